#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# faults.sh - the faults that need a GPU (docs/ROBUSTNESS.md), each checked for its one-line error,
# from an already built tree (make -j all) on one GPU:
#   oom_device     replay --target local --window 1000G    one line "out of device memory"
#   oom_pinned     replay --target host --window 1000G     one line "out of pinned host memory"
#   small_window   replay of examples/mixed.csv --window 4K  one line "... (raise --window)"
#   bad_sm         replay --sms listing SM 200: one line "SM 200 does not exist"
#   chosen_sms     replay --sms 5,7,9,11 --placement: every run's producers on those SMs, in that
#                  order, and the GPC line names every SM (xs_replayer_sm_groups)
#   rotating_offsets  the same runs started at 6 different 4 KiB-aligned places of the window
#   never_signals  tests/gpu/test_signal: flags that never come time out within their bound,
#                  with one line naming the window and the source
#   sigint_*       calibrate (full), validate -n 100, replay -n 1000 (3 s in: it prints nothing
#                  before its median), bench ep --quick -n 20,
#                  bench tp --quick -n 10, bench up (3 lengths x 3 peer counts, -n 20), each
#                  SIGINTed mid-run: after its first progress line (a bench's first table row,
#                  with more to come), never at a fixed delay (probes at 2-3 s came after calibrate,
#                  bench ep and bench up had finished). Checked: it still ran when
#                  the signal came, it stops within SIGINT_BOUND s (default 60) with an exit
#                  status in 1..127, exactly one "xstage: error:" line, which says "interrupted
#                  by SIGINT after ...", no OK verdict on stdout, no process of its group left,
#                  and every result file it was asked for either absent (profile, samples,
#                  windows) or ending in "# INTERRUPTED: partial results" (CSV)
# The faults that need no GPU are CPU tests (make test): tests/test_launch.c (a rank that exits
# mid-run: the others are stopped within the bound, one line), tests/test_sigint.c (the flag).
# docs/ROBUSTNESS.md has the whole table.
# Writes $OUT/faults.log; prints a PASS/FAIL table last; exit status non-zero when any check
# failed. Expected wall time on one H200: about a minute (each SIGINT probe a few seconds).
# Usage, from the repository root:
#   OUT=dir [BUILD=build] [SIGINT_BOUND=60] [SIGINT_WAIT=120] bash tests/gpu/faults.sh
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

