#!/usr/bin/env bash
# Chat benchmark: the chat service (release build) on its own Postgres and Tansu broker, then `chat-load`: ROOMS
# rooms (a customer and a rider socket each), join-with-history timed, then RATE messages a second client to client.
#   Benchmarks/chat.sh [ROOMS] [RATE] [SECONDS]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rooms=${1:-1000}
rate=${2:-500}
seconds=${3:-20}
port=${BENCH_HTTP_PORT:-18182}

bench_build devtoken chat-service chat-load
bench_infrastructure
bench_service chat-service "$port" DATABASE_POOL_SIZE=40
sleep 4  # the service's consumers join their groups
"$bench_bin/chat-load" --url "ws://127.0.0.1:$port/socket.io/?EIO=4&transport=websocket" --kafka "127.0.0.1:$bench_kafka_port" \
    --rooms "$rooms" --rate "$rate" --seconds "$seconds" --key-dir "$DEV_KEY_DIR"
