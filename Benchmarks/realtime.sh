#!/usr/bin/env bash
# Realtime benchmark: the conformance server (release build, production heartbeat: 25 s / 20 s) under the
# project's own raw-protocol load generator, both on this machine.
#   Benchmarks/realtime.sh [CONNECTIONS] [RATES...]
# Prints how long opening the connections took (and the listen-queue overflows meanwhile), the server's resident
# memory per connection, and the message -> message-back round trip (p50/p95/p99/max) per rate, stepping rates up
# until p99 passes 100 ms. BENCH_CONNECT_BATCH: connections opened at once (250); BENCH_BACKLOG: the server's listen
# backlog (4096); BENCH_SECONDS: seconds per rate (10). BENCH_HOST_PROBE=1: the host probe beside it (lib.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
connections=${1:-10000}
shift || true
rates=("${@:-10000 20000 30000 40000 50000}")
port=${BENCH_PORT:-3100}

swift build -c release --scratch-path .build-release --product socketio-conformance-server >/dev/null
swift build -c release --scratch-path .build-release --product realtime-load >/dev/null
bin=.build-release/release

# Each connection is a file descriptor on both sides; the hard limit caps how many one process can hold.
ulimit -n "$(ulimit -Hn)"
echo "file descriptor limit: $(ulimit -n) per process; cores: $(nproc)"

"$bin/socketio-conformance-server" --port "$port" --backlog "${BENCH_BACKLOG:-4096}" --ping-interval 25000 --ping-timeout 20000 \
    --connect-timeout 45000 --log-level error &
server=$!
trap 'kill $server ${bench_host_pid:-} 2>/dev/null || true' EXIT
sleep 1
bench_host_probe
# shellcheck disable=SC2086
"$bin/realtime-load" --url "ws://127.0.0.1:$port/socket.io/?EIO=4&transport=websocket" \
    --connections "$connections" --connect-batch "${BENCH_CONNECT_BATCH:-250}" --rates ${rates[*]} --seconds "${BENCH_SECONDS:-10}" --server-pid "$server"
bench_host_report
