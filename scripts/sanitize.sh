#!/usr/bin/env bash
# Sanitizer and fuzzing runs (docs/quality.md). Not part of scripts/test.sh: they take long.
#
#   scripts/sanitize.sh                  ASan+UBSan build in build-asan, the whole CTest suite
#   scripts/sanitize.sh --thread         TSan build in build-tsan: unit_store, unit_limiter,
#                                        conformance and integration tests
#   scripts/sanitize.sh --fuzz SECONDS   libFuzzer build in build-fuzz (clang), each fuzzer for
#                                        SECONDS over tests/fuzz/corpus/<fuzzer>/
#
# Environment: SLUICE_JOBS (default 2), CXX (compiler for the ASan/TSan builds; clang++ or
# g++), SLUICE_FUZZ_CXX (default clang++-14, else clang++), CTEST_ARGS (extra ctest
# arguments, e.g. "-R unit_"), SLUICE_FUZZ_ONLY (space-separated fuzzer names).
# Every sanitizer report, including those of the sluice and redis child processes the
# integration tests start, goes to <build>/sanitizer-logs/; the run fails if any is there.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=address
fuzz_seconds=0
while (($# > 0)); do
  case $1 in
    --thread) mode=thread ;;
    --fuzz)
      mode=fuzz
      fuzz_seconds=${2:?--fuzz needs a number of seconds}
      shift
      ;;
    -h | --help)
      sed -n '2,16p' "$0"
      exit 0
      ;;
    *)
      echo "unknown argument: $1 (see --help)" >&2
      exit 2
      ;;
  esac
  shift
done

jobs=${SLUICE_JOBS:-2}
generator=()
if command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi
# -O1 keeps the stacks readable and the tests' timing bounds reachable.
common_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g")
compiler=()
if [[ -n ${CXX:-} ]]; then
  compiler=(-DCMAKE_CXX_COMPILER="$CXX")
fi

# Fails when a sanitizer wrote a report anywhere (a child process's report does not always
# fail the test that started it).
check_logs() {
  local dir=$1
  if compgen -G "$dir/*" >/dev/null; then
    echo "sanitizer reports in $dir:" >&2
    for log in "$dir"/*; do
      echo "== $log" >&2
      head -n 60 "$log" >&2
    done
    return 1
  fi
  echo "no sanitizer reports in $dir"
}

run_ctest() {
  local build=$1
  shift
  local logs=$root/$build/sanitizer-logs
  rm -rf "$logs"
  mkdir -p "$logs"
  local status=0
  (cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 600 "$@" ${CTEST_ARGS:-}) ||
    status=$?
  check_logs "$logs" || status=1
  return $status
}

case $mode in
  address)
    build=build-asan
    cmake -S . -B "$build" "${generator[@]}" "${compiler[@]}" "${common_flags[@]}" \
      -DSLUICE_SANITIZE=address,undefined -DSLUICE_BUILD_TESTS=ON
    cmake --build "$build" -j "$jobs"
    export ASAN_OPTIONS="log_path=$root/$build/sanitizer-logs/asan:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:abort_on_error=1"
    export UBSAN_OPTIONS="log_path=$root/$build/sanitizer-logs/ubsan:print_stacktrace=1:halt_on_error=1"
    export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp"
    run_ctest "$build"
    ;;
  thread)
    build=build-tsan
    # The suites where threads meet: stores, limiter, both stores against one another,
    # and the real server (I/O threads, reload, Redis connections) under integration.
    targets=(unit_store unit_limiter conformance_tests integration_tests sluice)
    cmake -S . -B "$build" "${generator[@]}" "${compiler[@]}" "${common_flags[@]}" \
      -DSLUICE_SANITIZE=thread -DSLUICE_BUILD_TESTS=ON
    cmake --build "$build" -j "$jobs" --target "${targets[@]}"
    export TSAN_OPTIONS="log_path=$root/$build/sanitizer-logs/tsan:halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp"
    run_ctest "$build" -L '^(unit/store|unit/limiter|conformance|integration)$'
    ;;
  fuzz)
    build=build-fuzz
    fuzz_cxx=${SLUICE_FUZZ_CXX:-$(command -v clang++-14 || command -v clang++)}
    cmake -S . -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$fuzz_cxx" "${common_flags[@]}" \
      -DSLUICE_FUZZ=ON -DSLUICE_BUILD_TESTS=OFF
    cmake --build "$build" -j "$jobs" --target sluice_fuzzers
    fuzzers=${SLUICE_FUZZ_ONLY:-$(cd "$build/fuzz" && ls fuzz_*)}
    export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:abort_on_error=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    failed=()
    for fuzzer in $fuzzers; do
      seeds=$root/tests/fuzz/corpus/$fuzzer
      # New inputs go to a scratch corpus; the committed seeds stay small and hand-picked.
      work=$root/$build/corpus/$fuzzer
      artifacts=$root/$build/artifacts/$fuzzer/
      mkdir -p "$work" "$artifacts"
      dict=()
      if [[ -f $root/tests/fuzz/$fuzzer.dict ]]; then
        dict=(-dict="$root/tests/fuzz/$fuzzer.dict")
      fi
      echo "== $fuzzer for ${fuzz_seconds}s"
      if ! "$build/fuzz/$fuzzer" "$work" "$seeds" "${dict[@]}" -max_total_time="$fuzz_seconds" \
        -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts" 2>"$root/$build/$fuzzer.log"; then
        failed+=("$fuzzer")
        tail -n 60 "$root/$build/$fuzzer.log" >&2
      else
        grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|cov:' \
          "$root/$build/$fuzzer.log" | tail -n 3
      fi
    done
    if ((${#failed[@]} > 0)); then
      echo "fuzzers with findings: ${failed[*]} (inputs in $build/artifacts/)" >&2
      exit 1
    fi
    echo "all fuzzers ran ${fuzz_seconds}s without a finding"
    ;;
esac
