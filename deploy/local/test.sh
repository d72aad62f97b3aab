#!/usr/bin/env bash
# Builds and runs every test against a throwaway Postgres and Tansu broker of its own, then tears them down.
# Exit status: the tests'. Ports (distinct from make run's): TEST_PG_PORT (15432), TEST_KAFKA_PORT (19092),
# and 19100-19199 for brokers that tests start and stop themselves.
#   test.sh [--coverage] [swift test arguments, e.g. --filter KafkaTests]
set -euo pipefail
source "$(dirname "$0")/common.sh"

# Coverage builds instrumented code into a separate folder so it does not invalidate the normal build.
swift_flags=()
coverage=false
if [ "${1:-}" = "--coverage" ]; then
    coverage=true
    swift_flags=(--enable-code-coverage --scratch-path "$ROOT/.build-coverage")
    shift
fi

PG_PORT=${TEST_PG_PORT:-15432}
KAFKA_PORT=${TEST_KAFKA_PORT:-19092}
runtime=$(runtime_dir test)

# Brokers that tests start themselves on 19100-19199 and that outlived a test process that did not exit cleanly.
stop_test_brokers() {
    pkill -f "tansu broker --listener-url tcp://127.0.0.1:191[0-9][0-9]" || true
}

cleanup() {
    stop_test_brokers
    "$ROOT/deploy/local/broker.sh" stop "$runtime/broker" || true
    "$ROOT/deploy/local/postgres.sh" stop "$runtime/postgres" || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$ROOT"
log "building (debug, with tests)"
build_started=$(date +%s)
swift build --build-tests "${swift_flags[@]}"
log "build took $(( $(date +%s) - build_started )) s"

stop_test_brokers
log "starting Postgres on 127.0.0.1:$PG_PORT and the Tansu broker on 127.0.0.1:$KAFKA_PORT"
"$ROOT/deploy/local/postgres.sh" start "$runtime/postgres" "$PG_PORT"
"$ROOT/deploy/local/broker.sh" start "$runtime/broker" "$KAFKA_PORT"

export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/delivery"
export TEST_KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT"
export TEST_TANSU_BIN="$LOCAL/bin/tansu"
export TEST_PYTHON="$PYTHON"
export TEST_BIN_PATH="$(swift build "${swift_flags[@]}" --show-bin-path)"
export LOG_LEVEL=${LOG_LEVEL:-warning}

tests_started=$(date +%s)
status=0
swift test --skip-build "${swift_flags[@]}" "$@" || status=$?
log "tests took $(( $(date +%s) - tests_started )) s (exit status $status)"

if $coverage; then
    "$PYTHON" "$ROOT/deploy/local/coverage_report.py" "$(swift test "${swift_flags[@]}" --show-codecov-path)" || status=$?
fi
exit $status
