#!/usr/bin/env bash
# gpu_session16.sh - run 16 (bench/results/h200-2026-11-30-r16): how repeatable validate's
# figures are with the median of 16 repetitions, validate's new default (issue 3; docs/MODEL.md
# "Run 16").
# Run 15 measured the same suite twice in one call seven times: the schedule totals agreed to
# 0.5-1.1 %, but the worst schedule differed by 16-1040 %, always a knee burst (96 producers at
# 0.9·Q(K), 24 at 1.3·Q(K)) whose single runs stall or not at random; the median of 4 fell on
# either side. call 2's two validates with -n 16 agreed (84.3 and 77.8 %, the same mode).
# PART=reps, on one machine:
#   keep (the default state): calibrate; validate three times (16 repetitions, the new default)
#   and twice with -n 4 (the old default), the same profile; then the knee bursts of that suite
#   (0.9·Q(K) K96, 1.3·Q(K) K24 and K96, sized from validate's rows) replayed 32 times each with
#   --placement, for how often a single run stalls;
#   flush: calibrate; validate twice (16); then calibrate --quick (keep) for its time.
# PART=warm: host windows stored to once by the GPU at open (the new default) against
#   --cold-window (zeroed by the CPU only, as before): call 1 found 96 x 26768 B (0.9·Q(K))
#   stalling in 13 of the first 15 runs, while rotation took it over pages the GPU had never
#   stored to, and in none of the 17 after. keep: calibrate; validate (16); the knee bursts
#   (0.5·Q(K) K96, 0.9·Q(K) K96, 1.3·Q(K) K24 and K96) 32 runs each, warm and cold
#   (--placement); validate again, warm and cold; flush: calibrate; validate twice.
# PART=prep, prep2 (calls 3, 4) ran dev builds of win.cu at 6b1070b and c0abd1d (-DXS_WIN_PREP).
# PART=sweep: see the case below.
# PART=final: the defaults in keep and flush (calibrate, validate twice), calibrate --quick, then
# what PART=check runs.
# PART=check: faults.sh and compute-sanitizer (memcheck on calibrate --quick and replay,
# racecheck on replay).
# Writes $OUT/session16.log and s16.tar.gz (profiles, samples, validate tables and rows,
# placements).
# Usage: OUT=dir [COMMIT=sha] [PART=reps|warm|prep|prep2|sweep|short|final|check] scripts/gpu_session16.sh
set -u
OUT=${OUT:-./out-s16}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/session16.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
say "# gpu_session16.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown} part=${PART:-reps}"
log_device

# validate state $1 with its profile, run name $2, further arguments to validate
val() {
    local d=$1 v=$2
    shift 2
    [ -s "$OUT/profile_${d}.json" ] &&
        step "validate ${*:+$* }--dest $d ($v)" 200 "$X" validate "$@" --dest "$d" \
            --profile "$OUT/profile_${d}.json" --rows "$OUT/validate_${d}_${v}_rows.csv" \
            --csv "$OUT/validate_${d}_$v.csv"
}

# the bytes per producer of validate's schedule $2 in rows file $1
knee_bytes() {
    [ -s "$1" ] && awk -F, -v s="$2" '$1 == s { print $5; exit }' "$1"
}

