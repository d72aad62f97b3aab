# syntax=docker/dockerfile:1
#
# Two images from one build. The default target, `runtime`, holds the five services; the container's command picks
# which one runs, e.g.
#   docker run --rm -e DATABASE_URL=... -e KAFKA_BROKERS=... ... IMAGE order-service
# `tools` (docker build --target tools) holds devtoken, which mints development tokens with a private key: it is
# kept out of the runtime image. Configuration is by environment only (README, "Configuration");
# docker-compose.yml runs the whole system.
#
# Build stage: the official Swift image (Debian 12) plus librdkafka's headers. The Swift runtime and Foundation
# are linked statically, so the runtime stage needs only glibc, libstdc++ and zlib from Debian, and librdkafka.

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
    services="order-service chat-service allocation-service location-service notification-service"; \
    for product in $services devtoken; do \
        swift build -c release --static-swift-stdlib --product "$product"; \
    done; \
    bin="$(swift build -c release --show-bin-path)"; \
    mkdir -p /staging/bin /staging/tools /staging/libexec; \
    for product in $services; do \
        install -m 0755 "$bin/$product" /staging/bin/; \
    done; \
    install -m 0755 "$bin/devtoken" /staging/tools/; \
    strip --strip-debug /staging/bin/* /staging/tools/*; \
    cp -R "$bin"/*.resources /staging/bin/; \
    if [ -x /usr/libexec/swift/linux/swift-backtrace-static ]; then \
        cp /usr/libexec/swift/linux/swift-backtrace-static /staging/libexec/; \
    fi; \
    ls -la /staging/bin /staging/tools

# librdkafka 2.16.1, the build that confluent-kafka 2.16.1's manylinux wheel carries (from PyPI, checked against its
# hash). Debian 12's librdkafka1 is 2.0.2: fine against Apache Kafka, but it cannot talk to the local Tansu broker,
# which needs the newer protocol versions of 2.1 and later; 2.16.1 talks to both, and it is the version the local
# run and the tests use. It is self-contained (OpenSSL, zstd, lz4 and zlib linked in; only glibc outside), and the
# services, built against Debian's 2.0.2 headers, load it by its soname, librdkafka.so.1 (the wheel renames it;
# patchelf gives it back).
FROM debian:bookworm-slim AS librdkafka
ARG CONFLUENT_KAFKA_VERSION=2.16.1
ARG CONFLUENT_KAFKA_SHA256_AMD64=24f613cc81a856b6fbb2d7d11044a9aa770044eecc1f83ff84618688b056be06
ARG CONFLUENT_KAFKA_SHA256_ARM64=c012a1d74f95e91c9c43f0aa996d5fea8582397144c1f96b553f24b594afa7c6
RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends python3-pip patchelf \
    && rm -rf /var/lib/apt/lists/*
RUN set -eu; \
    case "$(dpkg --print-architecture)" in \
        amd64) platform=manylinux_2_28_x86_64; sha256="$CONFLUENT_KAFKA_SHA256_AMD64" ;; \
        arm64) platform=manylinux_2_28_aarch64; sha256="$CONFLUENT_KAFKA_SHA256_ARM64" ;; \
        *) echo "no librdkafka wheel for $(dpkg --print-architecture)" >&2; exit 1 ;; \
    esac; \
    python3 -m pip download --quiet --no-deps --only-binary=:all: --implementation cp --python-version 3.11 \
        --platform "$platform" --dest /wheel "confluent-kafka==$CONFLUENT_KAFKA_VERSION"; \
    echo "$sha256  $(ls /wheel/*.whl)" | sha256sum -c -; \
    python3 -m zipfile -e /wheel/*.whl /wheel/contents; \
    install -D -m 0644 /wheel/contents/confluent_kafka.libs/librdkafka-*.so.1 /staging/librdkafka.so.1; \
    patchelf --set-soname librdkafka.so.1 /staging/librdkafka.so.1

# What both images share: Debian's libraries and a non-root user.
FROM debian:bookworm-slim AS base

# curl: the compose healthchecks (GET /ready). tini: PID 1, forwards SIGTERM for the graceful shutdown.
RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends \
        libstdc++6 zlib1g ca-certificates tzdata curl tini \
    && rm -rf /var/lib/apt/lists/*
COPY --from=librdkafka /staging/librdkafka.so.1 /usr/local/lib/librdkafka.so.1
RUN ldconfig

# A non-root user.
RUN groupadd --system --gid 10001 delivery \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/delivery --create-home \
        --shell /usr/sbin/nologin delivery
COPY --from=build /staging/libexec/ /usr/local/libexec/swift/

# Crash backtraces: a statically linked binary has to be told where the backtracer is.
ENV SWIFT_BACKTRACE=enable=yes,sanitize=yes,threads=all,images=all,interactive=no,swift-backtrace=/usr/local/libexec/swift/swift-backtrace-static
ENTRYPOINT ["/usr/bin/tini", "--"]

# devtoken, and openssl for the gateway's self-signed certificate. docker-compose.yml keeps the dev JWT key pair in
# /keys, hands the public half to the services in /jwt, and makes the certificate in /certs; all are owned by the
# user, so fresh named volumes mounted there start out writable.
FROM base AS tools
RUN export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
    && apt-get -q update \
    && apt-get -q install -y --no-install-recommends openssl \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o 10001 -g 10001 -m 0750 /keys \
    && install -d -o 10001 -g 10001 -m 0755 /jwt /certs
COPY --from=build /staging/tools/ /usr/local/bin/
USER 10001:10001
WORKDIR /home/delivery
CMD ["devtoken", "--help"]

# The services (the default target): no devtoken, no key.
FROM base AS runtime
COPY --from=build /staging/bin/ /usr/local/bin/
USER 10001:10001
WORKDIR /home/delivery
# docker-compose.yml runs every service with HTTP_HOST=0.0.0.0 and HTTP_PORT=8080 (without them each listens on its
# own default port, 8081-8085).
EXPOSE 8080
# The command is the service: order-service, chat-service, allocation-service, location-service or
# notification-service.
CMD ["order-service"]
