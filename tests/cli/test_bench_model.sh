#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `xstage bench model` as a smoke test: a quick run (no timing asserted) prints every case with a
# finite time, the CSV form has the same cases, and bad options fail with one line. Works in a
# NOCUDA build. Usage: test_bench_model.sh BUILD_DIR
build=${1:-build}
X="$build/xstage"
T=$(mktemp -d /tmp/xs-bm-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

cases="floor_burst_free floor_chunk_free floor_burst_sat floor_chunk_sat simulate_free
simulate_sat simulate_staggered plan ep_auto tp_predict tp_rank up_plan"

if "$X" bench model --quick >"$T/out" 2>"$T/err"; then ok; else bad "quick run: exit $? ($(head -c 300 "$T/err"))"; fi
grep -q '^# bench model OK$' "$T/out" && ok || bad "quick run: no closing OK line"
for c in $cases; do
    # name, events, unit, then a positive median time
    awk -v c="$c" '$1 == c && $4 + 0 > 0 { f = 1 } END { exit !f }' "$T/out" && ok ||
        bad "quick run: case $c missing or without a time"
done

if "$X" bench model --quick --csv - -r 5 >"$T/csv" 2>"$T/err"; then ok; else bad "csv run: exit $?"; fi
grep -q '^case,events,unit,median_ns,ns_per_event,spread,ratio,ratio_to$' "$T/csv" && ok ||
    bad "csv run: header"
n=$(grep -c -v '^#' "$T/csv")
[ "$n" -eq 13 ] && ok || bad "csv run: $n lines, expected a header and 12 cases"

expect_err() {
    d=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    nl=$(wc -l <"$T/err")
    if [ "$rc" -eq 0 ]; then bad "$d: exit 0"; return; fi
    if [ "$rc" -gt 125 ]; then bad "$d: crashed (exit $rc)"; return; fi
    if [ "$nl" -ne 1 ]; then bad "$d: $nl stderr lines: $(cat "$T/err")"; return; fi
    if grep -q -- "$pat" "$T/err"; then ok; else bad "$d: '$(cat "$T/err")' lacks '$pat'"; fi
}
expect_err "iters 0" "-n 0: expected a whole number" "$X" bench model -n 0
expect_err "rows word" "-r ten: expected a whole number" "$X" bench model -r ten
expect_err "unknown option" "unknown or ambiguous" "$X" bench model --bogus
expect_err "stray argument" "unexpected argument 'extra'" "$X" bench model extra

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
