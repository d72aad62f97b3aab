#!/usr/bin/env bash
# Host benchmark: how steadily this machine runs at rest. Times a fixed piece of CPU work every 10 ms for SECONDS
# and reports the episodes in which it ran three times slower or more (docs/benchmarks.md, "The machine"). Run
# it before comparing runs of the other benchmarks; it needs no build.
#   Benchmarks/host.sh [SECONDS]     default 30
set -euo pipefail
source "$(dirname "$0")/lib.sh"
"$ROOT/deploy/local/setup.sh"
"$PYTHON" "$ROOT/Benchmarks/host.py" "${1:-30}"
