#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_tiles.sh - the workloads' tile traces and per-tile stall on one GPU, from an already built
# tree (about 90 s): `bench ep` and `bench up` on one small configuration each with --trace
# (trace v1 files, docs/TRACE.md "Workload traces") and --tiles (EP's per-tile CSV), then
# `xstage compare --trace` (and --timeline) on the traces written: each must load and compare.
# The bench's own summaries carry the per-tile stall where it matters (tiles stalled > 0.5 us:
# the model's median error beside the zero predictor's, issue side and MMA side; EP: "stalled
# tiles", UP: "piggyback per-tile stall", docs/UP.md "Per-tile stall").
# Usage: OUT=dir [BUILD=build] [PROFILE=bench/results/calibrate/profile.json] scripts/gpu_tiles.sh
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-./out-tiles}
PROFILE=${PROFILE:-bench/results/calibrate/profile.json}
X="$BUILD/xstage"
mkdir -p "$OUT/traces"
LOG="$OUT/tiles.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
step "bench ep" 60 "$X" bench ep --profile "$PROFILE" --config olmoe-1b-7b --tokens 2048 \
    --routing balanced -n 3 -w 1 --csv "$OUT/ep.csv" --tiles "$OUT/ep_tiles.csv" \
    --trace "$OUT/traces"
step "bench up" 45 "$X" bench up --profile "$PROFILE" --seq 8192 --heads 8 --peers 4 \
    --causal both --pilots 0 -n 3 -w 1 --csv "$OUT/up.csv" --trace "$OUT/traces"
n=0
for f in "$OUT"/traces/*.csv; do
    [ -s "$f" ] || continue
    b=$(basename "$f" .csv)
    # every trace must load and compare; the timeline of the first few
    if [ "$n" -lt 4 ]; then
        step "compare $b" 20 "$X" compare --trace "$f" --profile "$PROFILE" --worst 3 \
            --timeline "$OUT/${b}_timeline.json"
    else
        step "compare $b" 20 "$X" compare --trace "$f" --profile "$PROFILE" --worst 0
    fi
    n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
    results+=("FAIL  no trace written under $OUT/traces")
    fails=$((fails + 1))
fi
echo
echo "== gpu_tiles summary"
printf '%s\n' "${results[@]}"
grep -E "stalled tiles|per-tile stall|^=== compare|^total error|^# total" "$LOG"
for f in "$OUT"/*.json "$OUT"/ep_tiles.csv; do [ -s "$f" ] && gzip -f "$f"; done
tar -czf "$OUT/traces.tar.gz" -C "$OUT" traces && rm -rf "$OUT/traces"
exit $fails
