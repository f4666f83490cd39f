#!/usr/bin/env bash
# gpu_session14.sh - run 14 (bench/results/h200-2026-11-29-r14): which producers straggle in the
# knee bursts, and where they run (issue 3; docs/MODEL.md "The knee's two modes").
# validate's maximum is one family of isolated bursts just above the knee: 24 producers at 1.3
# and 2·Q(K) with the destination lines kept in the CPU's caches, 96 producers with them flushed.
# Their median producer finishes unstalled (0.7 us) while the last one ends 10-80 us later, and
# consecutive runs alternate between two totals. The block scheduler places the producers on the
# same SMs in every run; which GPC those SMs are in was never looked at.
# PART=gpc (call 1): the GPC of every SM (thread-block clusters); then each knee burst 16 times
#   in both destination states with every producer's SM and the end of its issue window
#   (replay --placement): place_<dest>_<K>_<B>.csv. Bursts: the validate rows at 1.3, 2 and
#   4·Q(K) of 24 and 96 producers, and 2 MiB from 16, 32, 64 and 132 producers (calibration's
#   first stalled volume).
# PART=weights (call 2): the same knee bursts, then long bursts from 16-132 producers (where
#   every SM's share of the link shows in when it finishes), both states; then calibrate and
#   validate (--rows) in each state, on this machine, for the model's per-SM shares offline.
# PART=window (call 3): validate measured 24 x 102176 B (2·Q(K), keep) at 60.0 us in call 2,
#   replay alone 24 x 100896 B at 37.6 us. validate's window is 128 MiB, calibrate's 256 MiB,
#   replay's the schedule's size: the same bursts with windows of the schedule's size, 16, 128
#   and 256 MiB, both states (window_<dest>_<K>_<B>_<w>.log via the session log).
# PART=order (call 4): in call 2 the total of 24 x 65584 B (flush) followed which of two orders
#   the block scheduler gave CTAs 0-7 on SMs 124-131 (6.5-8.6 us in one, 8.3-12.6 in the other,
#   alternating launch by launch). --order sm makes producer p the CTA on the p-th lowest SM, so
#   that the same SM stores the same region in every run: the knee bursts with both orders side
#   by side (place_<dest>_<order>_<K>_<B>.csv), then calibrate and validate with --order sm in
#   both states. Ran at commit 8206b02; --order was removed after it (README of r14: no effect
#   on that machine, whose 24-producer burst did not stall at all, and the rendezvous of the
#   CTAs' SMs put one producer a timer tick late in most runs).
# PART=sms (call 5): is the X-Stage's capacity one pool, or one per GPC? The same bursts from
#   producers on chosen SMs (replay --sms): 16 producers spread two per GPC, all in one GPC, in
#   two GPCs, in the TPC pairs of SMs 0-15, and on the block scheduler's own choice (SMs 124-131
#   and 0-14 even); 8 producers in one GPC or one per GPC; 4 likewise; 1, 2 and 4 MiB in all
#   (sms_<set>_<K>_<B>.csv). GPCs as call 1's clusters showed them.
# PART=sms2 (call 6): which unit holds the capacity? 16 producers in GPC 0 (with SMs 124-131), in
#   GPC 0's lower SMs or in SMs 124-131 only (8), in GPC 4, in GPC 6, four in each GPC of one
#   suspected half (GPCs 1, 2, 3, 7 / 0, 4, 5, 6) or two GPCs of each; 1.5, 2 and 4 MiB.
# PART=sms3 (call 7): capacity against where the producers are: 2-16 SMs of GPC 1; 1, 2 or 4 SMs
#   of each GPC of half A (1, 2, 3, 7); 1, 2, 4 or 8 SMs of every GPC; 1, 1.5, 2, 3, 4 MiB each.
# PART=check (calls 8 and 9): tests/gpu/faults.sh (with bad_sm and chosen_sms), then compute-sanitizer
#   memcheck and racecheck on replay --sms --placement (the cluster launches of the GPC map, the
#   kernel with chosen SMs).
# PART=spread (call 10): the block scheduler puts small grids on SMs 124-131 first and then one
#   SM per TPC, so 24 producers sit 16 in one half of the chip and 8 in the other, and the knee
#   follows the CTA order in GPC 0. --sms spread puts producer p on the p-th of the even SMs then
#   the odd ones. The knee bursts with both placements side by side (16 runs, both states), then
#   calibrate + validate in each state with each placement, on one machine.
# PART=table (call 11): where the block scheduler puts the CTAs of every grid size 1-132 (the
#   input a placement-aware model needs): for each G, 4 launches of G producers x 4 KiB with
#   --placement, into placement_table.csv (G, run, SM of CTA 0..G-1).
# Writes $OUT/session14.log (everything) and the CSVs; with PART=weights|sms|sms2|sms3|spread all of
# it in s14.tar.gz.
# Usage: OUT=dir [PROFILE=file] [COMMIT=sha]
#        [PART=gpc|weights|window|sms|sms2|sms3|check|spread|table] scripts/gpu_session14.sh
set -u
OUT=${OUT:-./out-s14}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/session14.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
pick_profile "${PROFILE:-}"
say "# gpu_session14.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown} part=${PART:-gpc}"
say "$PROFILE_LINE"
log_device

