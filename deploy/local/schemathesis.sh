#!/usr/bin/env bash
# The long Schemathesis run: Tests/System/test_schemathesis.py with many examples per operation and role, against
# the whole system on the system tests' ports. It records every failure instead of stopping at the first, prints
# per service the operations, test cases, failures by check and answers by status, and exits 1 if anything failed.
#   schemathesis.sh [pytest arguments]      SCHEMATHESIS_EXAMPLES (200) examples per operation and role
# TEST_BIN_PATH names prebuilt service executables; without it the debug build is built first.
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$ROOT"

if [ -z "${TEST_BIN_PATH:-}" ]; then
    log "building (debug)"
    swift build
    TEST_BIN_PATH="$(swift build --show-bin-path)"
fi
export TEST_BIN_PATH
export SCHEMATHESIS_EXAMPLES=${SCHEMATHESIS_EXAMPLES:-200}
export SCHEMATHESIS_KEEP_GOING=1
export SCHEMATHESIS_REPORT=${SCHEMATHESIS_REPORT:-$(runtime_dir schemathesis)/report.json}
export LOG_LEVEL=${LOG_LEVEL:-warning}
mkdir -p "$(dirname "$SCHEMATHESIS_REPORT")"
rm -f "$SCHEMATHESIS_REPORT"

log "Schemathesis: $SCHEMATHESIS_EXAMPLES examples per operation and role"
started=$(date +%s)
"$PYTHON" -m pytest "$ROOT/Tests/System/test_schemathesis.py" -q -p no:cacheprovider "$@"
log "took $(( $(date +%s) - started )) s; the counts and each failure's request: $SCHEMATHESIS_REPORT"

"$PYTHON" - "$SCHEMATHESIS_REPORT" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
failures = sum(len(service["failures"]) for service in report.values())
print(f"{failures} distinct failures (operation, role, check, status)")
sys.exit(1 if failures else 0)
EOF
