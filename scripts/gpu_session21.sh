#!/usr/bin/env bash
# gpu_session21.sh - run 21 (bench/results/h200-2026-11-30-r21): auto's lead search for its paced
# order (issue 5; docs/EP.md "Run 21"). Where auto paces it now also predicts leads D/2..2D and,
# around D, leads that taper where Linear-1 ends (xs_moe_plan.lead_end); --auto-fixed runs the
# rule up to run 20 (paced at the unpaced order's best lead) in the same rounds wherever the two
# decisions differ, so every change is measured side by side.
# PART=sweep: test_moe (the tapered plans verified on the GPU), run 13's two margin rows at -n 15,
#             then the default sweep (-n 5 -w 1) SWEEPS times (default 2), all with --auto-fixed.
# PART=long:  bench ep --long on the two N = 2 configurations (-n 3), then scripts/ep_summary.py
#             over the sweep CSV given as SWEEP_CSV (if any) and the long one.
# Usage: OUT=dir [COMMIT=sha] [PART=sweep|long] [SWEEPS=2] [SWEEP_CSV=file]
#        [PROFILE=bench/results/h200-2026-11-29-r11/h200_host_profile.json] [PY=python3]
#        scripts/gpu_session21.sh
set -u
OUT=${OUT:-./out-s21}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/session21.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
export NCCL_NVLS_ENABLE=0
say "# gpu_session21.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown} part=${PART:-sweep}"
log_device
P=${PROFILE:-bench/results/h200-2026-11-29-r11/h200_host_profile.json}
SUMMARY='^# (wave/interleaved|wave/auto |auto near bound|auto/auto_fixed|auto_fixed|lead search|stall prediction|wall time|bench ep)'
if [ "${PART:-sweep}" = sweep ]; then
    if [ -x "${BUILD:-build}/tests/gpu/test_moe" ]; then
        step "test_moe" 240 "${BUILD:-build}/tests/gpu/test_moe"
        grep -E '^(FAIL|[0-9]+ passed)' "$LOG" | tail -n 5
    fi
    step "bench ep margin rows" 120 "$X" bench ep --profile "$P" \
        --config deepseek-v2-lite,olmoe-1b-7b --tokens 1024 --routing balanced --auto-fixed \
        -n 15 -w 1 --csv "$OUT/ep_margin.csv"
    grep -E '^# auto ' "$LOG" | tail -n 2
    for i in $(seq 1 "${SWEEPS:-2}"); do
        step "bench ep sweep $i" 200 "$X" bench ep --profile "$P" --auto-fixed -n 5 -w 1 \
            --csv "$OUT/ep_sweep$i.csv"
        tail -n 40 "$LOG" | grep -E "$SUMMARY"
    done
else
    step "bench ep --long" 540 "$X" bench ep --long --profile "$P" \
        --config "${CONFIGS:-olmoe-1b-7b,qwen3-30b-a3b}" -n "${ITERS:-3}" -w 1 --auto-fixed \
        --csv "$OUT/ep_long.csv"
    tail -n 40 "$LOG" | grep -E "$SUMMARY"
    if [ -n "${SWEEP_CSV:-}" ]; then
        ${PY:-python3} scripts/ep_summary.py "$SWEEP_CSV" "$OUT/ep_long.csv" | tee -a "$LOG"
    fi
fi
printf '%s\n' "${results[@]}" | tee -a "$LOG"
gzip -f "$LOG"
