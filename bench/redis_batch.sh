#!/usr/bin/env bash
# How many decisions share one EVALSHA (--redis-max-batch, docs/redis.md), seen from Redis.
#
#   bench/redis_batch.sh [--sluice PATH] [--max-batch N|none] [--in-flight N|none]
#                        [--op fixed_window_allow] [--seconds 5] [--connections 64]
#                        [--clients 10000] [--cluster]
#
# Starts its own redis-server (CPU 1, free loopback port, temp dir, no persistence) and one
# Sluice (--threads 1 --store redis, CPU 0, bench/rules), drives it with
# wrk -t1 -c<connections> -s bench/wrk/decision.lua (--clients, 10 000 by default; 1 is one
# hot key; CPU 1), then prints the
# decisions answered, redis-server's `cmdstat_evalsha` calls and usec_per_call (INFO
# commandstats), decisions per call, and the CPU per decision of Sluice and of redis-server
# (utime+stime from /proc). `--max-batch none` passes no flag (for binaries older than it);
# `--in-flight N` passes --redis-batches-in-flight N (`none`, the default: no flag).
# `--cluster` starts a Redis Cluster of three masters instead (all on CPU 1, joined with
# redis-cli --cluster create) and runs Sluice with --store redis_cluster; calls and CPU are
# summed over the three.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
sluice=$root/${SLUICE_BUILD_DIR:-build}/sluice
max_batch=none
in_flight=none
op=fixed_window_allow
seconds=5
connections=64
clients=10000
cluster=0
while (($#)); do
  case $1 in
    --sluice) sluice=$2; shift ;;
    --max-batch) max_batch=$2; shift ;;
    --in-flight) in_flight=$2; shift ;;
    --op) op=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --connections) connections=$2; shift ;;
    --clients) clients=$2; shift ;;
    --cluster) cluster=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bench/redis_batch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
for tool in redis-server redis-cli wrk taskset curl; do
  command -v "$tool" >/dev/null || { echo "bench/redis_batch.sh: $tool is not installed" >&2; exit 1; }
done

work=$(mktemp -d /tmp/sluice-redis-batch-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

redis_ports=()
redis_pids=()
for node in $(seq $((cluster ? 3 : 1))); do
  redis_port=$(port)
  # A cluster node also listens on its port + 10000 (the cluster bus).
  while ((cluster && redis_port > 55000)); do redis_port=$(port); done
  mkdir -p "$work/$node"
  cluster_args=()
  ((cluster)) && cluster_args=(--cluster-enabled yes --cluster-config-file "$work/$node/nodes.conf")
  taskset -c 1 redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$work/$node" --daemonize no "${cluster_args[@]}" >"$work/$node/redis.log" 2>&1 &
  redis_pids+=($!)
  pids+=($!)
  redis_ports+=("$redis_port")
  up=0
  for _ in $(seq 100); do
    redis-cli -p "$redis_port" PING >/dev/null 2>&1 && { up=1; break; }
    sleep 0.05
  done
  ((up)) || { echo "redis-server did not start:" >&2; cat "$work/$node/redis.log" >&2; exit 1; }
done
store=(--store redis --redis "redis://127.0.0.1:${redis_ports[0]}/2")
if ((cluster)); then
  redis-cli --cluster create "${redis_ports[@]/#/127.0.0.1:}" --cluster-replicas 0 \
    --cluster-yes >"$work/create.log" 2>&1 || { cat "$work/create.log" >&2; exit 1; }
  for _ in $(seq 100); do
    redis-cli -p "${redis_ports[0]}" CLUSTER INFO | grep -q '^cluster_state:ok' && break
    sleep 0.1
  done
  store=(--store redis_cluster --redis "redis://127.0.0.1:${redis_ports[0]}")
fi
redis_ticks() {
  local sum=0 p
  for p in "${redis_pids[@]}"; do sum=$((sum + $(ticks "$p"))); done
  echo "$sum"
}

sluice_port=$(port)
extra=()
[[ $max_batch != none ]] && extra=(--redis-max-batch "$max_batch")
[[ $in_flight != none ]] && extra+=(--redis-batches-in-flight "$in_flight")
taskset -c 0 "$sluice" --listen "127.0.0.1:$sluice_port" --rules "$here/rules" --threads 1 \
  --log-level warn "${store[@]}" "${extra[@]}" \
  >"$work/sluice.log" 2>&1 &
sluice_pid=$!
pids+=("$sluice_pid")
ready=0
for _ in $(seq 100); do
  if curl -sf "http://127.0.0.1:$sluice_port/readyz" >/dev/null; then ready=1; break; fi
  sleep 0.1
done
((ready)) || { echo "sluice did not become ready:" >&2; cat "$work/sluice.log" >&2; exit 1; }

s0=$(ticks "$sluice_pid")
r0=$(redis_ticks)
BENCH_MODE=json BENCH_CLIENTS=$clients BENCH_OP=$op BENCH_DESC=1 BENCH_RATE=0 BENCH_THREADS=1 \
  BENCH_OUT="$work/out.json" BENCH_PREFIX=b BENCH_SEQ=0 BENCH_SEQ_START=0 \
  taskset -c 1 wrk -t1 "-c$connections" "-d${seconds}s" --timeout 5s \
  -s "$here/wrk/decision.lua" "http://127.0.0.1:$sluice_port" >"$work/wrk.txt" 2>&1
s1=$(ticks "$sluice_pid")
r1=$(redis_ticks)
decisions=$(grep -o '[0-9]* requests in' "$work/wrk.txt" | awk '{print $1}')
calls=0
usec_total=0
for redis_port in "${redis_ports[@]}"; do
  stats=$(redis-cli -p "$redis_port" INFO commandstats | tr -d '\r' | grep '^cmdstat_evalsha:' || true)
  calls=$((calls + $(sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p' <<<"$stats" | grep . || echo 0)))
  usec_total=$((usec_total + $(sed -n 's/.*:calls=[0-9]*,usec=\([0-9]*\),.*/\1/p' <<<"$stats" | grep . || echo 0)))
done
usec=$(python3 -c "print($usec_total / max($calls, 1))")
python3 - "$sluice" "$max_batch" "$in_flight" "$op,clients=$clients$( ((cluster)) && echo ,cluster)" "$decisions" "${calls:-0}" "${usec:-0}" \
  "$((s1 - s0))" "$((r1 - r0))" "$(getconf CLK_TCK)" <<'PY'
import sys
sluice, mb, inf, op, n, calls, usec, st, rt, hz = sys.argv[1:]
n, calls, usec, st, rt, hz = int(n), int(calls), float(usec), int(st), int(rt), int(hz)
print(f"{sluice} --redis-max-batch {mb} --redis-batches-in-flight {inf} {op}: decisions={n} evalsha={calls} "
      f"decisions/call={n / max(calls, 1):.1f} redis_usec_per_call={usec:.1f} "
      f"sluice_cpu_us/decision={st / hz * 1e6 / max(n, 1):.1f} "
      f"redis_cpu_us/decision={rt / hz * 1e6 / max(n, 1):.1f}")
PY
