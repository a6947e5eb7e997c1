#!/usr/bin/env bash
# What a banned answer costs the server against a plain denial, in instructions (valgrind's
# callgrind: repeatable whatever else the machine does), over HTTP, one I/O thread
# (docs/benchmarks.md, "The penalty box").
#
# Three runs of build/sluice under callgrind, each over one keep-alive connection: no
# requests (start-up and shutdown alone), N denials of a client over a limit without `ban`,
# N answers to a client in the penalty box of the same limit with `ban`. The cost of one
# answer is (run - idle run) / N. With --store redis a redis-server of its own is started,
# and the Redis commands each run sent are counted too (INFO commandstats).
#
# Usage: bench/ban_cost.sh [--requests N] [--store memory|redis] [--endpoint should|json|grpc]
#                          [--sluice PATH] [--keep DIR]
# --endpoint json asks Envoy's /json, whose denials are charged (envoy's counting) and never
# answered from the Redis store's over-limit cache; should (the default) /shouldAllowRequest;
# grpc Envoy's ShouldRateLimit (counted as /json is) with h2load over one HTTP/2 connection:
# there the two first calls run before callgrind's counters are zeroed and the N measured
# calls are dumped alone (no idle run; needs h2load, protoc, callgrind_control, curl).
# --keep DIR copies the three callgrind outputs there (callgrind_annotate DIR/boxed.out).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
sluice=$root/${SLUICE_BUILD_DIR:-build}/sluice
requests=2000
store=memory
keep=
endpoint=should
while (($#)); do
  case $1 in
    --requests) requests=$2; shift ;;
    --store) store=$2; shift ;;
    --sluice) sluice=$2; shift ;;
    --keep) keep=$2; shift ;;
    --endpoint) endpoint=$2; shift ;;
    *) echo "bench/ban_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
