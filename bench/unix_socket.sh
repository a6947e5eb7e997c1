#!/usr/bin/env bash
# Sluice's memory store over a unix socket against TCP loopback, with one load generator
# (bench_http_load, since wrk speaks no unix sockets): Sluice --threads 1 on CPU 0 listening
# on both, the generator on CPU 1, closed loop, 64 keep-alive connections, 10k clients,
# fixed_window_allow. The transports alternate for --rounds rounds; prints each run, Sluice's
# CPU time per request in it (user + system, from /proc: less disturbed than the rate when
# other work shares the cores), and the ratios of the medians (unix / TCP).
#
# Usage: bench/unix_socket.sh [--sluice PATH] [--load PATH] [--seconds S] [--rounds N]
#                             [--connections N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=$root/${SLUICE_BUILD_DIR:-build}
sluice=$build/sluice
load=$build/bench/bench_http_load
seconds=8
rounds=3
connections=64
while (($#)); do
  case $1 in
    --sluice) sluice=$2; shift ;;
    --load) load=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --connections) connections=$2; shift ;;
    *) echo "bench/unix_socket.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -x $load ]] || cmake --build "$build" --target bench_http_load >/dev/null

work=$(mktemp -d /tmp/sluice-unix-bench-XXXXXX)
spid=""
cleanup() {
  [[ -n $spid ]] && kill "$spid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
socket=$work/sluice.sock
taskset -c 0 "$sluice" --listen "127.0.0.1:$port,unix:$socket" --rules "$here/rules" \
  --threads 1 --log-level warn >"$work/sluice.log" 2>&1 &
spid=$!
for _ in $(seq 100); do
  [[ -S $socket ]] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$spid/stat"; }
hz=$(getconf CLK_TCK)
run() {
  local before after line requests
  before=$(cpu_ticks)
  line=$(taskset -c 1 "$load" --target "$1" --connections "$connections" --seconds "$seconds" \
    --warmup 0 --clients 10000 --op fixed_window_allow)
  after=$(cpu_ticks)
  requests=$(sed -E 's/.*"requests":([0-9]+).*/\1/' <<<"$line")
  # One decimal: the figures are ~10-20 us, and whole microseconds would round by up to 5 %.
  echo "${line%\}},\"sluice_cpu_us_per_request\":$(awk -v t=$((after - before)) -v hz="$hz" \
    -v n="$requests" 'BEGIN { printf "%.1f", t * 1000000 / hz / n }')}"
}
tcp=()
unix=()
tcp_cpu=()
unix_cpu=()
rate() { sed -E 's/.*"requests_per_second":([0-9]+).*/\1/' <<<"$1"; }
cpu() { sed -E 's/.*"sluice_cpu_us_per_request":([0-9.]+).*/\1/' <<<"$1"; }
for ((i = 1; i <= rounds; i++)); do
  line=$(run "127.0.0.1:$port"); echo "$line"
  tcp+=("$(rate "$line")"); tcp_cpu+=("$(cpu "$line")")
  line=$(run "unix:$socket"); echo "$line"
  unix+=("$(rate "$line")"); unix_cpu+=("$(cpu "$line")")
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${tcp[*]}" "${unix[*]}" "${tcp_cpu[*]}" "${unix_cpu[*]}" <<'PY'
import statistics, sys
tcp, unix, tcp_cpu, unix_cpu = ([float(x) for x in a.split()] for a in sys.argv[1:5])
t, u = statistics.median(tcp), statistics.median(unix)
tc, uc = statistics.median(tcp_cpu), statistics.median(unix_cpu)
print(f"tcp median {t:.0f}/s, unix median {u:.0f}/s: unix/tcp {u / t:.2f}")
print(f"sluice CPU per request: tcp {tc:.1f} us, unix {uc:.1f} us: requests per CPU second "
      f"unix/tcp {tc / uc:.2f}")
PY
