#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_safety.sh - the GPU commands' output files through the atomic writer (docs/ROBUSTNESS.md),
# from an already built tree, on one GPU, in about a minute:
#   1. replay --windows --placement: both files written whole, no temporary file left
#   2. replay --windows naming the schedule: refused in one line before the GPU is touched
#   3. probe --csv: written whole
#   4. replay --windows /dev/full: one line, non-zero exit
# Writes safety.log and the files to $OUT; the PASS/FAIL table comes last.
# Usage: OUT=dir [BUILD=build] scripts/gpu_safety.sh
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-./out-safety}
X="$BUILD/xstage"
mkdir -p "$OUT"
LOG="$OUT/safety.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
cp examples/ep_wave.csv "$OUT/s.csv"
step "replay --windows --placement" 60 "$X" replay --schedule "$OUT/s.csv" \
    --windows "$OUT/windows.csv" --placement "$OUT/placement.csv"
for f in windows.csv placement.csv; do
    if [ -s "$OUT/$f" ]; then results+=("PASS  $f written"); else
        results+=("FAIL  $f missing or empty"); fails=$((fails + 1)); fi
done
if ls -A "$OUT" | grep -q 'xs-'; then
    results+=("FAIL  temporary file left in $OUT"); fails=$((fails + 1))
else results+=("PASS  no temporary file left"); fi
cp "$OUT/s.csv" "$OUT/s.orig"
if ! "$X" replay --schedule "$OUT/s.csv" --windows "$OUT/./s.csv" >>"$LOG" 2>"$OUT/err" &&
    [ "$(wc -l <"$OUT/err")" -eq 1 ] && grep -q 'same file' "$OUT/err" &&
    cmp -s "$OUT/s.csv" "$OUT/s.orig"; then
    results+=("PASS  replay --windows = --schedule refused"); else
    results+=("FAIL  replay --windows = --schedule: $(head -c 200 "$OUT/err")"); fails=$((fails + 1)); fi
step "probe --csv" 120 "$X" probe --csv "$OUT/probe.csv"
[ -s "$OUT/probe.csv" ] && results+=("PASS  probe.csv written") ||
    { results+=("FAIL  probe.csv missing or empty"); fails=$((fails + 1)); }
if ! "$X" replay --schedule "$OUT/s.csv" --windows /dev/full >>"$LOG" 2>"$OUT/err" &&
    [ "$(wc -l <"$OUT/err")" -eq 1 ]; then
    results+=("PASS  replay --windows /dev/full: one line, non-zero exit"); else
    results+=("FAIL  replay --windows /dev/full: $(head -c 200 "$OUT/err")"); fails=$((fails + 1)); fi
printf '%s\n' "${results[@]}" | tee -a "$LOG"
echo "gpu_safety: $fails failed" | tee -a "$LOG"
[ "$fails" -eq 0 ]
