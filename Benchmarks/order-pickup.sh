#!/usr/bin/env bash
# Pickup benchmark: the order service (release build) on its own Postgres and Tansu broker, then
# `order-pickup-load`: ORDERS ready orders picked up from CONCURRENCY connections.
#   Benchmarks/order-pickup.sh [ORDERS] [CONCURRENCY]
set -euo pipefail
source "$(dirname "$0")/../deploy/local/common.sh"
orders=${1:-3000}
concurrency=${2:-32}
runtime=$(runtime_dir bench)
pg_port=${BENCH_PG_PORT:-25532}
kafka_port=${BENCH_KAFKA_PORT:-29192}
http_port=${BENCH_HTTP_PORT:-18181}

"$ROOT/deploy/local/setup.sh"
cd "$ROOT"
swift build -c release --scratch-path .build-release --product order-service >/dev/null
swift build -c release --scratch-path .build-release --product order-pickup-load >/dev/null
swift build -c release --scratch-path .build-release --product devtoken >/dev/null
bin=.build-release/release

cleanup() {
    [ -n "${service:-}" ] && kill "$service" 2>/dev/null && wait "$service" 2>/dev/null || true
    "$ROOT/deploy/local/broker.sh" stop "$runtime/broker"
    "$ROOT/deploy/local/postgres.sh" stop "$runtime/postgres"
}
trap cleanup EXIT
"$ROOT/deploy/local/postgres.sh" start "$runtime/postgres" "$pg_port"
"$ROOT/deploy/local/broker.sh" start "$runtime/broker" "$kafka_port"
public_key=$("$bin/devtoken" --init-keys --key-dir "$DEV_KEY_DIR")

DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/delivery" DATABASE_TLS=disable KAFKA_BROKERS="127.0.0.1:$kafka_port" \
    JWT_ISSUER="$DEV_JWT_ISSUER" JWT_AUDIENCE="$DEV_JWT_AUDIENCE" JWT_PUBLIC_KEY_FILE="$public_key" \
    HTTP_HOST=127.0.0.1 HTTP_PORT="$http_port" LOG_LEVEL=warning DATABASE_POOL_SIZE=40 \
    "$bin/order-service" >"$runtime/order-service.log" 2>&1 &
service=$!
for _ in $(seq 300); do curl -fsS "http://127.0.0.1:$http_port/ready" >/dev/null 2>&1 && break; sleep 0.1; done

"$bin/order-pickup-load" --url "http://127.0.0.1:$http_port" --kafka "127.0.0.1:$kafka_port" \
    --orders "$orders" --concurrency "$concurrency" --key-dir "$DEV_KEY_DIR"
