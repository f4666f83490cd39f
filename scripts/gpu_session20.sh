#!/usr/bin/env bash
# gpu_session20.sh - run 20 (bench/results/h200-2026-11-30-r20): the long-token limit of
# wave/interleaved (issue 5; docs/EP.md "Run 20"). The default sweep's largest ratio grows with
# the token count (olmoe-1b-7b N=2: 1.36 at T=4096, 1.37-1.55 at 8192-32768 in this run's calls
# 1 and 4). bench ep --long runs each configuration at 8, 16 and 32 x its largest default token
# count (combine at most 4 GiB); here the two configurations whose sweep peer count is 2.
# PART=all: first the default sweep (-n 5 -w 1, as gpu_ep.sh runs it), then the long points, then
# scripts/ep_summary.py over both: issue 5's figures from one GPU in one call.
# Usage: OUT=dir [COMMIT=sha] [PART=long|all] [CONFIGS=olmoe-1b-7b,qwen3-30b-a3b] [ITERS=3]
#        [PROFILE=bench/results/h200-2026-11-29-r11/h200_host_profile.json] [PY=python3]
#        scripts/gpu_session20.sh
set -u
OUT=${OUT:-./out-s20}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/session20.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
export NCCL_NVLS_ENABLE=0
say "# gpu_session20.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown}"
log_device
P=${PROFILE:-bench/results/h200-2026-11-29-r11/h200_host_profile.json}
LIMIT=540
if [ "${PART:-long}" = all ]; then
    LIMIT=400
    step "bench ep" 150 "$X" bench ep --profile "$P" -n 5 -w 1 --csv "$OUT/ep.csv"
    grep -E '^# (wave/interleaved|wave/auto |auto near bound|stall prediction|bench ep)' "$LOG"
fi
step "bench ep --long" $LIMIT "$X" bench ep --long \
    --profile "$P" --config "${CONFIGS:-olmoe-1b-7b,qwen3-30b-a3b}" -n "${ITERS:-3}" -w 1 \
    --csv "$OUT/ep_long.csv"
grep -E '^# (--long|wave/interleaved|wave/auto |bench ep|wall)' "$LOG"
grep -E '^[a-z0-9.-]+ +(balanced|zipf) +[0-9]{5,} ' "$LOG"
if [ "${PART:-long}" = all ]; then
    ${PY:-python3} scripts/ep_summary.py "$OUT/ep.csv" "$OUT/ep_long.csv" | tee -a "$LOG"
fi
