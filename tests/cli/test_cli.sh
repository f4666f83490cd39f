#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Command-line tests of the xstage tool: good runs, the published B200 acceptance figures, and
# every bad input with its one-line error and non-zero exit. Usage: test_cli.sh BUILD_DIR
build=${1:-build}
X="$build/xstage"
T=$(mktemp -d /tmp/xs-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect_ok DESC CMD...: exit 0
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

H=producers,bytes_per_producer,gap_ns
B200="--set issue_bytes_per_ns=43.1 --set drain_bytes_per_ns=717 --set capacity_bytes=4456448 --set capacity_bytes_per_producer=0 --set issue_overhead_ns=0"

# --- good runs ---------------------------------------------------------------------------------
expect_ok "help" "$X" --help
for c in predict criterion plan profile; do
    expect_ok "$c --help" "$X" $c --help
done
for c in calibrate replay validate probe "bench ep" "bench tp" "bench up"; do
    if "$X" $c --help 2>&1 | grep -q 'built without nvcc'; then
        expect_err "$c without CUDA" "built without nvcc" "$X" $c --help
    else
        expect_ok "$c --help" "$X" $c --help
    fi
done
if ! "$X" replay --help 2>&1 | grep -q 'built without nvcc'; then
    "$X" replay --help | grep -q -- '--fixed-offsets' && ok || bad "replay --help names --fixed-offsets"
    "$X" validate --help | grep -q -- '--fixed-offsets' && ok || bad "validate --help names --fixed-offsets"
    "$X" replay --help | grep -q -- '--cold-window' && ok || bad "replay --help names --cold-window"
    "$X" validate --help | grep -q -- '--cold-window' && ok || bad "validate --help names --cold-window"
    "$X" calibrate --help | grep -q -- '--volumes LIST' && ok || bad "calibrate --help names --volumes"
fi
expect_ok "predict example" "$X" predict --schedule examples/ep_wave.csv
expect_ok "predict csv" "$X" predict --schedule examples/mixed.csv --csv -
head -n 1 "$T/out" | grep -q '^row,producers,bytes_per_producer,gap_ns,issue_med_ns,issue_max_ns,end_ns$' && ok || bad "predict --csv header"
[ "$(wc -l <"$T/out")" -eq 6 ] && ok || bad "predict --csv: one line per row"
expect_ok "criterion" "$X" criterion -k 132 -b 16K --gap 2us
grep -q '^verdict:' "$T/out" && ok || bad "criterion prints a verdict"
expect_ok "plan" "$X" plan --schedule examples/ep_wave.csv --out "$T/plan.csv"
expect_ok "planned schedule is valid" "$X" predict --schedule "$T/plan.csv"
expect_ok "profile show" "$X" profile show
expect_ok "profile show set" "$X" profile show --set chunk_bytes=4096
grep -q 'chunk_bytes *4096' "$T/out" && ok || bad "--set shows in profile show"
nprof=0
for f in bench/results/*/*profile*.json tests/data/*profile*.json; do
    [ -e "$f" ] || continue
    expect_ok "profile check $f" "$X" profile check "$f"
    nprof=$((nprof + 1))
done
[ "$nprof" -ge 3 ] && ok || bad "recorded profiles: $nprof found under bench/results/*/ and tests/data/"

# --- acceptance: the published B200 numbers, one row of 148 producers x B ---------------------
for B in 8192 16384 32768 65536 131072 262144; do
    printf '%s\n148,%s,0\n' "$H" "$B" >"$T/one.csv"
    got=$("$X" predict --csv - --schedule "$T/one.csv" $B200 | tail -n 1 | cut -d, -f6)
    awk -v g="$got" -v B="$B" 'BEGIN { a = B / 43.1; b = (148 * B - 4456448) / 717;
        w = a > b ? a : b; e = (g - w) / w; if (e < 0) e = -e; exit !(e <= 0.02) }' \
        && ok || bad "B200 one row B=$B: issue_max $got"
    { echo "$H"; for i in 1 2 3 4 5 6 7 8 9 10; do echo "148,$B,0"; done; } >"$T/ten.csv"
    got=$("$X" predict --csv - --schedule "$T/ten.csv" $B200 | tail -n 1 | cut -d, -f7)
    awk -v g="$got" -v B="$B" 'BEGIN { w = (10 * 148 * B - 4456448) / 717;
        if (10 * 148 * B - 4456448 < 148 * B / 43.1 * 717) exit 0;
        e = (g - w) / w; if (e < 0) e = -e; exit !(e <= 0.02) }' \
        && ok || bad "B200 ten rows B=$B: end $got"
