#!/usr/bin/env bash
# Two answers' CPU per answer measured at the same time, so that this machine's changes of speed
# (another guest on the host: one run's figure can land 20 % from the next one's) hit both
# alike and their ratio keeps only what the answers cost:
#
#   bench/paired.sh [--rounds R] [--duration S] [--connections N] A B
#
# A and B are each PATH[@BUILD_DIR] (PATH: grpc, http, health, healthz; BUILD_DIR default
# $SLUICE_BUILD_DIR or build) or `nginx` (nginx `return 200`, one worker, sent the HTTP
# decision's POST). Each of A and B is its own server process (two Sluice processes when both
# are Sluice, of one build or of two), both pinned to CPU 0 with one I/O thread; in each of R
# rounds (default 9) two h2load (one thread, N connections each, default 32, one call in
# flight on each) load A and B at once for S seconds (default 3) from CPU 1. A server's CPU
# per answer is its utime+stime (/proc/<pid>/stat) over the round divided by the answers its
# h2load counted. Printed: each round's two figures and their ratio A/B, then the medians and
# the median, min and max of the rounds' ratios.
#
# The two servers share CPU 0, so each runs at about half of its own saturated rate, beside
# another process: the figures are not those of bench/grpc.sh (one server alone on the core)
# and are not compared with them; the ratio is what this script is for. Examples:
#   bench/paired.sh health healthz                 # the gRPC health check against /healthz
#   bench/paired.sh grpc@build-old grpc@build      # one answer, two builds (before/after)
#   bench/paired.sh http nginx                     # the HTTP decision against a null answer
# Needs: h2load, protoc, taskset, nginx for `nginx` (scripts/deps.sh bench).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=9
duration=3
connections=32
specs=()
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    -*) echo "usage: $0 [--rounds R] [--duration S] [--connections N] A B" >&2; exit 2 ;;
    *) specs+=("$1"); shift ;;
  esac
done
((${#specs[@]} == 2)) || { echo "usage: $0 [--rounds R] [--duration S] [--connections N] A B" >&2; exit 2; }
for tool in h2load protoc taskset; do
  command -v $tool >/dev/null || { echo "$tool is missing (scripts/deps.sh bench)" >&2; exit 1; }
done

source bench/scratch.sh  # $work, $pids (stopped at exit), answers URL

source bench/grpc_bodies.sh  # free_port; $work/grpc.bin, health.grpc, http.json; grpc_call

# Starts the server of spec $1 as side $2 (0 or 1); sets server_pid[$2] and load_args[$2].
declare -a server_pid load_args
start() {
  local spec=$1 side=$2 path dir http_port grpc_port
  if [[ $spec == nginx ]]; then
    command -v nginx >/dev/null || { echo "nginx is missing (scripts/deps.sh bench)" >&2; exit 1; }
    http_port=$(free_port)
    mkdir -p "$work/nginx-$side"
    sed -e "s|@PORT@|$http_port|g" -e "s|@DIR@|$work/nginx-$side|g" \
      -e 's|^master_process on;|master_process off;|' bench/peers/nginx-null.conf \
      >"$work/nginx-$side/nginx.conf"
    for d in client_body proxy fastcgi uwsgi scgi; do mkdir -p "$work/nginx-$side/$d"; done
    taskset -c 0 nginx -p "$work/nginx-$side" -c "$work/nginx-$side/nginx.conf" \
      >"$work/nginx-$side/out.log" 2>&1 &
    server_pid[$side]=$!
    pids+=("${server_pid[$side]}")
    answers "http://127.0.0.1:$http_port/" || { cat "$work/nginx-$side/out.log"; exit 1; }
    load_args[$side]="--h1 -d $work/http.json -H content-type:application/json http://127.0.0.1:$http_port/shouldAllowRequest"
    return
  fi
  path=${spec%%@*}
  dir=${SLUICE_BUILD_DIR:-build}
  [[ $spec == *@* ]] && dir=${spec#*@}
  [[ -x $dir/sluice ]] || { echo "no $dir/sluice (build it first)" >&2; exit 1; }
  http_port=$(free_port)
  grpc_port=$(free_port)
  taskset -c 0 "$dir/sluice" --threads 1 --rules bench/rules --listen "127.0.0.1:$http_port" \
    --grpc-listen "127.0.0.1:$grpc_port" --log-level warn >"$work/sluice-$side.log" 2>&1 &
  server_pid[$side]=$!
  pids+=("${server_pid[$side]}")
  answers "http://127.0.0.1:$http_port/healthz" || { cat "$work/sluice-$side.log"; exit 1; }
  for task in /proc/${server_pid[$side]}/task/*; do taskset -pc 0 "${task##*/}" >/dev/null; done
  local grpc_headers="-H content-type:application/grpc -H te:trailers"
  case $path in
    grpc) load_args[$side]="-d $work/grpc.bin $grpc_headers http://127.0.0.1:$grpc_port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" ;;
    health) load_args[$side]="-d $work/health.grpc $grpc_headers http://127.0.0.1:$grpc_port/grpc.health.v1.Health/Check" ;;
    http) load_args[$side]="--h1 -d $work/http.json -H content-type:application/json http://127.0.0.1:$http_port/shouldAllowRequest" ;;
    healthz) load_args[$side]="--h1 http://127.0.0.1:$http_port/healthz" ;;
    *) echo "unknown path '$path' (grpc, http, health, healthz or nginx)" >&2; exit 2 ;;
  esac
}
start "${specs[0]}" 0
start "${specs[1]}" 1

hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
answered() {  # <h2load output file>
  sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p' "$1"
}

echo "bench/paired.sh: A = ${specs[0]}, B = ${specs[1]}; $rounds rounds of $duration s, h2load -c $connections -m 1 on each at once (CPU 1), both servers on CPU 0"
for round in $(seq 0 "$rounds"); do
  run_for=$duration
  ((round)) || run_for=1  # round 0 warms both up and is not recorded
  a0=$(cpu "${server_pid[0]}")
  a1=$(cpu "${server_pid[1]}")
  # shellcheck disable=SC2086 # load_args are word lists
  taskset -c 1 h2load -t 1 -c "$connections" -m 1 -D "$run_for" ${load_args[0]} >"$work/out-0" &
  load_a=$!
  # shellcheck disable=SC2086
  taskset -c 1 h2load -t 1 -c "$connections" -m 1 -D "$run_for" ${load_args[1]} >"$work/out-1" &
  load_b=$!
  wait "$load_a" "$load_b"
  b0=$(cpu "${server_pid[0]}")
  b1=$(cpu "${server_pid[1]}")
  n0=$(answered "$work/out-0")
  n1=$(answered "$work/out-1")
  [[ -n $n0 && $n0 -gt 0 ]] || { cat "$work/out-0" >&2; exit 1; }
  [[ -n $n1 && $n1 -gt 0 ]] || { cat "$work/out-1" >&2; exit 1; }
  ((round)) && echo "$round $(((b0 - a0))) $n0 $((b1 - a1)) $n1"
done | python3 -c "
import statistics, sys
hz = $hz
rows = []
print('| round | A: µs CPU / answer | B: µs CPU / answer | A / B |')
print('|---:|---:|---:|---:|')
for line in sys.stdin:
    r, ta, na, tb, nb = (int(x) for x in line.split())
    a, b = ta / hz * 1e6 / na, tb / hz * 1e6 / nb
    rows.append((a, b))
    print(f'| {r} | {a:.1f} | {b:.1f} | {a / b:.3f} |')
ratios = [a / b for a, b in rows]
ma = statistics.median(a for a, _ in rows)
mb = statistics.median(b for _, b in rows)
print(f'medians: A {ma:.1f} µs, B {mb:.1f} µs; A / B, median of the rounds: '
      f'{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})')
"
