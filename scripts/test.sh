#!/usr/bin/env bash
# Installs what the tests need, builds, and runs every test through CTest.
# Unit tests use a manual clock; conformance and integration tests start their own
# redis-server and sluice processes on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
scripts/build.sh -DSLUICE_BUILD_TESTS=ON
cd "${SLUICE_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 300
