#!/usr/bin/env bash
# Runs the whole system in the foreground: Postgres, the Tansu broker and the five services on 127.0.0.1.
# Ctrl-C stops all of it. Ports: PG_PORT (25432), KAFKA_PORT (29092), services 8081-8085.
set -euo pipefail
source "$(dirname "$0")/common.sh"

PG_PORT=${PG_PORT:-25432}
KAFKA_PORT=${KAFKA_PORT:-29092}
runtime=$(runtime_dir run)
bin=$(cd "$ROOT" && swift build --show-bin-path)
mkdir -p "$runtime/logs"

pids=()
cleanup() {
    trap - EXIT INT TERM
    log "stopping"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    "$ROOT/deploy/local/broker.sh" stop "$runtime/broker"
    "$ROOT/deploy/local/postgres.sh" stop "$runtime/postgres"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for entry in "${SERVICES[@]}"; do
    port_in_use "${entry#*:}" && die "port ${entry#*:} is in use: is the system already running?"
done

log "starting Postgres on 127.0.0.1:$PG_PORT"
"$ROOT/deploy/local/postgres.sh" start "$runtime/postgres" "$PG_PORT"
log "starting the Tansu broker on 127.0.0.1:$KAFKA_PORT"
"$ROOT/deploy/local/broker.sh" start "$runtime/broker" "$KAFKA_PORT"

public_key=$("$bin/devtoken" --init-keys --key-dir "$DEV_KEY_DIR")
export DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/delivery"
export DATABASE_TLS=disable
export KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT"
export JWT_ISSUER="$DEV_JWT_ISSUER" JWT_AUDIENCE="$DEV_JWT_AUDIENCE" JWT_PUBLIC_KEY_FILE="$public_key"
export HTTP_HOST=127.0.0.1
export LOG_LEVEL=${LOG_LEVEL:-info}

for entry in "${SERVICES[@]}"; do
    name=${entry%%:*}
    # The log pipe ignores Ctrl-C so it outlives the service's graceful shutdown and keeps its last lines.
    HTTP_PORT=${entry#*:} "$bin/$name" \
        > >(trap '' INT TERM; sed -u "s/^/[$name] /" | tee -a "$runtime/logs/$name.log") 2>&1 &
    pids+=($!)
done

for entry in "${SERVICES[@]}"; do
    name=${entry%%:*}; port=${entry#*:}
    deadline=$(( $(date +%s) + 90 ))
    until curl -fsS "http://127.0.0.1:$port/ready" >/dev/null 2>&1; do
        [ "$(date +%s)" -ge "$deadline" ] && die "$name did not become ready; see $runtime/logs/$name.log"
        sleep 0.3
    done
done

cat <<INFO

The delivery platform is running (Ctrl-C stops everything):
$(for entry in "${SERVICES[@]}"; do printf '  %-22s http://127.0.0.1:%s  (/health /ready /metrics)\n' "${entry%%:*}" "${entry#*:}"; done)
  Postgres               postgres://postgres@127.0.0.1:$PG_PORT/delivery
  Kafka (Tansu)          127.0.0.1:$KAFKA_PORT
  logs                   $runtime/logs/
  tokens                 $bin/devtoken --sub alice --role customer --name Alice

INFO

# Stop everything as soon as one service exits.
wait -n "${pids[@]}" && status=$? || status=$?
log "a service exited (status $status); stopping the rest"
exit 1