SCHED=$(mktemp /tmp/xs_s14_XXXXXX.csv)
case ${PART:-gpc} in
gpc | weights)
    LONG=""
    [ "${PART}" = weights ] && LONG="132,131072 132,262144 96,262144 64,262144 32,262144 16,262144"
    for d in flush keep; do
        for kb in 24,65584 24,100896 24,201808 96,37360 96,57472 96,114960 \
            16,131072 32,65536 64,32768 132,15888 $LONG; do
            printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >"$SCHED"
            step "knee $d K${kb%,*} B${kb#*,}" 60 "$X" replay --schedule "$SCHED" -n 16 \
                --dest "$d" "${PROFILE_ARGS[@]}" \
                --placement "$OUT/place_${d}_${kb%,*}_${kb#*,}.csv"
        done
    done
    if [ "${PART}" = weights ]; then
        for d in keep flush; do
            step "calibrate --dest $d" 120 "$X" calibrate --target host --dest "$d" \
                --out "$OUT/profile_$d.json" --samples "$OUT/samples_$d.csv"
            [ -s "$OUT/profile_$d.json" ] &&
                step "validate --dest $d, its own calibration" 120 "$X" validate --dest "$d" \
                    --profile "$OUT/profile_$d.json" --rows "$OUT/validate_${d}_rows.csv" \
                    --csv "$OUT/validate_$d.csv"
        done
    fi
    ;;
window)
    for d in keep flush; do
        for kb in 24,102176 24,66400 16,131072 96,57792; do
            printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >"$SCHED"
            for w in auto 16M 128M 256M; do
                W=()
                [ "$w" != auto ] && W=(--window "$w")
                step "window $d K${kb%,*} B${kb#*,} w=$w" 60 "$X" replay --schedule "$SCHED" \
                    -n 12 --dest "$d" "${PROFILE_ARGS[@]}" "${W[@]}"
            done
        done
    done
    ;;
