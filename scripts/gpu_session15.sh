#!/usr/bin/env bash
# gpu_session15.sh - run 15 (bench/results/h200-2026-11-30-r15): a capacity sweep dense at the
# knee (issue 3; docs/MODEL.md "Run 15").
# validate's maximum comes from the isolated bursts just above the knee (1.3 and 2·Q(K) of 24
# and 96 producers): their time is (V - Q)/R, so a 5 % error in Q(K) is 17 % of a 1.3·Q burst.
# Refitting recorded validate rows showed the model's form able to do better than the fit's own
# choice of Q (flush: 7-16 % with Q 5-13 % above the fitted one), and calibrate sampled each K's
# knee at only three volumes (1, 2, 4 MiB). `calibrate --volumes` now takes the sweep's volumes;
# the default is 512K, 1M to 4M in quarter octaves, 5.66M, 8M, 16M.
# PART=dense: in each destination state, on one machine: calibrate with the old sweep
# (--volumes 512K,1M,2M,4M,8M,16M) and with the new default; validate with each profile (--rows),
# and the new one's validate once more (the same schedules: how far two measurements of the
# suite differ). The profiles predict each other's rows offline (scripts/validate_offline.py).
# PART=confirm: calibrate (the dense default) and validate -n 16 twice in flush, once in keep;
# calibrate --quick (flush) for its time.
# PART=rotate: rotating destination offsets against --fixed-offsets (knee bursts; calibrate and
# validate in both states); faults.sh and memcheck on the new replay.
# PART=final: calibrate and validate (twice) as the defaults run them (keep, rotating
# offsets, the dense sweep), then flush once; calibrate --quick for its time.
# PART=check: faults.sh and compute-sanitizer (memcheck on calibrate --quick and replay,
# racecheck on replay) on the final binary.
# Writes $OUT/session15.log and s15.tar.gz (profiles, samples, validate tables and rows).
# Usage: OUT=dir [COMMIT=sha] [PART=dense|confirm|rotate|final|check] scripts/gpu_session15.sh
set -u
OUT=${OUT:-./out-s15}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/session15.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
say "# gpu_session15.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown} part=${PART:-dense}"
log_device

# calibrate in each state of $1 (in order), then validate with that profile: twice in state $2,
# once in the others; further arguments go to validate (-n 16)
cal_val() {
    local states=$1 twice=$2 d v
    shift 2
    for d in $states; do
        step "calibrate --dest $d" 120 "$X" calibrate --target host --dest "$d" \
            --out "$OUT/profile_${d}.json" --samples "$OUT/samples_${d}.csv"
        for v in 1 2; do
            [ "$d" != "$twice" ] && [ "$v" = 2 ] && continue
            [ -s "$OUT/profile_${d}.json" ] &&
                step "validate ${*:+$* }--dest $d ($v)" 200 "$X" validate "$@" --dest "$d" \
                    --profile "$OUT/profile_${d}.json" --rows "$OUT/validate_${d}_${v}_rows.csv" \
                    --csv "$OUT/validate_${d}_$v.csv"
        done
    done
}

case ${PART:-dense} in
dense)
    for d in flush keep; do
        step "calibrate --dest $d, coarse sweep" 120 "$X" calibrate --target host --dest "$d" \
            --volumes 512K,1M,2M,4M,8M,16M --out "$OUT/profile_${d}_coarse.json" \
            --samples "$OUT/samples_${d}_coarse.csv"
        step "calibrate --dest $d, dense sweep (default)" 120 "$X" calibrate --target host \
            --dest "$d" --out "$OUT/profile_${d}_dense.json" --samples "$OUT/samples_${d}_dense.csv"
        for v in dense coarse dense2; do
            pf="$OUT/profile_${d}_${v%2}.json"
            [ -s "$pf" ] &&
                step "validate --dest $d, $v profile" 150 "$X" validate --dest "$d" \
                    --profile "$pf" --rows "$OUT/validate_${d}_${v}_rows.csv" \
                    --csv "$OUT/validate_${d}_$v.csv"
        done
    done
    ;;
confirm)
    # call 2: the dense default once more, validate with 16 repetitions (the median of 4 put the
    # bistable 0.9·Q(K) K96 row in either mode in call 1), twice in flush; keep once; --quick
    cal_val "flush keep" flush -n 16
    step "calibrate --quick --dest flush" 60 "$X" calibrate --quick --target host --dest flush \
        --out "$OUT/profile_quick.json"
    ;;
rotate)
    # call 4: rotating destination offsets (the new default) against --fixed-offsets: knee
    # bursts side by side (16 runs each, --placement records each run's offset), then calibrate
    # and validate with rotation in each state, and the same profile validated with fixed
    # offsets; then faults.sh (rotating_offsets) and compute-sanitizer memcheck on replay
    SCHED=$(mktemp /tmp/xs_s15_XXXXXX.csv)
    for d in flush keep; do
        for kb in 24,65584 24,100896 16,131072 96,57472; do
            printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >"$SCHED"
            for o in rot fixed; do
                F=()
                [ "$o" = fixed ] && F=(--fixed-offsets)
                step "knee $d $o K${kb%,*} B${kb#*,}" 60 "$X" replay --schedule "$SCHED" -n 16 \
                    --dest "$d" "${F[@]}" --placement "$OUT/place_${d}_${o}_${kb%,*}_${kb#*,}.csv"
            done
        done
        step "calibrate --dest $d (rotating)" 120 "$X" calibrate --target host --dest "$d" \
            --out "$OUT/profile_${d}.json" --samples "$OUT/samples_${d}.csv"
        if [ -s "$OUT/profile_${d}.json" ]; then
            step "validate --dest $d (rotating)" 150 "$X" validate --dest "$d" \
                --profile "$OUT/profile_${d}.json" --rows "$OUT/validate_${d}_rot_rows.csv" \
                --csv "$OUT/validate_${d}_rot.csv"
            step "validate --dest $d --fixed-offsets" 150 "$X" validate --dest "$d" \
                --fixed-offsets --profile "$OUT/profile_${d}.json" \
                --rows "$OUT/validate_${d}_fixed_rows.csv" --csv "$OUT/validate_${d}_fixed.csv"
        fi
    done
    rm -f "$SCHED"
    step faults 400 env OUT="$OUT/faults" bash tests/gpu/faults.sh
    tail -n 30 "$OUT/faults/faults.log" >>"$LOG"
    printf 'producers,bytes_per_producer,gap_ns\n4,1048576,0\n' >"$OUT/four.sched"
    step "sanitize memcheck replay (rotating)" 120 compute-sanitizer --tool memcheck \
        --error-exitcode 3 "$X" replay --schedule "$OUT/four.sched" -n 4
    rm -f "$OUT/four.sched"
    ;;
final)
    # calls 5 and 6: the default commands (keep, rotating offsets, dense sweep) on a fresh
    # machine: calibrate, validate twice with its profile; then the same in flush once
    cal_val "keep flush" keep
    step "calibrate --quick" 60 "$X" calibrate --quick --out "$OUT/profile_quick.json"
    ;;
check)
    # call 7: the final binary: faults.sh, and compute-sanitizer memcheck on calibrate --quick and
    # replay (rotating offsets), racecheck on replay
    replay_checks
    ;;
*)
    say "unknown PART=${PART}"
    fails=1
    ;;
esac
session_end s15 gpu_session15
