#!/usr/bin/env bash
# gpu_calib.sh - calibration runs on one GPU, from an already built tree (issue 3):
#   1. xstage calibrate --target host   (full; profile, raw samples, report)
#   2. xstage calibrate --target local  (the HBM control)
#   3. xstage calibrate --quick         (timed: must stay under 15 s)
#   4. xstage validate on the host profile (suite never used in fitting)
#   5. xstage replay: examples, free-running and --sync, host and local
#   6. compute-sanitizer memcheck on calibrate --quick and on replay
# Writes to $OUT: calib.log (everything), h200_host_profile.json, h200_local_profile.json,
# h200_host_samples.csv, h200_local_samples.csv, validate.csv. Each step bounded by `timeout`;
# one failure does not stop the others; PASS/FAIL table last.
# Usage: OUT=dir [BUILD=build] scripts/gpu_calib.sh
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-./out-calib}
X="$BUILD/xstage"
mkdir -p "$OUT"
LOG="$OUT/calib.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
# --load-probe: (f), the drain under L2 load, goes into the profile
# (drain_under_load_bytes_per_ns) for bench up's model (docs/UP.md "Per-CTA programs")
step calibrate-host 120 "$X" calibrate --target host --load-probe \
    --out "$OUT/h200_host_profile.json" \
    --out-published "$OUT/h200_host_profile_published.json" --samples "$OUT/h200_host_samples.csv"
step calibrate-local 120 "$X" calibrate --target local --out "$OUT/h200_local_profile.json" \
    --samples "$OUT/h200_local_samples.csv"
step calibrate-quick 60 "$X" calibrate --target host --quick --out "$OUT/quick_profile.json"
# (f) the store kernel's rate with its SMs also busy (HBM, L2 traffic): does a fused kernel's
# compute slow the drain? (TP and UP rows drain at 0.74-0.84 R in run 6; not fitted)
step "load probe" 90 "$X" calibrate --target host --quick --load-probe
P="$OUT/h200_host_profile.json"
[ -s "$P" ] || P=""
step validate-host 240 "$X" validate ${P:+--profile "$P"} --csv "$OUT/validate.csv" \
    --rows "$OUT/validate_rows.csv"
PP="$OUT/h200_host_profile_published.json"
[ -s "$PP" ] && step validate-host-published 240 "$X" validate --profile "$PP" \
    --csv "$OUT/validate_published.csv" --rows "$OUT/validate_published_rows.csv"
for f in examples/ep_wave.csv examples/drift.csv; do
    step "replay $(basename "$f")" 60 "$X" replay --schedule "$f" ${P:+--profile "$P"}
    step "replay --sync $(basename "$f")" 60 "$X" replay --schedule "$f" --sync ${P:+--profile "$P"}
done
step "replay isolated --sync" 60 "$X" replay --schedule examples/isolated.csv --sync ${P:+--profile "$P"}
step "replay local" 60 "$X" replay --schedule examples/ep_wave.csv --target local
# per-producer issue windows (measured next to predicted): isolated bursts and a drift train
printf 'producers,bytes_per_producer,gap_ns\n16,524288,0\n' >/tmp/xs_iso16.csv
printf 'producers,bytes_per_producer,gap_ns\n132,63536,0\n' >/tmp/xs_iso132.csv
step "windows isolated K16 8M" 60 "$X" replay --schedule /tmp/xs_iso16.csv ${P:+--profile "$P"} \
    --windows "$OUT/windows_iso16.csv"
step "windows isolated K132 8M" 60 "$X" replay --schedule /tmp/xs_iso132.csv ${P:+--profile "$P"} \
    --windows "$OUT/windows_iso132.csv"
step "windows drift" 60 "$X" replay --schedule examples/drift.csv ${P:+--profile "$P"} \
    --windows "$OUT/windows_drift.csv"
# the knee: isolated bursts just above Q(K) (validate's 1.3xQ(K) K24/K96 volumes, calibration's
# 16 x 128 KiB) and the small 0.5xQ(K) K96 burst, 9 repetitions each: run 5 showed the first
# repetition of a calibration burst near the knee ending 15-25 us before the later ones (same
# destination addresses, verified by the host in between) and a start offset of ~250 or ~460 ns
for kb in 24,69440 96,39312 16,131072 96,15120; do
    printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >/tmp/xs_knee.csv
    step "knee repeats K${kb%,*} B${kb#*,}" 60 "$X" replay --schedule /tmp/xs_knee.csv -n 9 \
        ${P:+--profile "$P"}
done
if command -v compute-sanitizer >/dev/null 2>&1; then
    step "memcheck calibrate --quick" 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$X" calibrate --target host --quick
    step "memcheck replay" 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$X" replay --schedule examples/mixed.csv -n 1
fi
echo
echo "== gpu_calib summary"
printf '%s\n' "${results[@]}"
grep -E "^R = |^r = |^Q = |R / store bw|chunk_bytes = |^# totals|^# per-row|^# isolated|^# validate" "$LOG" | head -20
grep -A4 "^## (f) drain under load" "$LOG" | tail -n 4
grep -E "^=== knee repeats|^# total .* measured" "$LOG" | tail -8
exit $fails
