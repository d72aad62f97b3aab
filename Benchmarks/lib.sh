# Shared by the benchmark scripts: release builds, a throwaway Postgres and Tansu broker, a service started on
# them, and clean-up on exit. Sourced, not executed.
source "$(dirname "${BASH_SOURCE[0]}")/../deploy/local/common.sh"
bench_runtime=$(runtime_dir bench)
bench_pg_port=${BENCH_PG_PORT:-25532}
bench_kafka_port=${BENCH_KAFKA_PORT:-29192}
# BENCH_BIN=DIR runs the release binaries in DIR instead (copies of another build, for a side-by-side comparison), and
# builds nothing.
bench_bin=${BENCH_BIN:-"$ROOT/.build-release/release"}
bench_pids=()
# The broker: Tansu alone, every consumer asking every 10 ms. BENCH_BROKER_WAKE=1 puts it behind its wake relay, as
# `make run` and the tests run it (deploy/local/broker_wake.py: a fetch is held until a record arrives in a partition
# it reads, as on Apache Kafka), and the services' and generators' consumers then wait up to 5 s per fetch
# (KAFKA_PROPERTIES, which the environment may extend). Where consumers of quiet topics run beside busy ones the relay
# saves the broker's CPU; on one busy topic it only adds its own (docs/benchmarks.md, "Recovery" and "Notification").
bench_broker_wake=${BENCH_BROKER_WAKE:-0}
if [ "$bench_broker_wake" = 1 ]; then
    export KAFKA_PROPERTIES="fetch.wait.max.ms=5000${KAFKA_PROPERTIES:+;$KAFKA_PROPERTIES}"
fi

# bench_build PRODUCT...: release builds (in .build-release, apart from the debug build).
bench_build() {
    "$ROOT/deploy/local/setup.sh"
    mkdir -p "$(dirname "$bench_runtime")"
    [ -z "${BENCH_BIN:-}" ] || return 0
    for product in "$@"; do
        (cd "$ROOT" && swift build -c release --scratch-path .build-release --product "$product" \
            >"$bench_runtime-build.log" 2>&1) || { cat "$bench_runtime-build.log" >&2; die "building $product failed"; }
    done
}

bench_cleanup() {
    bench_host_report >/dev/null
    for pid in "${bench_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${bench_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    "$ROOT/deploy/local/broker.sh" stop "$bench_runtime/broker"
    "$ROOT/deploy/local/postgres.sh" stop "$bench_runtime/postgres"
}

# bench_infrastructure: Postgres and the broker for the benchmark, stopped on exit.
bench_infrastructure() {
    trap bench_cleanup EXIT
    "$ROOT/deploy/local/postgres.sh" start "$bench_runtime/postgres" "$bench_pg_port"
    "$ROOT/deploy/local/broker.sh" start "$bench_runtime/broker" "$bench_kafka_port" \
        $([ "$bench_broker_wake" = 1 ] && echo --wake)
    bench_public_key=$("$bench_bin/devtoken" --init-keys --key-dir "$DEV_KEY_DIR")
}

# bench_service NAME PORT [VAR=value...]: starts a release service on the benchmark's infrastructure.
bench_service() {
    local name=$1 port=$2
    shift 2
    env DATABASE_URL="postgres://postgres@127.0.0.1:$bench_pg_port/delivery" DATABASE_TLS=disable \
        KAFKA_BROKERS="127.0.0.1:$bench_kafka_port" JWT_ISSUER="$DEV_JWT_ISSUER" JWT_AUDIENCE="$DEV_JWT_AUDIENCE" \
        JWT_PUBLIC_KEY_FILE="$bench_public_key" HTTP_HOST=127.0.0.1 HTTP_PORT="$port" LOG_LEVEL=warning \
        PUSH_LOG_PROVIDER=true SOCKETIO_MAX_SESSIONS_PER_ADDRESS=0 "$@" \
        "$bench_bin/$name" >"$bench_runtime/$name-$port.log" 2>&1 &
    bench_pids+=($!)
    for _ in $(seq 300); do curl -fsS "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && return; sleep 0.1; done
    die "$name did not become ready; see $bench_runtime/$name-$port.log"
}

# bench_instances NAME PORT COUNT [VAR=value...]: COUNT instances of a service on PORT, PORT+10, ...; their
# addresses (http://127.0.0.1:PORT...) in bench_addresses.
bench_instances() {
    local name=$1 port=$2 count=$3
    shift 3
    bench_addresses=()
    for ((n = 0; n < count; n++)); do
        bench_service "$name" "$((port + 10 * n))" "$@"
        bench_addresses+=("http://127.0.0.1:$((port + 10 * n))")
    done
}

# bench_host_probe: with BENCH_HOST_PROBE=1, Benchmarks/host.py runs beside the load until bench_host_report or
# the exit's clean-up (it is not one of bench_pids, which scripts read as the services' pids), recording the host's
# slow episodes in the file BENCH_HOST_EPISODES names (a generator that reads it reports the operations that met one
# apart from the rest).
bench_host_probe() {
    [ "${BENCH_HOST_PROBE:-0}" = 1 ] || return 0
    mkdir -p "$bench_runtime"
    export BENCH_HOST_EPISODES="$bench_runtime/host-episodes"
    "$PYTHON" "$ROOT/Benchmarks/host.py" 0 --episodes "$BENCH_HOST_EPISODES" >"$bench_runtime/host-probe.log" 2>&1 &
    bench_host_pid=$!
}

# bench_host_report: stops the probe bench_host_probe started, if any, and prints what it found.
bench_host_report() {
    [ -n "${bench_host_pid:-}" ] || return 0
    kill -TERM "$bench_host_pid" 2>/dev/null || true
    wait "$bench_host_pid" 2>/dev/null || true
    bench_host_pid=""
    cat "$bench_runtime/host-probe.log"
}