done

# --- bad input: schedules -----------------------------------------------------------------------
sched_err() { # DESC PATTERN CONTENT
    printf '%b' "$3" >"$T/s.csv"
    expect_err "$1" "$2" "$X" predict --schedule "$T/s.csv"
}
expect_err "missing schedule file" "cannot open schedule" "$X" predict --schedule "$T/none.csv"
mkdir -p "$T/dir.csv"
expect_err "unreadable schedule (a directory)" "dir.csv" "$X" predict --schedule "$T/dir.csv"
sched_err "empty schedule" "s.csv: empty schedule" ""
sched_err "missing header" "s.csv:1: expected the header" "132,16384,0\n"
sched_err "wrong header" "s.csv:1: expected the header" "k,b,g\n1,2,3\n"
sched_err "header only" "no rows after the header" "$H\n"
sched_err "non-numeric" "s.csv:2: producers 'x' is not a number" "$H\nx,1,0\n"
sched_err "negative bytes" "s.csv:2: bytes_per_producer '-1' is negative" "$H\n4,-1,0\n"
sched_err "negative gap" "s.csv:3: gap_ns '-5' is negative" "$H\n4,16,0\n4,16,-5\n"
sched_err "zero producers" "s.csv:2: zero producers" "$H\n0,16,0\n"
sched_err "overflow" "s.csv:2: producers '99999999999999999999' overflows" "$H\n99999999999999999999,16,0\n"
sched_err "too large" "bytes_per_producer '9999999999999' is too large" "$H\n4,9999999999999,0\n"
sched_err "too few fields" "s.csv:2: too few fields" "$H\n4,16\n"
sched_err "too many fields" "s.csv:2: too many fields" "$H\n4,16,0,1\n"
expect_err "schedule required" "--schedule FILE is required" "$X" predict
expect_err "plan schedule required" "--schedule FILE is required" "$X" plan

# --- bad input: profiles and --set ----------------------------------------------------------------
good='{"device": "d", "path": "host", "date": "x", "command": "c", "issue_bytes_per_ns": 41, "issue_overhead_ns": 0, "drain_bytes_per_ns": 52, "capacity_bytes": 2000000, "capacity_bytes_per_producer": 0, "chunk_bytes": 2048}'
printf '%s\n' "$good" >"$T/good.json"
expect_ok "profile check good" "$X" profile check "$T/good.json"
expect_ok "predict with a profile file" "$X" predict --schedule examples/isolated.csv --profile "$T/good.json"
prof_err() { # DESC PATTERN CONTENT
    printf '%s' "$3" >"$T/p.json"
    expect_err "$1" "$2" "$X" profile check "$T/p.json"
}
expect_err "missing profile" "cannot open profile" "$X" predict --schedule examples/isolated.csv --profile "$T/none.json"
prof_err "empty profile" "empty profile" ""
prof_err "invalid JSON" "p.json:1:.*invalid JSON" '{"path": "host",,}'
prof_err "missing field" "missing field 'chunk_bytes'" "$(printf '%s' "$good" | sed 's/, "chunk_bytes": 2048//')"
prof_err "mistyped field" "field 'chunk_bytes' must be a number" "$(printf '%s' "$good" | sed 's/"chunk_bytes": 2048/"chunk_bytes": "2048"/')"
prof_err "misspelled field" "unknown field 'chunk_byte' (did you mean 'chunk_bytes'?)" "$(printf '%s' "$good" | sed 's/"chunk_bytes"/"chunk_byte"/')"
prof_err "zero drain" "a drain rate must be > 0" "$(printf '%s' "$good" | sed 's/"drain_bytes_per_ns": 52/"drain_bytes_per_ns": 0/')"
prof_err "negative issue rate" "an issue rate must be > 0" "$(printf '%s' "$good" | sed 's/"issue_bytes_per_ns": 41/"issue_bytes_per_ns": -41/')"
expect_err "unknown --set" "unknown profile field 'drain'" "$X" predict --schedule examples/isolated.csv --set drain=5
expect_err "bad --set value" "'fast' is not a finite number" "$X" criterion -k 1 -b 1K --gap 0 --set chunk_bytes=fast
expect_err "impossible --set" "a drain rate must be > 0" "$X" criterion -k 1 -b 1K --gap 0 --set drain_bytes_per_ns=-1

