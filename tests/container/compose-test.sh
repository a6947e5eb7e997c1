#!/usr/bin/env bash
# The compose stack, run for real: docker-compose.yml's default services (Redis, Sluice on
# the Redis store, the nginx gateway and its upstream), brought up with the README's
# commands, checked the way a user would, and taken down.
#
# Checks: both containers with a HEALTHCHECK report healthy, /healthz and gRPC health answer,
# /readyz says Sluice's Redis store is healthy;
# decisions over HTTP (/shouldAllowRequest) and gRPC (Envoy's RLS, tests/grpc's stubs) count
# in one bucket in the shared Redis, and the request after the limit is denied on both; the
# gateway serves five pages and then 429 with Retry-After; Redis holds the counters;
# `docker-compose down` ends and leaves no container or network behind.
#
# Usage: tests/container/compose-test.sh   (root; run by tests/container/run.sh after the
# image step has built sluice:local from this checkout, the image the compose file names)
# Engine: a Docker engine when one answers; otherwise podman's Docker API
# (`podman system service`, started here on a private socket) driven by docker-compose,
# with the images built on the debootstrap base (SLUICE_BASE_IMAGE, docker/build-image.sh).
# Host ports are free ones picked here (SLUICE_HTTP_PORT, SLUICE_GRPC_PORT,
# SLUICE_GATEWAY_PORT; the compose file's defaults are 8080, 8081 and 8000).
set -euo pipefail
cd "$(dirname "$0")/../.."

work=$(mktemp -d /tmp/sluice-compose.XXXXXX)
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-sluicecomposetest}
service_pid=""
shim_pid=""
up=false
engine=docker

log() { printf '[compose] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  if $up; then
    log "last lines of each service's log:"
    timeout 30 docker-compose logs --no-color --tail=25 >&2 2>&1 || true
  fi
  exit 1
}

cleanup() {
  if $up; then
    timeout 60 docker-compose down -t 5 >/dev/null 2>&1 || true
  fi
  [[ -z $shim_pid ]] || kill "$shim_pid" 2>/dev/null || true
  if [[ -n $service_pid ]]; then
    kill "$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {  # a port nothing is bound to on any address, below the ephemeral range
  /usr/bin/python3 - "$@" <<'PY'
import random, socket, sys
taken = {int(p) for p in sys.argv[1:]}
for _ in range(1000):
    port = random.randint(20000, 32000)  # Linux hands out 32768-60999 to outgoing sockets
    if port in taken:
        continue
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            continue
    print(port)
    break
else:
    sys.exit("no free port between 20000 and 32000")
PY
}

pick_ports() {
  SLUICE_HTTP_PORT=$(free_port) || fail "no free port"
  SLUICE_GRPC_PORT=$(free_port "$SLUICE_HTTP_PORT") || fail "no free port"
  SLUICE_GATEWAY_PORT=$(free_port "$SLUICE_HTTP_PORT" "$SLUICE_GRPC_PORT") || fail "no free port"
  export SLUICE_HTTP_PORT SLUICE_GRPC_PORT SLUICE_GATEWAY_PORT
}

# wait_until <seconds> <what> <command...>: polls the command until it succeeds.
wait_until() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what: not within ${seconds} s"
    sleep 0.5
  done
}

