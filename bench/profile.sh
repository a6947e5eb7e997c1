#!/usr/bin/env bash
# Where Sluice spends its CPU under the benchmark's load: perf (cpu-clock samples, which work
# without hardware counters) on a Sluice pinned like in bench/run.sh, driven by the same wrk
# script. Prints the hottest functions (self time) and writes them to
# bench/results/tmp/profile/profile-<store>.txt (untracked: a run leaves the tree clean).
#
# With --callgrind, Sluice runs under valgrind's callgrind instead (instruction counts:
# repeatable whatever else the machine does) at a low constant rate (300 req/s), and the
# report is callgrind_annotate's (self instructions per function), in
# bench/results/tmp/profile/profile-<store>-callgrind.txt.
#
# With --admin, Sluice also runs its admin listener, which turns on the per-denial counting
# behind GET /limits/top (use it with --op fixed_window_deny to measure that).
#
# `eventual` is --store redis with bench/eventual/rules (fixed_window_allow made
# `consistency: eventual`, docs/eventual.md).
#
# With --callgrind, --rate R (default 300) and --connections C (default 4) set wrk's offered
# rate and connections; --rate 0 sends as fast as Sluice answers, which is what lets the
# Redis store batch its script calls as under real load (e.g. --rate 0 --connections 64).
#
# Usage: bench/profile.sh [memory|redis|eventual] [--sluice PATH] [--seconds N] [--clients N]
#                         [--op fixed_window_allow] [--desc 1|3] [--callgraph] [--callgrind]
#                         [--rate R] [--connections C] [--admin] [--out FILE]
#
# --out FILE writes the report there instead, e.g. for a before/after comparison; the tracked
# figures are refreshed on purpose only, with --out bench/results/profile-<store>[-callgrind].txt.
# With --callgrind, valgrind's raw output is kept beside the report as FILE.callgrind.out (for
# callgrind_annotate --auto=yes), except beside the tracked figures in bench/results/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
store=${1:-memory}
shift || true
sluice=$root/${SLUICE_BUILD_DIR:-build}/sluice
seconds=8
clients=10000
op=fixed_window_allow
desc=1
callgraph=()
callgrind=0
admin=0
rate=300
connections=4
out=
while (($#)); do
  case $1 in
    --sluice) sluice=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --clients) clients=$2; shift ;;
    --op) op=$2; shift ;;
    --desc) desc=$2; shift ;;
    --callgraph) callgraph=(--call-graph dwarf,16384) ;;
    --callgrind) callgrind=1 ;;
    --admin) admin=1 ;;
    --rate) rate=$2; shift ;;
    --connections) connections=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "bench/profile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
((callgrind)) || command -v perf >/dev/null || { echo "perf is not installed (Debian: linux-perf)" >&2; exit 1; }

