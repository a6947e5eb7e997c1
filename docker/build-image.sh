#!/usr/bin/env bash
# Builds the Sluice image (the Dockerfile) where no image registry is reachable: with podman,
# on a Debian 12 base made by debootstrap and kept between runs; or with docker when a Docker
# engine answers (then on debian:bookworm-slim, unless BASE_IMAGE says otherwise).
#
# Usage: docker/build-image.sh [--base-only]
#   --base-only   only make the Debian 12 base (localhost/sluice-base:bookworm), then exit.
# Environment:
#   SLUICE_IMAGE          the tag to build (default sluice:local, the compose file's image)
#   SLUICE_IMAGE_JOBS     compile jobs inside the build (default 2)
#   SLUICE_UNIT_TESTS     on (default): the build stage builds and runs the unit tests;
#                         off: only for sources whose unit tests have just passed (CI)
#   SLUICE_CCACHE_DIR     a ccache directory to lend the build stage (podman only; default:
#                         ccache's own cache_dir when ccache is installed; "off": none). The
#                         sources are then built under this checkout's path, so that objects
#                         this checkout's build/ compiled through ccache are reused.
#   SLUICE_BUILD_CONTEXT  the build context (default the checkout; e.g. a `git archive HEAD`
#                         export to build only what is committed)
#   SLUICE_CONTAINER_CACHE where the base's root filesystem tarball is kept (default
#                         docker/.cache); podman's own image store keeps the base too
#   DEBIAN_MIRROR         debootstrap's mirror (default http://deb.debian.org/debian)
# Needs root for debootstrap and podman, and runc (apt-get install podman runc debootstrap):
# podman's default crun fails on hosts with cgroups in hybrid mode. Builds run with chroot
# isolation and the host network, which work without a container engine or systemd.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$(pwd -P)

image=${SLUICE_IMAGE:-sluice:local}
jobs=${SLUICE_IMAGE_JOBS:-2}
unit_tests=${SLUICE_UNIT_TESTS:-on}
context=${SLUICE_BUILD_CONTEXT:-.}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache_dir=${SLUICE_CONTAINER_CACHE:-docker/.cache}
base_tarball=$cache_dir/bookworm-minbase.tar
base_image=localhost/sluice-base:bookworm
# What works without systemd: runc, cgroupfs, a file for podman's events.
podman=(podman --runtime runc --cgroup-manager cgroupfs --events-backend file)

log() { printf '[image] %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}

have_docker_engine() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }

# A Debian 12 minbase root filesystem, imported into podman once and reused: podman's image
# store is the cache; the tarball lets a machine that lost the store skip debootstrap.
prepare_base() {
  command -v podman >/dev/null || fail "podman is missing: apt-get install podman runc debootstrap"
  command -v runc >/dev/null || fail "runc is missing: apt-get install runc (podman's crun fails on cgroups in hybrid mode)"
  if podman image exists "$base_image"; then
    return
  fi
  if [[ ! -s $base_tarball ]]; then
    command -v debootstrap >/dev/null || fail "debootstrap is missing: apt-get install debootstrap"
    mkdir -p "$cache_dir"
    local work
    work=$(mktemp -d /tmp/sluice-base.XXXXXX)
    log "debootstrap bookworm (minbase) from $mirror ..."
    if ! debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
      tail -n 20 "$work/debootstrap.log" >&2
      rm -rf "$work"
      fail "debootstrap failed (log above)"
    fi
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/cache/apt/*.bin \
      "$work"/rootfs/var/lib/apt/lists/*
    tar --numeric-owner -C "$work/rootfs" -cf "$base_tarball.tmp" .
    mv "$base_tarball.tmp" "$base_tarball"
    rm -rf "$work"
  fi
  log "podman import $base_tarball -> $base_image"
  podman import --quiet --change 'CMD ["/bin/bash"]' "$base_tarball" "$base_image" >/dev/null
}

case ${1:-} in
  --base-only)
    prepare_base
    log "base ready: $base_image"
    exit 0
    ;;
  "") ;;
  *) fail "unknown argument $1 (see the usage at the top of $0)" ;;
esac

args=(--build-arg BUILD_JOBS="$jobs" --build-arg UNIT_TESTS="$unit_tests")
start=$(date +%s)
if have_docker_engine; then
  [[ -z ${BASE_IMAGE:-} ]] || args+=(--build-arg BASE_IMAGE="$BASE_IMAGE")
  log "building $image with docker (unit tests $unit_tests)"
  docker build "${args[@]}" -t "$image" "$context" || fail "docker build (its last step's output is above)"
  size=$(docker image inspect --format '{{.Size}}' "$image")
else
  prepare_base
  args+=(--build-arg BASE_IMAGE="${BASE_IMAGE:-$base_image}")
  ccache_dir=${SLUICE_CCACHE_DIR:-}
  if [[ -z $ccache_dir ]] && command -v ccache >/dev/null; then
    ccache_dir=$(ccache -k cache_dir)
  fi
  if [[ -n $ccache_dir && $ccache_dir != off ]]; then
    mkdir -p "$ccache_dir"
    args+=(-v "$ccache_dir:/ccache" --build-arg SRC_DIR="$checkout")
    log "lending ccache $ccache_dir to the build stage (sources built under $checkout)"
  fi
  log "building $image with podman from $base_image (unit tests $unit_tests)"
  "${podman[@]}" build --isolation=chroot --network host --format docker \
    --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 "${args[@]}" -t "$image" "$context" ||
    fail "podman build (its last step's output is above)"
  size=$(podman image inspect --format '{{.Size}}' "$image")
fi
log "built $image in $(($(date +%s) - start)) s: $((size / 1000000)) MB"
