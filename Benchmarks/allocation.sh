#!/usr/bin/env bash
# Allocation benchmark: the allocation service (release build) on its own Postgres and Tansu broker, then
# `allocation-load`: RIDERS riders online over a city, ORDERS orders made ready at RATE a second, each offer timed
# from the OrderReadyForPickup event's publication to the rider's socket and to its PushRequested.
#   Benchmarks/allocation.sh [RIDERS] [ORDERS] [RATE]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
riders=${1:-10000}
orders=${2:-500}
rate=${3:-20}
port=${BENCH_HTTP_PORT:-18183}

bench_build devtoken allocation-service allocation-load
bench_infrastructure
bench_service allocation-service "$port" DATABASE_POOL_SIZE=20
sleep 4  # the service's consumers join their groups
"$bench_bin/allocation-load" --http "http://127.0.0.1:$port" --kafka "127.0.0.1:$bench_kafka_port" \
    --riders "$riders" --orders "$orders" --rate "$rate" --key-dir "$DEV_KEY_DIR"
