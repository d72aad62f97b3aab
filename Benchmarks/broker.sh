#!/usr/bin/env bash
# Broker benchmark: how the local broker (Tansu, in-memory) serves one partition as record batches pile up in it.
# A consumer at the end of the partition times produce-to-receive round trips after every step of single-record
# batches; the soak's realtime logs reach such counts (docs/testing.md, "What the soak found").
#   Benchmarks/broker.sh [STEP] [STEPS]     default: 2,500 batches a step, 10 steps
set -euo pipefail
source "$(dirname "$0")/lib.sh"
"$ROOT/deploy/local/setup.sh"
trap '"$ROOT/deploy/local/broker.sh" stop "$bench_runtime/broker"' EXIT
"$ROOT/deploy/local/broker.sh" start "$bench_runtime/broker" "$bench_kafka_port"
"$PYTHON" "$ROOT/Benchmarks/broker.py" "127.0.0.1:$bench_kafka_port" "${1:-2500}" "${2:-10}"
