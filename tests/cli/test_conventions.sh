#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The tool's one command-line convention (docs/CLI.md), one block per rule:
#   1. --csv FILE and --json FILE on every command that writes a table, "-" for the standard
#      output (then alone); the same columns in CSV, JSON and the human table; JSON with a
#      format version, the command and the report's '#' lines
#   2. -g means --gpus everywhere
#   3. --schedule - reads the schedule from the standard input
#   4. schedule CSV columns matched by header name: any order, extra columns, missing ones named
#   5. --set takes the model symbols r o R Q q c b; an unknown name suggests settable fields only
#   6. an unknown option is one line that points to --help
# Usage: test_conventions.sh BUILD_DIR
build=${1:-build}
X="$build/xstage"
T=$(mktemp -d /tmp/xs-conv-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }

# expect_err DESC PATTERN CMD...: non-zero exit, exactly one stderr line, matching PATTERN
expect_err() {
    d=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    n=$(wc -l <"$T/err")
    if [ "$rc" -eq 0 ]; then bad "$d: exit 0"; return; fi
    if [ "$rc" -gt 125 ]; then bad "$d: crashed (exit $rc)"; return; fi
    if [ "$n" -ne 1 ]; then bad "$d: $n stderr lines: $(cat "$T/err")"; return; fi
    if grep -q -- "$pat" "$T/err"; then ok "$d"; else bad "$d: '$(cat "$T/err")' lacks '$pat'"; fi
}
# run DESC CMD...: exit 0, stdout in $T/out
run() {
    d=$1; shift
    if "$@" >"$T/out" 2>"$T/err"; then :; else bad "$d: exit $? ($(head -c 300 "$T/err"))"; fi
}

# json FILE EXPR: the Python expression EXPR over the parsed document j is true
json() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}
have_python=0
python3 -c 'import json' 2>/dev/null && have_python=1

S=examples/mixed.csv
gpu=1
"$X" replay --help 2>&1 | grep -q 'built without nvcc' && gpu=0

# --- 1. --csv FILE / --json FILE, - for stdout ------------------------------------------------
for c in predict criterion plan; do
    "$X" $c --help | grep -q -- '--csv FILE' && "$X" $c --help | grep -q -- '--json FILE' &&
        ok "$c --help: --csv FILE and --json FILE" || bad "$c --help lacks --csv FILE / --json FILE"
done
if [ $gpu = 1 ]; then
    for c in replay validate probe "bench ep" "bench tp" "bench up"; do
        "$X" $c --help | grep -q -- '--csv FILE' && "$X" $c --help | grep -q -- '--json FILE' &&
            ok "$c --help: --csv FILE and --json FILE" ||
            bad "$c --help lacks --csv FILE / --json FILE"
    done
    expect_err "replay --csv needs a value" "'--csv' needs a value" "$X" replay -s "$S" --csv
fi
P="--schedule $S"
C="--producers 66 --bytes 32K --gap 1us"
for c in predict plan criterion; do
    case $c in criterion) a=$C ;; *) a=$P ;; esac
    run "$c human" "$X" $c $a
    cp "$T/out" "$T/human"
    run "$c --csv F --json F" "$X" $c $a --csv "$T/$c.csv" --json "$T/$c.json"
    check "$c: the human report stays on stdout with --csv FILE" cmp -s "$T/out" "$T/human"
    run "$c --csv -" "$X" $c $a --csv -
    check "$c --csv - = the --csv file" cmp -s "$T/out" "$T/$c.csv"
    check "$c --csv -: no report lines on stdout" sh -c "! grep -q '^#' '$T/out'"
    run "$c --json -" "$X" $c $a --json -
    cp "$T/out" "$T/$c.stdout.json"
    check "$c --json -: no report lines on stdout" sh -c "! grep -q '^#' '$T/out'"
    if [ $have_python = 1 ]; then
        # the same document but for the command line that it quotes
        check "$c --json - = the --json file" json "$T/$c.stdout.json" \
            "dict(j, command=0) == dict(json.load(open('$T/$c.json')), command=0) and j['command'].endswith('--json -')"
    fi
    expect_err "$c --csv - --json -" "both name the standard output" "$X" $c $a --csv - --json -
    if [ $have_python = 1 ]; then
        check "$c JSON: format 1, the command, notes with the profile line" json "$T/$c.json" \
            "j['format'] == 1 and j['command'].startswith('xstage $c') and any(n.startswith('# profile:') for n in j['notes'])"
        cols=$(head -n 1 "$T/$c.csv")
        check "$c JSON: the CSV's columns, in order" json "$T/$c.json" \
            "','.join(c['name'] for c in j['columns']) == '$cols'"
        nrows=$(($(wc -l <"$T/$c.csv") - 1))
        check "$c JSON: the CSV's rows ($nrows)" json "$T/$c.json" \
            "len(j['rows']) == $nrows and all(list(r) == '$cols'.split(',') for r in j['rows'])"
    fi
