#!/usr/bin/env bash
# gpu_session10.sh - the runs of run 10 (bench/results/h200-2026-11-29-r10): the attention
# kernel's KV split (docs/UP.md "KV split"). PARTS (default "kv san"):
#   kv   the attention GPU tests (KV-split cases included); bench up with each --kv-split of
#        KV_FORCED (default "32 16 64"; 8 slices) forced on the short rows (KV_SEQS, default
#        4096,8192; heads 8,16, peers 2, 4, 8, -n 3), with its local-output run (slice_us) and
#        the piggyback run of the same iterations; then
#        scripts/gpu_up.sh (the default 72-row sweep, the planner's family with the KV splits,
#        pilots on; the forced-courier rows skipped)
#   san  tests/gpu/sanitize.sh on test_attn and bench_up_kv (memcheck, synccheck, racecheck)
# Writes to $OUT: <part>*.csv and <part>*.log. Usage: OUT=dir [PROFILE=file] [PARTS=...]
#   scripts/gpu_session10.sh
set -u
OUT=${OUT:-./out-s10}
X=${BUILD:-build}/xstage
P=${PROFILE:-bench/results/h200-2026-11-29-r8/h200_call3_calib_h200_host_profile.json}
mkdir -p "$OUT"
for part in ${PARTS:-kv san}; do
    case $part in
    kv)
        timeout 300 build/tests/gpu/test_attn >"$OUT/kv_test_attn.log" 2>&1
        echo "kv test_attn rc=$? $(tail -n 1 "$OUT/kv_test_attn.log")"
        grep -E "FAIL" "$OUT/kv_test_attn.log" | head -n 12
        for kb in ${KV_FORCED:-32 16 64}; do
            timeout "${KV_LIMIT:-150}" "$X" bench up --seq "${KV_SEQS:-4096,8192}" --heads 8,16 \
                --peers 2,4,8 --kv-split "$kb" --profile "$P" -n 3 -w 1 \
                --csv "$OUT/kv_forced_$kb.csv" >"$OUT/kv_forced_$kb.log" 2>&1
            echo "kv forced $kb rc=$?"
            grep -E "^# summary" "$OUT/kv_forced_$kb.log" | head -n 4
        done
        OUT="$OUT/up" PROFILE="$P" COURIER_SEQS= timeout "${UP_LIMIT:-300}" bash scripts/gpu_up.sh \
            2>&1 | tail -n 40 ;;
    san)
        OUT="$OUT/san" SAN_BUDGET=${SAN_BUDGET:-200} \
            SAN_CASES=${SAN_CASES:-"test_attn bench_up_kv"} \
            timeout 260 bash tests/gpu/sanitize.sh 2>&1 | tail -n 20 ;;
    *) echo "unknown part $part" ;;
    esac
done