# --- bad input: options -----------------------------------------------------------------------------
expect_err "unknown command" "unknown command 'frobnicate'" "$X" frobnicate
expect_err "criterion missing args" "are all required" "$X" criterion -k 4
expect_err "criterion bad size" "--bytes '12Q': not a size" "$X" criterion -k 4 -b 12Q --gap 0
expect_err "criterion zero producers" "--producers 0: outside" "$X" criterion -k 0 -b 1K --gap 0
expect_err "criterion bad time" "unknown time unit" "$X" criterion -k 4 -b 1K --gap 3parsecs
expect_err "profile bad action" "unknown action 'frob'" "$X" profile frob
expect_err "stray argument" "unexpected argument 'extra'" "$X" predict --schedule examples/isolated.csv extra
expect_err "unknown benchmark" "unknown benchmark 'xx'" "$X" bench xx

# --- GPU subcommands' argument checks (no GPU needed: they fail before touching one) --------------
if ! "$X" replay --help 2>&1 | grep -q 'built without nvcc'; then
    expect_err "replay -g without peer" "--gpus 2 needs --target peer" "$X" replay --schedule examples/ep_wave.csv --gpus 2
    expect_err "calibrate -g without peer" "--gpus 2 needs --target peer" "$X" calibrate --gpus 2
    expect_err "replay virtual without N" "needs --virtual-peers N" "$X" replay --schedule examples/ep_wave.csv --target virtual
    expect_err "replay bad target" "" "$X" replay --schedule examples/ep_wave.csv --target moon
    expect_err "replay no schedule" "--schedule FILE is required" "$X" replay
    expect_err "validate bad iters" "--iters 0: outside" "$X" validate -n 0
    expect_err "validate bad max-iters" "--max-iters 0: outside" "$X" validate --max-iters 0
    "$X" validate --help | grep -q -- "--max-iters" && ok || bad "validate --help names --max-iters"
    expect_err "validate --random 0" "--random 0: outside" "$X" validate --random 0
    expect_err "validate bad --seed" "--seed '12x': a non-negative integer" "$X" validate --random 2 --seed 12x
    expect_err "validate --seed alone" "go with --random N" "$X" validate --seed 5
    expect_err "validate --random with --quick" "replaces the fixed suite" "$X" validate --random 2 --quick
    expect_err "validate --random -g 2" "runs on one GPU" "$X" validate --random 2 --target peer -g 2
    "$X" validate --help | grep -q -- "--random-csv" && ok || bad "validate --help names --random-csv"
    expect_err "replay bad --dest" "expected keep, flush or dirty" "$X" replay --schedule examples/ep_wave.csv --dest cold
    expect_err "validate bad --dest" "expected keep, flush or dirty" "$X" validate --dest ""
    expect_err "calibrate bad --dest" "destination state 'warm'" "$X" calibrate --dest warm
    expect_err "replay negative --max-skew" "--max-skew -5: outside" "$X" replay --schedule examples/ep_wave.csv --max-skew -5
    expect_err "calibrate bad --max-skew" "--max-skew 'soon': not a number" "$X" calibrate --max-skew soon
    expect_err "bench tp bad --engine" "expected mma or sm90" "$X" bench tp --engine tpu
    # --couriers (docs/TP.md "Couriers (sm90)"): sm90 only, 0..16, at most three besides 0;
    # default 4,8 on sm90 and none on mma (an explicit list on mma is refused)
    expect_err "bench tp --couriers on mma" "--couriers: needs the sm90 engine" "$X" bench tp --engine mma --couriers 4
    expect_err "bench tp --couriers 17" "--couriers 17: outside 0..16" "$X" bench tp --engine sm90 --couriers 17
    expect_err "bench tp --couriers -1" "--couriers -1: outside 0..16" "$X" bench tp --engine sm90 --couriers -1
    expect_err "bench tp --couriers word" "--couriers 'four': not an integer" "$X" bench tp --engine sm90 --couriers four
    expect_err "bench tp --couriers twice" "--couriers: 4 given twice" "$X" bench tp --engine sm90 --couriers 4,4
    expect_err "bench tp --couriers four" "--couriers: at most 3 courier counts besides 0" "$X" bench tp --engine sm90 --couriers 2,4,8,16
    expect_err "bench tp --couriers 0 on mma (accepted: the next check speaks)" "--n and --k go together" "$X" bench tp --couriers 0 --n 4096
    if "$X" bench tp --help 2>&1 | grep -q -- '4,6,8 with sm90'; then ok; else bad "bench tp --help lacks the sm90 courier default"; fi
    if "$X" bench tp --help 2>&1 | grep -q -- '--couriers LIST'; then ok; else bad "bench tp --help lacks --couriers"; fi
    # bench -g/--gpus: one-line errors before any GPU is touched (docs/MULTIGPU.md)
    expect_err "bench ep -g 0" "--gpus 0: outside 1..64" "$X" bench ep -g 0
    expect_err "bench ep -g 65" "--gpus 65: outside 1..64" "$X" bench ep --gpus 65
    expect_err "bench ep -g word" "--gpus 'two': not an integer" "$X" bench ep -g two
    expect_err "bench ep -g with --peers" "bench ep: -g/--gpus 2 cannot be combined with --peers" "$X" bench ep -g 2 --peers 4
    expect_err "bench ep -g with --device" "bench ep: -g/--gpus 2 cannot be combined with --device" "$X" bench ep -d 1 -g 2
    expect_err "bench ep --pace-frac 2" "--pace-frac 2: outside 0.1..1.2" "$X" bench ep --pace-frac 2
    expect_err "bench ep --defer=foo" "bench ep: --defer=foo: ring, spill or none" "$X" bench ep --defer=foo
    expect_err "bench ep --spill-depth alone" "bench ep: --spill-depth needs --defer=spill" "$X" bench ep --spill-depth 3
    expect_err "bench ep --spill-depth 9" "--spill-depth 9: outside 1..8" "$X" bench ep --defer=spill --spill-depth 9
    expect_err "bench ep --long with --tokens" "bench ep: --long chooses the token counts: not with --tokens" "$X" bench ep --long --tokens 1024
    expect_err "bench ep --long with --quick" "bench ep: --long chooses the token counts: not with --quick" "$X" bench ep --quick --long
    # bench ep couriers (docs/EP.md, "Couriers")
    expect_err "bench ep --couriers 65" "--couriers 65: outside 0..64" "$X" bench ep --couriers 65
    expect_err "bench ep --couriers -1" "--couriers -1: outside 0..64" "$X" bench ep --couriers -1
    expect_err "bench ep --couriers word" "--couriers 'four': not an integer" "$X" bench ep --couriers four
    expect_err "bench ep --courier-pace 0" "--courier-pace 0: outside 0.01..2" "$X" bench ep --courier-pace 0
    expect_err "bench ep --courier-pace 3" "--courier-pace 3: outside 0.01..2" "$X" bench ep --courier-pace 3
    expect_err "bench ep --courier-pace word" "--courier-pace 'fast': not a number" "$X" bench ep --courier-pace fast
    expect_err "bench ep bad --schedule" "--schedule 'couriers': wave, interleaved, auto, courier, adaptive, overlapped or all" "$X" bench ep --schedule couriers
    "$X" bench ep --help 2>&1 | grep -q -- '--couriers N' && ok || bad "bench ep --help lists --couriers"
    expect_err "bench tp -g with --peers" "bench tp: -g/--gpus 2 cannot be combined with --peers (with -g the ranks are the peers" "$X" bench tp -g 2 --peers 4
    expect_err "bench tp -g 65" "--gpus 65: outside 1..64" "$X" bench tp -g 65
    expect_err "bench tp -g 2 m not a multiple" "a multiple of 128" "$X" bench tp -g 2 --op gemm_rs --m 128 --n 256 --k 512
    expect_err "bench up --pilots 9" "--pilots 9: outside 0..8" "$X" bench up --pilots 9
    expect_err "bench up --pilot-max-us -1" "--pilot-max-us" "$X" bench up --pilot-max-us -1
    expect_err "bench up --slice-ns -5" "--slice-ns -5: outside 0..1e+06" "$X" bench up --slice-ns -5
    if "$X" bench up --help 2>&1 | grep -q -- '--pilots N'; then ok; else bad "bench up --help lacks --pilots"; fi
    expect_err "bench up --kv-split -2" "--kv-split -2: outside -1..1048576" "$X" bench up --kv-split -2
    expect_err "bench up --kv-split with --couriers" "--kv-split 8 cannot be combined with --couriers" "$X" bench up --kv-split 8 --couriers 4
    expect_err "bench up --kv-split with -g" "--kv-split 8: one GPU only" "$X" bench up --kv-split 8 -g 2
    expect_err "bench up -g 0" "--gpus 0: outside 1..64" "$X" bench up -g 0
    expect_err "bench up -g 65" "--gpus 65: outside 1..64" "$X" bench up --gpus 65
    expect_err "bench up -g word" "--gpus 'two': not an integer" "$X" bench up -g two
    expect_err "bench up -g with --peers" "bench up: -g/--gpus 2 cannot be combined with --peers (with -g the ranks are the peers" "$X" bench up -g 2 --peers 4
    expect_err "bench up -g 2 with --device" "bench up: -g/--gpus 2 cannot be combined with --device" "$X" bench up -d 1 -g 2
    expect_err "calibrate -g with --device" "calibrate: --gpus 2 cannot be combined with --device" "$X" calibrate --target peer -g 2 -d 1
    expect_err "replay -g with --device" "--gpus 2 cannot be combined with --device" "$X" replay --target peer -g 2 -d 1 --schedule examples/isolated.csv
    expect_err "validate -g with --device" "--gpus 2 cannot be combined with --device" "$X" validate --target peer -g 2 -d 1
    expect_err "calibrate --peer-dests" "--peer-dests 'two': expected all or one" "$X" calibrate --peer-dests two
    expect_err "probe bad target" "probe: --target virtual: host or local" "$X" probe --target virtual
    expect_err "probe bad iters" "--iters 0: outside 1..64" "$X" probe -n 0
    expect_err "probe small window" "--window 512K: at least 1M" "$X" probe --window 512K
    expect_err "probe bad --only" "probe: --only bogus: no case named 'bogus'" "$X" probe --only bogus
    expect_err "probe bad --only list" "probe: --only rows,zz: no case named 'zz'" "$X" probe --only rows,zz
    expect_err "probe stray argument" "probe: unexpected argument 'now'" "$X" probe now
    expect_err "replay unwritable --placement" "cannot write a file in /nonexistent" "$X" replay --schedule examples/isolated.csv --placement /nonexistent/p.csv
    expect_err "replay --sms not a number" "--sms '1,x': expected spread, or SM numbers" "$X" replay --schedule examples/isolated.csv --sms 1,x
    expect_err "validate bad --sms" "--sms 'q': expected spread" "$X" validate --sms q
    expect_err "calibrate bad --sms" "--sms '3-': bad range" "$X" calibrate --sms 3-
    expect_err "calibrate --sms with --gpus" "--sms with --gpus 2: one rank only" "$X" calibrate --sms spread --gpus 2 --target peer
    expect_err "calibrate bad --volumes" "--volumes 'abc': not a size" "$X" calibrate --volumes 1M,abc
    expect_err "calibrate --volumes too small" "--volumes 1024: outside 65536..67108864" "$X" calibrate --volumes 1K
    expect_err "calibrate --volumes too many" "--volumes: at most 24 values" "$X" calibrate --volumes "$(printf '1M,%.0s' $(seq 24))1M"
    expect_err "replay --sms backwards range" "--sms '9-2': bad range" "$X" replay --schedule examples/isolated.csv --sms 9-2
    expect_err "replay --sms with --gpus" "--sms with --gpus 2: one rank only" "$X" replay --schedule examples/isolated.csv --sms 0-3 --gpus 2 --target peer
    expect_err "bench up -g 3 seq not a multiple" "--seq 8192 is not a multiple of -g/--gpus 3" "$X" bench up -g 3 -s 8192
    expect_err "bench up -g 3 --quick seq not a multiple" "--seq 16384 is not a multiple of -g/--gpus 3" "$X" bench up -g 3 -s 6144,16384 --quick
    expect_err "bench up -g 2 bad split" "--split 300: outside" "$X" bench up -g 2 --split 300
    # couriers (docs/UP.md "Couriers"): one-line errors before any GPU is touched
    expect_err "bench up bad --couriers" "--couriers 65: outside -1..64" "$X" bench up --couriers 65
    expect_err "bench up --couriers -2" "--couriers -2: outside -1..64" "$X" bench up --couriers -2
    expect_err "bench up --couriers word" "--couriers 'four': not an integer" "$X" bench up --couriers four
    expect_err "bench up --couriers with --split" "--couriers 4 cannot be combined with --split 8" "$X" bench up --couriers 4 --split 8
    expect_err "bench up --courier-pace negative" "--courier-pace -0.5: outside 0..4" "$X" bench up --courier-pace -0.5
    expect_err "bench up --courier-pace word" "--courier-pace 'fast': not a number" "$X" bench up --courier-pace fast
    expect_err "bench up -g with --device" "bench up: -g/--gpus 1 cannot be combined with --device" "$X" bench up -g 1 --device 0
    expect_err "bench tp -g with --device" "bench tp: -g/--gpus 1 cannot be combined with --device" "$X" bench tp --device 2 --gpus 1
    if ! nvidia-smi -L >/dev/null 2>&1; then
        # no GPU here: the launcher's GPU count (N > 1) or the rank's GPU (N = 1) says so, one line
        expect_err "bench ep -g 2 without GPU" "no CUDA GPU" "$X" bench ep -g 2 --quick
        expect_err "bench ep -g 1 without GPU" "no CUDA GPU" "$X" bench ep -g 1 --quick
        expect_err "bench tp -g 2 without GPU" "no CUDA GPU" "$X" bench tp -g 2 --quick
        expect_err "bench up -g 2 without GPU" "no CUDA GPU" "$X" bench up -g 2 --quick
        expect_err "bench up -g 1 without GPU" "no CUDA GPU" "$X" bench up -g 1 --quick
        expect_err "bench up -g 1 --peers without GPU" "no CUDA GPU" "$X" bench up -g 1 --peers 4 --quick
    fi
fi

# --- plot ----------------------------------------------------------------------------------------------
if command -v gnuplot >/dev/null 2>&1; then
    expect_ok "plot" "$X" predict --schedule examples/drift.csv --plot "$T/d.png"
    [ -s "$T/d.png" ] && ok || bad "plot wrote a PNG"
fi
expect_err "plot without gnuplot" "needs gnuplot" env PATH=/nonexistent "$(cd "$(dirname "$X")" && pwd)/xstage" predict --schedule examples/drift.csv --plot "$T/e.png"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
