#!/usr/bin/env bash
# Image smoke test: builds the Sluice image (docker/build-image.sh: its build stage compiles
# Sluice and runs the unit tests, so this is slow and CPU-heavy), starts it with
# --network host against a local redis-server, and checks what a user sees: the health
# check, 200s turning into a 429 on /shouldAllowRequest and on the forward-auth endpoint
# /check, a non-root process, and a clean exit on SIGTERM. scripts/test.sh runs it (after
# building the image once) through tests/container/run.sh.
#
# Usage: docker/smoke-test.sh [--prepare-base | --no-build]
#   --prepare-base   only build and cache the Debian base (podman path), then exit.
#   --no-build       skip the build and check the image already tagged SLUICE_SMOKE_IMAGE.
# Engine: docker when a Docker engine answers, otherwise podman with a Debian 12 base made
# by debootstrap (docker/build-image.sh, which lists its settings: SLUICE_IMAGE_JOBS,
# SLUICE_UNIT_TESTS, SLUICE_BUILD_CONTEXT, DEBIAN_MIRROR, ...). Needs root for debootstrap
# and podman there, and runc (apt-get install podman runc debootstrap): podman's default
# crun fails on hosts with cgroups in hybrid mode. Prints the image's size at the end.
# Environment: SLUICE_SMOKE_IMAGE (default sluice:local, the compose file's image).
set -euo pipefail
cd "$(dirname "$0")/.."

image=${SLUICE_SMOKE_IMAGE:-sluice:local}
container=sluice-smoke-$$
work_dir=$(mktemp -d /tmp/sluice-smoke.XXXXXX)
redis_pid=""
engine=()

log() { printf '[smoke] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  if ((${#engine[@]} > 0)); then
    "${engine[@]}" logs "$container" 2>&1 | tail -n 30 >&2 || true
  fi
  exit 1
}

cleanup() {
  if ((${#engine[@]} > 0)); then
    "${engine[@]}" rm -f "$container" >/dev/null 2>&1 || true
  fi
  if [[ -n $redis_pid ]]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$work_dir"
}
trap cleanup EXIT

free_port() {  # a port nothing is bound to, below the ephemeral range (32768-60999)
  /usr/bin/python3 -c '
import random, socket, sys
for _ in range(1000):
    port = random.randint(20000, 32000)
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            continue
    print(port)
    sys.exit(0)
sys.exit("no free port between 20000 and 32000")'
}

build=true
case ${1:-} in
  --prepare-base)
    rm -rf "$work_dir"
    exec docker/build-image.sh --base-only
    ;;
  --no-build) build=false ;;
  "") ;;
  *) fail "unknown argument $1 (see the usage at the top of $0)" ;;
esac

# --- Build ---------------------------------------------------------------------------------
if $build; then
  SLUICE_IMAGE=$image docker/build-image.sh || fail "image build"
fi
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=(docker)
  run_flags=(--network host)
elif command -v podman >/dev/null; then
  command -v runc >/dev/null || fail "runc is missing: apt-get install runc (podman's crun fails on cgroups in hybrid mode)"
  # What works without a container engine or systemd: runc, cgroupfs, the host network,
  # explicit ulimits.
  engine=(podman --runtime runc --cgroup-manager cgroupfs --events-backend file)
  # Podman schedules health checks with systemd timers; the check is run by hand below.
  run_flags=(--network host --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 --no-healthcheck)
else
  fail "neither a running Docker engine nor podman (apt-get install podman runc debootstrap)"
fi
"${engine[@]}" image inspect "$image" >/dev/null 2>&1 || fail "no image $image to check"

# --- Run against a local redis-server ------------------------------------------------------
command -v redis-server >/dev/null || fail "redis-server is missing (scripts/deps.sh test)"
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work_dir" >"$work_dir/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do
  redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG && break
  sleep 0.1
done
redis-cli -p "$redis_port" ping | grep -q PONG || fail "redis-server did not start"

sluice_port=$(free_port)
cat >"$work_dir/forward-auth.yaml" <<'EOF'
forward_auth:
  domain: auth
  client: [{from: header, name: X-User-Id}, {from: client_ip}]
  descriptors: [[{key: auth_type, value: login}]]
EOF
chmod 0644 "$work_dir/forward-auth.yaml"
chmod 0755 "$work_dir"
log "starting $image on 127.0.0.1:$sluice_port with redis on $redis_port"
"${engine[@]}" run -d --name "$container" "${run_flags[@]}" \
  -v "$work_dir/forward-auth.yaml:/etc/sluice/forward-auth.yaml:ro" \
  -e SLUICE_LISTEN="127.0.0.1:$sluice_port" \
  -e SLUICE_STORE=redis -e SLUICE_REDIS="redis://127.0.0.1:$redis_port/0" \
  -e SLUICE_CONFIG=/etc/sluice/forward-auth.yaml \
  "$image" >/dev/null || fail "run"

base_url=http://127.0.0.1:$sluice_port
for _ in $(seq 100); do
  curl -fsS "$base_url/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "$base_url/healthz" >/dev/null || fail "/healthz does not answer"
"${engine[@]}" exec "$container" /usr/local/bin/sluice-healthcheck || fail "HEALTHCHECK command"
uid=$("${engine[@]}" exec "$container" id -u)
[[ $uid != 0 ]] || fail "sluice runs as root"
log "healthy, running as uid $uid"

# The seed rule (config/rules/auth.yaml): auth_type=login, 5 per minute per client.
expect_limit() {  # <name> <curl args...>: 200s up to X-Ratelimit-Limit, then 429
  local name=$1
  shift
  local headers=$work_dir/headers status limit
  status=$(curl -s -o /dev/null -D "$headers" -w '%{http_code}' "$@")
  [[ $status == 200 ]] || fail "$name: first answer $status, expected 200"
  limit=$(tr -d '\r' <"$headers" | sed -n 's/^[Xx]-[Rr]atelimit-[Ll]imit: //p')
  [[ $limit =~ ^[0-9]+$ ]] || fail "$name: no X-Ratelimit-Limit header"
  for ((i = 2; i <= limit; i++)); do
    status=$(curl -s -o /dev/null -w '%{http_code}' "$@")
    [[ $status == 200 ]] || fail "$name: answer $i was $status, expected 200"
  done
  status=$(curl -s -o /dev/null -D "$headers" -w '%{http_code}' "$@")
  [[ $status == 429 ]] || fail "$name: answer $((limit + 1)) was $status, expected 429"
  grep -qi '^Retry-After: [1-9]' "$headers" || fail "$name: 429 without Retry-After"
  log "$name: $limit x 200, then 429 with Retry-After"
}
expect_limit /shouldAllowRequest -X POST "$base_url/shouldAllowRequest" \
  -d '{"domain":"auth","clientId":"smoke-api","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]}'
expect_limit /check -H 'X-User-Id: smoke-check' "$base_url/check"
keys=$(redis-cli -p "$redis_port" dbsize)
((keys > 0)) || fail "no counters in Redis: the container did not use the Redis store"
log "Redis holds $keys counter keys"

# SIGTERM (the image's STOPSIGNAL) must end sluice cleanly, well before the kill timeout.
"${engine[@]}" stop -t 20 "$container" >/dev/null
exit_code=$("${engine[@]}" inspect --format '{{.State.ExitCode}}' "$container")
[[ $exit_code == 0 ]] || fail "exit code $exit_code after SIGTERM"
log "stopped cleanly on SIGTERM"
size=$("${engine[@]}" image inspect --format '{{.Size}}' "$image")
log "image $image: $((size / 1000000)) MB"
log "PASS"
