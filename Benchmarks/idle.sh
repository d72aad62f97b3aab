#!/usr/bin/env bash
# Idle benchmark: the CPU the system uses at rest, per process, while `make run` runs (start it first, in another
# terminal, and leave it alone for 30 s). One core = 100%.
#   Benchmarks/idle.sh [SECONDS] [--threads]     default 30; --threads: per thread (process/thread), the busiest 25
# To see what the consumers' fetch wait costs, start the system with e.g.
#   KAFKA_PROPERTIES="fetch.wait.max.ms=5000" make run
set -euo pipefail
seconds=${1:-30}
threads=false
[ "${2:-}" = "--threads" ] && threads=true
pattern='broker_wake|tansu|postgres|nginx|order-service|chat-service|allocation-service|location-service|notification-service'
[ -n "$(pgrep -f "$pattern" || true)" ] || { echo "nothing of the system runs: start it with make run" >&2; exit 1; }

# A process's name (its command, or broker-wake for the relay's Python).
process_name() {
    local pid=$1 stat name
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    name=${stat#*(}
    name=${name%%)*}
    grep -q broker_wake "/proc/$pid/cmdline" 2>/dev/null && name=broker-wake
    echo "$name"
}

# key, name and CPU ticks (user + system) of each process of the system, or of each of its threads.
sample() {
    for pid in $(pgrep -f "$pattern"); do
        process=$(process_name "$pid") || continue
        if $threads; then
            for task in /proc/"$pid"/task/*; do
                stat=$(cat "$task/stat" 2>/dev/null) || continue
                name=${stat#*(}
                name=${name%%)*}
                set -- ${stat##*) }
                echo "$pid:${task##*/} $process/${name// /_} $((${12} + ${13}))"
            done
        else
            stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
            set -- ${stat##*) }
            echo "$pid $process $((${12} + ${13}))"
        fi
    done | sort
}

before=$(sample)
sleep "$seconds"
after=$(sample)
echo "CPU over $seconds s at rest (one core = 100%):"
join <(echo "$before") <(echo "$after") | awk -v tick="$(getconf CLK_TCK)" -v seconds="$seconds" '
    { used[$2] += $5 - $3; total += $5 - $3 }
    END {
        for (name in used) printf "  %6.1f%%  %s\n", used[name] * 100 / tick / seconds, name
        printf "  %6.1f%%  all\n", total * 100 / tick / seconds
    }' | sort -rn | head -n "$($threads && echo 26 || echo 100)"
