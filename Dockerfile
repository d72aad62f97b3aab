# syntax=docker/dockerfile:1
#
# One image with the five services and devtoken; the container's command picks which one runs, e.g.
#   docker run --rm -e DATABASE_URL=... -e KAFKA_BROKERS=... ... IMAGE order-service
# Configuration is by environment only (README, "Configuration"). docker-compose.yml runs the whole system.
#
# Build stage: the official Swift image (Debian 12) plus librdkafka's headers. The Swift runtime and Foundation
# are linked statically, so the runtime stage needs only glibc, libstdc++, zlib and librdkafka from Debian.

ARG SWIFT_VERSION=6.3

FROM swift:${SWIFT_VERSION}-bookworm AS build
ARG SWIFT_VERSION
ARG TARGETARCH

RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends librdkafka-dev pkg-config zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /build
# Everything the manifest names must be present (it declares the test and benchmark targets too); .dockerignore
# keeps .build, .local and .git out.
COPY . .

# .build is a BuildKit cache, so a rebuild after a source change recompiles only what changed (and fetches no
# dependency twice); the products are copied out of it into /staging in the same step. Resource bundles
# (*.resources: the SQL migrations) must sit next to the executables, where Bundle.module looks first.
RUN --mount=type=cache,id=delivery-platform-swiftpm-${SWIFT_VERSION}-${TARGETARCH},target=/build/.build,sharing=locked \
    --mount=type=cache,id=delivery-platform-swiftpm-cache-${TARGETARCH},target=/root/.cache,sharing=locked \
    set -eu; \
    products="order-service chat-service allocation-service location-service notification-service devtoken"; \
    for product in $products; do \
        swift build -c release --static-swift-stdlib --product "$product"; \
    done; \
    bin="$(swift build -c release --show-bin-path)"; \
    mkdir -p /staging/bin /staging/libexec; \
    for product in $products; do \
        install -m 0755 "$bin/$product" /staging/bin/; \
    done; \
    strip --strip-debug /staging/bin/*; \
    cp -R "$bin"/*.resources /staging/bin/; \
    if [ -x /usr/libexec/swift/linux/swift-backtrace-static ]; then \
        cp /usr/libexec/swift/linux/swift-backtrace-static /staging/libexec/; \
    fi; \
    ls -la /staging/bin

# Runtime stage.
FROM debian:bookworm-slim

# librdkafka1: Debian 12's 2.0.2 (fine against Apache Kafka; only the local Tansu broker needs 2.1+).
# curl: the compose healthchecks (GET /ready). tini: PID 1, forwards SIGTERM for the graceful shutdown.
RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends \
        librdkafka1 libstdc++6 zlib1g ca-certificates tzdata curl tini \
    && rm -rf /var/lib/apt/lists/*

# A non-root user. /keys is where docker-compose.yml mounts the dev JWT key pair; owned by that user so a fresh
# named volume mounted there starts out writable for devtoken.
RUN groupadd --system --gid 10001 delivery \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/delivery --create-home \
        --shell /usr/sbin/nologin delivery \
    && install -d -o 10001 -g 10001 -m 0750 /keys

COPY --from=build /staging/bin/ /usr/local/bin/
COPY --from=build /staging/libexec/ /usr/local/libexec/swift/

# Crash backtraces: a statically linked binary has to be told where the backtracer is.
ENV SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/usr/local/libexec/swift/swift-backtrace-static

USER 10001:10001
WORKDIR /home/delivery
# docker-compose.yml runs every service with HTTP_PORT=8080 (without it each listens on its own default, 8081-8085).
EXPOSE 8080

# The command is the program: order-service, chat-service, allocation-service, location-service,
# notification-service or devtoken (with its arguments).
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["devtoken", "--help"]
