# Sluice container image: a build stage that compiles and unit-tests Sluice on Debian 12,
# and a slim runtime stage with only the binary, its shared libraries and config/.
#
#   docker build -t sluice .                      # or: docker compose build
#   docker run --rm -p 8080:8080 -p 8081:8081 sluice   # memory store, example rules
#   docker run --rm -p 8080:8080 -e SLUICE_STORE=redis \
#       -e SLUICE_REDIS=redis://redis-host:6379/0 sluice
#
# Every setting is a SLUICE_* variable mirroring a command-line flag (DESIGN.md §2a);
# arguments after the image name are passed to sluice as flags. envoyproxy/ratelimit's
# variables (RUNTIME_ROOT, PORT, GRPC_PORT, REDIS_URL, ...) work too and win over the
# SLUICE_* defaults below (docs/envoy.md).

# The base of both stages; any Debian 12 (bookworm) image works, e.g. a local mirror.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
# Parallel compile jobs; lower it on a small builder.
ARG BUILD_JOBS=2
# An ARG, not an ENV: it applies to this stage's commands and stays out of the image.
ARG DEBIAN_FRONTEND=noninteractive
WORKDIR /src
# deps.sh alone first, so the package layer is reused while only sources change. The unit
# tests need GoogleTest, and the Redis store's start their own redis-server.
COPY scripts/deps.sh scripts/deps.sh
RUN scripts/deps.sh build \
 && apt-get install -y -qq --no-install-recommends libgtest-dev redis-server \
 && rm -rf /var/lib/apt/lists/*
COPY . .
# Build the binary and the unit-test executables only (the integration tests drive real
# processes, nginx and docker-compose; CI runs them outside the image), then run them.
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=ON \
 && unit_targets=$(cmake --build build --target help | sed -n 's/^\(unit_[a-z_]*\):.*/\1/p') \
 && cmake --build build -j "${BUILD_JOBS}" --target sluice ${unit_targets} \
 && ctest --test-dir build -L '^unit/' --output-on-failure -j "${BUILD_JOBS}" \
 && strip build/sluice

FROM ${BASE_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# The shared libraries build/sluice links (Boost.Asio/Beast and nlohmann_json are
# header-only; libgrpc++1.51 brings libgrpc29, abseil, upb, c-ares, re2); the ldd check
# below fails the build if this list ever falls behind.
# apt's caches (/var/cache/apt/*.bin, ~78 MB, and the package lists) go in the same layer.
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      libhiredis0.14 libyaml-cpp0.7 libspdlog1.10 libfmt9 libgrpc++1.51 libprotobuf32 \
      libnghttp2-14 libssl3 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
 && groupadd --system --gid 10001 sluice \
 && useradd --system --uid 10001 --gid sluice --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin sluice
COPY --from=build /src/build/sluice /usr/local/bin/sluice
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
# Numeric, so that runAsNonRoot-style checks can verify it without /etc/passwd.
USER 10001:10001
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/sluice-healthcheck"]
# Sluice drains in-flight requests on SIGTERM; exec form makes it PID 1 so it gets the signal.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sluice"]
