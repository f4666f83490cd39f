#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Command-line tests of the trace commands (predict --trace, compare, --timeline, --plot): good
# runs on the recorded trace, and every class of bad trace with its one-line error and non-zero
# exit. Usage: test_trace.sh BUILD_DIR
build=${1:-build}
X="$build/xstage"
T=$(mktemp -d /tmp/xs-trace-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
expect_ok() {
    d=$1; shift
    if "$@" >"$T/out" 2>"$T/err"; then ok; else bad "$d: exit $? ($(head -c 300 "$T/err"))"; fi
}
# expect_err DESC PATTERN CMD...: non-zero exit, exactly one stderr line, matching PATTERN
expect_err() {
    d=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    n=$(wc -l <"$T/err")
    if [ "$rc" -eq 0 ]; then bad "$d: exit 0"; return; fi
    if [ "$rc" -gt 125 ]; then bad "$d: crashed (exit $rc)"; return; fi
    if [ "$n" -ne 1 ]; then bad "$d: $n stderr lines: $(cat "$T/err")"; return; fi
    if grep -q -- "$pat" "$T/err"; then ok; else bad "$d: '$(cat "$T/err")' lacks '$pat'"; fi
}

REC=tests/data/trace_sim132.csv
V1='# xstage-trace v1'
HDR=cta,sm,seq,bytes,issue_start_ns,issue_end_ns,work_start_ns,work_end_ns

# --- good runs ---------------------------------------------------------------------------------
expect_ok "compare --help" "$X" compare --help
expect_ok "predict --trace --help" "$X" predict --trace x --help
grep -q -- '--timeline' "$T/out" && ok || bad "predict --trace --help names --timeline"
"$X" predict --help | grep -q -- '--trace' && ok || bad "predict --help names --trace"
"$X" --help | grep -q '^ *compare ' && ok || bad "xstage --help lists compare"

expect_ok "predict --trace" "$X" predict --trace "$REC"
ntiles=$(grep -c '^[0-9]' "$REC")
rows=$(awk '/^# per CTA/ { exit } /^ *[0-9]/ { n++ } END { print n + 0 }' "$T/out")
[ "$rows" -eq "$ntiles" ] && ok || bad "predict --trace: $rows tile lines, $ntiles tiles"
grep -q '^# total: predicted ' "$T/out" && ok || bad "predict --trace prints the total"
expect_ok "predict --trace --csv -" "$X" predict --trace "$REC" --csv -
head -n 1 "$T/out" | grep -q '^cta,sm,seq,bytes,pred_start_ns,pred_end_ns,pred_issue_ns,pred_stall_ns,zero_start_ns,zero_end_ns$' \
    && ok || bad "predict --trace --csv header"
[ "$(($(wc -l <"$T/out") - 1))" -eq "$ntiles" ] && ok || bad "predict --trace --csv: one line per tile"

# the recorded trace came from the event model on the calibrated profile: predicted back on it
# the totals agree to rounding (a check of the conversion, not of the model's accuracy)
expect_ok "compare" "$X" compare --trace "$REC" --profile bench/results/calibrate/profile.json \
    --csv "$T/tiles.csv" --timeline "$T/tl.json" --worst 3
line=$(grep '^# figures: ' "$T/out")
[ -n "$line" ] && ok || bad "compare prints the figures line"
echo "$line" | awk '{ for (i = 1; i <= NF; i++) if ($i == "total_err_pct") v = $(i + 1) + 0;
    if (v < 0) v = -v; exit !(v < 0.05) }' && ok || bad "compare on its own model: $line"
for q in 'total error' 'issue-time error, median' 'issue-time error, p90' 'stall error, median' \
    'stall error, p90' 'stall error on stalled tiles'; do
    grep -q "^$q" "$T/out" && ok || bad "compare prints '$q'"
done
[ "$(grep -c '^ *[0-9]' "$T/out")" -eq 3 ] && ok || bad "compare --worst 3 lists 3 tiles"
[ "$(grep -c '^[0-9]' "$T/tiles.csv")" -eq "$ntiles" ] && ok || bad "compare --csv: one row per tile"
grep -q '^cta,sm,seq,bytes,meas_start_ns,meas_end_ns,pred_start_ns,pred_end_ns,' "$T/tiles.csv" \
    && ok || bad "compare --csv header"
if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); e = d["traceEvents"];
assert {x["pid"] for x in e if x["ph"] == "X"} == {1, 2}' "$T/tl.json" && ok \
        || bad "compare --timeline: JSON with both tracks"
fi
expect_ok "compare on another profile" "$X" compare --trace "$REC" --set drain_bytes_per_ns=26
grep '^# figures: ' "$T/out" | grep -q 'total_err_pct +' && ok || bad "half the drain rate: slower"
expect_ok "predict --trace --timeline" "$X" predict --trace "$REC" --timeline "$T/p.json"
[ -s "$T/p.json" ] && ok || bad "predict --timeline writes the file"
# --plot works in a private directory under $TMPDIR and leaves nothing there
mkdir "$T/tmpdir"
if command -v gnuplot >/dev/null 2>&1; then
    expect_ok "compare --plot" env TMPDIR="$T/tmpdir" "$X" compare --trace "$REC" --plot "$T/tl.png"
    [ -s "$T/tl.png" ] && ok || bad "compare --plot writes the PNG"
