#!/usr/bin/env bash
# Builds and runs every test, then tears down what they started. Exit status: the tests'.
#  1. the Swift tests (unit, integration, per-service) against a throwaway Postgres and Tansu broker of their own:
#     TEST_PG_PORT (15432), TEST_KAFKA_PORT (19092), and 19100-19199 for brokers that tests start themselves;
#  2. the system tests (Tests/System, pytest): the whole system with its gateway on ports of its own (15433, 19120,
#     18080-18090, 18443; see Tests/System/conftest.py), driven only through the gateway.
#   test.sh [--coverage] [swift test arguments, e.g. --filter KafkaTests]   both (with the arguments for Swift)
#   test.sh --system [pytest arguments, e.g. -k CUS_032]                     only the system tests
set -euo pipefail
source "$(dirname "$0")/common.sh"

# Coverage builds instrumented code into a separate folder so it does not invalidate the normal build.
swift_flags=()
coverage=false
swift_tests=true
if [ "${1:-}" = "--system" ]; then
    swift_tests=false
    shift
elif [ "${1:-}" = "--coverage" ]; then
    coverage=true
    swift_flags=(--enable-code-coverage --scratch-path "$ROOT/.build-coverage")
    shift
fi

PG_PORT=${TEST_PG_PORT:-15432}
KAFKA_PORT=${TEST_KAFKA_PORT:-19092}
runtime=$(runtime_dir test)

# Brokers that tests start themselves on 19100-19199 and that outlived a test process that did not exit cleanly
# (a broker behind its wake relay listens on a free port and advertises the relay's).
stop_test_brokers() {
    pkill -f "tansu broker --listener-url tcp://127.0.0.1:[0-9]+ --advertised-listener-url tcp://127.0.0.1:191[0-9][0-9]" || true
    pkill -f "broker_wake.py --listen 127.0.0.1:191[0-9][0-9]" || true
}

# Services, brokers and the gateway of a system-test run that was killed before its own teardown.
stop_system_test_leftovers() {
    pkill -f "$(swift build "${swift_flags[@]}" --show-bin-path)/[a-z]*-service" || true
    pkill -f "nginx.*(system-test|multi-instance|soak-test)-" || true
    for cluster in "$(runtime_dir "")"/{system-test,multi-instance,soak-test}-*/postgres; do
        [ -d "$cluster" ] && "$ROOT/deploy/local/postgres.sh" stop "$cluster"
    done
    true
}

cleanup() {
    stop_system_test_leftovers
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


export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/delivery"
export TEST_KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT"
export TEST_TANSU_BIN="$LOCAL/bin/tansu"
export TEST_PYTHON="$PYTHON"
export TEST_BIN_PATH="$(swift build "${swift_flags[@]}" --show-bin-path)"
export LOG_LEVEL=${LOG_LEVEL:-warning}

status=0
if $swift_tests; then
    stop_test_brokers
    log "starting Postgres on 127.0.0.1:$PG_PORT and the Tansu broker on 127.0.0.1:$KAFKA_PORT"
    "$ROOT/deploy/local/postgres.sh" start "$runtime/postgres" "$PG_PORT"
    "$ROOT/deploy/local/broker.sh" start "$runtime/broker" "$KAFKA_PORT"
    tests_started=$(date +%s)
    # At most SWIFT_TEST_PARALLELISM tests at once (default 8). Unbounded, every suite's services start together
    # and the 2-core CI machine saturates: a Postgres round trip inside the test process took 50-100 ms and the
    # services' consumers fell tens of seconds behind the scenarios waiting on them. Bounded, the run is no slower.
    swift test --skip-build --experimental-maximum-parallelization-width "${SWIFT_TEST_PARALLELISM:-8}" \
        "${swift_flags[@]}" "$@" || status=$?
    log "Swift tests took $(( $(date +%s) - tests_started )) s (exit status $status)"
    set --
fi

if ! $coverage; then
    "$ROOT/deploy/local/broker.sh" stop "$runtime/broker"
    stop_test_brokers
    log "system tests: the whole system behind its gateway"
    tests_started=$(date +%s)
    system_status=0
    "$PYTHON" -m pytest "$ROOT/Tests/System" -v -p no:cacheprovider --durations=5 "$@" || system_status=$?
    log "system tests took $(( $(date +%s) - tests_started )) s (exit status $system_status)"
    [ "$system_status" -eq 0 ] || status=$system_status
fi

if $coverage; then
    "$PYTHON" "$ROOT/deploy/local/coverage_report.py" "$(swift test "${swift_flags[@]}" --show-codecov-path)" || status=$?
fi
exit $status
