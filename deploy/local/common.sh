# Shared paths and helpers for the local scripts. Sourced, not executed.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LOCAL="$ROOT/.local"
VENV="$LOCAL/venv"
PYTHON="$VENV/bin/python"
# The librdkafka the services load at run time (see setup.sh).
export LD_LIBRARY_PATH="$LOCAL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

log() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# wait_for_port HOST PORT SECONDS: succeeds once something accepts TCP connections there.
wait_for_port() {
    local host=$1 port=$2 deadline=$(( $(date +%s) + $3 ))
    until (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.1
    done
}

# port_in_use PORT: succeeds if something already listens on 127.0.0.1:PORT.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Where a profile's throwaway Postgres cluster and broker live (outside the checkout: the postgres user must
# be able to reach it).
runtime_dir() { echo "${TMPDIR:-/tmp}/delivery-platform-$(id -u)/$1"; }

# The development token settings shared by devtoken and the services started here.
DEV_JWT_ISSUER="https://auth.delivery.local"
DEV_JWT_AUDIENCE="delivery-platform"
DEV_KEY_DIR="$LOCAL/dev-keys"

# as_root COMMAND...: runs COMMAND as root (with sudo unless root already).
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_install PACKAGE...: installs Debian packages (with sudo unless root).
apt_install() {
    log "installing Debian packages: $*"
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
