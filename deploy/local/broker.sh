#!/usr/bin/env bash
# The Tansu broker (Kafka wire protocol, in memory) on 127.0.0.1.
#   broker.sh start DIR PORT   log and pid file in DIR
#   broker.sh stop DIR
set -euo pipefail
source "$(dirname "$0")/common.sh"

cmd=${1:-}; dir=${2:-}
[ -n "$dir" ] || die "usage: broker.sh start|stop DIR [PORT]"
case "$cmd" in
start)
    port=${3:?usage: broker.sh start DIR PORT}
    [ -x "$LOCAL/bin/tansu" ] || die "the Tansu broker is not installed; run deploy/local/setup.sh"
    port_in_use "$port" && die "port $port is already in use; stop what listens there (a previous run?) or pick another port"
    mkdir -p "$dir"
    nohup "$LOCAL/bin/tansu" broker \
        --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
        >"$dir/broker.log" 2>&1 &
    echo $! >"$dir/broker.pid"
    wait_for_port 127.0.0.1 "$port" 15 || { cat "$dir/broker.log" >&2; die "the broker did not start"; }
    ;;
stop)
    if [ -f "$dir/broker.pid" ]; then
        pid=$(cat "$dir/broker.pid")
        kill "$pid" 2>/dev/null && for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$dir/broker.pid"
    fi
    ;;
*) die "usage: broker.sh start|stop DIR [PORT]" ;;
esac
