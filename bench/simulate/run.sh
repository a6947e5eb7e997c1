#!/usr/bin/env bash
# The what-if replay's speed and memory (docs/benchmarks.md, "What-if replay"):
#   bench/simulate/run.sh [lines=2000000]       requests replayed per second of CPU, one core
#   RUNS=5 bench/simulate/run.sh                 runs per case (default 3)
#   CPU=1 bench/simulate/run.sh                  the core to pin the replay to (default 0)
#   BIG=10G bench/simulate/run.sh                also the streamed 10 GB case (generated on
#                                                the fly into `--log -`; never on disk)
# Each case replays the same generated log RUNS times, pinned to one core, and reports the
# fastest and the median run by CPU time: user plus system (the kernel's part is mostly the
# first touch of the replay's memory), requests/s = lines / (user + system). The default
# size takes about 30 s in all on an idle core.
# Needs a Release build in build/ (scripts/build.sh); builds the generator itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
lines=${1:-2000000}
runs=${RUNS:-3}
cpu=${CPU:-0}
cmake --build build --target sluice bench_simulate_gen_log >/dev/null
gen=build/bench/bench_simulate_gen_log
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$gen" "$lines" 100000 50000 >"$dir/access.log"
echo "log: $lines lines, $(du -h "$dir/access.log" | cut -f1); $runs runs a case, pinned to core $cpu;" \
  "requests/s = lines / CPU seconds (user + system)"

run() {  # label, args...: the fastest and median of $runs replays by user + system CPU
  local label=$1
  shift
  : >"$dir/times"
  for ((i = 0; i < runs; i++)); do
    /usr/bin/time -f "%U %S %M" -o "$dir/time" taskset -c "$cpu" build/sluice simulate "$@" \
      >/dev/null
    cat "$dir/time" >>"$dir/times"
  done
  # Sorted by user + system: the first line is the fastest run, the middle one the median.
  awk '{ printf "%.2f %s %s %s\n", $1 + $2, $1, $2, $3 }' "$dir/times" | sort -n >"$dir/sorted"
  awk -v l="$label" -v n="$lines" -v runs="$runs" '
    { cpu[NR] = $1; user[NR] = $2; sys[NR] = $3; if ($4 > rss) rss = $4 }
    END {
      m = int((NR + 1) / 2)
      printf "%-24s fastest %5.2f s CPU (%.2f user + %.2f sys) %9.0f requests/s;", l, cpu[1], user[1], sys[1], n / cpu[1]
      printf " median %5.2f s %9.0f requests/s; max RSS %d MiB\n", cpu[m], n / cpu[m], rss / 1024
    }' "$dir/sorted"
}
run "new rules only" --rules bench/simulate/rules_new.yaml --log "$dir/access.log"
run "baseline and new rules" --rules bench/simulate/rules_new.yaml \
  --baseline bench/simulate/rules_old.yaml --log "$dir/access.log"

if [[ -n ${BIG:-} ]]; then
  echo "streamed: $BIG of generated log through --log - (the replay's own CPU and memory)"
  "$gen" "$BIG" 100000 50000 |
    /usr/bin/time -f "%e s elapsed, %U s user, %S s system, max RSS %M KiB" -o "$dir/big" \
      taskset -c "$cpu" build/sluice simulate --rules bench/simulate/rules_new.yaml \
      --baseline bench/simulate/rules_old.yaml --log - | sed -n 1p
  cat "$dir/big"
fi
