#!/usr/bin/env bash
# The container steps of the test command (scripts/test.sh runs them after CTest):
#   image    docker/build-image.sh: the Dockerfile, built with podman on a debootstrap Debian 12
#            base kept between runs (or with docker when an engine answers)
#   smoke    docker/smoke-test.sh --no-build: that image, run and checked
#   compose  tests/container/compose-test.sh: docker-compose.yml brought up, checked, down
# Each step's output goes to the log as it runs; a failing step ends the run with
# "FAILED: <step>", its exit status and its last lines, so the CI log names what broke.
#
# Usage: tests/container/run.sh [STEP...]   (default: all three, in order; needs root)
# Environment: SLUICE_UNIT_TESTS (on|off: whether the image's build stage runs the unit
# tests; scripts/test.sh says off after CTest has just run them on the same sources), and
# the settings of docker/build-image.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."

steps=("$@")
((${#steps[@]} > 0)) || steps=(image smoke compose)
logs=$(mktemp -d /tmp/sluice-container-steps.XXXXXX)
trap 'rm -rf "$logs"' EXIT

command_of() {
  case $1 in
    image) echo docker/build-image.sh ;;
    smoke) echo docker/smoke-test.sh --no-build ;;
    compose) echo tests/container/compose-test.sh ;;
    *) return 1 ;;
  esac
}

for step in "${steps[@]}"; do
  command_of "$step" >/dev/null || { echo "tests/container/run.sh: unknown step '$step' (image, smoke, compose)" >&2; exit 2; }
done

if [[ $(id -u) -ne 0 ]]; then
  echo "tests/container/run.sh: the container steps need root (debootstrap, podman): sudo $0 ${steps[*]}" >&2
  exit 1
fi

for step in "${steps[@]}"; do
  read -r -a command <<<"$(command_of "$step")"
  echo "=== container step '$step': ${command[*]}"
  start=$SECONDS
  set +e
  "${command[@]}" 2>&1 | tee "$logs/$step.log"
  status=${PIPESTATUS[0]}
  set -e
  if ((status != 0)); then
    echo
    echo "FAILED: container step '$step' (${command[*]}) exited with status $status after $((SECONDS - start)) s; its last lines:"
    tail -n 40 "$logs/$step.log" | sed 's/^/  | /'
    exit 1
  fi
  echo "=== container step '$step' passed in $((SECONDS - start)) s"
done
