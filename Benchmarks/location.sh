#!/usr/bin/env bash
# Location benchmark: the location service (release build) on its own Postgres and Tansu broker, then
# `location-load`: JOBS picked-up deliveries, a watching customer socket and a rider socket sending a position a
# second for each, every position timed to its watcher. Prints the service's resident memory at the end. With
# INSTANCES=2, two location instances, watchers and riders spread over them (half the positions cross instances).
#   [INSTANCES=2] Benchmarks/location.sh [JOBS] [SECONDS]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
jobs=${1:-5000}
seconds=${2:-20}
port=${BENCH_HTTP_PORT:-18184}
ulimit -n "$(ulimit -Hn)"

bench_build devtoken location-service location-load
bench_infrastructure
bench_instances location-service "$port" "${INSTANCES:-1}" DATABASE_POOL_SIZE=20
sleep 4  # the service's consumers join their groups
bench_host_probe
"$bench_bin/location-load" --http "$(IFS=,; echo "${bench_addresses[*]}")" --kafka "127.0.0.1:$bench_kafka_port" \
    --jobs "$jobs" --seconds "$seconds" --key-dir "$DEV_KEY_DIR"
bench_host_report
for pid in "${bench_pids[@]}"; do
    log "location-service $pid: resident memory $(awk '/VmRSS/ {print $2, $3}' "/proc/$pid/status"), CPU $(awk '{print ($14 + $15) / 100}' "/proc/$pid/stat") s"
done
