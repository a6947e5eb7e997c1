#!/usr/bin/env bash
# Why a gRPC health check costs the server more kernel time than /healthz: system calls and
# wake-ups of Sluice's I/O thread per answer, and the load generator's own CPU per request,
# with both paths offered the same rate (so neither is bounded by its client):
#
#   bench/grpc_wakeups.sh [--rps N] [--connections C] [--duration S] [--rounds R] [--build-dir DIR]
#
# Sluice (--threads 1, memory store) runs pinned to CPU 0, h2load to CPU 1 (-c C -m 1, N
# requests/s per connection). For each round and path, perf counts the I/O thread's system
# calls over the middle of an S-second h2load run; /usr/bin/time reports h2load's CPU and
# voluntary context switches. Needs: perf (linux-perf) with access to the syscall tracepoints
# (root), h2load, protoc, taskset.
set -euo pipefail
cd "$(dirname "$0")/.."

rps=1100
connections=64
duration=3
rounds=2
build_dir=${SLUICE_BUILD_DIR:-build}
while (($#)); do
  case $1 in
    --rps) rps=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    *) echo "usage: $0 [--rps N] [--connections C] [--duration S] [--rounds R] [--build-dir DIR]" >&2
       exit 2 ;;
  esac
done
for tool in perf h2load protoc taskset curl; do
  command -v $tool >/dev/null || { echo "$tool is missing" >&2; exit 1; }
done
[[ -x /usr/bin/time ]] || { echo "/usr/bin/time is missing (Debian: time)" >&2; exit 1; }
[[ -x $build_dir/sluice ]] || { echo "no $build_dir/sluice (build it first)" >&2; exit 1; }
((duration >= 2)) || { echo "--duration must be at least 2 s" >&2; exit 2; }

work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

source bench/grpc_bodies.sh  # free_port; $work/health.grpc; grpc_call

http_port=$(free_port)
grpc_port=$(free_port)
taskset -c 0 "$build_dir/sluice" --threads 1 --rules bench/rules --listen "127.0.0.1:$http_port" \
  --grpc-listen "127.0.0.1:$grpc_port" --log-level warn >"$work/sluice.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$http_port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$http_port/healthz" >/dev/null || { cat "$work/sluice.log"; exit 1; }
io_thread=
for task in "/proc/$pid/task/"*; do
  taskset -pc 0 "${task##*/}" >/dev/null
  [[ $(cat "$task/comm") == sluice-io-0 ]] && io_thread=${task##*/}
done
[[ -n $io_thread ]] || { echo "no sluice-io-0 thread in process $pid" >&2; exit 1; }

calls=(epoll_wait recvfrom sendto read write recvmsg sendmsg timerfd_settime futex epoll_ctl)
events=context-switches
for call in "${calls[@]}"; do events+=",syscalls:sys_enter_$call"; done

echo "h2load -c $connections -m 1 --rps=$rps, $duration s per run, $rounds rounds; Sluice's I/O"
echo "thread counted over $((duration - 1)) s of each run; per answer (per request for h2load)"
echo
echo "| round | path | answers/s | epoll_wait | recvfrom | sendto | other calls | context switches | h2load CPU | h2load sleeps |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for round in $(seq "$rounds"); do
  for path in health healthz; do
    if [[ $path == health ]]; then
      target=(-d "$work/health.grpc" "${grpc_call[@]}"
              "http://127.0.0.1:$grpc_port/grpc.health.v1.Health/Check")
    else
      target=(--h1 "http://127.0.0.1:$http_port/healthz")
    fi
    /usr/bin/time -f '%U %S %w' -o "$work/time.out" taskset -c 1 \
      h2load -t 1 -c "$connections" -m 1 --rps="$rps" -D "$duration" "${target[@]}" \
      >"$work/h2load.out" &
    load=$!
    sleep 0.5  # connections made, rate reached
    perf stat -x, -e "$events" -t "$io_thread" -- sleep $((duration - 1)) 2>"$work/perf.out"
    wait $load
    python3 - "$round" "$path" "$((duration - 1))" "$work/h2load.out" "$work/perf.out" \
      "$work/time.out" <<'EOF'
import re, sys
round_, path, counted, h2load_out, perf_out, time_out = sys.argv[1:]
text = open(h2load_out).read()
rate = float(re.search(r"finished in .*?, ([0-9.]+) req/s", text).group(1))
done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", text).group(1))
answers = rate * float(counted)
counts = {}
for line in open(perf_out):
    fields = line.strip().split(",")
    if len(fields) > 2 and fields[0].isdigit():
        counts[fields[2].replace("syscalls:sys_enter_", "")] = int(fields[0])
main = ("epoll_wait", "recvfrom", "sendto")
other = sum(v for k, v in counts.items() if k not in main and k != "context-switches")
user, system, sleeps = open(time_out).read().split()
per = lambda v: "%.3f" % (v / answers)
print("| %s | %s | %s | %s | %s | %s | %s | %s | %.1f µs | %s |" % (
    round_, path, format(int(rate), ","), per(counts.get("epoll_wait", 0)),
    per(counts.get("recvfrom", 0)), per(counts.get("sendto", 0)), per(other),
    per(counts.get("context-switches", 0)), (float(user) + float(system)) * 1e6 / done,
    per(int(sleeps) * answers / done)))
EOF
  done
done
