#!/usr/bin/env bash
# The what-if replay's speed and memory (docs/benchmarks.md, "What-if replay"):
#   bench/simulate/run.sh [lines=5000000]        requests replayed per second, one core
#   BIG=10G bench/simulate/run.sh                also the streamed 10 GB case (generated on
#                                                the fly into `--log -`; never on disk)
# Needs a Release build in build/ (scripts/build.sh); builds the generator itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
lines=${1:-5000000}
cmake --build build --target sluice bench_simulate_gen_log >/dev/null
gen=build/bench/bench_simulate_gen_log
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$gen" "$lines" 100000 50000 >"$dir/access.log"
echo "log: $lines lines, $(du -h "$dir/access.log" | cut -f1)"

run() {  # label, args...: user CPU seconds and max RSS of one replay, pinned to one core
  local label=$1
  shift
  /usr/bin/time -f "%U %M" -o "$dir/time" taskset -c 0 build/sluice simulate "$@" >/dev/null
  read -r user rss <"$dir/time"
  awk -v l="$label" -v n="$lines" -v u="$user" -v r="$rss" \
    'BEGIN { printf "%-28s %8.2f s user  %10.0f requests/s  max RSS %d MiB\n", l, u, n / u, r / 1024 }'
}
run "new rules only" --rules bench/simulate/rules_new.yaml --log "$dir/access.log"
run "baseline and new rules" --rules bench/simulate/rules_new.yaml \
  --baseline bench/simulate/rules_old.yaml --log "$dir/access.log"

if [[ -n ${BIG:-} ]]; then
  echo "streamed: $BIG of generated log through --log -"
  /usr/bin/time -f "%e s elapsed, %U s user, max RSS %M KiB" \
    bash -c "\"$gen\" $BIG 100000 50000 | taskset -c 0 build/sluice simulate \
      --rules bench/simulate/rules_new.yaml --baseline bench/simulate/rules_old.yaml --log - \
      | head -1"
fi