# The SIGINT probes. Each command starts in its own process group (as a terminal's foreground
# job) with SIGINT at its default action (a script's background job inherits it ignored, and
# xstage keeps an inherited ignore: xstage_sigint.h) and stdout line-buffered (stdbuf), so that
# its progress lines can be watched. perl (part of every Debian/Ubuntu base system) sets both.
DFL=(perl -e 'setpgrp(0, 0); $SIG{INT} = "DEFAULT"; exec { $ARGV[0] } @ARGV or
    die "exec $ARGV[0]: $!\n"')
STDBUF=()
command -v stdbuf >/dev/null 2>&1 && STDBUF=(stdbuf -oL)

# sigint NAME PATTERN AFTER_S FILES CMD...: start CMD, wait (up to SIGINT_WAIT s, default 120)
# for its first stdout line matching PATTERN (grep -E; a progress line: work is under way;
# an empty PATTERN: a command without progress lines, AFTER_S from its start), wait AFTER_S more, check that it still runs (else the probe came too late: FAIL, not a
# pass), send SIGINT to its process group, and give it SIGINT_BOUND s to end (then SIGKILL).
# Checks: an exit status in 1..127 (its own cleanup, not the signal's default action),
# exactly one "xstage: error:" line on stderr, and it says "interrupted by SIGINT after", no
# OK verdict on stdout, no process of its group left, and every result file in FILES (space-
# separated) either absent or ending in "# INTERRUPTED: partial results".
WAIT_MAX=${SIGINT_WAIT:-120}
sigint() {
    local name=$1 pat=$2 after=$3 files=$4
    shift 4
    echo "=== $name: SIGINT ${after}s after ${pat:+the first line matching /$pat/}${pat:-its start}: $*" |
        tee -a "$LOG"
    local f
    for f in $files; do rm -f "$f"; done
    if ! command -v perl >/dev/null 2>&1; then
        fail "$name (perl not found: cannot start the command in its own process group)"
        return
    fi
    local out="$T/$name.out" err="$T/$name.err"
    local t0=$SECONDS
    "${DFL[@]}" ${STDBUF[@]+"${STDBUF[@]}"} "$@" >"$out" 2>"$err" </dev/null &
    local pid=$!
    local why="" waited=0
    while [ -n "$pat" ] && ! grep -Eq "$pat" "$out" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            why="ended before its first progress line /$pat/ (no signal sent)"
            break
        fi
        if [ $((SECONDS - t0)) -ge "$WAIT_MAX" ]; then
            why="no progress line /$pat/ within ${WAIT_MAX}s"
            break
        fi
        sleep 0.1
    done
    [ -z "$why" ] && sleep "$after"
    local t_sig=$SECONDS
    if [ -z "$why" ]; then
        if kill -0 "$pid" 2>/dev/null; then
            kill -INT -- "-$pid" 2>/dev/null || kill -INT "$pid"
        else
            why="finished before the signal: the probe came too late"
        fi
    fi
    # the bound: its own exit within BOUND s of the signal, else SIGKILL to the group
    while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t_sig)) -lt "$BOUND" ]; do
        sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"
        [ -z "$why" ] && why="still running ${BOUND}s after SIGINT (killed)"
    fi
    wait "$pid" 2>/dev/null
    local rc=$?
    local dt=$((SECONDS - t0)) dstop=$((SECONDS - t_sig))
    # no process of its group left (launcher ranks, helpers)
    local left
    left=$(ps -eo pid=,pgid=,args= | awk -v g="$pid" '$2 == g {print $1, $3, $4}' | head -n 3)
    if [ -n "$left" ]; then
        kill -KILL -- "-$pid" 2>/dev/null
        [ -z "$why" ] && why="processes of its group left after it ended: $(echo $left)"
    fi
    tail -n 5 "$out" | sed 's/^/stdout: /' | tee -a "$LOG"
    sed 's/^/stderr: /' "$err" | tee -a "$LOG"
    local nerr
    nerr=$(grep -c '^xstage: error:' "$err")
    if [ -n "$why" ]; then
        :
    elif [ "$rc" -eq 0 ]; then
        why="exit 0 after the signal: it ignored it"
    elif [ "$rc" -ge 128 ]; then
        why="exit $rc: ended by a signal, not by its own cleanup"
    elif [ "$nerr" -ne 1 ]; then
        why="$nerr error lines"
    elif ! grep '^xstage: error:' "$err" | grep -q 'interrupted by SIGINT after'; then
        why="the error line does not name the interrupt"
    elif grep -Eq '(calibrate|replay|validate|bench (ep|tp|up)) OK' "$out"; then
        why="an OK verdict on stdout"
    fi
    for f in $files; do
        [ -e "$f" ] && echo "$(basename "$f"): $(wc -l <"$f") lines, last: $(tail -n 1 "$f")" |
            tee -a "$LOG"
        [ -n "$why" ] && continue
        if [ -e "$f" ] && [ "$(tail -n 1 "$f")" != "# INTERRUPTED: partial results" ]; then
            why="$(basename "$f") was written as if complete (last line: $(tail -n 1 "$f" |
                cut -c1-60))"
        fi
    done
    if [ -z "$why" ]; then
        local line
        line=$(grep '^xstage: error:' "$err" | cut -c16-110)
        pass "$name (exit $rc ${dstop}s after SIGINT, ${dt}s in all: $line)"
    else
        fail "$name ($why; exit $rc, ${dt}s)"
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
    printf 'producers,bytes_per_producer,gap_ns\n4,1048576,0\n' >"$T/four.csv"
    one_error bad_sm 60 'SM 200 does not exist' \
        "$X" replay --schedule "$T/four.csv" --sms 0-3,200
    echo "=== chosen_sms: replay --sms 5,7,9,11 --placement" | tee -a "$LOG"
    # --max-skew 0: no reruns, so the 7 runs (warm-up included) take 7 of the window's 16 places
    if "$X" replay --schedule "$T/four.csv" --sms 5,7,9,11 -n 6 --max-skew 0 --placement "$T/p.csv" \
        >>"$LOG" 2>&1; then
        runs=$(grep -c '^[0-9]' "$T/p.csv")
        placed=$(grep '^[0-9]' "$T/p.csv" | cut -d, -f4 | sort -u)
        sms=$(head -n 1 "$T/p.csv" | sed -n 's/.*SM 0\.\.\([0-9]*\):.*/\1/p')
        sms=${sms:--2}
        ngrp=$(head -n 1 "$T/p.csv" | cut -d: -f2 | wc -w)
        if [ "$runs" -eq 6 ] && [ "$placed" = "5 7 9 11" ] && [ "$ngrp" -eq $((sms + 1)) ]; then
            pass "chosen_sms (6 runs on SMs 5 7 9 11; GPC line for $ngrp SMs)"
        else
            fail "chosen_sms ($runs runs, SMs '$placed', GPC line for $ngrp SMs of $((sms + 1)))"
        fi
        # the same runs: each started where the last one's 4 MiB ended (4 KiB aligned), in the
        # 64 MiB default window (docs/MODEL.md, rotate destination offsets)
        offs=$(grep '^[0-9]' "$T/p.csv" | cut -d, -f6)
        nd=$(printf '%s\n' $offs | sort -u | wc -l)
        misaligned=$(printf '%s\n' $offs | awk '$1 % 4096 != 0 || $1 + 4194304 > 67108864' | wc -l)
        if [ "$nd" -eq 6 ] && [ "$misaligned" -eq 0 ]; then
            pass "rotating_offsets (6 runs at $(echo $offs | tr ' ' ','))"
        else
            fail "rotating_offsets ($nd distinct offsets of 6, $misaligned outside the window or misaligned: $(echo $offs))"
        fi
    else
        fail "chosen_sms (replay failed: $(tail -n 1 "$LOG"))"
    fi
    if [ -x "$BUILD/tests/gpu/test_signal" ]; then
        step never_signals 60 "$BUILD/tests/gpu/test_signal"
    else
        fail "never_signals (not built: $BUILD/tests/gpu/test_signal)"
    fi
    # progress lines: calibrate and validate "# target ...", the benches their first table row
    # (several more to come); replay prints nothing before its median: 3 s in, of about 7 s
    # (on an H200: 412 of 1000 repetitions done at 3 s)
    sigint sigint_calibrate '^# target ' 1 "$T/c.json $T/c.csv $T/cp.json" \
        "$X" calibrate --out "$T/c.json" --samples "$T/c.csv" --out-published "$T/cp.json"
    sigint sigint_validate '^# target ' 2 "$T/v.csv" "$X" validate -n 100 --csv "$T/v.csv"
    sigint sigint_replay '' 3 "$T/w.csv" \
        "$X" replay --schedule examples/ep_wave.csv -n 1000 --windows "$T/w.csv"
    sigint sigint_bench_ep '^[a-z][a-z0-9.-]* +[a-z]+ +[0-9]+ +[0-9]+ +[0-9.]+ ' 0 \
        "$T/ep.csv $T/tiles.csv" \
        "$X" bench ep --quick -n 20 -w 1 --csv "$T/ep.csv" --tiles "$T/tiles.csv"
    sigint sigint_bench_tp '^(gemm_rs|ag_gemm|mlp) ' 0 "$T/tp.csv" \
        "$X" bench tp --quick -n 10 --csv "$T/tp.csv"
    sigint sigint_bench_up '^ *[0-9]+ +[0-9]+ +[01] +[0-9]+ +[0-9.]+ ' 0 "$T/up.csv" \
        "$X" bench up --seq 8192,16384,32768 --heads 16 --peers 2,4,8 -n 20 --csv "$T/up.csv"
fi

{
    echo
    echo "=== summary ($((SECONDS - T0)) s; log: $LOG)"
    for r in "${results[@]}"; do echo "$r"; done
    echo "faults: $((${#results[@]} - fails)) passed, $fails failed"
} | tee -a "$LOG"
[ "$fails" -eq 0 ]
