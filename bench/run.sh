#!/usr/bin/env bash
# Sluice against its peers, in one run: nginx limit_req, HAProxy stick tables, a Node.js
# service (rate-limiter-flexible + ioredis), Sluice with the memory and the Redis store, and
# redis-benchmark running Sluice's Lua script (the ceiling). Writes bench/results/latest.json,
# latest.md and latest.png. See bench/README.md.
#
# Usage: bench/run.sh [--smoke|--quick] [--no-install] [--sluice PATH] [--out DIR]
#                     [--only SYSTEMS] [--workloads IDS] [--duration S] [--runs N]
#                     [--no-ceiling] [--no-memory] [--no-grpc]
#   (default)     the full run: ~15 minutes, both cores busy; writes bench/results/
#   --quick       fewer and shorter runs; writes bench/results/tmp/quick/
#   --smoke       a few seconds per system, one workload (the CTest entry); writes a temp dir.
#                 Peers that are not installed are skipped with a message; Sluice must answer.
#   --no-install  do not apt-get/npm/build anything (what the CTest entry uses)
#   --sluice PATH the binary to measure (default: $SLUICE_BUILD_DIR/sluice, built Release by
#                 scripts/build.sh into ${SLUICE_BUILD_DIR:-build})
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root"

profile=full
install=1
sluice=""
pass=()
cmdline="${SLUICE_BUILD_DIR:+SLUICE_BUILD_DIR=$SLUICE_BUILD_DIR }bench/run.sh $*"
while (($#)); do
  case $1 in
    --smoke) profile=smoke ;;
    --quick) profile=quick ;;
    --no-install) install=0 ;;
    --sluice) sluice=$2; shift ;;
    --out|--only|--workloads|--duration|--runs) pass+=("$1" "$2"); shift ;;
    --no-ceiling|--no-memory|--no-grpc) pass+=("$1") ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [[ $profile == smoke ]] && ! printf '%s\n' "${pass[@]+"${pass[@]}"}" | grep -qx -- --out; then
  pass+=(--out "${TMPDIR:-/tmp}/sluice-bench-smoke")
fi

if ((install)); then
  scripts/deps.sh bench
  if command -v npm >/dev/null 2>&1; then
    lock=bench/peers/node/package-lock.json
    stamp=bench/peers/node/node_modules/.package-lock.json
    if [[ ! -f $stamp || $lock -nt $stamp ]]; then
      (cd bench/peers/node && npm ci --no-audit --no-fund --loglevel=error)
    fi
  fi
  if [[ -z $sluice ]]; then
    SLUICE_BUILD_DIR=${SLUICE_BUILD_DIR:-build} scripts/build.sh -DSLUICE_BUILD_TESTS=OFF
  fi
fi
sluice=${sluice:-${SLUICE_BUILD_DIR:-build}/sluice}

exec python3 "$here/bench.py" --profile "$profile" --sluice "$sluice" \
  --command "$cmdline" "${pass[@]+"${pass[@]}"}"
