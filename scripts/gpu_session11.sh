#!/usr/bin/env bash
# gpu_session11.sh - the runs of run 11 (bench/results/h200-2026-11-29-r11): bench up's model
# on per-CTA programs (docs/UP.md "Per-CTA programs"): scripts/gpu_up.sh, the default 72-row
# sweep (-n 11, pilots on, the forced-courier rows skipped), predicting with the profile of run 8
# call 3 as every run since. Host code changed only; the kernels are run 10's.
# LOAD_DRAIN (default empty: the profile's R): bench up --load-drain, the drain rate under L2
# load that the same calibration call measured (run 8 call 3, h200_call3_calib_calib.log,
# "(f) drain under load", line l2: 50.43 GB/s); calls 2 and 3 of run 11 pass 50.43.
# (Both empty: the profile's R and no slice cost; scripts/gpu_up.sh's own default is both.)
# SLICE_NS (default empty: 0): bench up --slice-ns, the kernel's own cost of one output slice:
# the median over run 10 call 8's split rows of slice_us / (tiles per CTA x split), 156 ns
# (bench/results/h200-2026-11-29-r11/README.md gives the command); call 3 passes 156.
# Writes $OUT/up.csv, sdpa_ref.csv, gpu_up.log.gz.
# Usage: OUT=dir [PROFILE=file] [LOAD_DRAIN=X] [SLICE_NS=X] scripts/gpu_session11.sh
set -u
OUT=${OUT:-./out-s11}
P=${PROFILE:-bench/results/h200-2026-11-29-r8/h200_call3_calib_h200_host_profile.json}
mkdir -p "$OUT"
ARGS=
[ -n "${LOAD_DRAIN:-}" ] && ARGS="--load-drain $LOAD_DRAIN"
[ -n "${SLICE_NS:-}" ] && ARGS="$ARGS --slice-ns $SLICE_NS"
OUT="$OUT/up" PROFILE="$P" COURIER_SEQS= UP_MODEL_ARGS="$ARGS" timeout "${UP_LIMIT:-420}" \
    bash scripts/gpu_up.sh 2>&1 | tail -n 60
gzip -f "$OUT/up/gpu_up.log"
mv "$OUT/up/up.csv" "$OUT/up/sdpa_ref.csv" "$OUT/up/gpu_up.log.gz" "$OUT/" && rmdir "$OUT/up"
