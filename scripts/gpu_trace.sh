#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_trace.sh - the trace path on one GPU, from an already built tree: `xstage replay --windows
# --timeline` writes each example schedule's measured run as a v1 trace (docs/TRACE.md) and its
# Chrome timeline; `xstage compare` then predicts the trace's per-CTA programs on the profile and
# prints the figures (total error, per-tile issue-time error, stall error beside the zero-stall
# predictor's); `predict --trace` and the loader's refusal of a cut trace run on the first.
# The schedules are replay's examples, not the acceptance kernels (examples/byo): this checks the
# GPU side of the trace path and gives figures on shapes the calibration did not fit.
# Usage: OUT=dir [BUILD=build] [PROFILE=bench/results/calibrate/profile.json] scripts/gpu_trace.sh
set -u
BUILD=${BUILD:-build}
OUT=${OUT:-./out-trace}
PROFILE=${PROFILE:-bench/results/calibrate/profile.json}
X="$BUILD/xstage"
mkdir -p "$OUT"
LOG="$OUT/trace.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
for f in examples/ep_wave.csv examples/drift.csv examples/mixed.csv; do
    n=$(basename "$f" .csv)
    step "replay $n" 90 "$X" replay --schedule "$f" --profile "$PROFILE" \
        --windows "$OUT/${n}_trace.csv" --timeline "$OUT/${n}_timeline.json"
    step "compare $n" 60 "$X" compare --trace "$OUT/${n}_trace.csv" --profile "$PROFILE" \
        --csv "$OUT/${n}_tiles.csv" --worst 5
done
T="$OUT/ep_wave_trace.csv"
if [ -s "$T" ]; then
    step "predict --trace" 60 "$X" predict --trace "$T" --profile "$PROFILE" --csv -
    # a trace cut mid-line is refused with one line
    head -c "$(($(wc -c <"$T") - 7))" "$T" >"$OUT/cut.csv"
    if "$X" compare --trace "$OUT/cut.csv" >/dev/null 2>"$OUT/cut.err"; then
        results+=("FAIL  cut trace accepted")
        fails=$((fails + 1))
    elif [ "$(wc -l <"$OUT/cut.err")" -eq 1 ]; then
        results+=("PASS  cut trace refused: $(cat "$OUT/cut.err")")
    else
        results+=("FAIL  cut trace: $(wc -l <"$OUT/cut.err") stderr lines")
        fails=$((fails + 1))
    fi
    rm -f "$OUT/cut.csv" "$OUT/cut.err"
fi
echo
echo "== gpu_trace summary"
printf '%s\n' "${results[@]}"
grep -E "^=== compare|^# figures|^total error|^# total" "$LOG"
for f in "$OUT"/*.json "$OUT"/*_tiles.csv; do [ -s "$f" ] && gzip -f "$f"; done
exit $fails
