#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test through CTest; then the container
# steps (tests/container/run.sh): builds the image, smoke-tests it, and brings the compose
# stack up, checks it and takes it down.
# Unit tests use a manual clock; conformance and integration tests start their own
# redis-server and sluice processes on free loopback ports.
# SLUICE_CONTAINER_TESTS=off leaves the container steps out (they need root and minutes);
# SLUICE_UNIT_TESTS=on makes the image's build stage rerun the unit tests CTest just ran.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
# Through ccache, with paths relative to the checkout: the image's build stage is lent the
# same cache and builds under the same path, so it reuses these objects.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  CCACHE_BASEDIR=$(pwd -P)
  export CCACHE_BASEDIR
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
scripts/build.sh -DSLUICE_BUILD_TESTS=ON "${launcher[@]}"
(cd "${SLUICE_BUILD_DIR:-build}" && ctest --output-on-failure -j "$(nproc)" --timeout 300)

if [[ ${SLUICE_CONTAINER_TESTS:-on} == off ]]; then
  echo "SKIPPED: the container steps (image, smoke, compose): SLUICE_CONTAINER_TESTS=off"
  exit 0
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi
ccache_dir=off
if command -v ccache >/dev/null 2>&1; then
  ccache_dir=$(ccache -k cache_dir)
fi
"${sudo[@]}" env SLUICE_UNIT_TESTS="${SLUICE_UNIT_TESTS:-off}" SLUICE_CCACHE_DIR="$ccache_dir" \
  tests/container/run.sh
