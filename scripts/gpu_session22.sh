#!/usr/bin/env bash
# gpu_session22.sh - run 22 (bench/results/h200-2026-11-30-r22): issue 3's open item, the knee of
# 24 producers (docs/MODEL.md "Run 22"). On one GPU: calibrate (host, defaults, with --samples),
# validate its profile twice, then a knee map of isolated bursts from 12 to 36 producers in steps
# of 4 (K = 24 with its neighbours), 1.0 to 2.6 MB in steps of 0.1 MB: one replay per K (the grid
# is K, as in validate's one-row schedules), the volumes as rows of one --sync schedule with a
# 300 us gap after each (the stage drains in ~50 us), -n 16, every byte verified.
# Usage: OUT=dir [COMMIT=sha] scripts/gpu_session22.sh
set -u
OUT=${OUT:-./out-s22}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/session22.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
export NCCL_NVLS_ENABLE=0
say "# gpu_session22.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown}"
log_device
step "calibrate" 120 "$X" calibrate --target host --out "$OUT/profile.json" \
    --samples "$OUT/samples.csv"
for i in a b; do
    step "validate $i" 200 "$X" validate --profile "$OUT/profile.json" --csv "$OUT/validate_$i.csv" \
        --rows "$OUT/validate_${i}_rows.csv"
    grep -E '^# (totals|per-row|isolated burst above)' "$LOG" | tail -n 3
done
for k in 12 16 20 24 28 32 36; do
    s="$OUT/map_K$k.sched.csv"
    echo "producers,bytes_per_producer,gap_ns" >"$s"
    for v in $(seq 1000000 100000 2600000); do
        echo "$k,$((v / k / 16 * 16)),300000" >>"$s"
    done
    step "knee map K=$k" 60 sh -c '"$0" replay --schedule "$1" --sync -n 16 --profile "$2" --csv \
        >"$3"' "$X" "$s" "$OUT/profile.json" "$OUT/map_K$k.csv"
done
printf '%s\n' "${results[@]}" | tee -a "$LOG"
say "# gpu_session22.sh done: $fails failed steps"
