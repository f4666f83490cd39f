#!/usr/bin/env bash
# gpu_probe.sh - work under stores and the drain of row-shaped stores (`xstage probe`), and where
# the producers of the knee bursts ran (`xstage replay --placement`). Issues 3, 5, 6, 7: the
# model assumes work does not slow while stores drain and calibrates R with contiguous bursts;
# the fused kernels lose main-loop time next to their stores and drain their row stores at
# 0.74-0.84 R; 24 producers at 1.3 Q(K) stall in some runs and not in others (MODEL.md "Run 6").
# Writes to $OUT: probe.log, probe_host.csv, probe_local.csv, placement_<K>_<B>.csv.
# Usage: OUT=dir [PROFILE=file] [PROBE_REPS=5] [KNEE_REPS=25] scripts/gpu_probe.sh
set -u
OUT=${OUT:-./out-probe}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/probe.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
P=${PROFILE:-}
[ -n "$P" ] && [ ! -s "$P" ] && P=""
STEP_SHOW=1 step "probe host" 150 "$X" probe --target host -n "${PROBE_REPS:-5}" --csv "$OUT/probe_host.csv"
STEP_SHOW=1 step "probe local" 90 "$X" probe --target local -n 3 --csv "$OUT/probe_local.csv"
for kb in 24,69440 24,106496 16,131072 96,15120; do
    printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >/tmp/xs_place_$$.csv
    step "placement K${kb%,*} B${kb#*,}" 60 "$X" replay --schedule /tmp/xs_place_$$.csv \
        -n "${KNEE_REPS:-25}" --dest flush ${P:+--profile "$P"} \
        --placement "$OUT/placement_${kb%,*}_${kb#*,}.csv"
done
rm -f /tmp/xs_place_$$.csv
echo
echo "== gpu_probe summary"
printf '%s\n' "${results[@]}"
exit $fails
