#!/usr/bin/env bash
# gpu_session7.sh - the experiments of the 2026-11-29 fourth session that are not a standing area
# of gpu_all.sh (bench/results/h200-2026-11-29-r7/README.md). From an already built tree.
#   race  racecheck of test_tp --tiny --sm90 and of the variants build/tests/gpu/test_tp<suffix>
#         found there (RACE_VARIANTS). The store-warp hand-over variants this part was written
#         for (built with -D macros of cuda/tp_sm90.cuh) were removed with the store-warp mode
#         (docs/ROBUSTNESS.md); a missing variant is reported and skipped
#   split bench up on one GPU (virtual peers over PCIe), the default sweep at -n 3 with the
#         planner's choice, then with every tile's stores forced into 8, 4 and 2 slices: the
#         kernel's own cost of a split (slice_us) against what it hides (docs/UP.md)
# Usage: OUT=dir [PARTS="race split"] [PROFILE=file] scripts/gpu_session7.sh
set -u
OUT=${OUT:-./out-s7}
PARTS=${PARTS:-race split}
mkdir -p "$OUT"
S="$OUT/session7.log"
: >"$S"
G=build/tests/gpu
for p in $PARTS; do
    case $p in
    race)
        # RACE_VARIANTS: suffixes of build/tests/gpu/test_tp* (calls 4 and 5 ran "" _sw1 _sw2
        # and "" _bf1 _bf1sw1: store-warp hand-over forms, removed with the mode)
        for v in ${RACE_VARIANTS-'""'}; do
            [ "$v" = '""' ] && v=""
            [ -x "$G/test_tp$v" ] || { echo "race: $G/test_tp$v missing" | tee -a "$S"; continue; }
            for tool in ${RACE_TOOLS:-racecheck}; do
                timeout 120 ${SANITIZER:-/usr/local/cuda/bin/compute-sanitizer} --tool "$tool" \
                    --error-exitcode 3 "$G/test_tp$v" --tiny --sm90 >"$OUT/${tool}$v.log" 2>&1
                rc=$?
                echo "$tool test_tp$v --tiny --sm90: rc=$rc $(grep -c 'Race reported\|Barrier error' "$OUT/${tool}$v.log") finding lines; $(tail -n 3 "$OUT/${tool}$v.log" | grep -m1 'passed\|SUMMARY')" | tee -a "$S"
            done
        done ;;
    split)
        for sp in ${SPLITS:--1 8 4 2}; do
            timeout 200 build/xstage bench up --split "$sp" -n 3 -w 1 ${PROFILE:+--profile "$PROFILE"} \
                --csv "$OUT/up_split$sp.csv" >"$OUT/up_split$sp.log" 2>&1
            echo "bench up --split $sp: rc=$? $(grep -c '^ *[0-9]' "$OUT/up_split$sp.log") rows; $(grep 'hidden >= 90' "$OUT/up_split$sp.log" | head -n 2 | tr '\n' ' ')" | tee -a "$S"
        done ;;
    *) echo "unknown part $p" | tee -a "$S" ;;
    esac
done
