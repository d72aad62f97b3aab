#!/usr/bin/env bash
# Recovery benchmark: two chat and two allocation instances (release builds) on their own Postgres and Tansu broker,
# then `recovery-load`: ROOMS chat rooms (2 clients each) and RIDERS rider clients, every client dropped DROPS times
# at random while chat messages and offers stream, reconnecting to either instance with its pid and last offset.
# BENCH_HOST_PROBE=1 sets apart the reconnects that met one of the host's slow episodes (Benchmarks/host.py).
#   [BENCH_HOST_PROBE=1] Benchmarks/recovery.sh [ROOMS] [RIDERS] [DROPS] [SECONDS] [--timeline]
# --timeline prints each second's reconnect latencies.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rooms=${1:-500}
riders=${2:-1000}
drops=${3:-5}
seconds=${4:-60}

bench_build devtoken chat-service allocation-service recovery-load
bench_infrastructure
for port in 18182 18192; do bench_service chat-service "$port" DATABASE_POOL_SIZE=20; done
for port in 18183 18193; do bench_service allocation-service "$port" DATABASE_POOL_SIZE=20; done
sleep 4  # the services' consumers join their groups
bench_host_probe
"$bench_bin/recovery-load" --kafka "127.0.0.1:$bench_kafka_port" --key-dir "$DEV_KEY_DIR" \
    --chat "ws://127.0.0.1:18182/socket.io/?EIO=4&transport=websocket,ws://127.0.0.1:18192/socket.io/?EIO=4&transport=websocket" \
    --allocation "http://127.0.0.1:18183,http://127.0.0.1:18193" \
    --rooms "$rooms" --riders "$riders" --drops "$drops" --seconds "$seconds" ${5:+"$5"}
bench_host_report
echo "reconnects not recovered, by reason (each instance's /metrics):"
for port in 18182 18192 18183 18193; do
    curl -fsS "http://127.0.0.1:$port/metrics" | grep '^socketio_recoveries_refused_total' | sed "s/^/  :$port /" || true
done
