#!/usr/bin/env bash
# gpu_knee.sh - does the state of the destination lines in the CPU's caches set the X-Stage's
# capacity near the knee? (issue 3; docs/MODEL.md "Run 5: the knee"). Calibration runs 4-6 saw
# the first repetition of an isolated burst just above Q(K) end 15-25 us before the later ones,
# and validate's worst rows are such bursts. Between repetitions the host verifies every byte,
# so the lines sit clean in its caches; `--dest flush` evicts them after the check, `--dest
# dirty` rewrites them from the CPU. Per state: the knee bursts, 9 repetitions each (every run's
# total printed in order), then validate; then a calibration under flush and dirty and validate
# on each. Writes to $OUT: knee.log, validate_<state>.csv, profile_<state>.json, samples_<state>.csv.
# DESTS (default "keep flush dirty"): the states of the knee bursts and validate; CAL_DESTS
# (default "flush dirty"): the states calibrated; MAX_SKEW (ns, default 0): also rerun the knee
# bursts, validate and calibrate with --max-skew MAX_SKEW (runs whose producers did not leave the
# common start together are run again; the sub-us bursts' bimodal total).
# Usage: OUT=dir [PROFILE=file] [DESTS=...] [CAL_DESTS=...] [MAX_SKEW=ns] scripts/gpu_knee.sh
set -u
OUT=${OUT:-./out-knee}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/knee.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
P=${PROFILE:-}
[ -n "$P" ] && [ ! -s "$P" ] && P=""
MS=${MAX_SKEW:-0}
SKEWS=0
[ "$MS" != 0 ] && SKEWS="0 $MS"
for d in ${DESTS:-keep flush dirty}; do
    for sk in $SKEWS; do
        for kb in 24,69440 16,131072 16,262144 96,15120 96,39312; do
            printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >/tmp/xs_knee_$$.csv
            step "knee $d skew<=$sk K${kb%,*} B${kb#*,}" 60 "$X" replay \
                --schedule /tmp/xs_knee_$$.csv -n 9 --dest "$d" --max-skew "$sk" ${P:+--profile "$P"}
        done
        step "validate --dest $d --max-skew $sk" 120 "$X" validate --dest "$d" --max-skew "$sk" \
            ${P:+--profile "$P"} --csv "$OUT/validate_${d}_skew$sk.csv"
    done
done
for d in ${CAL_DESTS:-flush dirty}; do
    step "calibrate --dest $d --max-skew $MS" 120 "$X" calibrate --target host --dest "$d" \
        --max-skew "$MS" --out "$OUT/profile_$d.json" --samples "$OUT/samples_$d.csv"
    [ -s "$OUT/profile_$d.json" ] &&
        step "validate --dest $d --max-skew $MS on its own calibration" 120 "$X" validate \
            --dest "$d" --max-skew "$MS" --profile "$OUT/profile_$d.json" \
            --rows "$OUT/validate_${d}_own_rows.csv" --csv "$OUT/validate_${d}_own.csv"
done
rm -f /tmp/xs_knee_$$.csv
echo
echo "== gpu_knee summary"
printf '%s\n' "${results[@]}"
grep -E "^=== knee|^# run totals|^# total .* measured|^# totals|^# per-row|^=== (validate|calibrate)|^R = |^Q = " "$LOG" |
    grep -v "rc=" | head -80
exit $fails
