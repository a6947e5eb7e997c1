#!/usr/bin/env bash
# Installs the Debian 12 packages Sluice needs that are missing; quick when none are.
# The one list of Sluice's packages: the container image installs its levels from here too.
#
# Usage: scripts/deps.sh [LEVEL] [--list]
#   build    compile Sluice (the default)
#   unit     + what the unit tests (ctest -L '^unit/') need. The image's build stage installs
#            exactly this level and runs those tests, so a unit test's dependency goes here.
#   test     + everything else the test command (scripts/test.sh) needs, the container
#            image, smoke and compose steps included
#   bench    + the benchmarks' tools
#   runtime  only the shared libraries build/sluice links: the image's runtime stage
#   --list   print the level's packages, one a line, and install nothing
# Each of build, unit, test, bench includes the levels before it.
set -euo pipefail
level=build
list_only=false
for arg in "$@"; do
  case $arg in
    runtime | build | unit | test | bench) level=$arg ;;
    --list) list_only=true ;;
    *)
      echo "scripts/deps.sh: unknown argument '$arg' (levels: runtime build unit test bench; --list)" >&2
      exit 2
      ;;
  esac
done

packages=(build-essential cmake ninja-build pkg-config libboost1.81-dev libhiredis-dev
          libyaml-cpp-dev libspdlog-dev nlohmann-json3-dev zlib1g-dev
          # gRPC (src/grpc, proto/): grpc++'s CMake package needs all four; libgrpc++-dev
          # also brings grpc++_reflection; gRPC's CMake package needs abseil's.
          libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
          # scripts/test.sh compiles through ccache, and so does the image's build stage when
          # the test mounts that cache into it (tests/container/).
          ccache
          # The gRPC listener's TLS (OpenSSL through Asio); nghttp2's client library is the
          # unit tests' HTTP/2 peer (the listener's HTTP/2 is Sluice's own).
          libnghttp2-dev libssl-dev
          # Calendar windows (src/limiter/calendar.cpp): Howard Hinnant's date library over
          # the system's tz database, which tzdata installs.
          libhowardhinnant-date-dev tzdata)
if [[ $level == runtime ]]; then
  # What build/sluice links (Boost.Asio/Beast and nlohmann_json are header-only;
  # libgrpc++1.51 brings libgrpc29, abseil, upb, c-ares, re2). The image checks the binary
  # with ldd, so this list cannot fall behind unnoticed.
  packages=(libhiredis0.14 libyaml-cpp0.7 libspdlog1.10 libfmt9 libgrpc++1.51 libprotobuf32
            libssl3
            # zlib: `sluice simulate` reads gzip logs.
            zlib1g
            # Calendar windows: the date library's time zones, read from tzdata's files.
            libdate-tz3 tzdata)
fi
if [[ $level == unit || $level == test || $level == bench ]]; then
  # GoogleTest; the Redis store's unit tests start their own redis-server;
  # python3-yaml: the differential YAML check (tests/unit/rules/yaml_syntax_test.cpp).
  packages+=(libgtest-dev redis-server python3 python3-yaml)
fi
if [[ $level == test || $level == bench ]]; then
  packages+=(redis-tools curl nginx-light wrk docker-compose
             # tests/grpc: a real gRPC client, run by /usr/bin/python3; the xDS tests
             # (tests/grpc/test_xds_rules.py) make certificates with openssl and read Envoy
             # Gateway's fixtures with python3-yaml (unit level).
             python3-grpcio python3-protobuf openssl
             # tests/grpc/test_rls_hostile.py: HPACK for the raw HTTP/2 client's frames.
             python3-hpack)
  # The Prometheus tests: `promtool check metrics/rules/config`, `promtool test rules`, and a
  # real `prometheus` server scraping Sluice (Debian's package has both executables).
  packages+=(prometheus)
  # stress-ng: the CPU hog of the stress run (docs/quality.md).
  packages+=(stress-ng)
  # The container steps of scripts/test.sh (tests/container/): podman builds the image from
  # a Debian 12 base made by debootstrap; runc because podman's default crun fails on hosts
  # with cgroups in hybrid mode; docker-compose (above) drives podman's Docker API in the
  # compose test (Debian 12's podman-compose 1.0.3 ignores profiles and fixed addresses).
  # The compose services find each other by name (redis:6379, sluice:8080): podman 4.3's CNI
  # networks resolve names only with the dnsname plugin, which podman does not pull in.
  packages+=(podman runc debootstrap golang-github-containernetworking-plugin-dnsname)
  # tests/browser: the what-if HTML report in headless Chromium.
  packages+=(chromium)
fi
if [[ $level == bench ]]; then
  # bench/run.sh: load generator, peers, plot. A Node.js that ships its own npm (as
  # NodeSource's does) conflicts with Debian's npm package, so npm is added only when missing.
  packages+=(wrk haproxy nginx-light redis-server redis-tools gnuplot-nox python3 util-linux
             # bench/grpc: h2load drives the gRPC endpoint.
             nghttp2-client
             # instruction counts (bench/profile.sh, ban_cost.sh, grpc_callgrind.sh ...)
             valgrind curl protobuf-compiler
             # system calls and wake-ups per answer (bench/grpc_wakeups.sh)
             linux-perf time)
  if ! command -v node >/dev/null 2>&1; then
    packages+=(nodejs)
  fi
  if ! command -v npm >/dev/null 2>&1; then
    packages+=(npm)
  fi
fi

if $list_only; then
  printf '%s\n' "${packages[@]}" | awk '!seen[$0]++'
  exit 0
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
