#!/usr/bin/env bash
# Quick start: install what is missing, build, and run Sluice on the embedded memory store
# with the example rules. Extra arguments are passed to sluice (see build/sluice --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh -DSLUICE_BUILD_TESTS=OFF
exec build/sluice --rules config/rules --listen 127.0.0.1:8080 "$@"
