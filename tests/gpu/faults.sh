#!/usr/bin/env bash
# faults.sh - the faults of issue 9 (item 3) that need a GPU, each checked for its one-line error,
# from an already built tree (make -j all) on one GPU:
#   oom_device     replay --target local --window 1000G    one line "out of device memory"
#   oom_pinned     replay --target host --window 1000G     one line "out of pinned host memory"
#   small_window   replay of examples/mixed.csv --window 4K  one line "... (raise --window)"
#   never_signals  tests/gpu/test_signal: flags that never come time out within their bound,
#                  with one line naming the window and the source
#   sigint_*       SIGINT a few seconds into calibrate --quick, validate -n 100, replay -n 1000,
#                  bench ep/tp/up --quick: the command stops within SIGINT_BOUND s (default 60)
#                  with a non-zero exit below 128, exactly one "xstage: error:" line, which says
#                  "interrupted by SIGINT after ...", no OK verdict on stdout, and every result
#                  file it was asked for either absent (profile, samples, windows) or ending in
#                  "# INTERRUPTED: partial results" (CSV)
# The faults that need no GPU are CPU tests (make test): tests/test_launch.c (a rank that exits
# mid-run: the others are stopped within the bound, one line), tests/test_sigint.c (the flag).
# docs/ROBUSTNESS.md has the whole table.
# Writes $OUT/faults.log; prints a PASS/FAIL table last; exit status non-zero when any check
# failed. Expected wall time on one H200: about a minute.
# Usage, from the repository root: OUT=dir [BUILD=build] [SIGINT_BOUND=60] bash tests/gpu/faults.sh
set -u

BUILD=${BUILD:-build}
OUT=${OUT:-./out-faults}
BOUND=${SIGINT_BOUND:-60}
X="$BUILD/xstage"
mkdir -p "$OUT"
LOG="$OUT/faults.log"
: >"$LOG"
T=$(mktemp -d /tmp/xs-faults-XXXXXX)
trap 'rm -rf "$T"' EXIT
T0=$SECONDS
results=()
fails=0

pass() { results+=("PASS  $1"); }
fail() {
    results+=("FAIL  $1")
    fails=$((fails + 1))
}

# one_error NAME TIMEOUT_S PATTERN CMD...: non-zero exit (not a signal, not the timeout) within
# the bound, exactly one "xstage: error:" line, and it matches PATTERN (grep -E)
one_error() {
    local name=$1 limit=$2 pat=$3
    shift 3
    echo "=== $name (expected to fail): $* (timeout ${limit}s)" | tee -a "$LOG"
    local t0=$SECONDS out rc nerr
    out=$(timeout --kill-after=5 "$limit" "$@" 2>&1 </dev/null)
    rc=$?
    printf '%s\n' "$out" | tee -a "$LOG"
    nerr=$(printf '%s\n' "$out" | grep -c '^xstage: error:')
    if [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] && [ "$nerr" -eq 1 ] &&
        printf '%s\n' "$out" | grep '^xstage: error:' | grep -Eq "$pat"; then
        pass "$name (exit $rc, one error line, $((SECONDS - t0))s)"
    else
        fail "$name (exit $rc, $nerr error lines, want /$pat/, $((SECONDS - t0))s)"
    fi
}

# step NAME TIMEOUT_S CMD...: exit 0 within the bound
step() {
    local name=$1 limit=$2
    shift 2
    echo "=== $name: $* (timeout ${limit}s)" | tee -a "$LOG"
    local t0=$SECONDS
    timeout --kill-after=5 "$limit" "$@" </dev/null 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        pass "$name ($((SECONDS - t0))s)"
    else
        fail "$name (exit $rc, $((SECONDS - t0))s)"
    fi
}

# Commands run with SIGINT at its default action: a shell that was itself started with SIGINT
# ignored hands that on, and xstage keeps an inherited ignore (xstage_sigint.h). perl is part of
# every Debian/Ubuntu base system; without it the command runs as it is.
DFL=()
command -v perl >/dev/null 2>&1 &&
    DFL=(perl -e '$SIG{INT} = "DEFAULT"; exec { $ARGV[0] } @ARGV or die "exec $ARGV[0]: $!\n"')

