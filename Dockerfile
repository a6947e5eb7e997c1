# Sluice container image: a build stage that compiles and unit-tests Sluice on Debian 12,
# and a slim runtime stage with only the binary, its shared libraries and config/.
#
#   docker build -t sluice .                      # or: docker compose build
#   docker run --rm -p 8080:8080 -p 8081:8081 sluice   # memory store, example rules
#   docker run --rm -p 8080:8080 -e SLUICE_STORE=redis \
#       -e SLUICE_REDIS=redis://redis-host:6379/0 sluice
#
# Every setting is a SLUICE_* variable mirroring a command-line flag (docs/deployment.md);
# arguments after the image name are passed to sluice as flags. envoyproxy/ratelimit's
# variables (RUNTIME_ROOT, PORT, GRPC_PORT, REDIS_URL, ...) work too and win over the
# SLUICE_* defaults below (docs/envoy.md).

# The base of both stages; any Debian 12 (bookworm) image works, e.g. a local mirror.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
# An ARG, not an ENV: it applies to this stage's commands and stays out of the image.
ARG DEBIAN_FRONTEND=noninteractive
# scripts/deps.sh alone first, so the package layer is reused while only sources change. Its
# `unit` level is what the build and the unit tests below need (one list: scripts/deps.sh).
COPY scripts/deps.sh /usr/local/sbin/sluice-deps
RUN sluice-deps unit && rm -rf /var/lib/apt/lists/*
# Parallel compile jobs; lower it on a small builder.
ARG BUILD_JOBS=2
# on: build the unit-test programs and run them (ctest -L '^unit/'), so that no image is
# built from code whose unit tests fail. off: only for a builder that has just run those
# tests on the same sources (CI does, before it builds the image).
ARG UNIT_TESTS=on
# Where the sources are built. A builder that mounts a ccache directory at /ccache
# (podman build -v ...:/ccache) sets it to the path its own build used, so that the compile
# commands match and the cache answers (docker/build-image.sh). The sources are copied to a
# fixed path and moved in the RUN below, never through `WORKDIR ${SRC_DIR}`: buildah keys a
# WORKDIR step by its text, not by the argument's value, so a layer cached for one path was
# reused for another and the build ran in an empty directory. A RUN step's key includes the
# values of the arguments it sees.
ARG SRC_DIR=/src
COPY . /sluice-src
# Build the binary and, with UNIT_TESTS=on, the unit-test executables only (the integration
# tests drive real processes, nginx and compose; CI runs them outside the image).
RUN set -e; \
    case "${UNIT_TESTS}" in on | off) ;; *) echo "UNIT_TESTS must be on or off" >&2; exit 2 ;; esac; \
    case "${SRC_DIR}" in /*) ;; *) echo "SRC_DIR must be an absolute path" >&2; exit 2 ;; esac; \
    mkdir -p "$(dirname "${SRC_DIR}")"; \
    mv -T /sluice-src "${SRC_DIR}"; \
    cd "${SRC_DIR}"; \
    launcher=""; \
    if [ -d /ccache ]; then \
      export CCACHE_DIR=/ccache CCACHE_BASEDIR="${SRC_DIR}" CCACHE_MAXSIZE=0 \
             CCACHE_STATSLOG=/tmp/ccache-stats.log; \
      launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"; \
    fi; \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=ON ${launcher}; \
    targets=sluice; \
    if [ "${UNIT_TESTS}" = on ]; then \
      targets="sluice $(cmake --build build --target help | sed -n 's/^\(unit_[a-z_]*\):.*/\1/p')"; \
    fi; \
    cmake --build build -j "${BUILD_JOBS}" --target ${targets}; \
    if [ -n "${launcher}" ]; then ccache --show-log-stats | sed -n '/Hits:/p;/Misses:/p'; fi; \
    if [ "${UNIT_TESTS}" = on ]; then \
      ctest --test-dir build -L '^unit/' --output-on-failure -j "${BUILD_JOBS}"; \
    fi; \
    strip build/sluice; \
    mv build/sluice /usr/local/bin/sluice; \
    cd /; \
    rm -rf "${SRC_DIR}"

FROM ${BASE_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# The shared libraries build/sluice links: scripts/deps.sh's `runtime` level. The ldd check
# below fails the build if that list ever falls behind.
# apt's caches (/var/cache/apt/*.bin, ~78 MB, and the package lists) go in the same layer.
COPY scripts/deps.sh /usr/local/sbin/sluice-deps
RUN sluice-deps runtime \
 && rm /usr/local/sbin/sluice-deps \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
 && groupadd --system --gid 10001 sluice \
 && useradd --system --uid 10001 --gid sluice --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin sluice
COPY --from=build /usr/local/bin/sluice /usr/local/bin/sluice
COPY docker/healthcheck.sh /usr/local/bin/sluice-healthcheck
COPY config/ /etc/sluice/
RUN if ldd /usr/local/bin/sluice | grep 'not found'; then exit 1; fi \
 && chmod 0755 /usr/local/bin/sluice-healthcheck

# HTTP on 8080 and Envoy's gRPC Rate Limit Service on 8081 (envoyproxy/ratelimit's ports).
ENV SLUICE_LISTEN=0.0.0.0:8080 \
    SLUICE_GRPC_LISTEN=0.0.0.0:8081 \
    SLUICE_RULES=/etc/sluice/rules \
    SLUICE_STORE=memory
WORKDIR /etc/sluice
# The memory store's snapshot (--memory-snapshot) goes on a volume here, owned by the user.
RUN mkdir -p /var/lib/sluice && chown 10001:10001 /var/lib/sluice
# Numeric, so that runAsNonRoot-style checks can verify it without /etc/passwd.
USER 10001:10001
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/sluice-healthcheck"]
# Sluice drains in-flight requests on SIGTERM; exec form makes it PID 1 so it gets the signal.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sluice"]
