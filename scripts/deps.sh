#!/usr/bin/env bash
# Installs the Debian 12 packages Sluice needs that are missing; quick when none are.
# Usage: scripts/deps.sh [build|test|bench]   (each level includes the ones before it)
set -euo pipefail
level=${1:-build}

packages=(build-essential cmake ninja-build pkg-config libboost1.81-dev libhiredis-dev
          libyaml-cpp-dev libspdlog-dev nlohmann-json3-dev)
if [[ $level == test || $level == bench ]]; then
  packages+=(libgtest-dev redis-server redis-tools curl nginx-light docker-compose)
fi
if [[ $level == bench ]]; then
  packages+=(wrk haproxy gnuplot-nox nodejs npm python3)
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
