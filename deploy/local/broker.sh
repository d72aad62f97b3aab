#!/usr/bin/env bash
# The Tansu broker (Kafka wire protocol, in memory) on 127.0.0.1.
#   broker.sh start DIR PORT [--wake]   log and pid files in DIR
#   broker.sh stop DIR
# With --wake, clients reach Tansu through broker_wake.py on PORT (Tansu itself on a free port, advertising PORT),
# which answers a waiting fetch as soon as a record arrives: consumers can then wait 500 ms (`fetch.wait.max.ms`)
# instead of asking every 10 ms (docs/benchmarks.md, "Idle").
set -euo pipefail
source "$(dirname "$0")/common.sh"

cmd=${1:-}; dir=${2:-}
[ -n "$dir" ] || die "usage: broker.sh start|stop DIR [PORT] [--wake]"

stop_pid_file() {
    [ -f "$1" ] || return 0
    local pid
    pid=$(cat "$1")
    kill -CONT "$pid" 2>/dev/null || true  # a paused broker (soak) cannot end otherwise
    kill "$pid" 2>/dev/null && for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$1"
}

case "$cmd" in
start)
    port=${3:?usage: broker.sh start DIR PORT [--wake]}
    wake=${4:-}
    [ -x "$LOCAL/bin/tansu" ] || die "the Tansu broker is not installed; run deploy/local/setup.sh"
    port_in_use "$port" && die "port $port is already in use; stop what listens there (a previous run?) or pick another port"
    mkdir -p "$dir"
    tansu_port=$port
    if [ "$wake" = --wake ]; then
        tansu_port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    fi
    nohup "$LOCAL/bin/tansu" broker \
        --listener-url "tcp://127.0.0.1:$tansu_port" --advertised-listener-url "tcp://127.0.0.1:$port" \
        >"$dir/broker.log" 2>&1 &
    echo $! >"$dir/broker.pid"
    wait_for_port 127.0.0.1 "$tansu_port" 15 || { cat "$dir/broker.log" >&2; die "the broker did not start"; }
    if [ "$wake" = --wake ]; then
        nohup "$PYTHON" "$ROOT/deploy/local/broker_wake.py" --listen "127.0.0.1:$port" \
            --upstream "127.0.0.1:$tansu_port" >"$dir/broker-wake.log" 2>&1 &
        echo $! >"$dir/broker-wake.pid"
        wait_for_port 127.0.0.1 "$port" 15 || { cat "$dir/broker-wake.log" >&2; die "the broker's relay did not start"; }
    fi
    ;;
stop)
    stop_pid_file "$dir/broker-wake.pid"
    stop_pid_file "$dir/broker.pid"
    ;;
*) die "usage: broker.sh start|stop DIR [PORT] [--wake]" ;;
esac
