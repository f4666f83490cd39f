#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_validate.sh - transfer across chips: on one GPU (device 0), from an already built tree,
#   1. xstage calibrate --target host                  -> profile.json, samples.csv.gz
#   2. xstage validate on that profile (the fixed suite) -> validate.csv, validate_rows.csv
#   3. xstage validate --random N on that profile       -> random.csv (one summary row),
#                                                          random_rows.csv (every storing row)
# everything under $OUT/<chip>/, chip = the GPU's UUID prefix (GPU-xxxxxxxx, as bench/results
# names chips), with env.txt (device, UUID, driver, commit) and validate.log (every command's
# output). Run it once on each fresh machine; bench/results/calibrate/<chip>/ keeps the folder.
# Prints each step's time and the total; expected about 30 s on an H200 (calibrate < 15 s,
# validate ~5 s, validate --random 20 < 60 s).
# Usage: OUT=dir [BUILD=build] [RANDOM_N=20] [SEED=S] scripts/gpu_validate.sh
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-./out-validate}
N=${RANDOM_N:-20}
X="$BUILD/xstage"
t_start=$SECONDS
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 2>/dev/null | head -n 1)
chip=$(printf '%s' "$uuid" | cut -c1-12)
[ -n "$chip" ] || chip=GPU-unknown
D="$OUT/$chip"
mkdir -p "$D"
LOG="$D/validate.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: ${XS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null)"
    echo "gpu_uuid: ${uuid:-unknown}"
    echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 2>/dev/null)"
    echo "command: OUT=$OUT RANDOM_N=$N${SEED:+ SEED=$SEED} $0"
} >"$D/env.txt"
if [ ! -x "$X" ]; then
    echo "xstage: error: $X is missing (build first: make -j tool)" >&2
    exit 1
fi
P="$D/profile.json"
step calibrate 120 "$X" calibrate --target host --out "$P" --samples "$D/samples.csv"
if [ -s "$P" ]; then
    step validate 240 "$X" validate --profile "$P" --csv "$D/validate.csv" \
        --rows "$D/validate_rows.csv"
    step "validate --random $N" 120 "$X" validate --random "$N" ${SEED:+--seed "$SEED"} \
        --profile "$P" --random-csv "$D/random.csv" --random-rows "$D/random_rows.csv"
else
    results+=("FAIL  validate, validate --random (no profile: calibrate failed)")
    fails=$((fails + 1))
fi
[ -s "$D/samples.csv" ] && gzip -f "$D/samples.csv"
echo
echo "== gpu_validate $chip"
printf '%s\n' "${results[@]}"
grep -E "^# [0-9]+ runs, |^# totals|^# per-row|^# validate|^# random schedules" "$LOG"
[ -s "$D/random.csv" ] && cat "$D/random.csv"
echo "gpu_validate: $chip done in $((SECONDS - t_start)) s, $fails failed step(s); files in $D"
exit "$fails"