case ${PART:-reps} in
reps)
    step "calibrate --dest keep" 120 "$X" calibrate --target host --dest keep \
        --out "$OUT/profile_keep.json" --samples "$OUT/samples_keep.csv"
    for v in n16a n16b n16c; do val keep "$v"; done
    for v in n4a n4b; do val keep "$v" -n 4; done
    SCHED=$(mktemp /tmp/xs_s16_XXXXXX.csv)
    for kn in "0.9xQ(K) K96" "1.3xQ(K) K24" "1.3xQ(K) K96"; do
        k=${kn##*K}
        b=$(knee_bytes "$OUT/validate_keep_n16a_rows.csv" "isolated $kn")
        [ -n "$b" ] || continue
        printf 'producers,bytes_per_producer,gap_ns\n%s,%s,0\n' "$k" "$b" >"$SCHED"
        step "knee keep ${kn} ($k x $b B), 32 runs" 60 "$X" replay --schedule "$SCHED" -n 32 \
            --dest keep --placement "$OUT/place_keep_${kn%%x*}_${k}_${b}.csv"
    done
    rm -f "$SCHED"
    step "calibrate --dest flush" 120 "$X" calibrate --target host --dest flush \
        --out "$OUT/profile_flush.json" --samples "$OUT/samples_flush.csv"
    for v in n16a n16b; do val flush "$v"; done
    step "calibrate --quick" 60 "$X" calibrate --quick --out "$OUT/profile_quick.json"
    ;;
warm)
    step "calibrate --dest keep" 120 "$X" calibrate --target host --dest keep \
        --out "$OUT/profile_keep.json" --samples "$OUT/samples_keep.csv"
    val keep n16a
    SCHED=$(mktemp /tmp/xs_s16_XXXXXX.csv)
    for kn in "0.5xQ(K) K96" "0.9xQ(K) K96" "1.3xQ(K) K24" "1.3xQ(K) K96"; do
        k=${kn##*K}
        b=$(knee_bytes "$OUT/validate_keep_n16a_rows.csv" "isolated $kn")
        [ -n "$b" ] || continue
        printf 'producers,bytes_per_producer,gap_ns\n%s,%s,0\n' "$k" "$b" >"$SCHED"
        for w in warm cold; do
            F=()
            [ "$w" = cold ] && F=(--cold-window)
            step "knee keep ${kn} ($k x $b B) $w, 32 runs" 60 "$X" replay --schedule "$SCHED" \
                -n 32 --dest keep "${F[@]}" --placement "$OUT/place_keep_${w}_${kn%%x*}_${k}_${b}.csv"
        done
    done
    rm -f "$SCHED"
    val keep n16b
    val keep cold --cold-window
    step "calibrate --dest flush" 120 "$X" calibrate --target host --dest flush \
        --out "$OUT/profile_flush.json" --samples "$OUT/samples_flush.csv"
    for v in n16a n16b; do val flush "$v"; done
    ;;
prep)
    # what makes a rotation's first pass over the window slow (call 2: 96 x 19040 B took 1.2-1.4
    # us until the offsets wrapped, 0.8 us after, in warm and cold windows alike): the window
    # prepared at open by the CPU (zeros, --cold-window), by the GPU (zeros, the default build),
    # and by dev builds (build/exp/xstage_pN, win.cu with -DXS_WIN_PREP=N): 2 the GPU writes
    # 0xa5, 3 the GPU writes 0xa5 and the CPU reads every line, 4 the GPU writes zeros and the
    # CPU reads every line. Each: 32 runs of 96 x 19040 B and 96 x 34288 B, keep and flush
    SCHED=$(mktemp /tmp/xs_s16_XXXXXX.csv)
    for kb in 96,19040 96,34288; do
        printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >"$SCHED"
        for v in p0 p1 p2 p3 p4; do
            B=$X
            F=()
            case $v in
            p0) F=(--cold-window) ;;
            p1) ;;
            *) B=build/exp/xstage_$v ;;
            esac
            for d in keep flush; do
                step "prep $v $d ${kb/,/ x } B, 32 runs" 60 "$B" replay --schedule "$SCHED" -n 32 \
                    --dest "$d" "${F[@]}" --placement "$OUT/place_${v}_${d}_${kb/,/_}.csv"
            done
        done
    done
    rm -f "$SCHED"
    step "calibrate --dest keep (p3)" 120 build/exp/xstage_p3 calibrate --target host --dest keep \
        --out "$OUT/profile_keep.json" --samples "$OUT/samples_keep.csv"
    for v in p1 p3; do
        B=$X
        [ "$v" = p3 ] && B=build/exp/xstage_p3
        for r in a b; do
            [ -s "$OUT/profile_keep.json" ] &&
                step "validate keep $v $r" 200 "$B" validate --dest keep \
                    --profile "$OUT/profile_keep.json" --rows "$OUT/validate_keep_${v}$r""_rows.csv" \
                    --csv "$OUT/validate_keep_${v}$r.csv"
        done
    done
    ;;