# sigint NAME DELAY_S FILES CMD...: SIGINT after DELAY_S (timeout sends it, and SIGKILL when the
# command is still running BOUND s later); FILES: space-separated result files the command was
# asked to write, each of which must be absent or end in the INTERRUPTED line
sigint() {
    local name=$1 delay=$2 files=$3
    shift 3
    echo "=== $name: SIGINT after ${delay}s: $*" | tee -a "$LOG"
    local f
    for f in $files; do rm -f "$f"; done
    local t0=$SECONDS rc
    timeout --preserve-status --signal=INT --kill-after="$BOUND" "$delay" \
        ${DFL[@]+"${DFL[@]}"} "$@" >"$T/$name.out" 2>"$T/$name.err" </dev/null
    rc=$?
    local dt=$((SECONDS - t0))
    tail -n 5 "$T/$name.out" | sed 's/^/stdout: /' | tee -a "$LOG"
    sed 's/^/stderr: /' "$T/$name.err" | tee -a "$LOG"
    local nerr why=""
    nerr=$(grep -c '^xstage: error:' "$T/$name.err")
    if [ "$rc" -eq 0 ]; then
        why="exit 0: it finished before the signal (or ignored it)"
    elif [ "$rc" -ge 128 ]; then
        why="exit $rc: ended by a signal, not by its own cleanup (or did not stop within ${BOUND}s)"
    elif [ "$nerr" -ne 1 ]; then
        why="$nerr error lines"
    elif ! grep '^xstage: error:' "$T/$name.err" | grep -q 'interrupted by SIGINT after'; then
        why="the error line does not name the interrupt"
    elif grep -Eq '(calibrate|replay|validate|bench (ep|tp|up)) OK' "$T/$name.out"; then
        why="an OK verdict on stdout"
    fi
    for f in $files; do
        [ -n "$why" ] && break
        if [ -e "$f" ] && [ "$(tail -n 1 "$f")" != "# INTERRUPTED: partial results" ]; then
            why="$(basename "$f") was written as if complete (last line: $(tail -n 1 "$f" |
                cut -c1-60))"
        fi
        [ -e "$f" ] && echo "$(basename "$f"): $(wc -l <"$f") lines, last: $(tail -n 1 "$f")" |
            tee -a "$LOG"
    done
    if [ -z "$why" ]; then
        pass "$name (exit $rc after ${dt}s: $(grep '^xstage: error:' "$T/$name.err" |
            cut -c16-100))"
    else
        fail "$name ($why; ${dt}s)"
    fi
}

{
    echo "# faults.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    nvidia-smi --format=csv,noheader --query-gpu=name,driver_version,memory.total 2>&1 |
        sed 's/^/# gpu: /'
    echo "# host memory: $(awk '/MemTotal/ {print $2, $3}' /proc/meminfo)"
    echo "# git: $(git rev-parse --short HEAD 2>/dev/null)," \
        "$(git status --porcelain 2>/dev/null | wc -l) changed files"
} | tee -a "$LOG"

if [ ! -x "$X" ]; then
    fail "xstage not built: $X"
else
    S=examples/mixed.csv
    one_error oom_device 60 'out of device memory' \
        "$X" replay --schedule "$S" --target local --window 1000G
    one_error oom_pinned 60 'out of pinned host memory' \
        "$X" replay --schedule "$S" --target host --window 1000G
    one_error small_window 60 'raise --window' "$X" replay --schedule "$S" --window 4K
    if [ -x "$BUILD/tests/gpu/test_signal" ]; then
        step never_signals 60 "$BUILD/tests/gpu/test_signal"
    else
        fail "never_signals (not built: $BUILD/tests/gpu/test_signal)"
    fi
    sigint sigint_calibrate 2 "$T/c.json $T/c.csv" \
        "$X" calibrate --quick --out "$T/c.json" --samples "$T/c.csv"
    sigint sigint_validate 3 "$T/v.csv" "$X" validate -n 100 --csv "$T/v.csv"
    sigint sigint_replay 3 "$T/w.csv" \
        "$X" replay --schedule examples/ep_wave.csv -n 1000 --windows "$T/w.csv"
    sigint sigint_bench_ep 3 "$T/ep.csv $T/tiles.csv" \
        "$X" bench ep --quick --csv "$T/ep.csv" --tiles "$T/tiles.csv"
    sigint sigint_bench_tp 3 "$T/tp.csv" "$X" bench tp --quick --csv "$T/tp.csv"
    sigint sigint_bench_up 3 "$T/up.csv" "$X" bench up --quick --peers 2,4,8 --csv "$T/up.csv"
fi

{
    echo
    echo "=== summary ($((SECONDS - T0)) s; log: $LOG)"
    for r in "${results[@]}"; do echo "$r"; done
    echo "faults: $((${#results[@]} - fails)) passed, $fails failed"
} | tee -a "$LOG"
[ "$fails" -eq 0 ]
