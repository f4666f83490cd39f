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