sms | sms2 | sms3)
    # name:SMs (groups of call 1: SM s < 64 in GPC (s / 2) % 8, SMs 64-119 in 1 + ((s - 64) / 2) % 7)
    SETS="spread16:0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30 gpc1_16:2,3,18,19,34,35,50,51,64,65,78,79,92,93,106,107
          gpc12_16:2,3,18,19,34,35,50,51,4,5,20,21,36,37,52,53 pairs16:0-15
          sched16:124-131,0,2,4,6,8,10,12,14 gpc1_8:2,3,18,19,34,35,50,51
          spread8:0,2,4,6,8,10,12,14 gpc1_4:2,3,18,19 spread4:0,2,4,6"
    MIBS="1 2 4"
    if [ "$PART" = sms2 ]; then
        SETS="gpc0_16:0,1,16,17,32,33,48,49,124-131 gpc0lo_8:0,1,16,17,32,33,48,49 hi_8:124-131
              gpc4_16:8,9,24,25,40,41,56,57,70,71,84,85,98,99,112,113
              gpc6_16:12,13,28,29,44,45,60,61,74,75,88,89,102,103,116,117
              halfA16:2,3,18,19,4,5,20,21,6,7,22,23,14,15,30,31
              halfB16:0,1,16,17,8,9,24,25,10,11,26,27,12,13,28,29
              mixAB16:2,3,18,19,8,9,24,25,4,5,20,21,10,11,26,27"
        MIBS="1.5 2 4"
    fi
    if [ "$PART" = sms3 ]; then
        SETS="g1x2_2:2,3 g1x4_4:2,3,18,19 g1x8_8:2,3,18,19,34,35,50,51
              g1x16_16:2,3,18,19,34,35,50,51,64,65,78,79,92,93,106,107 Ax1_4:2,4,6,14
              Ax2_8:2,3,4,5,6,7,14,15 Ax4_16:2,3,18,19,4,5,20,21,6,7,22,23,14,15,30,31
              ABx1_8:0,2,4,6,8,10,12,14 ABx2_16:0-15
              ABx4_32:0,1,16,17,2,3,18,19,4,5,20,21,6,7,22,23,8,9,24,25,10,11,26,27,12,13,28,29,14,15,30,31
              ABx8_64:0-63"
        MIBS="1 1.5 2 3 4"
    fi
    for set in $SETS; do
        name=${set%%:*}
        sms=${set#*:}
        k=${name##*_}
        k=${k//[!0-9]/} # the producer count ends the name
        for mib in $MIBS; do
            b=$(awk -v m="$mib" -v k="$k" 'BEGIN { printf "%d", int(m * 1048576 / k / 16) * 16 }')
            printf 'producers,bytes_per_producer,gap_ns\n%s,%s,0\n' "$k" "$b" >"$SCHED"
            step "sms $name K$k B$b" 60 "$X" replay --schedule "$SCHED" -n 8 --dest flush \
                --sms "$sms" "${PROFILE_ARGS[@]}" --placement "$OUT/sms_${name}_${k}_$b.csv"
        done
    done
    ;;
spread)
    for d in flush keep; do
        for kb in 24,65584 24,100896 16,131072 96,37360 96,57472; do
            printf 'producers,bytes_per_producer,gap_ns\n%s,0\n' "$kb" >"$SCHED"
            for o in spread sched; do
                S=()
                [ "$o" = spread ] && S=(--sms spread)
                step "place $o $d K${kb%,*} B${kb#*,}" 60 "$X" replay --schedule "$SCHED" -n 16 \
                    --dest "$d" "${S[@]}" "${PROFILE_ARGS[@]}" \
                    --placement "$OUT/place_${d}_${o}_${kb%,*}_${kb#*,}.csv"
            done
        done
    done
    for d in flush keep; do
        for o in spread sched; do
            S=()
            [ "$o" = spread ] && S=(--sms spread)
            step "calibrate --dest $d ($o)" 120 "$X" calibrate --target host --dest "$d" "${S[@]}" \
                --out "$OUT/profile_${d}_$o.json" --samples "$OUT/samples_${d}_$o.csv"
            [ -s "$OUT/profile_${d}_$o.json" ] &&
                step "validate --dest $d ($o), its own calibration" 150 "$X" validate --dest "$d" \
                    "${S[@]}" --profile "$OUT/profile_${d}_$o.json" \
                    --rows "$OUT/validate_${d}_${o}_rows.csv" --csv "$OUT/validate_${d}_$o.csv"
        done
    done
    ;;
table)
    T="$OUT/placement_table.csv"
    echo "grid,run,smids" >"$T"
    for g in $(seq 1 132); do
        printf 'producers,bytes_per_producer,gap_ns\n%s,4096,0\n' "$g" >"$SCHED"
        if "$X" replay --schedule "$SCHED" -n 4 --placement "$OUT/p.csv" >>"$LOG" 2>&1; then
            grep '^[0-9]' "$OUT/p.csv" | awk -F, -v g="$g" '{print g "," $1 "," $4}' >>"$T"
        else
            say "FAIL placement of grid $g"
            fails=$((fails + 1))
        fi
    done
    head -n 1 "$OUT/p.csv" >"$OUT/sm_groups.txt"
    rm -f "$OUT/p.csv"
    say "placement table: $(($(wc -l <"$T") - 1)) launches"
    ;;
check)
    step faults 400 env OUT="$OUT/faults" bash tests/gpu/faults.sh
    tail -n 30 "$OUT/faults/faults.log" >>"$LOG"
    printf 'producers,bytes_per_producer,gap_ns\n4,1048576,0\n' >"$SCHED"
    for tool in memcheck racecheck; do
        step "sanitize $tool replay --sms" 120 compute-sanitizer --tool "$tool" --error-exitcode 3 \
            "$X" replay --schedule "$SCHED" --sms 5,7,9,11 -n 2 --placement "$OUT/san_$tool.csv"
    done
    ;;
*)
    say "unknown PART=${PART}"
    fails=1
    ;;
esac
rm -f "$SCHED"
case ${PART:-gpc} in weights | sms | sms2 | sms3 | spread)
    (cd "$OUT" && tar czf s14.tar.gz --remove-files ./*.csv ./*.json 2>/dev/null) ;;
esac
echo
echo "== gpu_session14 summary"
printf '%s\n' "${results[@]}"
grep -E "^=== knee|^# run totals" "$LOG" | head -60
exit $fails
