#!/usr/bin/env bash
# gpu_tp.sh - the tensor-parallel GPU runs on one H200, from an already-built tree:
#   1. tests/gpu/test_tp   fused GEMM+RS, AG+GEMM, MLP vs a CPU fp64 reference on small shapes,
#                          every remote byte checked, missed signals time out within their bound
#   2. xstage bench tp     the sweep (Llama-3 8B/70B/405B shapes, 2 token counts, 2 peer counts,
#                          3 operations): unfused vs naive vs shaped, bound, the planner's
#                          predictions, every row verified
# Writes to $OUT (default ./out): tp.log (everything), tp.csv (bench rows).
# Every step is bounded by `timeout`; one failing step does not stop the next. Expected wall
# time about 1 minute (run 4: test 3 s, sweep 45 s); at most 200 s (test <= 40 s, sweep <= 150 s:
# it stops starting configurations after TP_MAX_TIME = 120 seconds and is killed 30 s later),
# inside gpu_all.sh's 240 s for this area. The last lines printed are a
# short table and PASS/FAIL per step.
# The model (orders, predictions, comm_us = bytes / R) uses TP_PROFILE, by default the newest
# calibrated host profile under bench/results/ (the embedded provisional one when there is none).
# usage: OUT=dir scripts/gpu_tp.sh [BUILD_DIR]      (BUILD_DIR defaults to build)
#        TP_ARGS="--quick" replaces the sweep's arguments (default: the full sweep, -n 5 -w 1)
set -u

B=${1:-${BUILD:-build}}
OUT=${OUT:-out}
TP_MAX_TIME=${TP_MAX_TIME:-120}
if [ -z "${TP_PROFILE:-}" ]; then
    TP_PROFILE=$(ls -1 bench/results/h200-*/h200_host_profile.json 2>/dev/null | sort | tail -n 1)
fi
mkdir -p "$OUT"
LOG="$OUT/tp.log"
: >"$LOG"

say() { printf '%s\n' "$*" | tee -a "$LOG"; }

say "# gpu_tp.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) build=$B out=$OUT"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1 || true; } >>"$LOG"
say "# git $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(git status --porcelain 2>/dev/null | wc -l) changed files"
PROFILE_ARGS=()
if [ -n "$TP_PROFILE" ] && [ -r "$TP_PROFILE" ]; then
    PROFILE_ARGS=(--profile "$TP_PROFILE")
    say "# profile: $TP_PROFILE"
else
    say "# profile: embedded (no calibrated host profile found)"
fi

declare -a NAMES RESULTS DETAILS

# run_step NAME LIMIT_S CMD... : runs CMD with a time bound, output appended to the log
run_step() {
    local name=$1 limit=$2
    shift 2
    say "=== $name (limit ${limit}s): $*"
    local t0=$SECONDS rc
    if [ ! -x "$1" ]; then
        say "FAIL $name: $1 is missing (build it first: make -j all)"
        NAMES+=("$name"); RESULTS+=("FAIL"); DETAILS+=("binary missing: $1")
        return
    fi
    timeout -k 10 "$limit" "$@" >"$OUT/.step.out" 2>&1
    rc=$?
    cat "$OUT/.step.out" >>"$LOG"
    local dt=$((SECONDS - t0)) last detail result
    last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT/.step.out" | tail -n 1)
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        result=FAIL; detail="timed out after ${limit}s"
    elif [ "$rc" -ne 0 ]; then
        result=FAIL; detail="exit $rc ${last}"
    else
        result=PASS; detail="${last}"
    fi
    case "$name" in
    bench_tp)
        detail="$detail $(grep -E '^# (bench tp|summary: [0-9]+ configurations)' "$OUT/.step.out" |
            sed 's/^# //; s/summary: //' | tr '\n' ';')" ;;
    esac
    if [ "$result" = FAIL ]; then
        say "FAIL $name (${dt}s): $detail"
        if grep -qE 'FAIL|error' "$OUT/.step.out"; then
            grep -E 'FAIL|error' "$OUT/.step.out" | sort -u | head -n 12 | sed 's/^/    /'
        else
            tail -n 5 "$OUT/.step.out" | sed 's/^/    /'
        fi
    else
        say "PASS $name (${dt}s): $detail"
    fi
    NAMES+=("$name"); RESULTS+=("$result"); DETAILS+=("$detail (${dt}s)")
}

run_step test_tp 40 "$B/tests/gpu/test_tp"

X="$B/xstage"
if [ -x "$X" ] && "$X" bench tp --help 2>&1 | grep -q 'needs the CUDA side'; then
    # a CPU-only link of the tool: relink a private one from the built objects when possible
    NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    X="${TMPDIR:-/tmp}/xstage-tp.$$"
    if [ -x "$NVCC" ] && "$NVCC" -gencode=arch=compute_90a,code=sm_90a -o "$X" "$B"/tools/*.o \
        "$B"/cuda/*.o "$B/libxstage.a" -l:libjansson.a -lm -ldl -lpthread >>"$LOG" 2>&1; then
        say "note: $B/xstage lacked bench tp; relinked $X from $B/tools and $B/cuda objects"
    else
        X=""
    fi
fi
if [ -z "$X" ]; then
    say "FAIL bench_tp: $B/xstage was linked without the CUDA subcommands and could not be relinked"
    NAMES+=("bench_tp"); RESULTS+=("FAIL"); DETAILS+=("xstage lacks bench tp")
else
    # shellcheck disable=SC2086
    run_step bench_tp $((TP_MAX_TIME + 30)) "$X" bench tp --csv "$OUT/tp.csv" \
        --max-time "$TP_MAX_TIME" ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} ${TP_ARGS:--n 5 -w 1}
fi
case "$X" in "${TMPDIR:-/tmp}"/xstage-tp.*) rm -f "$X" ;; esac

# the sweep's table and summary, then the per-step verdicts (last)
if [ -s "$OUT/tp.csv" ]; then
    echo
    grep -E '^(op,|[a-z_]+,)' "$OUT/tp.csv" |
        awk -F, 'NR==1{for(i=1;i<=NF;i++)c[$i]=i; printf "%-7s %-11s %5s %2s %9s %9s %9s %9s %9s %9s %9s %6s %6s %6s %6s %-17s %3s\n","op","model","m","P","unfused","naive","shaped","local","loc_shp","bound","floor","u/s","n/s","s/b","s/f","order","ok"; next}
             {printf "%-7s %-11s %5s %2s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %6.3f %6.3f %6.3f %6.3f %-17s %3s\n",$c["op"],$c["model"],$c["m"],$c["peers"],$c["unfused_us"],$c["naive_us"],$c["shaped_us"],$c["local_us"],$c["shaped_local_us"],$c["bound_us"],$c["floor_us"],$c["unfused_over_shaped"],$c["naive_over_shaped"],$c["shaped_over_bound"],$c["shaped_over_floor"],$c["shaped_order"],$c["verified"]}'
fi
if [ -s "$OUT/.step.out" ]; then
    echo
    grep -E '^# (summary|bench tp)' "$OUT/.step.out"
fi
rm -f "$OUT/.step.out"
echo
printf '%-10s %-5s %s\n' step result detail | tee -a "$LOG"
fail=0
for i in "${!NAMES[@]}"; do
    printf '%-10s %-5s %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${DETAILS[$i]}" | tee -a "$LOG"
    [ "${RESULTS[$i]}" = PASS ] || fail=1
done
if [ "$fail" -eq 0 ]; then
    say "gpu_tp: ALL PASS"
else
    say "gpu_tp: SOME STEPS FAILED (see $LOG)"
fi
exit "$fail"
