#!/usr/bin/env bash
# gpu_session8.sh - the courier runs of run 8 (bench/results/h200-2026-11-29-r8): fused kernels
# whose remote stores leave from a few courier CTAs paced under R instead of from every CTA
# (docs/MODEL.md "Run 8": the probe that motivated them). PARTS (default "tpc"):
#   tpc  the TP GPU tests (courier cases included), bench tp --engine sm90: a quick gemm_rs smoke
#        with 4 couriers, then the default sweep
#        with 0, 4 and 8 couriers side by side in the same iterations (every row verified), the
#        couriers at TPC_PACE x R (0.98), TPC_COURIERS (4,6,8); TPC_NOTEST=1 skips the test
#   upc  the attention GPU tests (courier cases included), then scripts/gpu_up.sh (the default
#        sweep with couriers in the planner's family, and the short rows with 8 couriers forced)
#   tpp  gemm_rs only, 8 and 16 couriers next to the default kernel, paced at 0.98 and at 1.0 x R
#        (two runs): how close paced couriers come to the drain bound
#   c3f  calibrate and validate (4 repetitions) with the destination lines flushed after each
#        check (--dest flush), against call 3's default state (keep)
#   epx  bench ep -n 3 with the couriers at 0.95 R (courier column: auto's best candidate forced)
#   san  tests/gpu/sanitize.sh on the cases with couriers (SAN_CASES default: test_attn test_moe
#        test_tp90 bench_tp90 bench_ep bench_up; memcheck, synccheck, racecheck; SAN_BUDGET 240 s)
#   epc  the MoE GPU tests (--quick, courier cases included), then scripts/gpu_ep.sh (the default
#        sweep; auto may choose couriers, and a forced courier column runs in the same rounds)
#   tps  split first steps (run 9): test_tp --sm90 (split cases: fused, local, a missing part),
#        then bench tp --engine sm90 --op gemm_rs with TPS_COURIERS (4,6,8), the planner piloting the
#        front order whole and split in 2, 4 and 8 parts (--split 2,4,8), at each pace of TPS_PACE
#        (default 0.98)
# Writes to $OUT: <part>*.csv and <part>*.log. Usage: OUT=dir [PROFILE=file] [PARTS=...]
#   scripts/gpu_session8.sh
set -u
OUT=${OUT:-./out-s8}
X=${BUILD:-build}/xstage
P=${PROFILE:-bench/results/h200-2026-11-29-r8/h200_call3_calib_h200_host_profile.json}
mkdir -p "$OUT"
for part in ${PARTS:-tpc}; do
    case $part in
    tpc)
        if [ -z "${TPC_NOTEST:-}" ]; then
            timeout 300 build/tests/gpu/test_tp >"$OUT/tpc_test_tp.log" 2>&1
            echo "tpc test_tp rc=$? $(tail -n 1 "$OUT/tpc_test_tp.log")"
        fi
        timeout 120 "$X" bench tp --engine sm90 --couriers 4 --op gemm_rs --quick --profile "$P" \
            --csv "$OUT/tpc_quick.csv" >"$OUT/tpc_quick.log" 2>&1
        echo "tpc quick rc=$?"
        tail -n 25 "$OUT/tpc_quick.log"
        timeout "${TPC_LIMIT:-330}" "$X" bench tp --engine sm90 --couriers "${TPC_COURIERS:-4,6,8}" \
            --courier-pace "${TPC_PACE:-0.98}" \
            --max-time "${TPC_MAX_TIME:-270}" --profile "$P" -n 5 -w 1 --csv "$OUT/tpc.csv" \
            >"$OUT/tpc.log" 2>&1
        echo "tpc sweep rc=$?"
        grep -E "^# summary|^# couriers" "$OUT/tpc.log" | tail -n 30 ;;
    upc)
        timeout 300 build/tests/gpu/test_attn >"$OUT/upc_test_attn.log" 2>&1
        echo "upc test_attn rc=$? $(tail -n 1 "$OUT/upc_test_attn.log")"
        OUT="$OUT/upc" PROFILE="$P" timeout "${UPC_LIMIT:-240}" bash scripts/gpu_up.sh 2>&1 |
            tail -n 60 ;;
    epc)
        timeout 300 build/tests/gpu/test_moe --quick >"$OUT/epc_test_moe.log" 2>&1
        echo "epc test_moe rc=$? $(tail -n 1 "$OUT/epc_test_moe.log")"
        OUT="$OUT/epc" PROFILE="$P" timeout "${EPC_LIMIT:-300}" bash scripts/gpu_ep.sh build 2>&1 |
            tail -n 70 ;;
    tps)
        timeout "${TPS_TEST_LIMIT:-240}" build/tests/gpu/test_tp --sm90 >"$OUT/tps_test_tp.log" 2>&1
        echo "tps test_tp --sm90 rc=$? $(tail -n 1 "$OUT/tps_test_tp.log")"
        grep -E "split|FAIL" "$OUT/tps_test_tp.log" | head -n 24
        for f in ${TPS_PACE:-0.98}; do
            timeout "${TPS_LIMIT:-200}" "$X" bench tp --engine sm90 --op gemm_rs \
                --couriers "${TPS_COURIERS:-4,6,8}" --split 2,4,8 --courier-pace "$f" \
                --max-time "${TPS_MAX_TIME:-150}" --profile "$P" -n 5 -w 1 \
                --csv "$OUT/tps_$f.csv" >"$OUT/tps_$f.log" 2>&1
            echo "tps bench pace $f rc=$?"
            grep -E "^# summary: (gemm_rs shaped within|gemm_rs unfused|planner)" "$OUT/tps_$f.log"
        done ;;
    tpp)
        for f in 0.98 1.0; do
            timeout 150 "$X" bench tp --engine sm90 --op gemm_rs --couriers 8,16 --courier-pace "$f" \
                --max-time 110 --profile "$P" -n 5 -w 1 --csv "$OUT/tpp_$f.csv" >"$OUT/tpp_$f.log" 2>&1
            echo "tpp pace $f rc=$?"
            grep -E "^# summary" "$OUT/tpp_$f.log" | grep -v "^# summary:   " | tail -n 14
        done ;;
    c3f)
        timeout 60 "$X" calibrate --target host --dest flush --out "$OUT/c3f_profile.json" \
            --samples "$OUT/c3f_samples.csv" >"$OUT/c3f_calibrate.log" 2>&1
        echo "c3f calibrate rc=$?"
        timeout 120 "$X" validate --dest flush --profile "$OUT/c3f_profile.json" \
            --csv "$OUT/c3f_validate.csv" --rows "$OUT/c3f_validate_rows.csv" >"$OUT/c3f_validate.log" 2>&1
        echo "c3f validate rc=$?"
        grep -E "^# (totals|per-row|isolated burst above|validate done)" "$OUT/c3f_validate.log" ;;
    epx)
        timeout 150 "$X" bench ep --profile "$P" --courier-pace 0.95 -n 3 -w 1 --csv "$OUT/epx.csv" \
            >"$OUT/epx.log" 2>&1
        echo "epx rc=$?"
        grep -E "^# (wave/|auto near|couriers|courier near|auto/courier|bench ep)" "$OUT/epx.log" ;;
    san)
        OUT="$OUT/san" SAN_BUDGET=${SAN_BUDGET:-240} \
            SAN_CASES=${SAN_CASES:-"test_attn test_moe test_tp90 bench_tp90 bench_ep bench_up"} \
            timeout 300 bash tests/gpu/sanitize.sh 2>&1 | tail -n 30 ;;
    *) echo "unknown part $part" ;;
    esac
done