command -v valgrind > /dev/null || { echo "valgrind is not installed (scripts/deps.sh bench)" >&2; exit 1; }
work=$(mktemp -d)
redis_pid=
cleanup() { [[ -n $redis_pid ]] && kill "$redis_pid" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir "$work/rules"
cat > "$work/rules/api.yaml" <<'EOF'
domain: api
descriptors:
  - key: plain
    rate_limit: {name: plain, unit: hour, requests_per_unit: 1}
  - key: boxed
    rate_limit: {name: boxed, unit: hour, requests_per_unit: 1,
                 ban: {after: 1, duration: 1h}}
EOF
store_args=(--store memory)
if [[ $store == redis ]]; then
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no > "$work/redis.log" 2>&1 &
  redis_pid=$!
  until redis-cli -p "$redis_port" ping > /dev/null 2>&1; do sleep 0.1; done
  store_args=(--store redis --redis "redis://127.0.0.1:$redis_port")
fi

# One run: sluice under callgrind, `mode` requests, then SIGTERM; prints the instructions
# (and, on Redis, the commands Redis ran for it).
run() {
  local mode=$1
  local port
  port=$(free_port)
  [[ $store == redis ]] && redis-cli -p "$redis_port" config resetstat > /dev/null && redis-cli -p "$redis_port" flushall > /dev/null
  valgrind --tool=callgrind --callgrind-out-file="$work/$mode.out" "$sluice" --rules "$work/rules" \
    --listen "127.0.0.1:$port" --threads 1 --log-level error "${store_args[@]}" > "$work/$mode.log" 2>&1 &
  local pid=$!
  /usr/bin/python3 - "$port" "$mode" "$requests" "$endpoint" <<'EOF'
import http.client, json, sys, time
port, mode, n, endpoint = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
deadline = time.monotonic() + 120
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/readyz")
        r = c.getresponse()
        r.read()
        if r.status == 200:
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("sluice did not become ready")
    time.sleep(0.2)
def post(body):
    path = "/json" if endpoint == "json" else "/shouldAllowRequest"
    c.request("POST", path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()
if mode != "idle":
    if endpoint == "json":
        body = '{"domain":"api","descriptors":[{"entries":[{"key":"%s","value":"v"}]}]}' % mode
    else:
        body = '{"domain":"api","clientId":"c","descriptors":[[{"key":"%s","value":"v"}]]}' % mode
    post(body)  # the one allowed request
    status, data = post(body)  # the first denial (bans in the boxed mode)
    if status != 429 or (mode == "boxed") != (b'"banned":true' in data):
        sys.exit("unexpected first denial: %d %s" % (status, data))
    for i in range(n):
        status, data = post(body)
        if status != 429:
            sys.exit("expected 429, got %d %s" % (status, data))
EOF
  kill -TERM "$pid"
  wait "$pid" || true
  local instructions dispatch
  instructions=$(awk '/^summary:/ {print $2}' "$work/$mode.out")
  # The requests' own work, from a parsed request to its answer written into the buffer
  # (Session::dispatch, inclusive): free of how the reads happened to split the bytes.
  dispatch=$(callgrind_annotate --inclusive=yes "$work/$mode.out" 2> /dev/null |
    awk '/sluice::http::Session::dispatch\(/ {gsub(",", "", $1); print $1; exit}')
  instructions="$instructions ${dispatch:-0}"
  if [[ $store == redis ]]; then
    # Script calls, and the commands the scripts ran (as name=calls,name=calls).
    local stats calls commands
    stats=$(redis-cli -p "$redis_port" info commandstats | tr -d '\r')
    calls=$(awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ {s += $3} END {print s + 0}' <<< "$stats")
    commands=$(awk -F'[=,:]' '/^cmdstat_/ && !/^cmdstat_(evalsha|eval|script|config|flushall|info|ping|client|hello|select|auth|cluster|command):/ {
      sub("cmdstat_", "", $1); printf "%s%s=%s", (n++ ? "," : ""), $1, $3 } END {if (!n) printf "-"}' <<< "$stats")
    echo "$instructions $calls $commands"
  else
    echo "$instructions 0 -"
  fi
}

# One gRPC run: sluice under callgrind, the allowed call and the first denial, counters
# zeroed, N calls, counters dumped; prints instructions for the N calls, the banned answers
# counted (sluice_banned_total) and, on Redis, the script calls and commands.
grpc_run() {
  local mode=$1 http_port grpc_port pid out
  http_port=$(free_port)
  grpc_port=$(free_port)
  [[ $store == redis ]] && redis-cli -p "$redis_port" flushall > /dev/null
  printf 'domain: "api"\ndescriptors { entries { key: "%s" value: "v" } }\n' "$mode" |
    protoc -I "$root/proto" -I /usr/include --encode=envoy.service.ratelimit.v3.RateLimitRequest \
      envoy/service/ratelimit/v3/rls.proto > "$work/$mode.bin"
  /usr/bin/python3 -c 'import struct, sys; m = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(b"\x00" + struct.pack(">I", len(m)) + m)' \
    "$work/$mode.bin" "$work/$mode.grpc"
  out=$work/$mode.out
  valgrind --tool=callgrind --callgrind-out-file="$out" "$sluice" --rules "$work/rules" \
    --listen "127.0.0.1:$http_port" --grpc-listen "127.0.0.1:$grpc_port" --threads 1 \
    --log-level error "${store_args[@]}" > "$work/$mode.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/readyz") == 200 ]] && break
    sleep 0.2
  done
  local call=(h2load -t 1 -c 1 -m 1 -d "$work/$mode.grpc" -H 'content-type: application/grpc'
    -H 'te: trailers' "http://127.0.0.1:$grpc_port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
  "${call[@]}" -n 2 > /dev/null
  callgrind_control --zero "$pid" > /dev/null 2>&1
  [[ $store == redis ]] && redis-cli -p "$redis_port" config resetstat > /dev/null
  "${call[@]}" -n "$requests" | grep -q "^status codes: $requests 2xx" ||
    { echo "bench/ban_cost.sh: the gRPC calls failed" >&2; exit 1; }
  callgrind_control --dump=measured "$pid" > /dev/null 2>&1
  local banned_total
  banned_total=$(curl -s "http://127.0.0.1:$http_port/metrics" |
    awk '/^sluice_banned_total\{/ {s += $2} END {print s + 0}')
  kill -TERM "$pid"
  wait "$pid" || true
  local dump total
  dump=$(grep -l "^desc: Trigger: dump measured" "$out".* | head -1)
  total=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$dump")
  if [[ -n $keep ]]; then
    mkdir -p "$keep"
    cp "$dump" "$keep/grpc-$mode.out"
  fi
  local calls=0 commands=-
  if [[ $store == redis ]]; then
    local stats
    stats=$(redis-cli -p "$redis_port" info commandstats | tr -d '\r')
    calls=$(awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ {s += $3} END {print s + 0}' <<< "$stats")
    commands=$(awk -F'[=,:]' '/^cmdstat_/ && !/^cmdstat_(evalsha|eval|script|config|flushall|info|ping|client|hello|select|auth|cluster|command):/ {
      sub("cmdstat_", "", $1); printf "%s%s=%s", (n++ ? "," : ""), $1, $3 } END {if (!n) printf "-"}' <<< "$stats")
  fi
  echo "$total $banned_total $calls $commands"
}

if [[ $endpoint == grpc ]]; then
  for tool in h2load protoc callgrind_control curl; do
    command -v $tool > /dev/null || { echo "$tool is missing (scripts/deps.sh bench)" >&2; exit 1; }
  done
  read -r denied denied_banned denied_calls denied_commands <<< "$(grpc_run plain)"
  read -r banned banned_banned banned_calls banned_commands <<< "$(grpc_run boxed)"
  /usr/bin/python3 - "$denied" "$banned" "$requests" "$store" "$denied_banned" "$banned_banned" \
    "$denied_calls" "$banned_calls" "$denied_commands" "$banned_commands" <<'EOF'
import sys
denied, banned, n = (int(x) for x in sys.argv[1:4])
store = sys.argv[4]
db, bb, dc, bc = (int(float(x)) for x in sys.argv[5:9])
d, b = denied / n, banned / n
print("store %s, gRPC ShouldRateLimit, %d calls each over one connection, one I/O thread, "
      "instructions per answer (callgrind, the measured calls alone)" % (store, n))
print("  plain denial:  %8.0f   (sluice_banned_total %d)" % (d, db))
print("  banned answer: %8.0f   (sluice_banned_total %d)" % (b, bb))
print("  banned/denial: %8.2fx" % (b / d))
if store == "redis":
    print("  script calls to Redis: denials %d, banned %d (for %d answers each)" % (dc, bc, n))
    print("  commands the scripts ran: denials %s; banned %s" % (sys.argv[9], sys.argv[10]))
EOF
  exit 0
fi

read -r idle idle_dispatch _ <<< "$(run idle)"
read -r denied denied_dispatch denied_calls denied_commands <<< "$(run plain)"
read -r banned banned_dispatch banned_calls banned_commands <<< "$(run boxed)"
if [[ -n $keep ]]; then
  mkdir -p "$keep"
  cp "$work"/idle.out "$work"/plain.out "$work"/boxed.out "$keep"/
fi
/usr/bin/python3 - "$idle" "$denied" "$banned" "$requests" "$store" "$denied_calls" "$banned_calls" \
  "$idle_dispatch" "$denied_dispatch" "$banned_dispatch" "$endpoint" "$denied_commands" \
  "$banned_commands" <<'EOF'
import sys
idle, denied, banned, n = (int(x) for x in sys.argv[1:5])
store, dc, bc = sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
idle_d, denied_d, banned_d = (int(x) for x in sys.argv[8:11])
endpoint, denied_cmds, banned_cmds = sys.argv[11:14]
d = (denied - idle) / n
b = (banned - idle) / n
# Each run's dispatch also holds its 2 first requests and its /readyz polls (the idle run's
# one poll is taken off); spread over n + 2 decisions.
dd = (denied_d - idle_d) / (n + 2)
bd = (banned_d - idle_d) / (n + 2)
print("store %s, endpoint %s, %d answers each, one I/O thread, instructions per answer "
      "(callgrind)" % (store, "/json" if endpoint == "json" else "/shouldAllowRequest", n))
print("                 whole process   request -> answer (Session::dispatch)")
print("  plain denial:  %8.0f        %8.0f" % (d, dd))
print("  banned answer: %8.0f        %8.0f" % (b, bd))
print("  banned/denial: %8.2fx       %8.2fx" % (b / d, bd / dd))
if store == "redis":
    print("  script calls to Redis: denials %d, banned %d (for %d answers each + 2)" % (dc, bc, n))
    print("  commands the scripts ran: denials %s; banned %s" % (denied_cmds, banned_cmds))
EOF
