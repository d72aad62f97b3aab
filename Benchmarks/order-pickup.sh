#!/usr/bin/env bash
# Pickup benchmark: the order service (release build) on its own Postgres and Tansu broker. First pgbench's built-in
# tpcb-like script with CONCURRENCY clients on that Postgres (scale 1 and scale CONCURRENCY, 10 s each, in a database
# of its own, before the service starts), the floor to compare pickups with; then `order-pickup-load` prepares ORDERS
# ready orders and picks them all up, from CONCURRENCY connections (closed loop), or at RATE a second (open loop).
# BENCH_IDEMPOTENCY_KEYS=1 sends each pickup with an Idempotency-Key of its own; BENCH_PUSH_OUTCOMES=N first publishes N
# outcomes of other pushes and times how fast the pickup saga's consumer gets past them.
#   Benchmarks/order-pickup.sh [ORDERS] [CONCURRENCY] [RATE]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
orders=${1:-3000}
concurrency=${2:-32}
rate=${3:-}
port=${BENCH_HTTP_PORT:-18181}
pgbench_seconds=${BENCH_PGBENCH_SECONDS:-10}

bench_build devtoken order-service order-pickup-load
bench_infrastructure
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pg_args=(-h 127.0.0.1 -p "$bench_pg_port" -U postgres)
"$pg_bin/psql" "${pg_args[@]}" -d postgres -qc "CREATE DATABASE pgbench" >/dev/null
scales=(1)
[ "$concurrency" -gt 1 ] && scales+=("$concurrency")
for scale in "${scales[@]}"; do
    "$pg_bin/pgbench" "${pg_args[@]}" -i -q -s "$scale" pgbench >"$bench_runtime-pgbench.log" 2>&1 \
        && "$pg_bin/pgbench" "${pg_args[@]}" -c "$concurrency" -j 2 -T "$pgbench_seconds" pgbench \
            >>"$bench_runtime-pgbench.log" 2>&1 \
        || { cat "$bench_runtime-pgbench.log" >&2; die "pgbench failed"; }
    awk -v scale="$scale" -v clients="$concurrency" '/latency average/ { latency = $4 } /^tps/ { tps = $3 }
        END { printf "pgbench tpcb-like, scale %s, %s clients: %.0f transactions a second, latency average %s ms\n", scale, clients, tps, latency }' \
        "$bench_runtime-pgbench.log"
done
"$pg_bin/psql" "${pg_args[@]}" -d postgres -qc "DROP DATABASE pgbench" >/dev/null
bench_service order-service "$port" DATABASE_POOL_SIZE=40
bench_host_probe
"$bench_bin/order-pickup-load" --url "http://127.0.0.1:$port" --kafka "127.0.0.1:$bench_kafka_port" \
    --orders "$orders" --concurrency "$concurrency" ${rate:+--rate "$rate"} --service-pid "${bench_pids[-1]}" \
    --key-dir "$DEV_KEY_DIR" ${BENCH_IDEMPOTENCY_KEYS:+--idempotency-keys} \
    ${BENCH_PUSH_OUTCOMES:+--push-outcomes "$BENCH_PUSH_OUTCOMES"}
bench_host_report
