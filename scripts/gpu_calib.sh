#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_calib.sh - the calibrate area's reference run on one GPU, from an already built tree:
#   1. xstage calibrate --target host    (full: profile.json, samples.csv.gz)
#   2. xstage calibrate --target local   (the HBM control: local_profile.json)
#   3. xstage calibrate --quick          (timed: quick_profile.json)
#   4. xstage validate, twice, on profile.json (a suite never used in fitting: validate_a.csv,
#      validate_b.csv and their per-row tables *_rows.csv)
#   5. xstage replay of the examples, free-running and --sync, host and local
#   6. compute-sanitizer memcheck on calibrate --quick and on replay (when installed)
# Writes to $OUT the files bench/results/calibrate/ keeps, and calib.log (everything). Each step
# is bounded by `timeout`; one failure does not stop the others; the PASS/FAIL table comes last.
# Usage: OUT=dir [BUILD=build] [SANITIZE=0: skip step 6] scripts/gpu_calib.sh
set -u
# NCCL and cuBLAS are found in the active Python environment's nvidia-* wheels (docs/INSTALL.md):
# on the GPU machine that is the PyTorch venv (XS_VENV names another; XS_NCCL_LIB and
# XS_CUBLAS_LIB, when set, win over any search)
XS_VENV=${XS_VENV:-/opt/torch/.venv}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$XS_VENV" ]; then
    export VIRTUAL_ENV="$XS_VENV" PATH="$XS_VENV/bin:$PATH"
fi
BUILD=${BUILD:-build}
OUT=${OUT:-./out-calib}
X="$BUILD/xstage"
mkdir -p "$OUT"
LOG="$OUT/calib.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
# --load-probe adds the drain under L2 load (drain_under_load_bytes_per_ns) that bench up uses
step calibrate-host 120 "$X" calibrate --target host --load-probe --out "$OUT/profile.json" \
    --samples "$OUT/samples.csv"
step calibrate-local 120 "$X" calibrate --target local --out "$OUT/local_profile.json"
step calibrate-quick 60 "$X" calibrate --target host --quick --out "$OUT/quick_profile.json"
P="$OUT/profile.json"
[ -s "$P" ] || P=""
for v in a b; do
    step "validate $v" 240 "$X" validate ${P:+--profile "$P"} --csv "$OUT/validate_$v.csv" \
        --rows "$OUT/validate_${v}_rows.csv"
done
for f in examples/ep_wave.csv examples/drift.csv; do
    step "replay $(basename "$f")" 60 "$X" replay --schedule "$f" ${P:+--profile "$P"}
    step "replay --sync $(basename "$f")" 60 "$X" replay --schedule "$f" --sync ${P:+--profile "$P"}
done
step "replay local" 60 "$X" replay --schedule examples/ep_wave.csv --target local
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1; then
    step "memcheck calibrate --quick" 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$X" calibrate --target host --quick
    step "memcheck replay" 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$X" replay --schedule examples/mixed.csv -n 1
fi
[ -s "$OUT/samples.csv" ] && gzip -f "$OUT/samples.csv"
echo
echo "== gpu_calib summary"
printf '%s\n' "${results[@]}"
grep -E "^R = |^r = |^Q = |R / store bw|chunk_bytes = |^# totals|^# per-row|^# isolated|^# validate" "$LOG" | head -20
gzip -f "$LOG"
exit $fails
