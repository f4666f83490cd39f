#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_tp.sh - the tensor-parallel GPU runs on one H200, from an already-built tree:
#   1. tests/gpu/test_tp   fused GEMM+RS, AG+GEMM, MLP vs a CPU fp64 reference on small shapes,
#                          every remote byte checked, missed signals time out within their bound
#   2. xstage bench tp     the sweep (Llama-3 8B/70B/405B shapes, 2 token counts, 2 peer counts,
#                          3 operations): unfused vs naive vs shaped, bound, the planner's
#                          predictions, every row verified
# Writes to $OUT (default ./out): tp.log (everything), tp.csv (bench rows).
# Every step is bounded by `timeout`; one failing step does not stop the next. Expected wall
# time about 1 minute (test 3 s, sweep 45 s); at most 200 s (test <= 40 s, sweep <= 150 s:
# it stops starting configurations after TP_MAX_TIME = 120 seconds and is killed 30 s later),
# inside gpu_all.sh's 240 s for this area. The last lines printed are a
# short table and PASS/FAIL per step.
# The model (orders, predictions, comm_us = bytes / R) uses TP_PROFILE, by default the newest
# PROFILE (or TP_PROFILE), else bench/results/tp/profile.json, else the embedded one.
# usage: OUT=dir scripts/gpu_tp.sh [BUILD_DIR]      (BUILD_DIR defaults to build)
#        TP_ARGS="--quick" replaces the sweep's arguments (default: the full sweep, -n 5 -w 1)
#        TP_COURIERS=4,8 adds a step after the sweep (opt-in; not part of gpu_all.sh's budget):
#          the default sm90 sweep with 0 and each listed courier count side by side in the same
#          iterations, every row verified (docs/TP.md "Couriers (sm90)"), into $OUT/tp_couriers.csv;
#          it stops starting configurations after TP_COURIERS_MAX_TIME (default 540) seconds and is
#          killed 60 s later. TP_COURIERS_ARGS replaces its -n 5 -w 1.
set -u
# NCCL and cuBLAS are found in the active Python environment's nvidia-* wheels (docs/INSTALL.md):
# on the GPU machine that is the PyTorch venv (XS_VENV names another; XS_NCCL_LIB and
# XS_CUBLAS_LIB, when set, win over any search)
XS_VENV=${XS_VENV:-/opt/torch/.venv}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$XS_VENV" ]; then
    export VIRTUAL_ENV="$XS_VENV" PATH="$XS_VENV/bin:$PATH"
fi

B=${1:-${BUILD:-build}}
OUT=${OUT:-out}
TP_MAX_TIME=${TP_MAX_TIME:-120}
mkdir -p "$OUT"
LOG="$OUT/tp.log"
: >"$LOG"

. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"

say "# gpu_tp.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) build=$B out=$OUT"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1 || true; } >>"$LOG"
say "# git $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(git status --porcelain 2>/dev/null | wc -l) changed files"
pick_profile "${PROFILE:-${TP_PROFILE:-}}" tp
say "$PROFILE_LINE"

# the verdict's detail: the sweep's summary lines
step_detail() {
    case $1 in
    bench_tp)
        grep -E '^# (bench tp|summary: [0-9]+ configurations)' "$2" | sed 's/^# //; s/summary: //' |
            tr '\n' ';' ;;
    bench_tp_couriers)
        grep -E '^# (bench tp|summary: ([0-9]+ configurations|gemm_rs +shaped_c0/shaped_c|planner))' "$2" |
            sed 's/^# //; s/summary: //' | tr '\n' ';' ;;
    esac
}

vstep test_tp 40 "$B/tests/gpu/test_tp"

X=$(xstage_with tp "$B")
if [ -z "$X" ]; then
    say "FAIL bench_tp: $B/xstage was linked without the CUDA subcommands and could not be relinked"
    verdicts+=("bench_tp FAIL xstage lacks bench tp")
    fails=$((fails + 1))
else
    # shellcheck disable=SC2086
    vstep bench_tp $((TP_MAX_TIME + 30)) "$X" bench tp --csv "$OUT/tp.csv" \
        --max-time "$TP_MAX_TIME" ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} ${TP_ARGS:--n 5 -w 1}
fi
if [ -n "${TP_COURIERS:-}" ] && [ -n "$X" ]; then
    TP_COURIERS_MAX_TIME=${TP_COURIERS_MAX_TIME:-540}
    # shellcheck disable=SC2086
    vstep bench_tp_couriers $((TP_COURIERS_MAX_TIME + 60)) "$X" bench tp --engine sm90 \
        --couriers "$TP_COURIERS" --csv "$OUT/tp_couriers.csv" --max-time "$TP_COURIERS_MAX_TIME" \
        ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} ${TP_COURIERS_ARGS:--n 5 -w 1}
fi
case "$X" in "${TMPDIR:-/tmp}"/xstage-tp.*) rm -f "$X" ;; esac

# the sweep's table and summary, then the per-step verdicts (last)
if [ -s "$OUT/tp.csv" ]; then
    echo
    grep -E '^(op,|[a-z_]+,)' "$OUT/tp.csv" |
        awk -F, 'NR==1{for(i=1;i<=NF;i++)c[$i]=i; printf "%-7s %-11s %5s %2s %9s %9s %9s %9s %9s %9s %9s %6s %6s %6s %6s %-17s %3s\n","op","model","m","P","unfused","naive","shaped","local","loc_shp","bound","floor","u/s","n/s","s/b","s/f","order","ok"; next}
             {printf "%-7s %-11s %5s %2s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %6.3f %6.3f %6.3f %6.3f %-17s %3s\n",$c["op"],$c["model"],$c["m"],$c["peers"],$c["unfused_us"],$c["naive_us"],$c["shaped_us"],$c["local_us"],$c["shaped_local_us"],$c["bound_us"],$c["floor_us"],$c["unfused_over_shaped"],$c["naive_over_shaped"],$c["shaped_over_bound"],$c["shaped_over_floor"],$c["shaped_order"],$c["verified"]}'
fi
echo
grep -E '^# (summary|bench tp)' "$LOG" | tail -n 24
if [ -s "$OUT/tp_couriers.csv" ]; then
    # the courier step's per-row ratios: the default kernel's shaped order over N couriers'
    echo
    grep -E '^(op,|[a-z_]+,)' "$OUT/tp_couriers.csv" |
        awk -F, 'NR==1{for(i=1;i<=NF;i++){c[$i]=i; if($i ~ /^shaped_c0_over_shaped_c/)r[++nr]=$i}
                       printf "%-7s %-11s %5s %2s %9s %9s", "op","model","m","P","shaped","bound";
                       for(j=1;j<=nr;j++)printf " %22s", r[j]; printf " %3s\n","ok"; next}
             {printf "%-7s %-11s %5s %2s %9.1f %9.1f", $c["op"],$c["model"],$c["m"],$c["peers"],$c["shaped_us"],$c["bound_us"];
              for(j=1;j<=nr;j++)printf " %22s", $c[r[j]]; printf " %3s\n", $c["verified"]}'
fi
vstep_report gpu_tp