command -v docker-compose >/dev/null || fail "docker-compose is missing (scripts/deps.sh test)"
command -v curl >/dev/null || fail "curl is missing (scripts/deps.sh test)"

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  log "using the Docker engine"
else
  engine=podman
  command -v podman >/dev/null || fail "neither a Docker engine nor podman (scripts/deps.sh test)"
  command -v runc >/dev/null || fail "runc is missing (scripts/deps.sh test)"
  # What works without systemd and without crun: runc, cgroupfs, file events, and open-file
  # limits below the host's (podman's default, 1048576, is refused where the hard limit is
  # lower). Read by the API service and by the podman commands below.
  cat >"$work/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  export CONTAINERS_CONF=$work/containers.conf
  podman system service --time=0 "unix://$work/podman.sock" >"$work/service.log" 2>&1 &
  service_pid=$!
  export DOCKER_HOST=unix://$work/podman.sock
  wait_until 30 "podman's Docker API" curl -fsS --unix-socket "$work/podman.sock" http://d/_ping
  # The images build on the Debian 12 base docker/build-image.sh made (no registry here).
  docker/build-image.sh --base-only
  export SLUICE_BASE_IMAGE=${SLUICE_BASE_IMAGE:-localhost/sluice-base:bookworm}
  if [[ ! -d /run/systemd/system ]]; then
    # Podman runs HEALTHCHECKs from systemd timers. Without systemd this loop stands in for
    # them, so that `depends_on: condition: service_healthy` and the health status work.
    (
      while true; do
        for id in $(podman ps -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME"); do
          podman healthcheck run "$id" >/dev/null 2>&1 || true
        done
        sleep 2
      done
    ) &
    shim_pid=$!
  fi
  log "using podman's Docker API (podman system service) on $DOCKER_HOST"
fi
inspect() { "$engine" inspect "$@"; }

pick_ports
"$engine" image inspect sluice:local >/dev/null 2>&1 ||
  fail "no image sluice:local: build it first (docker/build-image.sh)"

# --- Up: the README's commands ----------------------------------------------------------
start=$SECONDS
# sluice:local comes from the image step; the two small images are built here (cached).
log "docker-compose build redis nginx upstream"
timeout 900 docker-compose build redis nginx upstream >"$work/build.log" 2>&1 ||
  { tail -n 30 "$work/build.log" >&2; fail "docker-compose build (last lines above)"; }
log "images built in $((SECONDS - start)) s"
up_start=$SECONDS
up=true
# A port free when picked can be taken before the containers bind it (other jobs share the
# machine): then the stack goes down and comes up on new ports, at most three times.
for attempt in 1 2 3; do
  log "docker-compose up -d   (HTTP on $SLUICE_HTTP_PORT, gRPC on $SLUICE_GRPC_PORT, gateway on $SLUICE_GATEWAY_PORT)"
  timeout 300 docker-compose up -d >"$work/up.log" 2>&1 && break
  if ((attempt < 3)) && grep -q 'address already in use' "$work/up.log"; then
    log "a port was taken meanwhile (attempt $attempt): down, new ports, up again"
    timeout 60 docker-compose down -t 5 >/dev/null 2>&1 || true
    pick_ports
    continue
  fi
  tail -n 30 "$work/up.log" >&2
  fail "docker-compose up -d (last lines above)"
done

http=http://127.0.0.1:$SLUICE_HTTP_PORT
grpc=127.0.0.1:$SLUICE_GRPC_PORT
gateway=http://127.0.0.1:$SLUICE_GATEWAY_PORT
wait_until 60 "Sluice's /healthz on $http" curl -fsS "$http/healthz"
health_of() { inspect --format '{{.State.Health.Status}}' "$(docker-compose ps -q "$1")"; }
is_healthy() { [[ $(health_of "$1") == healthy ]]; }
wait_until 60 "redis container healthy" is_healthy redis
wait_until 60 "sluice container healthy" is_healthy sluice
# Sluice's container is healthy while its Redis store fails open: its /readyz names the store's
# state. A store that stays failing here is most often a network without name resolution.
store_deadline=$((SECONDS + 30))
until curl -fsS "$http/readyz" 2>/dev/null | grep -q '"store":"healthy"'; do
  ((SECONDS < store_deadline)) ||
    fail "Sluice's Redis store is not healthy within 30 s: /readyz says" \
      "$(curl -sS "$http/readyz" 2>&1). 'cannot resolve redis' in its log below means the" \
      "compose network resolves no names (podman: the dnsname plugin, scripts/deps.sh test)"
  sleep 0.5
done
log "up in $((SECONDS - up_start)) s; redis and sluice healthy, /healthz answers, the store is healthy"
grpc_health=$(/usr/bin/python3 tests/container/rls_ask.py "$grpc" --health 2>"$work/grpc.err") ||
  { cat "$work/grpc.err" >&2; fail "gRPC health check on $grpc"; }
[[ $grpc_health == SERVING ]] || fail "gRPC health: $grpc_health, expected SERVING"
log "gRPC health: SERVING"

# --- Decisions over HTTP and gRPC, one bucket in the shared Redis -------------------------
# config/rules/api.yaml: user + path /v1/search, 10 per minute (sliding window). Without a
# clientId an HTTP decision counts in the same bucket as a gRPC one.
user=compose-$$-$RANDOM
body='{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"'$user'"},{"key":"path","value":"/v1/search"}]}]}'
ask_http() { curl -s -o /dev/null -w '%{http_code}' -X POST "$http/shouldAllowRequest" -d "$body"; }
ask_grpc() {
  /usr/bin/python3 tests/container/rls_ask.py "$grpc" api "user=$user,path=/v1/search" "$1" 2>"$work/grpc.err" ||
    { cat "$work/grpc.err" >&2; fail "gRPC ShouldRateLimit on $grpc"; }
}
for i in 1 2 3 4 5; do
  status=$(ask_http)
  [[ $status == 200 ]] || fail "HTTP decision $i: $status, expected 200"
done
answers=$(ask_grpc 5 | tr '\n' ' ')
[[ $answers == "OK OK OK OK OK " ]] || fail "gRPC decisions 6..10: $answers, expected 5 x OK"
status=$(ask_http)
[[ $status == 429 ]] || fail "HTTP decision 11: $status, expected 429 (the limit is 10, shared with gRPC)"
answer=$(ask_grpc 1)
[[ $answer == OVER_LIMIT ]] || fail "gRPC decision 12: $answer, expected OVER_LIMIT"
log "5 x 200 over HTTP + 5 x OK over gRPC, then 429 and OVER_LIMIT: one bucket"
keys=$(docker-compose exec -T redis redis-cli --raw dbsize | tr -d '\r')
[[ $keys =~ ^[0-9]+$ ]] && ((keys > 0)) || fail "Redis holds no counters (dbsize: '$keys')"
log "Redis holds $keys counter keys"

# --- The gateway: nginx asks Sluice's /check before serving a page --------------------------
page_user=gateway-$$-$RANDOM
statuses=""
for i in 1 2 3 4 5 6; do
  statuses+="$(curl -s -o /dev/null -D "$work/headers" -w '%{http_code}' -H "X-User-Id: $page_user" "$gateway/") "
done
[[ $statuses == "200 200 200 200 200 429 " ]] || fail "gateway answers: $statuses, expected 5 x 200 then 429"
grep -qi '^Retry-After: [1-9]' "$work/headers" || fail "the gateway's 429 has no Retry-After"
curl -s "$gateway/" -H "X-User-Id: other-$page_user" | grep -q 'Hello from the upstream' ||
  fail "another client does not get the upstream's page"
log "gateway: 5 x 200, then 429 with Retry-After; another client still served"

# --- Down ------------------------------------------------------------------------------------
down_start=$SECONDS
log "docker-compose down"
timeout 120 docker-compose down >"$work/down.log" 2>&1 ||
  { tail -n 30 "$work/down.log" >&2; fail "docker-compose down (last lines above)"; }
up=false
left=$("$engine" ps -aq --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME")
[[ -z $left ]] || fail "containers left after down: $left"
if "$engine" network ls --format '{{.Name}}' | grep -q "^${COMPOSE_PROJECT_NAME}_"; then
  fail "network left after down"
fi
log "down in $((SECONDS - down_start)) s, nothing left behind"
log "PASS in $((SECONDS - start)) s"
