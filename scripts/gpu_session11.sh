#!/usr/bin/env bash
# gpu_session11.sh - the run of run 11 (bench/results/h200-2026-11-29-r11): bench up's model
# on per-CTA programs (docs/UP.md "Per-CTA programs"): scripts/gpu_up.sh, the default 72-row
# sweep (-n 11, pilots on, the forced-courier rows skipped), predicting with the profile of run 8
# call 3 as every run since. Host code changed only; the kernels are run 10's.
# Writes $OUT/up/ (gpu_up.log, up.csv, sdpa_ref.csv) and $OUT/run11.tar.gz of it.
# Usage: OUT=dir [PROFILE=file] scripts/gpu_session11.sh
set -u
OUT=${OUT:-./out-s11}
P=${PROFILE:-bench/results/h200-2026-11-29-r8/h200_call3_calib_h200_host_profile.json}
mkdir -p "$OUT"
OUT="$OUT/up" PROFILE="$P" COURIER_SEQS= timeout "${UP_LIMIT:-420}" bash scripts/gpu_up.sh \
    2>&1 | tail -n 60
gzip -k "$OUT/up/gpu_up.log" 2>/dev/null
