#!/usr/bin/env bash
# gpu_session17.sh - run 17 (bench/results/h200-2026-11-30-r17): where the knee of an isolated
# burst falls, producer count by producer count (issue 3; docs/MODEL.md "Run 17").
# Calls 1-3 of run 17 ran gpu_session16.sh PART=final (the defaults, calibrate and validate twice
# in keep and flush): 6 of 12 validates met the 15 % maximum, every miss a burst of 24 or 96
# producers at 1.3 or 2·Q(K), whose runs stall or not at random. One Q(K) = Q + K·beta
# misplaces the knee by 15-25 % at some K (run 14: the capacity belongs to the half of the chip
# the producers are in, and the block scheduler's placement decides how many land in each half).
# PART=kneemap (DEST=keep, the default, or flush): isolated bursts of K = 4, 8, 12, ..., 132
# producers (16 counts), total volumes 0.5 MiB x 2^(i/4), i = 0..15 (0.5-6.7 MiB), 16 runs
# each, with --placement (every run's total, each producer's SM and end, and the GPC of every
# SM): the knee and how sharp it is at each K, and which SMs the scheduler gives each K, on
# one chip; after a calibration (in DEST) of the same chip unless CAL=0 (call 4 had none); then
# validate in DEST unless VAL=0.
# PART=fine: the knee's transition in 1/16 octaves for five K (see the case).
# PART=final: gpu_session16.sh's set (calls 1-3, 8 and 9 ran gpu_session16.sh PART=final itself).
# Writes $OUT/session17.log and s17.tar.gz (per burst: km_K_V.csv, replay's CSV;
# kp_K_V.csv, its placement file).
# Usage: OUT=dir [COMMIT=sha] [PART=kneemap|fine|final] [DEST=keep|flush] [CAL=0] [VAL=0]
#        [KS="4 8 ..."] scripts/gpu_session17.sh
set -u
OUT=${OUT:-./out-s17}
X=${BUILD:-build}/xstage
if [ "${PART:-kneemap}" = final ]; then
    exec bash "$(dirname "${BASH_SOURCE[0]}")/gpu_session16.sh"
fi
mkdir -p "$OUT"
LOG="$OUT/session17.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
say "# gpu_session17.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown} part=${PART:-kneemap}"
log_device

case ${PART:-kneemap} in
kneemap)
    DEST=${DEST:-keep}
    # the chip's own calibration first (keep), to predict the map with (not in call 4)
    [ "${CAL:-1}" = 1 ] &&
        step "calibrate --dest $DEST" 120 "$X" calibrate --target host --dest "$DEST" \
            --out "$OUT/profile_$DEST.json" --samples "$OUT/samples_$DEST.csv"
    SCHED=$(mktemp /tmp/xs_s17_XXXXXX.csv)
    KS=${KS:-"4 8 12 16 20 24 28 32 40 48 56 64 80 96 112 132"}
    for k in $KS; do
        for i in $(seq 0 15); do
            # bytes per producer: 0.5 MiB * 2^(i/4) / K, a multiple of 16
            b=$(awk -v k="$k" -v i="$i" 'BEGIN { v = 524288 * 2 ^ (i / 4); printf "%d", int(v / k / 16 + 0.5) * 16 }')
            printf 'producers,bytes_per_producer,gap_ns\n%s,%s,0\n' "$k" "$b" >"$SCHED"
            step "burst $k x $b B" 60 "$X" replay --schedule "$SCHED" -n 16 --dest "$DEST" --csv \
                --placement "$OUT/kp_${k}_$b.csv"
            # the replay's own CSV lines (the step appended them to the log): keep the last block
            awk '/^row,producers/ { s = "" } { s = s $0 "\n" } END { printf "%s", s }' "$LOG" |
                grep -E '^(row,|[0-9])' >"$OUT/km_${k}_$b.csv"
        done
    done
    rm -f "$SCHED"
    # and the suite on the same chip and profile (VAL=0: not)
    [ "${VAL:-1}" = 1 ] && [ -s "$OUT/profile_$DEST.json" ] &&
        step "validate --dest $DEST" 200 "$X" validate --dest "$DEST" \
            --profile "$OUT/profile_$DEST.json" --rows "$OUT/validate_${DEST}_rows.csv" \
            --csv "$OUT/validate_$DEST.csv"
    ;;
fine)
    # the knee's transition, finer (keep): for K = 8, 24, 48, 96, 132 around the knee of calls
    # 4-5 (1.1, 1.45, 1.85, 2.6, 3.1 MiB) from 0.8x to 1.25x in 1/16 octaves, 32 runs each,
    # after a calibration and a validate of the same chip
    step "calibrate --dest keep" 120 "$X" calibrate --target host --dest keep \
        --out "$OUT/profile_keep.json" --samples "$OUT/samples_keep.csv"
    [ -s "$OUT/profile_keep.json" ] &&
        step "validate --dest keep" 200 "$X" validate --dest keep \
            --profile "$OUT/profile_keep.json" --rows "$OUT/validate_keep_rows.csv" \
            --csv "$OUT/validate_keep.csv"
    SCHED=$(mktemp /tmp/xs_s17_XXXXXX.csv)
    for kc in 8,1.1 24,1.45 48,1.85 96,2.6 132,3.1; do
        k=${kc%,*}
        for i in $(seq -5 5); do
            b=$(awk -v k="$k" -v c="${kc#*,}" -v i="$i" 'BEGIN { v = c * 1048576 * 2 ^ (i / 16); printf "%d", int(v / k / 16 + 0.5) * 16 }')
            printf 'producers,bytes_per_producer,gap_ns\n%s,%s,0\n' "$k" "$b" >"$SCHED"
            step "burst $k x $b B" 60 "$X" replay --schedule "$SCHED" -n 32 --dest keep --csv \
                --placement "$OUT/kp_${k}_$b.csv"
        done
    done
    rm -f "$SCHED"
    ;;
*)
    say "unknown PART=${PART}"
    fails=1
    ;;
esac
session_end s17 gpu_session17