done
# the columns of the human tables: predict's table heads the CSV's names; criterion's rows are
# the CSV's quantities
check "predict: the human table's columns = the CSV's" sh -c \
    "'$X' predict $P | grep -m1 '^ *row ' | tr -s ' ' | sed 's/^ //; s/ /,/g' | grep -qx \"\$(head -n 1 '$T/predict.csv')\""
"$X" criterion $C | sed -n '/^quantity/,/^rate:/p' | sed '1d;$d' | cut -c1-34 | sed 's/ *$//' >"$T/q1"
tail -n +2 "$T/criterion.csv" | python3 -c 'import csv,sys; [print(r[0]) for r in csv.reader(sys.stdin)]' >"$T/q2" 2>/dev/null &&
    check "criterion: the human table's quantities = the CSV's" cmp -s "$T/q1" "$T/q2"
if [ $have_python = 1 ]; then
    check "criterion JSON: values are numbers, verdict in the summary" json "$T/criterion.json" \
        "j['rows'][0] == {'quantity': 'K (producers)', 'value': 66, 'unit': ''} and any(s.startswith('verdict:') for s in j['summary'])"
fi
# the trace commands (docs/TRACE.md): --csv FILE too
REC=tests/data/trace_sim132.csv
if [ -e "$REC" ]; then
    for c in predict compare; do
        run "$c --trace --csv FILE" "$X" $c --trace "$REC" --csv "$T/tr_$c.csv"
        check "$c --trace --csv FILE: the report stays on stdout" grep -q '^#' "$T/out"
        run "$c --trace --csv -" "$X" $c --trace "$REC" --csv -
        grep -v '^#' "$T/tr_$c.csv" >"$T/tr_$c.rows"
        grep -v '^#' "$T/out" >"$T/tr_$c.out"
        check "$c --trace --csv - = the file's rows, alone" sh -c \
            "cmp -s '$T/tr_$c.rows' '$T/tr_$c.out' && [ \$(grep -c '^#' '$T/out') -le 1 ]"
    done
fi
expect_err "--csv into a missing directory" "predict: --csv $T/no/such.csv" "$X" predict $P --csv "$T/no/such.csv"
check "... and no JSON left" test ! -e "$T/no"
expect_err "--json = --schedule" "is the same file as --schedule" "$X" predict --schedule "$T/predict.csv" --json "$T/predict.csv"

# --- 2. -g means --gpus -----------------------------------------------------------------------
expect_err "criterion -g is not the gap" "-g means --gpus; the gap is --gap" "$X" criterion -k 8 -b 4K -g 1us
check "criterion --help: --gap has no short form" sh -c "'$X' criterion --help | grep -q '^  --gap NS'"
for c in predict criterion plan; do
    "$X" $c --help | grep -q -- '-g,' && bad "$c --help has a -g that is not --gpus" || ok "$c: no other -g"
done
if [ $gpu = 1 ]; then
    for c in calibrate replay validate "bench ep" "bench tp" "bench up"; do
        "$X" $c --help | grep -q -- '-g, --gpus' && ok "$c: -g, --gpus" || bad "$c --help: -g is not --gpus"
    done
fi

# --- 3. --schedule - ----------------------------------------------------------------------------
"$X" predict --schedule "$S" --csv - >"$T/file.csv"
run "predict --schedule -" sh -c "'$X' predict --schedule - --csv - <'$S'"
check "predict --schedule - = predict --schedule FILE" cmp -s "$T/out" "$T/file.csv"
run "plan -s -" sh -c "'$X' plan -s - --csv - <'$S'"
"$X" plan -s "$S" --csv - >"$T/plan_file.csv"
check "plan -s - = plan -s FILE" cmp -s "$T/out" "$T/plan_file.csv"
run "plan --out - | predict -s -" sh -c "'$X' plan -s '$S' --out - | '$X' predict -s - --csv -"
"$X" plan -s "$S" --out "$T/planned.csv" >/dev/null
"$X" predict -s "$T/planned.csv" --csv - >"$T/planned_pred.csv"
check "plan --out - pipes the planned schedule alone into predict -s -" cmp -s "$T/out" "$T/planned_pred.csv"
expect_err "plan --out - --csv -" "both name the standard output" "$X" plan -s "$S" --out - --csv -
run "predict -s - report" sh -c "'$X' predict -s - <'$S'"
check "predict -s -: the report names stdin" grep -q '^# schedule: stdin, ' "$T/out"
printf 'producers,bytes_per_producer,gap_ns\n4,x,0\n' >"$T/badrow.csv"
expect_err "--schedule -: errors name stdin:LINE" "stdin:2: bytes_per_producer 'x'" sh -c "'$X' predict -s - <'$T/badrow.csv'"

