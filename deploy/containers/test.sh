#!/usr/bin/env bash
# `make test-containers`: builds every image (images.sh: the base and stand-in images when their recipe changed,
# the project's from its Dockerfile), then Tests/Containers brings up docker-compose.yml with podman (two replicas
# of every service), plays the journeys through the containerized gateway over TLS and tears it all down.
#   deploy/containers/test.sh [pytest arguments, e.g. -k console]
set -euo pipefail
source "$(dirname "$0")/../local/common.sh"

missing=()
for tool in podman runc podman-compose debootstrap; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# netavark and aardvark-dns are only podman's recommendations: without them podman falls back to CNI, whose
# networks have no DNS, and the services cannot find postgres or kafka by name. netavark sets up its networks with
# iptables, which nothing installs with it: without it every container fails with "netavark: No such file or
# directory" (found on a fresh machine).
for helper in netavark aardvark-dns; do [ -x "/usr/lib/podman/$helper" ] || missing+=("$helper"); done
[ -x /usr/sbin/iptables ] || missing+=(iptables)
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

started=$(date +%s)
"$ROOT/deploy/containers/images.sh"
log "images took $(( $(date +%s) - started )) s"
started=$(date +%s)
status=0
# Screenshots of their own: the console tests here have the same names as the system tests'.
export CONSOLE_SCREENSHOTS=${CONSOLE_SCREENSHOTS:-$LOCAL/screenshots-containers}
"$PYTHON" -m pytest "$ROOT/Tests/Containers" -v -p no:cacheprovider --durations=5 "$@" || status=$?
log "container tests took $(( $(date +%s) - started )) s (exit status $status)"
exit $status
