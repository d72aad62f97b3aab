#!/usr/bin/env bash
# Notification benchmark: the notification service (release build) on its own Postgres and Tansu broker, with FCM
# pointed at `notification-load`, which registers USERS Android devices, requests COUNT pushes at RATE a second on
# notifications.requests, and (as the FCM server) times each from its request's publication to the provider call.
#   Benchmarks/notification.sh [USERS] [COUNT] [RATE]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
users=${1:-1000}
count=${2:-5000}
rate=${3:-500}
port=${BENCH_HTTP_PORT:-18185}
fcm_port=${BENCH_FCM_PORT:-18199}

bench_build devtoken notification-service notification-load
bench_infrastructure
# A throwaway service account whose token endpoint is the load generator.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$bench_runtime/fcm.pem" 2>/dev/null
"$PYTHON" - "$bench_runtime/fcm.pem" "$bench_runtime/service-account.json" "$fcm_port" <<'PY'
import json, sys
key = open(sys.argv[1]).read()
json.dump({"type": "service_account", "project_id": "load", "client_email": "load@load.iam.gserviceaccount.com",
           "private_key": key, "token_uri": f"http://127.0.0.1:{sys.argv[3]}/token"}, open(sys.argv[2], "w"))
PY
bench_service notification-service "$port" DATABASE_POOL_SIZE=20 FCM_SERVICE_ACCOUNT_FILE="$bench_runtime/service-account.json" \
    FCM_BASE_URL="http://127.0.0.1:$fcm_port"
sleep 4  # the service's consumers join their groups
bench_host_probe
"$bench_bin/notification-load" --http "http://127.0.0.1:$port" --kafka "127.0.0.1:$bench_kafka_port" --fcm-port "$fcm_port" \
    --users "$users" --count "$count" --rate "$rate" --tick-ms "${BENCH_TICK_MS:-10}" --key-dir "$DEV_KEY_DIR"
bench_host_report
