#!/bin/bash
# What docker-compose.yml's kafka healthcheck uses of Apache Kafka's tool: `kafka-broker-api-versions.sh
# --bootstrap-server HOST:PORT` succeeds when the broker answers a Kafka ApiVersions request there.
set -euo pipefail
server=localhost:9092
while [ $# -gt 0 ]; do
    case "$1" in
    --bootstrap-server) server=$2; shift 2 ;;
    *) shift ;;
    esac
done
host=${server%:*} port=${server##*:}
[ "$host" = localhost ] && host=127.0.0.1
exec 3<>"/dev/tcp/$host/$port"
# ApiVersions (key 18) v0, correlation id 1, client id "healthcheck": a 4-byte size, then the 21-byte request.
printf '\x00\x00\x00\x15\x00\x12\x00\x00\x00\x00\x00\x01\x00\x0bhealthcheck' >&3
answer=$(timeout 5 head -c 10 <&3 | od -An -tx1 | tr -d ' \n')
# The answer's size, the same correlation id, and error code 0.
[ "${answer:8:8}" = 00000001 ] && [ "${answer:16:4}" = 0000 ]