else
    expect_err "--plot without gnuplot" "needs gnuplot" env TMPDIR="$T/tmpdir" "$X" compare \
        --trace "$REC" --plot "$T/tl.png"
fi
[ -z "$(ls -A "$T/tmpdir")" ] && ok || bad "--plot left $(ls -A "$T/tmpdir") in TMPDIR"

# --- bad command lines -------------------------------------------------------------------------
expect_err "compare without --trace" "--trace FILE is required" "$X" compare
expect_err "compare --csv without a file" "'--csv' needs a value" "$X" compare --trace "$REC" --csv
expect_err "predict --trace --csv without a file" "'--csv' needs a value" "$X" predict --trace "$REC" --csv
expect_err "compare extra argument" "unexpected argument" "$X" compare --trace "$REC" extra
expect_err "compare missing file" "cannot open trace" "$X" compare --trace "$T/none.csv"
expect_err "compare bad profile" "" "$X" compare --trace "$REC" --set nosuch=1
expect_err "compare --worst -1" "--worst" "$X" compare --trace "$REC" --worst -1
expect_err "timeline to a bad path" "cannot write a file in" "$X" compare --trace "$REC" \
    --timeline /nonexistent/dir/t.json
expect_err "csv to a bad path" "cannot write" "$X" compare --trace "$REC" --csv /nonexistent/dir/t.csv

# --- bad traces: one line naming the line, through both commands ---------------------------------
good="$V1
# dropped=0
$HDR
0,1,0,4096,100,200,-1,-1
0,1,1,4096,300,400,250,290
"
# bad_trace NAME PATTERN TEXT: predict --trace and compare both refuse it
bad_trace() {
    printf '%s' "$3" >"$T/$1.csv"
    expect_err "predict --trace $1" "$2" "$X" predict --trace "$T/$1.csv"
    expect_err "compare $1" "$2" "$X" compare --trace "$T/$1.csv"
}
printf '%s' "$good" >"$T/good.csv"
expect_ok "good small trace" "$X" compare --trace "$T/good.csv"
bad_trace empty "empty file" ""
bad_trace truncated_line ":5: too few fields" "$V1
# dropped=0
$HDR
0,1,0,4096,100,200,-1,-1
0,1,1,4096,300,4"
bad_trace truncated_break ":5: last line has no line break" "$V1
# dropped=0
$HDR
0,1,0,4096,100,200,-1,-1
0,1,1,4096,300,400,-1,-1"
bad_trace truncated_header ":2: no header" "$V1
# dropped=0
"
bad_trace version ":1: unsupported trace version 'v2'" "# xstage-trace v2
# dropped=0
$HDR
0,1,0,4096,100,200,-1,-1
"
bad_trace not_trace ":1: not an xstage trace" "$HDR
0,1,0,4096,100,200,-1,-1
"
bad_trace negative ":4: issue_start_ns -100 is negative" "$V1
# dropped=0
$HDR
0,1,0,4096,-100,200,-1,-1
"
bad_trace reversed ":4: reversed issue span" "$V1
# dropped=0
$HDR
0,1,0,4096,300,200,-1,-1
"
bad_trace reversed_work ":4: reversed work span" "$V1
# dropped=0
$HDR
0,1,0,4096,300,400,90,80
"
bad_trace seq_gap ":5: CTA 0 seq 2 follows seq 0" "$V1
# dropped=0
$HDR
0,1,0,4096,100,200,-1,-1
0,1,2,4096,300,400,-1,-1
"
bad_trace overlap ":5: .*overlapping issue spans" "$V1
# dropped=0
$HDR
0,1,0,4096,100,200,-1,-1
0,1,1,4096,150,400,-1,-1
"
bad_trace overflowed ":2: trace overflowed: 5 records dropped; raise the capacity" "$V1
# dropped=5
$HDR
0,1,0,4096,100,200,-1,-1
"
bad_trace no_dropped ":2: header before a '# dropped=N' line" "$V1
$HDR
0,1,0,4096,100,200,-1,-1
"
bad_trace huge ":5: .*at most 1000 s" "$V1
# dropped=0
$HDR
0,1,0,4096,100,200,-1,-1
1,2,0,4096,100,9000000000000000000,-1,-1
"
bad_trace overflow_int ":4: issue_end_ns '99999999999999999999' is out of range" "$V1
# dropped=0
$HDR
0,1,0,4096,100,99999999999999999999,-1,-1
"
bad_trace huge_bytes ":4: bytes 99999999999999 outside 0..2^40" "$V1
# dropped=0
$HDR
0,1,0,99999999999999,100,200,-1,-1
"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
