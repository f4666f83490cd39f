#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build the libFuzzer targets (make fuzz: clang, ASan + UBSan, into build-fuzz/) and run each for
# a bounded time on a copy of its seed corpus (tests/fuzz/corpus/) and of the inputs that once
# failed (tests/fuzz/regress/), in a temporary directory: nothing is written into the checkout.
# Any crash, leak, timeout, out-of-memory or sanitizer report fails the run; the failing input is
# kept and its path printed. One summary line per target.
#
# Usage: scripts/fuzz.sh [TARGET...]   (schedule, profile, cli, trace; default all four)
#   FUZZ_SECONDS  time per target (default 60)
#   BUILD         build directory prefix (default build; the targets go to $BUILD-fuzz)
#   FUZZ_CC       the clang to build with (default clang)
set -eu
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
build=${BUILD:-build}
targets=${*:-schedule profile cli trace}

if ! command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1; then
    echo "fuzz: error: ${FUZZ_CC:-clang} not found (Debian: apt-get install clang libclang-rt-dev)" >&2
    exit 1
fi
if ! make -s BUILD="$build" fuzz >/dev/null; then
    echo "fuzz: error: building the fuzz targets failed (make fuzz); libFuzzer and the sanitizer" \
        "runtimes come with Debian's libclang-rt-dev" >&2
    exit 1
fi

work=$(mktemp -d /tmp/xs-fuzz-XXXXXX)
failed=0
for t in $targets; do
    bin="$build-fuzz/fuzz_$t"
    if [ ! -x "$bin" ]; then
        echo "fuzz: error: no target '$t' ($bin)" >&2
        exit 1
    fi
    dir="$work/$t"
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp tests/fuzz/corpus/"$t"/* "$dir/corpus/"
    if [ -d tests/fuzz/regress/"$t" ]; then cp tests/fuzz/regress/"$t"/* "$dir/corpus/"; fi
    seeds=$(ls "$dir/corpus" | wc -l)
    rc=0
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
        "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log")
    cov=$(grep -a -o 'cov: [0-9]*' "$dir/log" | tail -n 1 | cut -d' ' -f2)
    found=$(ls "$dir/artifacts" | head -n 1)
    # a sanitizer report that did not end the run (none should: UBSan does not recover) counts too
    reports=$(grep -a -c -E '^==[0-9]+==ERROR|runtime error:|^SUMMARY: ' "$dir/log" || true)
    if [ "$rc" -ne 0 ] || [ -n "$found" ] || [ "$reports" -ne 0 ]; then
        failed=$((failed + 1))
        grep -a -v -E '^#[0-9]+|^INFO:|NEW_FUNC' "$dir/log" | tail -n 40 >&2
        echo "fuzz_$t: FAILED (exit $rc) after ${runs:-?} runs; input: $dir/artifacts/${found:-?}" \
            "log: $dir/log; replay: $bin FILE" >&2
    else
        echo "fuzz_$t: ok, ${secs} s, ${runs:-?} runs (${rate:-?}/s), coverage ${cov:-?}," \
            "$seeds seeds -> $(ls "$dir/corpus" | wc -l) inputs"
    fi
done
if [ "$failed" -ne 0 ]; then
    echo "fuzz: $failed target(s) FAILED; the failing inputs and logs are under $work" >&2
    exit 1
fi
rm -rf "$work"
