#!/usr/bin/env bash
# gpu_session19.sh - run 19 (bench/results/h200-2026-11-30-r19): does the fit place the knee where
# the chip has it? (issue 3; docs/MODEL.md "Run 19"). The fit's score is nearly flat in Q over
# the knee's bracket, so on some chips it settles low (run 19 call 1: Q 0.81 MB, the burst
# validate calls 1.3·Q(K) at 24 producers then sits in the chip's transition and runs 25-41 %
# faster than predicted; fc3ca6e's fit of the same samples, Q 0.92 MB, validated within 10.3 %).
# One calibration per state, its samples refitted by variants of the fit, and every variant
# validated with the suite its own profile sizes, in turns, on the same chip:
#   fit  the profile calibrate writes (this binary);
#   rf   the samples refitted by $KW/refit without a knee weight: the same code as fit, through
#        the samples file (times rounded to 0.1 ns), to see what the rounding alone moves;
#   kw2, kw4  refitted by $KW/refit with KNEE_W=2 or 4: the largest unstalled and the smallest
#        stalled capacity burst of each K weigh 2 or 4 times in the score
#        (dev/cal_offline/run19/variants.patch).
# All variants run on this binary's model (only the fit differs).
# PART=dense: two calibrations per state on the same chip, the default capacity sweep (quarter
# octaves from 1 to 4 MiB: d4) and eighth octaves (d8, --volumes $DENSE8), and d8's samples
# refitted with KNEE_W=2 (d8kw2); each validated with its own suite, in turns.
# Usage: OUT=dir [COMMIT=sha] [KW=build/kw] [PART=kw|dense] [STATES="keep flush"]
#        [VARIANTS=...] [REPS_KEEP="a b"] scripts/gpu_session19.sh
set -u
OUT=${OUT:-./out-s19}
X=${BUILD:-build}/xstage
KW=${KW:-build/kw}
mkdir -p "$OUT"
LOG="$OUT/session19.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
say "# gpu_session19.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown} part=${PART:-kw}"
log_device
DENSE8=512K,1024K,1117K,1218K,1328K,1448K,1579K,1722K,1878K,2048K,2233K,2435K,2656K,2896K,3158K,3444K,3756K,4096K,5793K,8192K,16384K

for d in ${STATES:-keep flush}; do
    case ${PART:-kw} in
    kw)
        variants=${VARIANTS:-fit rf kw2 kw4}
        step "calibrate --dest $d" 120 "$X" calibrate --target host --dest "$d" \
            --out "$OUT/profile_${d}_fit.json" --samples "$OUT/samples_${d}.csv"
        if [ -s "$OUT/samples_${d}.csv" ]; then
            step "refit rf ($d)" 120 "$KW/refit" "$OUT/samples_${d}.csv" "$OUT/profile_${d}_rf.json"
            for w in 2 4; do
                step "refit kw$w ($d)" 120 env KNEE_W=$w "$KW/refit" "$OUT/samples_${d}.csv" \
                    "$OUT/profile_${d}_kw$w.json"
            done
        fi
        ;;
    dense)
        variants=${VARIANTS:-d4 d8 d8kw2}
        step "calibrate --dest $d (d4)" 120 "$X" calibrate --target host --dest "$d" \
            --out "$OUT/profile_${d}_d4.json" --samples "$OUT/samples_${d}_d4.csv"
        step "calibrate --dest $d (d8)" 180 "$X" calibrate --target host --dest "$d" \
            --volumes "$DENSE8" --out "$OUT/profile_${d}_d8.json" --samples "$OUT/samples_${d}_d8.csv"
        [ -s "$OUT/samples_${d}_d8.csv" ] &&
            step "refit d8kw2 ($d)" 120 env KNEE_W=2 "$KW/refit" "$OUT/samples_${d}_d8.csv" \
                "$OUT/profile_${d}_d8kw2.json"
        ;;
    *)
        say "unknown PART=${PART}"
        fails=1
        variants=
        ;;
    esac
    reps=${REPS_KEEP:-a b}
    [ "$d" = flush ] && reps="a"
    for n in $reps; do
        for v in $variants; do
            prof="$OUT/profile_${d}_$v.json"
            if [ ! -s "$prof" ]; then
                results+=("FAIL  validate $d $v $n (no profile)")
                fails=$((fails + 1))
                continue
            fi
            step "validate --dest $d ($v $n)" 200 "$X" validate --dest "$d" --profile "$prof" \
                --rows "$OUT/validate_${d}_${v}_${n}_rows.csv" --csv "$OUT/validate_${d}_${v}_$n.csv"
        done
    done
done
session_end s19 gpu_session19
