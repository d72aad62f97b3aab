#!/usr/bin/env bash
# Order-events benchmark: the three services that follow orders.events (chat, allocation and location, release
# builds) on one Postgres and Tansu broker. ORDERS whole order lifecycles (created, accepted, ready, assigned,
# rider arrived, picked up, delivered: seven events each) are published at once, and each service's consumer is
# timed until its events_consumed_total has counted all of them; then each process's CPU over that time.
#   Benchmarks/order-events.sh [ORDERS]     default 2,000
set -euo pipefail
source "$(dirname "$0")/lib.sh"
orders=${1:-2000}

bench_build devtoken chat-service allocation-service location-service
bench_infrastructure
bench_service chat-service 18182 DATABASE_POOL_SIZE=20
bench_service allocation-service 18183 DATABASE_POOL_SIZE=20
bench_service location-service 18184 DATABASE_POOL_SIZE=20
sleep 4  # the consumers join their groups
"$PYTHON" "$ROOT/Benchmarks/order-events.py" --brokers "127.0.0.1:$bench_kafka_port" --orders "$orders" \
    --consumer "chat-rooms=http://127.0.0.1:18182" --consumer "allocation-orders=http://127.0.0.1:18183" \
    --consumer "location-jobs=http://127.0.0.1:18184" \
    --process "chat=${bench_pids[0]}" --process "allocation=${bench_pids[1]}" --process "location=${bench_pids[2]}" \
    --process "postgres=$(head -1 "$bench_runtime/postgres/data/postmaster.pid")" \
    --process "broker=$(cat "$bench_runtime/broker/broker.pid")"
