# SPDX-License-Identifier: Apache-2.0
# steps.sh - the bounded step runner shared by the gpu_*.sh scripts (sourced once LOG is set).
#   step NAME LIMIT CMD...  runs CMD under `timeout LIMIT` (SIGKILL STEP_KILL_AFTER s later,
#                           default 5), its output appended to $LOG; with STEP_SHOW=1 also shown
#                           as it comes, otherwise followed by an rc line and the log's last 3
#                           lines. One failed step does not stop the script.
#   results, fails          one line per step ("PASS  NAME (Ns)", "FAIL  NAME (exit RC[, timed
#                           out], Ns)"; scripts add their own lines too) and the failure count.
results=()
fails=0

step() {
    local name=$1 limit=$2
    shift 2
    echo "=== $name (limit ${limit}s): $*" | tee -a "$LOG"
    local t0=$SECONDS rc
    if [ "${STEP_SHOW:-0}" = 1 ]; then
        timeout --kill-after="${STEP_KILL_AFTER:-5}" "$limit" "$@" 2>&1 | tee -a "$LOG"
        rc=${PIPESTATUS[0]}
    else
        timeout --kill-after="${STEP_KILL_AFTER:-5}" "$limit" "$@" >>"$LOG" 2>&1
        rc=$?
    fi
    local dt=$((SECONDS - t0))
    if [ "$rc" -eq 0 ]; then
        results+=("PASS  $name (${dt}s)")
    else
        local why="exit $rc"
        [ "$rc" -eq 124 ] && why="$why, timed out"
        results+=("FAIL  $name ($why, ${dt}s)")
        fails=$((fails + 1))
    fi
    if [ "${STEP_SHOW:-0}" != 1 ]; then
        echo "=== $name: rc=$rc ${dt}s" | tee -a "$LOG"
        tail -n 3 "$LOG"
    fi
}

# ---- steps with a verdict (gpu_ep.sh, gpu_tp.sh) ------------------------------------------------
#   vstep NAME LIMIT CMD...  like step, and: SKIP when STEP_BUDGET (s, from the script's start)
#                            has fewer than 15 s left, LIMIT capped to what is left; FAIL without
#                            running when CMD is not an executable; the verdict's detail is the
#                            output's last "N passed, N failed" line, or what the script's own
#                            step_detail NAME FILE prints when it defines one; a failure shows the
#                            output's FAIL/error lines (else its last 5).
#   verdicts                 "NAME RESULT DETAIL (Ns)", one per vstep (scripts may add their own)
#   vstep_report TAG         the verdict table, then "TAG: ALL PASS" or "TAG: SOME STEPS FAILED";
#                            status 1 when a step failed (SKIP is not a failure)
#   xstage_with SUB BUILD    prints the path of an xstage with the CUDA subcommand `bench SUB`:
#                            BUILD/xstage, or one relinked from BUILD's objects (a CPU-only link
#                            of the tool lacks it); nothing when neither works
#   pick_profile FILE AREA   sets PROFILE_ARGS (--profile FILE, or empty) and PROFILE_LINE (the
#                            "# profile:" line to log): FILE when given, else the profile of
#                            the area's reference run, bench/results/AREA/profile.json, else
#                            none (the commands use their embedded profile); the profile used
#                            is copied to $OUT/profile.json, so that the run records it
verdicts=()

pick_profile() {
    local f=${1:-}
    [ -z "$f" ] && [ -n "${2:-}" ] && f="bench/results/$2/profile.json"
    PROFILE_ARGS=()
    if [ -n "$f" ] && [ -r "$f" ]; then
        [ -n "${OUT:-}" ] && [ "$f" != "$OUT/profile.json" ] && cp "$f" "$OUT/profile.json"
        PROFILE_ARGS=(--profile "$f")
        PROFILE_LINE="# profile: $f"
    else
        PROFILE_LINE="# profile: none readable (${1:-no calibrated host profile in bench/results})"
        PROFILE_LINE="$PROFILE_LINE: the embedded one"
    fi
}

say() { printf '%s\n' "$*" | tee -a "$LOG"; }


vstep() {
    local name=$1 limit=$2
    shift 2
    if [ -n "${STEP_BUDGET:-}" ]; then
        local left=$((STEP_BUDGET - SECONDS))
        if [ "$left" -lt 15 ]; then
            say "SKIP $name: ${left}s of the ${STEP_BUDGET}s budget left"
            verdicts+=("$name SKIP budget spent")
            return
        fi
        [ "$limit" -gt "$left" ] && limit=$left
    fi
    say "=== $name (limit ${limit}s): $*"
    if [ ! -x "$1" ]; then
        say "FAIL $name: $1 is missing (build it first: make -j all)"
        verdicts+=("$name FAIL binary missing: $1")
        fails=$((fails + 1))
        return
    fi
    local out t0=$SECONDS rc
    out=$(mktemp)
    timeout -k 10 "$limit" "$@" >"$out" 2>&1
    rc=$?
    cat "$out" >>"$LOG"
    local dt=$((SECONDS - t0)) detail result
    detail=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
    if declare -F step_detail >/dev/null; then
        local extra
        extra=$(step_detail "$name" "$out")
        [ -n "$extra" ] && detail="$detail${detail:+; }$extra"
    fi
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        result=FAIL; detail="timed out after ${limit}s; $detail"
    elif [ "$rc" -ne 0 ]; then
        result=FAIL; detail="exit $rc; $detail"
    else
        result=PASS
    fi
    if [ "$result" = FAIL ]; then
        fails=$((fails + 1))
        say "FAIL $name (${dt}s): $detail"
        if grep -qE 'FAIL|error' "$out"; then
            grep -E 'FAIL|error' "$out" | sort -u | head -n 12 | sed 's/^/    /'
        else
            tail -n 5 "$out" | sed 's/^/    /'
        fi
    else
        say "PASS $name (${dt}s): $detail"
    fi
    verdicts+=("$name $result $detail (${dt}s)")
    rm -f "$out"
}

vstep_report() {
    local tag=$1 v bad=0
    echo
    printf '%-14s %-5s %s\n' step result detail | tee -a "$LOG"
    local n r rest
    for v in "${verdicts[@]}"; do
        read -r n r rest <<<"$v"
        printf '%-14s %-5s %s\n' "$n" "$r" "$rest" | tee -a "$LOG"
        [ "$r" = PASS ] || [ "$r" = SKIP ] || bad=1
    done
    if [ "$bad" -eq 0 ]; then
        say "$tag: ALL PASS"
    else
        say "$tag: SOME STEPS FAILED (see $LOG)"
    fi
    return "$bad"
}

xstage_with() {
    local sub=$1 b=$2 x="$2/xstage"
    if [ -x "$x" ] && "$x" bench "$sub" --help 2>&1 | grep -q 'needs the CUDA side'; then
        local nvcc
        nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
        x="${TMPDIR:-/tmp}/xstage-$sub.$$"
        if [ -x "$nvcc" ] && "$nvcc" -gencode=arch=compute_90a,code=sm_90a -o "$x" "$b"/tools/*.o \
            "$b"/cuda/*.o "$b/libxstage.a" -l:libjansson.a -lm -ldl -lpthread >>"$LOG" 2>&1; then
            say "note: $b/xstage lacked bench $sub; relinked $x from $b/tools and $b/cuda objects"
        else
            x=""
        fi
    fi
    [ -n "$x" ] && [ -x "$x" ] && printf '%s\n' "$x"
}
