#!/usr/bin/env bash
# Eventual limits next to strict Redis and the memory store (docs/eventual.md, issue 16):
# decisions per second and p99 of one sidecar (--threads 1, CPU 0) driven by wrk (-t1 -c64,
# CPU 1, bench/wrk/decision.lua), every request far from its limit (fixed_window_allow,
# 1 000 000 per second). Runs are alternated between the systems; the median is reported.
# Also redis-server's CPU (utime + stime from /proc, over the measured run) per decision and,
# for eventual, per synced key (sluice_eventual_keys_synced_total) and keys per sync.
# --baseline PATH adds the eventual store of another build (e.g. the previous commit's) to
# the same alternated runs: before and after under the same load from the rest of the machine.
#   bench/eventual.sh [--sluice PATH] [--baseline PATH] [--duration S] [--runs N] [--clients N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
sluice=${SLUICE_BUILD_DIR:-$root/build}/sluice
duration=4
runs=3
clients=10000
baseline=""
while [ $# -gt 0 ]; do
  case $1 in
    --sluice) sluice=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for tool in wrk redis-server taskset; do
  command -v "$tool" >/dev/null || { echo "bench/eventual.sh needs $tool (scripts/deps.sh bench)" >&2; exit 1; }
done
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; return 1; }

redis_port=$(free_port)
taskset -c 1 redis-server --port "$redis_port" --save '' --appendonly no --dir "$work" >/dev/null &
redis_pid=$!
pids+=("$redis_pid")
wait_port "$redis_port"
tick=$(getconf CLK_TCK)
# redis-server's CPU (user + system) in microseconds.
redis_cpu_us() { awk -v t="$tick" '{ print ($14 + $15) * 1000000 / t }' "/proc/$redis_pid/stat"; }
# redis-server's own background CPU (serverCron, expiry) per second, measured alone for 3 s
# and subtracted from each run's figure.
idle0=$(redis_cpu_us); sleep 3; idle1=$(redis_cpu_us)
idle_per_s=$(python3 -c "print(($idle1 - $idle0) / 3)")
# The sum of a metric's samples (all label sets) on the sidecar at port $1.
metric() {
  python3 - "$1" "$2" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
name = sys.argv[2]
print(sum(float(l.split()[-1]) for l in body.splitlines()
          if l.startswith(name + " ") or l.startswith(name + "{")))
PY
}

# system -> extra flags
declare -A flags=(
  [memory]="--store memory --rules $root/bench/rules"
  [redis-strict]="--store redis --redis redis://127.0.0.1:$redis_port/0 --rules $root/bench/rules"
  [redis-eventual]="--store redis --redis redis://127.0.0.1:$redis_port/0 --rules $here/eventual/rules"
)
declare -A binary=([memory]=$sluice [redis-strict]=$sluice [redis-eventual]=$sluice)
order=(memory redis-strict redis-eventual)
if [[ -n $baseline ]]; then
  flags[baseline-eventual]=${flags[redis-eventual]}
  binary[baseline-eventual]=$baseline
  order+=(baseline-eventual)
fi
declare -A results
run_one() {  # system run
  local system=$1 run=$2 port
  port=$(free_port)
  # shellcheck disable=SC2086
  taskset -c 0 "${binary[$system]}" --listen 127.0.0.1:"$port" --threads 1 --log-level warn ${flags[$system]} &
  local pid=$!
  wait_port "$port"
  local out=$work/$system-$run.json
  local cpu0 keys0 syncs0 cpu1 keys1 syncs1
  # 1 s warm-up (keys read once), then the measured run with the same clients.
  BENCH_MODE=json BENCH_CLIENTS=$clients BENCH_OP=fixed_window_allow BENCH_PREFIX="r${run}_" \
    BENCH_OUT=$work/warm.json taskset -c 1 wrk -t1 -c64 -d1s -s "$root/bench/wrk/decision.lua" \
    "http://127.0.0.1:$port" >/dev/null
  cpu0=$(redis_cpu_us); keys0=$(metric "$port" sluice_eventual_keys_synced_total)
  syncs0=$(metric "$port" sluice_eventual_syncs_total)
  BENCH_MODE=json BENCH_CLIENTS=$clients BENCH_OP=fixed_window_allow BENCH_PREFIX="r${run}_" \
    BENCH_OUT=$out taskset -c 1 wrk -t1 -c64 -d"${duration}s" -s "$root/bench/wrk/decision.lua" \
    "http://127.0.0.1:$port" >/dev/null
  cpu1=$(redis_cpu_us); keys1=$(metric "$port" sluice_eventual_keys_synced_total)
  syncs1=$(metric "$port" sluice_eventual_syncs_total)
  echo "{\"redis_cpu_us\": $(python3 -c "print(max(0, $cpu1 - $cpu0 - $idle_per_s * $duration))"), \"keys_synced\": $(python3 -c "print($keys1 - $keys0)"), \"syncs\": $(python3 -c "print($syncs1 - $syncs0)")}" >"$out.redis"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  results[$system]+="$out "
}
for run in $(seq "$runs"); do
  for system in "${order[@]}"; do
    run_one "$system" "$run"
  done
  order=("${order[@]:1}" "${order[0]}")
done
python3 - "$clients" "$idle_per_s" "${results[memory]}" "${results[redis-strict]}" \
  "${results[redis-eventual]}" ${baseline:+"${results[baseline-eventual]}"} <<'PY'
import json, statistics, sys
clients = sys.argv[1]
idle = sys.argv[2]
def load(files):
    rows = [json.load(open(f)) for f in files.split()]
    rps = [r["requests"] / (r["duration_us"] / 1e6) for r in rows]
    p99 = [r["p99_us"] for r in rows]
    bad = sum(r["non2xx"] for r in rows)
    redis = [json.load(open(f + ".redis")) for f in files.split()]
    # Redis CPU per decision and per synced key, summed over the runs.
    decisions = sum(r["requests"] for r in rows)
    cpu = sum(r["redis_cpu_us"] for r in redis)
    keys = sum(r["keys_synced"] for r in redis)
    syncs = sum(r["syncs"] for r in redis)
    return (statistics.median(rps), min(rps), max(rps), statistics.median(p99), bad,
            cpu / decisions, cpu / keys if keys else None, keys / syncs if syncs else None)
names = ["sluice-memory", "sluice-redis strict", "sluice-redis eventual",
         "baseline eventual (--baseline)"][:len(sys.argv) - 3]
stats = [load(f) for f in sys.argv[3:]]
mem = stats[0][0]
print(f"clients: {clients}; redis-server idle CPU: {idle} µs/s (subtracted)")
print("| system | decisions/s (median) | min–max | p99 (ms) | non-2xx | vs memory |")
print("|---|---|---|---|---|---|")
for name, (med, lo, hi, p99, bad, *_) in zip(names, stats):
    print(f"| {name} | {med:,.0f} | {lo:,.0f}–{hi:,.0f} | {p99/1000:.2f} | {bad} | {med/mem:.2f}x |")
print()
print("| system | Redis CPU per decision (µs) | Redis CPU per synced key (µs) | keys per sync |")
print("|---|---|---|---|")
for name, (*_, per_decision, per_key, per_sync) in zip(names[1:], stats[1:]):
    key = f"{per_key:.2f}" if per_key is not None else "—"
    sync = f"{per_sync:,.0f}" if per_sync is not None else "—"
    print(f"| {name} | {per_decision:.2f} | {key} | {sync} |")
PY
