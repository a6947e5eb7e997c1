#!/usr/bin/env bash
# RSS growth per client under a spray of random client ids through HTTP (docs/sketch.md):
#   bench/sketch/spray_rss.sh [clients=1000000]
# Hour windows, so that no bucket expires during the spray. Starts build/sluice (memory store) twice, once with a `sketch` rule and once with the exact
# sliding_window_counter, sends `clients` requests each from a new client id with wrk, and
# prints the RSS growth per client of each.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
sluice_bin=${SLUICE_BIN:-$build/sluice}
clients=${1:-1000000}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

cat > "$work/spray.lua" <<'LUA'
-- Every request from a client id never used before (thread number + counter).
-- thread_id is a global of each thread's Lua state, set by setup() (a local here would
-- shadow it and give every thread the same ids).
local counter = 0
thread_id = 0
local next_thread = 0
function setup(thread)
  thread:set("thread_id", next_thread)
  next_thread = next_thread + 1
end
function init(args)
  counter = 0
end
function request()
  counter = counter + 1
  local body = '{"domain":"spray","clientId":"c' .. thread_id .. '-' .. counter .. '"}'
  return wrk.format("POST", "/shouldAllowRequest", {["Content-Type"] = "application/json"}, body)
end
LUA

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
decisions() {
  curl -s "http://127.0.0.1:$port/metrics" |
    awk '/^sluice_decisions_total\{domain="spray"/ {s += $2} END {printf "%d\n", s}'
}

run() {
  local name=$1 rule=$2
  mkdir -p "$work/$name"
  printf 'domain: spray\nrate_limit:\n  unit: hour\n  requests_per_unit: 100\n%s' "$rule" \
    > "$work/$name/spray.yaml"
  "$sluice_bin" --listen "127.0.0.1:$port" --rules "$work/$name" --threads 1 \
    --log-level warn --store memory &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
  # Warm-up: the first requests allocate buffers that are not per client.
  curl -s -X POST "http://127.0.0.1:$port/shouldAllowRequest" -d '{"domain":"spray","clientId":"warm"}' >/dev/null
  local before after sent
  before=$(rss_kb "$pid")
  wrk -t 2 -c 16 -d 600s -s "$work/spray.lua" "http://127.0.0.1:$port" >"$work/$name/wrk.txt" 2>&1 &
  local wrk_pid=$!
  while (( $(decisions) < clients )); do sleep 0.5; done
  kill "$wrk_pid"; wait "$wrk_pid" 2>/dev/null || true
  sent=$(decisions)
  after=$(rss_kb "$pid")
  local keys
  keys=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^sluice_memory_store_keys / {print $2}')
  awk -v n="$name" -v b="$before" -v a="$after" -v s="$sent" -v k="$keys" 'BEGIN {
    printf "%-28s clients %9d  RSS %7.1f -> %7.1f MiB  growth %6.1f B/client  (buckets %s)\n",
      n, s, b/1024, a/1024, (a-b)*1024/s, k }'
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

run "sketch (expected 1M per hour)" "  algorithm: sketch
  sketch: {expected_requests: 1000000}
"
run "exact sliding_window_counter" "  algorithm: sliding_window_counter
"
