#!/usr/bin/env bash
# The sketch algorithm's measured error (docs/sketch.md), one seeded command:
#   bench/sketch/run.sh [--requests N] [--clients K] [--windows T] [--limit L] [--seed S]
# Builds bench_sketch_eval, runs every trace against the exact sliding_window_counter, writes
# bench/sketch/results/{results.md,load.dat} and the plot docs/sketch-false-denials.png.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
out=$root/bench/sketch/results
mkdir -p "$out"
cmake --build "$build" --target bench_sketch_eval >/dev/null
start=$(date +%s)
"$build/bench/bench_sketch_eval" --out "$out" "$@"
echo "evaluation took $(( $(date +%s) - start )) s"
gnuplot -e "data='$out/load.dat'; png='$root/docs/sketch-false-denials.png'" \
  "$root/bench/sketch/plot.gp"
echo "wrote $out/results.md and docs/sketch-false-denials.png"
