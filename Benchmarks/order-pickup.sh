#!/usr/bin/env bash
# Pickup benchmark: the order service (release build) on its own Postgres and Tansu broker, then
# `order-pickup-load`: ORDERS ready orders picked up from CONCURRENCY connections.
#   Benchmarks/order-pickup.sh [ORDERS] [CONCURRENCY]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
orders=${1:-3000}
concurrency=${2:-32}
port=${BENCH_HTTP_PORT:-18181}

bench_build devtoken order-service order-pickup-load
bench_infrastructure
bench_service order-service "$port" DATABASE_POOL_SIZE=40
"$bench_bin/order-pickup-load" --url "http://127.0.0.1:$port" --kafka "127.0.0.1:$bench_kafka_port" \
    --orders "$orders" --concurrency "$concurrency" --key-dir "$DEV_KEY_DIR"
