#!/usr/bin/env bash
# Runs the whole system in the foreground: Postgres, the Tansu broker, the five services and the nginx gateway
# (https://127.0.0.1:8443), with demo data seeded and a token printed for each demo party. Ctrl-C stops all of it.
# Ports: gateway 8443 (HTTPS) and 8080 (redirects), services 8081-8085, Postgres 25432, Kafka 29092.
# INSTANCES=N (make run INSTANCES=2) runs N instances of every service: instance k on the ports + 10 * (k - 1).
set -euo pipefail
source "$(dirname "$0")/common.sh"
exec "$PYTHON" "$ROOT/deploy/local/system.py" run
