#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_ep.sh - the expert-parallel GPU runs on one H200, from an already-built tree:
#   1. tests/gpu/test_gemm  the tile engine vs fp64 / cuBLAS, and its throughput vs cuBLAS
#   2. tests/gpu/test_moe   the fused MoE kernel: each layer alone (h, then Linear-2 from the
#                           reference h), every schedule verified, timeouts, the model
#   3. xstage bench ep      the sweep (8 configurations x 2 routings x 3 token counts, each
#                           configuration at its own peer count: docs/EP.md), -n 5 -w 1; auto may
#                           choose couriers (C = 4 or 8 at 0.9 R), and the courier column runs the
#                           better candidate forced, side by side (docs/EP.md, "Couriers")
#   4. xstage bench ep      two points again with every tile of every verified run (tiles.csv.gz:
#                           per-tile spans, main loops, pacer waits, predicted stalls; the courier
#                           runs' copies as rows of kind 3)
# Writes to $OUT (default ./out): ep.log (everything), sweep.csv (bench rows), gemm.csv (GEMM
# throughput), tiles.csv.gz and tiles_points.csv. Every step is bounded by `timeout` and
# by what is left of EP_BUDGET seconds (default 200: the whole EP step stays under 3.5 minutes); a
# step that no longer fits is skipped; one failing step does not stop the others. The last lines
# printed are a summary table with PASS/FAIL per step.
# The X-Stage profile of the model (auto, per-tile stall predictions, drain_us): PROFILE (set by
# gpu_all.sh to the profile its calibration just produced), else bench/results/ep/profile.json,
# else the embedded one. EP_LONG=1 adds bench ep --long (about 400 s) into long.csv.
# usage: OUT=dir [PROFILE=file] scripts/gpu_ep.sh [BUILD_DIR]   (BUILD_DIR defaults to build)
#        EP_ARGS="--quick" replaces the sweep's arguments (default: the full sweep, -n 5 -w 1)
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
BUDGET=${EP_BUDGET:-200}
mkdir -p "$OUT"
LOG="$OUT/ep.log"
: >"$LOG"

. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
STEP_BUDGET=$BUDGET

say "# gpu_ep.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) build=$B out=$OUT budget=${BUDGET}s"
pick_profile "${PROFILE:-}" ep
say "$PROFILE_LINE"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv 2>&1 || true; } >>"$LOG"

# the verdict's detail: the throughput line of test_gemm, the summary lines of the sweep
step_detail() {
    case $1 in
    test_gemm) grep -E '^# gemm: geomean' "$2" | sed 's/^# gemm: //' ;;
    bench_ep*)
        grep -E '^# (bench ep|wave/interleaved|wave/auto |auto near bound|couriers +auto chose|wave/courier|auto/courier|courier near bound|stall prediction|wall time)' \
            "$2" | sed 's/^# //; s/  */ /g' | tr '\n' ';' ;;
    esac
}

vstep test_gemm 45 "$B/tests/gpu/test_gemm" --csv "$OUT/gemm.csv" -n 20
vstep test_moe_model 20 "$B/tests/gpu/test_moe" --model ${PROFILE_ARGS[1]:+"${PROFILE_ARGS[1]}"}
vstep test_moe 60 "$B/tests/gpu/test_moe"
X=$(xstage_with ep "$B")
if [ -z "$X" ]; then
    say "FAIL bench_ep: $B/xstage was linked without the CUDA subcommands and could not be relinked"
    verdicts+=("bench_ep FAIL xstage lacks bench ep")
    fails=$((fails + 1))
else
    # shellcheck disable=SC2086
    vstep bench_ep 150 "$X" bench ep "${PROFILE_ARGS[@]}" --csv "$OUT/sweep.csv" \
        ${EP_ARGS:--n 5 -w 1}
    # every tile of two drain-bound points (small files: ~25k rows), for the per-tile analysis
    if [ -z "${EP_ARGS:-}" ]; then
        vstep bench_ep_tiles 40 "$X" bench ep "${PROFILE_ARGS[@]}" \
            --config olmoe-1b-7b,deepseek-v2-lite --tokens 2048 --routing balanced -n 3 -w 1 \
            --csv "$OUT/tiles_points.csv" --tiles "$OUT/tiles.csv"
        [ -s "$OUT/tiles.csv" ] && gzip -f "$OUT/tiles.csv"
    fi
    if [ "${EP_LONG:-0}" = 1 ]; then
        STEP_BUDGET=$((STEP_BUDGET + 450))
        vstep bench_ep_long 440 "$X" bench ep --long "${PROFILE_ARGS[@]}" \
            --config olmoe-1b-7b,qwen3-30b-a3b -n 3 -w 1 --csv "$OUT/long.csv"
    fi
fi
case "$X" in "${TMPDIR:-/tmp}"/xstage-ep.*) rm -f "$X" ;; esac

# the sweep's table and summary, then the per-step verdicts (last)
if [ -s "$OUT/sweep.csv" ]; then
    echo
    grep -E '^(config|[a-z0-9.-]+,)' "$OUT/sweep.csv" |
        awk -F, 'NR==1{for(i=1;i<=NF;i++)c[$i]=i; printf "%-18s %-8s %5s %2s %9s %9s %9s %9s %9s %9s %6s %6s %6s %-15s %4s %5s\n","config","routing","T","N","unfused","wave","inter","auto","courier","bound","w/int","w/auto","w/cour","auto","crit","ok"; next}
             {a=$c["auto_schedule"]; if($c["auto_paced"]=="1")a=a"+p"; if($c["auto_couriers"]+0>0)a=a"+c"$c["auto_couriers"]; k=$c["criterion_met"]=="1"?"met":($c["criterion_reshaped"]=="1"?"resh":"no")
              printf "%-18s %-8s %5s %2s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %6.3f %6.3f %6.3f %-15s %4s %5s\n",$c["config"],$c["routing"],$c["tokens"],$c["peers"],$c["unfused_us"],$c["wave_us"],$c["interleaved_us"],$c["auto_us"],$c["courier_us"],$c["bound_us"],$c["wave_over_interleaved"],$c["wave_over_auto"],$c["wave_over_courier"],a,k,$c["verified"]}'
fi
# the headline figures (docs/METRICS.md) over the sweep and the long points
if [ -s "$OUT/sweep.csv" ] && command -v "${PY:-python3}" >/dev/null 2>&1; then
    echo
    "${PY:-python3}" scripts/ep_summary.py "$OUT/sweep.csv" ${EP_LONG:+"$OUT/long.csv"} |
        tee "$OUT/summary.txt"
fi
echo
vstep_report gpu_ep
