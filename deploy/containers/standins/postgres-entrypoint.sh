#!/bin/bash
# What docker-compose.yml uses of the official postgres image's entrypoint: on an empty data directory, initdb with
# POSTGRES_USER and POSTGRES_PASSWORD (scram-sha-256 over TCP), create POSTGRES_DB, and run
# /docker-entrypoint-initdb.d/*.sh and *.sql against a server listening on its socket only; then run the command
# (`postgres ARGS...`) as the postgres user, listening on every address.
set -euo pipefail
if [ "$(id -u)" = 0 ]; then
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec gosu postgres "$0" "$@"
fi
export POSTGRES_USER=${POSTGRES_USER:-postgres} POSTGRES_DB=${POSTGRES_DB:-${POSTGRES_USER:-postgres}}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?the postgres stand-in needs POSTGRES_PASSWORD}"
    initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") --auth-local=trust \
        --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
    printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses='' -k /var/run/postgresql" start >/dev/null
    if [ "$POSTGRES_DB" != postgres ]; then
        psql -v ON_ERROR_STOP=1 --no-psqlrc -q -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\""
    fi
    for script in /docker-entrypoint-initdb.d/*; do
        case "$script" in
        *.sh) echo "running $script"; . "$script" ;;
        *.sql) echo "running $script"; psql -v ON_ERROR_STOP=1 --no-psqlrc -U "$POSTGRES_USER" -d "$POSTGRES_DB" -f "$script" ;;
        *) ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "postgres stand-in: initialised $PGDATA"
fi
if [ "${1:-}" = postgres ]; then
    shift
    exec postgres -D "$PGDATA" -c listen_addresses='*' -k /var/run/postgresql "$@"
fi
exec "$@"
