#!/usr/bin/env bash
# A throwaway Postgres cluster on 127.0.0.1 for local runs and tests.
#   postgres.sh start DIR PORT    fresh cluster in DIR (deleted first), database "delivery", trust auth
#   postgres.sh stop DIR
#   postgres.sh crash DIR         an abrupt end after a checkpoint (connections cut, committed data kept)
#   postgres.sh resume DIR PORT   starts the cluster in DIR again, its data kept
# POSTGRES_SYNCHRONOUS_COMMIT=on makes every acknowledged commit survive a crash (the soak's setting); the default
# `off` is faster and loses the last commits of a crash (the checkpoint in `crash` writes most of them out first).
# Postgres refuses to run as root, so as root the cluster runs as the postgres user.
set -euo pipefail
source "$(dirname "$0")/common.sh"

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || die "PostgreSQL server binaries not found; run deploy/local/setup.sh"

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd=${1:-}; dir=${2:-}
[ -n "$dir" ] || die "usage: postgres.sh start|resume|stop|crash DIR [PORT]"
launch() {
    local port=$1
    if port_in_use "$port"; then
        die "port $port is already in use; stop what listens there (a previous run?) or pick another port"
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=${POSTGRES_SYNCHRONOUS_COMMIT:-off} -c full_page_writes=off -c max_connections=400 -c shared_buffers=256MB ${POSTGRES_EXTRA_OPTIONS:-}" \
        start >/dev/null || { cat "$dir/postgres.log" >&2; die "Postgres did not start"; }
}

shut_down() {
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m "$1" -w -t 30 stop >/dev/null 2>&1 || true
    fi
}

case "$cmd" in
start)
    port=${3:?usage: postgres.sh start DIR PORT}
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    launch "$port"
    as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres delivery
    ;;
resume)
    [ -d "$dir/data" ] || die "no cluster in $dir; use start"
    launch "${3:?usage: postgres.sh resume DIR PORT}"
    ;;
stop) shut_down fast ;;
crash)
    # With synchronous_commit=off (the default here, for speed) the last commits may still sit in memory; a
    # checkpoint first writes out what it can, as a durable configuration would have at commit. Commits acknowledged
    # between the checkpoint and the end are still lost: the soak runs with POSTGRES_SYNCHRONOUS_COMMIT=on.
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/psql" -h "$dir" -p "$(sed -n 4p "$dir/data/postmaster.pid")" -U postgres -d delivery -qAt \
            -c CHECKPOINT >/dev/null
    fi
    shut_down immediate
    ;;
*) die "usage: postgres.sh start|resume|stop|crash DIR [PORT]" ;;
esac
