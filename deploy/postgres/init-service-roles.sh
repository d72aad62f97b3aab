#!/bin/sh
# Postgres' first start in docker-compose.yml (the image runs /docker-entrypoint-initdb.d/* once, on an empty data
# volume, as the superuser): one login role per service, owning only its own schema.
#   order_service -> orders, chat_service -> chat, allocation_service -> allocation, location_service -> location,
#   notification_service -> notification; passwords from ORDER_DB_PASSWORD, CHAT_DB_PASSWORD, ... (required).
# A role can connect to the database and migrate and use its schema; it has no privilege on any other schema, is
# no superuser (so it cannot switch triggers off with session_replication_role), and cannot create temporary
# tables. It keeps CREATE on the database because the migrator's CREATE SCHEMA IF NOT EXISTS needs it even when
# the schema exists; with it a role could create a new schema of its own, not touch another's. The cube extension
# (the allocation schema's) is installed here so no role needs more. docs/architecture.md, "Database roles".
set -eu

run_sql() {
    psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" "$@"
}

run_sql -v database="$POSTGRES_DB" <<'SQL'
REVOKE ALL ON DATABASE :"database" FROM PUBLIC;
CREATE EXTENSION IF NOT EXISTS cube SCHEMA public;
SQL

create_service_role() {
    role=$1 schema=$2 password=$3
    run_sql -v database="$POSTGRES_DB" -v role="$role" -v schema="$schema" -v password="$password" <<'SQL'
CREATE ROLE :"role" LOGIN PASSWORD :'password';
GRANT CONNECT, CREATE ON DATABASE :"database" TO :"role";
CREATE SCHEMA :"schema" AUTHORIZATION :"role";
SQL
    echo "init-service-roles: role $role owns schema $schema"
}

create_service_role order_service orders "${ORDER_DB_PASSWORD:?}"
create_service_role chat_service chat "${CHAT_DB_PASSWORD:?}"
create_service_role allocation_service allocation "${ALLOCATION_DB_PASSWORD:?}"
create_service_role location_service location "${LOCATION_DB_PASSWORD:?}"
create_service_role notification_service notification "${NOTIFICATION_DB_PASSWORD:?}"
