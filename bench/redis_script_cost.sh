#!/usr/bin/env bash
# What one decision of Sluice's Lua script costs redis-server, in instructions (callgrind:
# independent of the machine's load, unlike Redis's own usec_per_call): a redis-server under
# valgrind gets N1, then (a new server) N2 pipelined batch calls of M fixed_window decisions
# from bench/redis_script/drive.py; (total(N2) - total(N1)) / ((N2 - N1) * M) leaves out
# start-up and shutdown. M = 1 is the unbatched call (--redis-max-batch none).
#
# Usage: bench/redis_script_cost.sh [--batch M]... [--calls N1,N2] [--lua DIR]
#                                   [--layout lists|per-request] [--args sidecar|bare]
#                                   [--state fresh|steady]
#   --batch M   decisions per call (repeatable; default: 1 and 16)
#   --lua DIR   the script's sources (default src/store/redis/lua), e.g. another checkout's
#   --layout    the batch layout that script reads: lists (today's) or per-request (scripts
#               before the argument lists, up to bf593e6)
#   --args      sidecar (default): the arguments Sluice sends for bench/rules'
#               fixed_window_allow, whose limit may take a runtime override (its rule's
#               override field); bare: without that field (no override is looked up)
#   --state     fresh (default): most decisions meet an absent key; steady: every client's
#               bucket is written before (the same warm-up in both runs, so it cancels) and
#               the window is an hour, so each decision rewrites a state of its own window,
#               as most do in a loaded run
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
lua=$root/src/store/redis/lua
batches=()
n1=100
n2=600
layout=lists
shape=sidecar
state=fresh
while (($#)); do
  case $1 in
    --batch) batches+=("$2"); shift ;;
    --calls) n1=${2%,*}; n2=${2#*,}; shift ;;
    --lua) lua=$(cd "$2" && pwd); shift ;;
    --layout) layout=$2; shift ;;
    --args) shape=$2; shift ;;
    --state) state=$2; shift ;;
    *) echo "bench/redis_script_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
((${#batches[@]})) || batches=(1 16)
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
work=$(mktemp -d /tmp/sluice-script-cost-XXXXXX)
trap 'rm -rf "$work"' EXIT

total() {  # calls m -> instructions of one redis-server's whole life
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" redis-server --port "$port" \
    --bind 127.0.0.1 --save '' --appendonly no --hz 1 --dir "$work" >"$work/redis.log" 2>&1 &
  local pid=$!
  for _ in $(seq 150); do
    redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break
    sleep 0.2
  done
  python3 "$here/redis_script/drive.py" "$port" "$1" "$2" "$lua" "$layout" "$shape" "$state" >/dev/null \
    || { redis-cli -p "$port" shutdown nosave >/dev/null 2>&1; exit 1; }
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" || true
  callgrind_annotate "$work/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
echo "# redis-server $(redis-server --version | grep -oE 'v=[0-9.]+'), script from $lua, $shape arguments, $state keys"
for m in "${batches[@]}"; do
  a=$(total "$n1" "$m")
  b=$(total "$n2" "$m")
  echo "decisions per call $m: $(((b - a) / ((n2 - n1) * m))) instructions of redis-server per decision"
done
