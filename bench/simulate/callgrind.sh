#!/usr/bin/env bash
# The what-if replay's instructions per replayed request (docs/benchmarks.md, "What-if
# replay"): callgrind counts a replay of 100,000 and of 300,000 generated lines, and the
# difference over the 200,000 more lines is the cost of one request, start-up, the first
# use of each bucket and client, and the report left out. Repeatable whatever else the
# machine does (wall-clock figures are not).
#   bench/simulate/callgrind.sh              new rules only
#   bench/simulate/callgrind.sh --baseline   baseline and new rules (two decisions a request)
# Needs a Release build in build/ and valgrind; builds the generator and sluice itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake --build build --target sluice bench_simulate_gen_log >/dev/null
extra=()
if [[ ${1:-} == --baseline ]]; then
  extra=(--baseline bench/simulate/rules_old.yaml)
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
count() {  # lines: the instructions of one replay of that many generated lines
  build/bench/bench_simulate_gen_log "$1" 100000 50000 >"$dir/log"
  valgrind --tool=callgrind --callgrind-out-file="$dir/out" build/sluice simulate \
    --rules bench/simulate/rules_new.yaml "${extra[@]}" --log "$dir/log" >/dev/null 2>"$dir/err"
  sed -n 's/.*refs: *//p' "$dir/err" | tr -d ,
}
small=$(count 100000)
large=$(count 300000)
echo "100,000 lines: $small instructions; 300,000 lines: $large"
echo "per replayed request: $(((large - small) / 200000)) instructions"