work=$(mktemp -d /tmp/sluice-profile-XXXXXX)
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
wait_port() {
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

extra=()
rules=$here/rules
if [[ $store == eventual ]]; then
  rules=$here/eventual/rules
fi
if [[ $store == redis || $store == eventual ]]; then
  rport=$(port)
  taskset -c 1 redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$work" >"$work/redis.log" 2>&1 &
  pids+=($!)
  wait_port "$rport"
  extra=(--redis "redis://127.0.0.1:$rport/0")
fi
store_flag=$store
if [[ $store == eventual ]]; then
  store_flag=redis
fi
sport=$(port)
if ((admin)); then
  extra+=(--admin-listen "127.0.0.1:$(port)")
fi
if ((callgrind)); then
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" "$sluice" \
    --listen "127.0.0.1:$sport" --rules "$rules" --threads 1 --log-level warn \
    --store "$store_flag" "${extra[@]}" >"$work/sluice.log" 2>&1 &
  spid=$!
  pids+=($spid)
  for _ in $(seq 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$sport") 2>/dev/null; then break; fi
    sleep 0.1
  done
  # Start-up (rules loading, dynamic linking) is not what a request costs: zero the counters.
  callgrind_control -z "$spid" >/dev/null 2>&1 || true
  BENCH_MODE=json BENCH_CLIENTS=$clients BENCH_OP=$op BENCH_DESC=$desc BENCH_RATE=$rate \
    wrk -t1 -c"$connections" -d"${seconds}s" --timeout 10s -s "$here/wrk/decision.lua" \
    "http://127.0.0.1:$sport" >"$work/wrk.txt" 2>&1
  kill -TERM "$spid"
  wait "$spid" 2>/dev/null || true
  script_calls=
  if [[ -n ${rport:-} ]]; then
    script_calls=$(redis-cli -p "$rport" info commandstats | tr -d '\r' |
      sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
  fi
  out=${out:-$here/results/tmp/profile/profile-$store-callgrind.txt}
  mkdir -p "$(dirname "$out")"
  {
    echo "# bench/profile.sh $store --callgrind: instructions of sluice under callgrind,"
    echo "# $( ((rate)) && echo "$rate req/s" || echo 'as fast as it answers') over $connections connections for $seconds s, $clients clients, op=$op, $desc descriptor(s)$( ((admin)) && echo ', admin listener on')"
    grep -E 'requests in' "$work/wrk.txt" | sed 's/^/# wrk: /'
    callgrind_annotate --threshold=100 "$work/callgrind.out" 2>/dev/null \
      | grep -E '^ *[0-9,]+ \( *[0-9.]+%\)' >"$work/flat.txt"
    grep 'PROGRAM TOTALS' "$work/flat.txt" | sed 's/^/# /'
    # Zeroing the counters mid-run credits the frames then on the stack (the thread's entry,
    # clone, start_thread) with everything as "self": leave them out of the self listings.
    grep -vE 'PROGRAM TOTALS|clone\.S:clone|pthread_create\.c:start_thread|_M_run\(\)|\?\?\?:0x[0-9a-f]+ ' \
      "$work/flat.txt" >"$work/self.txt" || true
    total=$(grep 'PROGRAM TOTALS' "$work/flat.txt" | awk '{gsub(",", "", $1); print $1}')
    requests=$(grep -oE '[0-9]+ requests in' "$work/wrk.txt" | awk '{print $1}')
    if [[ -n $total && -n $requests && $requests -gt 0 ]]; then
      echo "# instructions per request: $((total / requests)) (counters zeroed after start-up)"
      if [[ -n $script_calls && $script_calls -gt 0 ]]; then
        echo "# script calls: $script_calls, $((requests * 10 / script_calls / 10)).$((requests * 10 / script_calls % 10)) decisions per call"
      fi
    fi
    echo "# shares by kind (self instructions, start-up excluded):"
    awk '{
         share = $0; sub(/^[^(]*\( */, "", share); sub(/%.*/, "", share); line = $0;
         kind = "other user code";
         if (line ~ /malloc|free|operator new|operator delete|tcache/) kind = "malloc/free";
         else if (line ~ /nlohmann/) kind = "nlohmann::json";
         else if (line ~ /beast/) kind = "boost::beast";
         else if (line ~ /asio/) kind = "boost::asio";
         else if (line ~ /spdlog|fmt::/) kind = "spdlog/fmt";
         else if (line ~ /sluice::/) kind = "sluice::";
         else if (line ~ /mem(move|cpy|set|cmp)|str(len|cmp)|basic_string/) kind = "libc mem*/str*, std::string";
         else if (line ~ /libc\.so|ld-linux/) kind = "other libc";
         sum[kind] += share }
       END { for (k in sum) printf "#   %6.2f%%  %s\n", sum[k], k }' "$work/self.txt" | sort -k2 -rn
    echo "# sluice:: functions, inclusive (what each costs with everything it calls):"
    callgrind_annotate --inclusive=yes --threshold=100 "$work/callgrind.out" 2>/dev/null \
      | grep -E '^ *[0-9,]+ \( *[0-9.]+%\)' | grep 'sluice::' | sed -E 's/ \[[^]]*\]$//' \
      | sed 's/^/#   /' | cut -c1-200 | head -25 || true  # head closes the pipe early
    echo "# hottest functions (self instructions):"
    sed -E 's/ \[[^]]*\]$//' "$work/self.txt" | cut -c1-200 | head -40 || true
  } | tee "$out"
  if [[ $(cd "$(dirname "$out")" && pwd) != "$here/results" ]]; then
    cp "$work/callgrind.out" "$out.callgrind.out"
  fi
  exit 0
fi
taskset -c 0 "$sluice" --listen "127.0.0.1:$sport" --rules "$rules" --threads 1 \
  --log-level warn --store "$store_flag" "${extra[@]}" >"$work/sluice.log" 2>&1 &
spid=$!
pids+=($spid)
wait_port "$sport"
sleep 0.5

BENCH_MODE=json BENCH_CLIENTS=$clients BENCH_OP=$op BENCH_DESC=$desc \
  taskset -c 1 wrk -t1 -c64 -d"$((seconds + 2))s" -s "$here/wrk/decision.lua" \
  "http://127.0.0.1:$sport" >"$work/wrk.txt" 2>&1 &
wpid=$!
pids+=($wpid)
sleep 1
perf record -e cpu-clock -F 1999 "${callgraph[@]}" -p "$spid" -o "$work/perf.data" \
  -- sleep "$seconds" >/dev/null 2>&1
wait "$wpid" || true
out=${out:-$here/results/tmp/profile/profile-$store.txt}
mkdir -p "$(dirname "$out")"
{
  echo "# bench/profile.sh $store: perf cpu-clock samples of sluice (--threads 1, CPU 0),"
  echo "# wrk -t1 -c64 on CPU 1, $clients clients, op=$op, $desc descriptor(s), $seconds s"
  grep -E 'Requests/sec|Latency ' "$work/wrk.txt" | sed 's/^/# wrk: /'
  perf report -i "$work/perf.data" --stdio --no-children --sort symbol 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//' \
    >"$work/flat.txt"
  echo "# shares by kind (self time):"
  awk '{ share = $1; sub(/%/, "", share); line = $0;
         kind = "other user code";
         if (line ~ /\[k\]/) kind = "kernel (syscalls, TCP)";
         else if (line ~ /malloc|free|_int_|operator new|operator delete|tcache/) kind = "malloc/free";
         else if (line ~ /nlohmann/) kind = "nlohmann::json";
         else if (line ~ /beast/) kind = "boost::beast";
         else if (line ~ /asio/) kind = "boost::asio";
         else if (line ~ /spdlog|fmt::/) kind = "spdlog/fmt";
         else if (line ~ /sluice::/) kind = "sluice::";
         else if (line ~ /mem(move|cpy|set|cmp)|str(len|cmp)/) kind = "libc mem*/str*";
         sum[kind] += share }
       END { for (k in sum) printf "#   %6.2f%%  %s\n", sum[k], k }' "$work/flat.txt" | sort -k2 -rn
  echo "# hottest functions (self time):"
  cut -c1-200 "$work/flat.txt" | head -45
} | tee "$out"
