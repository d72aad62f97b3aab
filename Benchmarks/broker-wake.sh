#!/usr/bin/env bash
# Broker wake benchmark: the local broker alone and behind its wake relay (deploy/local/broker_wake.py), side by
# side. For each: the broker's (and the relay's) CPU with CONSUMERS idle consumers for 20 s, then produce-to-receive
# latency of COUNT records, each sent after QUIET seconds with nothing on the topic. Consumers wait 10 ms at the
# broker alone (the services' default there) and 500 ms behind the relay (what make run gives the services).
#   Benchmarks/broker-wake.sh [QUIET] [COUNT] [CONSUMERS]     default: 1 s, 20 records, 8 consumers
set -euo pipefail
source "$(dirname "$0")/lib.sh"
"$ROOT/deploy/local/setup.sh"
trap '"$ROOT/deploy/local/broker.sh" stop "$bench_runtime/broker"; "$ROOT/deploy/local/broker.sh" stop "$bench_runtime/broker-wake"' EXIT
"$ROOT/deploy/local/broker.sh" start "$bench_runtime/broker" "$bench_kafka_port"
"$ROOT/deploy/local/broker.sh" start "$bench_runtime/broker-wake" "$((bench_kafka_port + 1))" --wake
"$PYTHON" "$ROOT/Benchmarks/broker_wake.py" --quiet "${1:-1}" --count "${2:-20}" --consumers "${3:-8}" \
    "alone,127.0.0.1:$bench_kafka_port,10,$(cat "$bench_runtime/broker/broker.pid")" \
    "behind the relay,127.0.0.1:$((bench_kafka_port + 1)),500,$(cat "$bench_runtime/broker-wake/broker.pid"):$(cat "$bench_runtime/broker-wake/broker-wake.pid")"
