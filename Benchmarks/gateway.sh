#!/usr/bin/env bash
# Gateway benchmark: the whole system (release builds) with its nginx gateway, then the same REST calls and Socket.IO
# acknowledgements made directly to the allocation service and through the gateway (TLS), one client at a time.
#   Benchmarks/gateway.sh [CALLS]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
calls=${1:-2000}

bench_build devtoken order-service chat-service allocation-service location-service notification-service
"$PYTHON" "$ROOT/Benchmarks/gateway.py" "$bench_bin" "$calls"
