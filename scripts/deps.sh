#!/usr/bin/env bash
# Installs the Debian 12 packages Sluice needs that are missing; quick when none are.
# Usage: scripts/deps.sh [build|test|bench]   (each level includes the ones before it)
set -euo pipefail
level=${1:-build}

packages=(build-essential cmake ninja-build pkg-config libboost1.81-dev libhiredis-dev
          libyaml-cpp-dev libspdlog-dev nlohmann-json3-dev zlib1g-dev
          # gRPC (src/grpc, proto/): grpc++'s CMake package needs all four; libgrpc++-dev
          # also brings grpc++_reflection. src/grpc includes abseil's mutex.h itself.
          libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev)
if [[ $level == test || $level == bench ]]; then
  packages+=(libgtest-dev redis-server redis-tools curl nginx-light wrk docker-compose
             # tests/grpc: a real gRPC client, run by /usr/bin/python3.
             python3 python3-grpcio python3-protobuf)
  # The Prometheus tests: `promtool check metrics/rules/config`, `promtool test rules`, and a
  # real `prometheus` server scraping Sluice (Debian's package has both executables).
  packages+=(prometheus)
  # python3-yaml: the differential YAML check (tests/unit/rules/yaml_syntax_test.cpp);
  # stress-ng: the CPU hog of the stress run (docs/quality.md).
  packages+=(python3-yaml stress-ng)
  # tests/browser: the what-if HTML report in headless Chromium; zlib: gzip logs for
  # `sluice simulate` (also a build dependency, below).
  packages+=(chromium)
fi
if [[ $level == bench ]]; then
  # bench/run.sh: load generator, peers, plot. A Node.js that ships its own npm (as
  # NodeSource's does) conflicts with Debian's npm package, so npm is added only when missing.
  packages+=(wrk haproxy nginx-light redis-server redis-tools gnuplot-nox python3 util-linux
             # bench/grpc: h2load drives the gRPC endpoint.
             nghttp2-client)
  if ! command -v node >/dev/null 2>&1; then
    packages+=(nodejs)
  fi
  if ! command -v npm >/dev/null 2>&1; then
    packages+=(npm)
  fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "Installing missing packages: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