# --- 4. schedule columns by header name ---------------------------------------------------------
printf '# reordered, with two extra columns\nnote, gap_ns ,producers,layer,bytes_per_producer\n' >"$T/re.csv"
grep -v '^#' "$S" | tail -n +2 | awk -F, '{print "x" NR "," $3 "," $1 ",L" NR "," $2}' >>"$T/re.csv"
run "predict reordered columns" "$X" predict -s "$T/re.csv" --csv -
check "reordered columns with extras predict as the original" cmp -s "$T/out" "$T/file.csv"
printf 'producers,gap_ns\n4,0\n' >"$T/miss.csv"
expect_err "missing column named" "missing: bytes_per_producer" "$X" predict -s "$T/miss.csv"
printf 'gap_ns,layer\n0,1\n' >"$T/miss2.csv"
expect_err "two missing columns named" "missing: producers, bytes_per_producer" "$X" predict -s "$T/miss2.csv"
printf 'producers,bytes_per_producer,gap_ns,producers\n4,4,0,4\n' >"$T/dup.csv"
expect_err "a column twice" "column 'producers' appears twice" "$X" predict -s "$T/dup.csv"
printf 'producers,extra,bytes_per_producer,gap_ns\n4,1,16K\n' >"$T/short.csv"
expect_err "a row shorter than the header" "too few fields; the header has 4 columns" "$X" predict -s "$T/short.csv"

# --- 5. --set symbols ---------------------------------------------------------------------------
for pair in r=issue_bytes_per_ns:40 o=issue_overhead_ns:300 R=drain_bytes_per_ns:40 \
            Q=capacity_bytes:2M q=capacity_bytes_per_producer:64K c=chunk_bytes:8192 \
            b=queue_bytes_per_producer:32K; do
    sym=${pair%%=*}; rest=${pair#*=}; field=${rest%%:*}; v=${rest#*:}
    case $v in *K) v=$(( ${v%K} * 1024 )) ;; *M) v=$(( ${v%M} * 1048576 )) ;; esac
    "$X" predict -s "$S" --csv - --set "$field=$v" >"$T/by_field" 2>&1
    "$X" predict -s "$S" --csv - --set "$sym=$v" >"$T/by_symbol" 2>&1
    check "--set $sym=$v = --set $field=$v" cmp -s "$T/by_field" "$T/by_symbol"
done
"$X" predict -s "$S" --csv - >"$T/plain"
check "--set R changes the prediction" sh -c "! cmp -s '$T/plain' '$T/by_symbol'"
expect_err "--set typo suggests the field" "did you mean 'drain_bytes_per_ns'" "$X" predict -s "$S" --set drain_bytes_pr_ns=1
expect_err "--set suggests no key it cannot set" "unknown profile field 'dat'" "$X" predict -s "$S" --set dat=1
check "... and not 'date'" sh -c "! grep -q \"did you mean 'date'\" '$T/err'"
expect_err "--set lists the symbols" "or the symbols r, o, R, Q" "$X" predict -s "$S" --set Z=1
expect_err "--set symbol bad value" "--set drain_bytes_per_ns: 'fast' is not a finite number" "$X" predict -s "$S" --set R=fast

# --- 6. an unknown option points to --help ------------------------------------------------------
expect_err "predict --bogus" "predict: option '--bogus' is unknown.*--help" "$X" predict --bogus
expect_err "plan -Z" "plan: option -Z is unknown.*--help" "$X" plan -Z
expect_err "criterion --bogus" "criterion: option '--bogus' is unknown.*--help" "$X" criterion --bogus
expect_err "profile show --bogus" "profile show: option '--bogus' is unknown.*--help" "$X" profile show --bogus
if [ $gpu = 1 ]; then
    for c in calibrate replay validate probe "bench ep" "bench tp" "bench up"; do
        expect_err "$c --bogus" "option '--bogus' is unknown.*--help" "$X" $c --bogus
    done
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
