#!/usr/bin/env bash
# Chat benchmark: the chat service (release build) on its own Postgres and Tansu broker, then `chat-load`: ROOMS
# rooms (a customer and a rider socket each), join-with-history timed, then RATE messages a second client to client.
# With INSTANCES=2, two chat instances, each room's customer on one and its rider on the other. With
# BENCH_HOST_PROBE=1, Benchmarks/host.py records the host's slow episodes meanwhile (docs/benchmarks.md, "The machine").
#   [INSTANCES=2] [BENCH_HOST_PROBE=1] Benchmarks/chat.sh [ROOMS] [RATE] [SECONDS] [chat-load options, e.g. --timeline]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rooms=${1:-1000}
rate=${2:-500}
seconds=${3:-20}
port=${BENCH_HTTP_PORT:-18182}

bench_build devtoken chat-service chat-load
bench_infrastructure
bench_instances chat-service "$port" "${INSTANCES:-1}" DATABASE_POOL_SIZE=40
urls=()
for address in "${bench_addresses[@]}"; do urls+=("${address/http:/ws:}/socket.io/?EIO=4&transport=websocket"); done
sleep 4  # the service's consumers join their groups
bench_host_probe
"$bench_bin/chat-load" --url "$(IFS=,; echo "${urls[*]}")" --kafka "127.0.0.1:$bench_kafka_port" \
    --rooms "$rooms" --rate "$rate" --seconds "$seconds" --key-dir "$DEV_KEY_DIR" "${@:4}"
bench_host_report
echo "events refused by the per-socket rate limit (each instance's /metrics; a refused message is not delivered):"
for address in "${bench_addresses[@]}"; do
    curl -fsS "$address/metrics" | grep '^socketio_rate_limited_total' | sed "s|^|  $address |" || echo "  $address none"
done
