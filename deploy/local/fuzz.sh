#!/usr/bin/env bash
# Coverage-guided fuzzing of the protocol parsers (Tools/Fuzz) with libFuzzer, the runtime the Swift toolchain
# ships. Builds the fuzz-parsers product with AddressSanitizer and libFuzzer's coverage into .build-fuzz (release;
# the first build compiles every dependency again), then runs each target for FUZZ_SECONDS (default 60), one after
# the other, starting from the seed corpus in Tools/Fuzz/corpus/<target> with the dictionary of its protocol.
#   fuzz.sh [target...]    default: every target (engine-packet engine-query socketio-packet json http-json paging)
#   fuzz.sh --build        only build
# New inputs are kept in .local/fuzz/<target>/corpus, a crashing input in .local/fuzz/<target>/crash-*, the
# libFuzzer output in .local/fuzz/<target>/log. Prints executions, exec/s, coverage and crashes per target; exit
# status 1 if any target crashed.
set -euo pipefail
source "$(dirname "$0")/common.sh"

seconds=${FUZZ_SECONDS:-60}
build_only=false
if [ "${1:-}" = "--build" ]; then
    build_only=true
    shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(engine-packet engine-query socketio-packet json http-json paging)

toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")
runtime=$(ls "$toolchain"/lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-"$(uname -m)".a 2>/dev/null | head -1)
[ -n "$runtime" ] || die "the Swift toolchain in $toolchain has no libFuzzer runtime (libclang_rt.fuzzer_no_main)"

# libFuzzer's runtime is linked without its main: SwiftPM aliases main to the executable's own entry point, which
# calls LLVMFuzzerRunDriver. Hence coverage through the frontend (-sanitize=fuzzer at link time would add a main).
cd "$ROOT"
log "building fuzz-parsers (release, AddressSanitizer, libFuzzer coverage) into .build-fuzz"
swift build -c release --scratch-path "$ROOT/.build-fuzz" --product fuzz-parsers \
    -Xswiftc -DFUZZING -Xswiftc -enable-experimental-feature -Xswiftc Extern \
    -Xswiftc -sanitize=address -Xswiftc -Xfrontend -Xswiftc -sanitize=fuzzer \
    -Xlinker --whole-archive -Xlinker "$runtime" -Xlinker --no-whole-archive -Xlinker -lstdc++
binary="$(swift build -c release --scratch-path "$ROOT/.build-fuzz" --show-bin-path)/fuzz-parsers"
$build_only && exit 0

status=0
summary=()
for target in "${targets[@]}"; do
    [ -d "Tools/Fuzz/corpus/$target" ] || die "unknown target $target (no Tools/Fuzz/corpus/$target)"
    work="$LOCAL/fuzz/$target"
    mkdir -p "$work/corpus"
    rm -f "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-*
    log "fuzzing $target for $seconds s"
    result=0
    SWIFT_BACKTRACE=enable=no FUZZ_TARGET=$target "$binary" \
        -max_total_time="$seconds" -print_final_stats=1 -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -dict="Tools/Fuzz/dictionaries/$target.dict" -artifact_prefix="$work/" \
        "$work/corpus" "Tools/Fuzz/corpus/$target" >"$work/log" 2>&1 || result=$?
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
    coverage=$(grep -a -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
    features=$(grep -a -o 'ft: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
    artifacts=$(ls "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-* 2>/dev/null || true)
    crashes=$(printf '%s' "$artifacts" | grep -c . || true)
    if [ "$result" -ne 0 ] || [ "$crashes" -gt 0 ]; then
        status=1
        [ "$crashes" -gt 0 ] || crashes="1 (exit status $result, see $work/log)"
        grep -a -m3 'Fatal error\|ERROR: \|SUMMARY' "$work/log" >&2 || true
        [ -z "$artifacts" ] || log "crashing input: $artifacts (replay: fuzz-parsers $target <file>)"
    fi
    summary+=("$(printf '%-16s %12s %8s %6s %7s  %s' "$target" "${executions:-?}" "${rate:-?}" "${coverage:-?}" \
        "${features:-?}" "$crashes")")
done

printf '%-16s %12s %8s %6s %7s  %s\n' target executions exec/s cov ft crashes
printf '%s\n' "${summary[@]}"
exit $status