prep2)
    # call 4: is the slow first pass about the pages' history or about time? 96 x 19040 B, 48
    # runs, keep: windows of 16, 64 and 256 MiB (wrap after about 8, 35 and 140 places) and
    # fixed offsets; and the dev build xstage_p5 (the GPU writes every 16-byte unit with its own
    # content, 16-byte stores from 132 x 128 threads) in keep and flush
    SCHED=$(mktemp /tmp/xs_s16_XXXXXX.csv)
    printf 'producers,bytes_per_producer,gap_ns\n96,19040,0\n' >"$SCHED"
    for win in 16M 64M 256M; do
        step "prep2 p1 keep window $win" 60 "$X" replay --schedule "$SCHED" -n 48 --dest keep \
            --window "$win" --placement "$OUT/place2_p1_keep_w$win.csv"
    done
    step "prep2 p1 keep fixed offsets" 60 "$X" replay --schedule "$SCHED" -n 48 --dest keep \
        --fixed-offsets --placement "$OUT/place2_p1_keep_fixed.csv"
    for d in keep flush; do
        step "prep2 p5 $d window 64M" 60 build/exp/xstage_p5 replay --schedule "$SCHED" -n 48 \
            --dest "$d" --placement "$OUT/place2_p5_${d}_w64M.csv"
    done
    rm -f "$SCHED"
    ;;
sweep)
    # call 5: replayer_open now runs the replay kernel once over the whole host window (verified,
    # not recorded) unless --cold-window. 48 runs of 96 x 19040 B and 96 x 34288 B, keep and
    # flush, with and without that pass; then the defaults: calibrate and validate (16) twice
    # in keep, the same in flush
    SCHED=$(mktemp /tmp/xs_s16_XXXXXX.csv)
    for kb in 96,19040 96,34288; do
        printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >"$SCHED"
        for d in keep flush; do
            for w in sweep cold; do
                F=()
                [ "$w" = cold ] && F=(--cold-window)
                step "$w $d ${kb/,/ x } B, 48 runs" 60 "$X" replay --schedule "$SCHED" -n 48 \
                    --dest "$d" "${F[@]}" --placement "$OUT/place_${w}_${d}_${kb/,/_}.csv"
            done
        done
    done
    rm -f "$SCHED"
    for d in keep flush; do
        step "calibrate --dest $d" 120 "$X" calibrate --target host --dest "$d" \
            --out "$OUT/profile_${d}.json" --samples "$OUT/samples_${d}.csv"
        for v in n16a n16b; do val "$d" "$v"; done
    done
    ;;
short)
    # call 13: the defaults, fewer steps (the session's last device seconds): keep calibrate and
    # validate twice, flush calibrate and validate once
    for d in keep flush; do
        step "calibrate --dest $d" 120 "$X" calibrate --target host --dest "$d" \
            --out "$OUT/profile_${d}.json" --samples "$OUT/samples_${d}.csv"
        val "$d" n16a
        [ "$d" = keep ] && val "$d" n16b
    done
    ;;
final)
    # call 7: the final binary as the defaults run it (16 repetitions, the window's first pass),
    # calibrate and validate twice in keep and in flush, calibrate --quick; then the checks
    for d in keep flush; do
        step "calibrate --dest $d" 120 "$X" calibrate --target host --dest "$d" \
            --out "$OUT/profile_${d}.json" --samples "$OUT/samples_${d}.csv"
        for v in n16a n16b; do val "$d" "$v"; done
    done
    step "calibrate --quick" 60 "$X" calibrate --quick --out "$OUT/profile_quick.json"
    ;&
check)
    replay_checks
    ;;
*)
    say "unknown PART=${PART}"
    fails=1
    ;;
esac
session_end s16 gpu_session16
