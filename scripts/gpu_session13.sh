#!/usr/bin/env bash
# gpu_session13.sh - run 13 (bench/results/h200-2026-11-29-r13): the spilling kernel.
# On the rows where auto stays near 1.1 x bound_us the loss is the pacer's holds: a CTA whose
# Linear-2 tile the pacer holds back idles with the staged tile in shared memory (run 12, call
# 12). The deferring kernel hid the holds but its 3-stage ring cost 4-5 % on every row. The
# spilling kernel (xs_moe_run_opts.defer = XS_MOE_DEFER_SPILL) keeps the 4-stage ring: such a
# tile's remote rows go to a staging buffer in device memory, and leave from there at a later
# task boundary of the CTA once the pacer admits them.
# PART=spill (call 1):
#   1. tests/gpu/test_moe: every check, with spill_checks (spilled runs verified, bit-identical
#      to the 16-byte-store runs, a tile's stores seen leaving after its CTA took a later task)
#   2. xstage bench ep --defer=spill: the default sweep, auto_defer = auto's plan on the
#      spilling kernel (depth 2), measured in the same rounds as wave, interleaved and auto
#   3. the same at --spill-depth 4 and 1 on the four configurations of the margin rows, T = 1024
#      and 2048, auto only against wave (ep_spill4.csv, ep_spill1.csv)
#   4. compute-sanitizer memcheck and synccheck on test_moe (tests/gpu/sanitize.sh)
# PART=frac (call 3): racecheck on test_moe; then the pacer's rate at 0.95, 0.98 and 1.0 R with
#   the spilling column, on the margin configurations at T = 1024 and 2048 (ep_spill_frac*.csv):
#   with the holds hidden, does a pacer closer to R pay now (run 12 call 8, without: no)?
# Writes $OUT/session13.log (everything) and the CSVs.
# PART=autospill (call 4): auto's spilling candidate (the model now predicts the spilling kernel,
#   pred_spill_us): test_moe (a spilling plan runs as planned, and on the plain kernel with
#   XS_MOE_DEFER_NONE); the default sweep with --defer=spill (every paced row measured on the
#   spilling kernel next to its prediction); then --auto-spill --defer=none (auto spills where
#   predicted >= 1 % faster; the auto_defer column runs the same plans on the plain kernel).
# PART=confirm (call 5): auto spills by default now; two default sweeps with --defer=none (the
#   auto_defer column runs the same plans on the plain kernel), ep_1.csv and ep_2.csv.
# PART=wavemax (call 6): where does wave lose most to interleaved on this path? Four
#   fine-grained configurations (H = 2048: qwen1.5-moe-a2.7b, deepseek-v2-lite, qwen3-30b-a3b,
#   olmoe-1b-7b, where the sweep's largest ratios are) at T = 2048, 4096, 8192 and every peer
#   count of {2, 4, 8}, both routings (72 points, -n 3), ep_wavemax.csv. Not the sweep: an
#   exploration of the published 1.6x maximum.
# Usage: OUT=dir [PROFILE=file] [COMMIT=sha] [PART=spill|frac|autospill|confirm|wavemax]
#        scripts/gpu_session13.sh
set -u
OUT=${OUT:-./out-s13}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/session13.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
pick_profile "${PROFILE:-}"
say "# gpu_session13.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown} part=${PART:-spill}"
say "$PROFILE_LINE"
log_device

MARGIN=qwen1.5-moe-a2.7b,deepseek-v2-lite,qwen3-30b-a3b,qwen3-235b-a22b
case ${PART:-spill} in
spill)
    vstep test_moe 120 build/tests/gpu/test_moe
    vstep bench_ep 300 "$X" bench ep "${PROFILE_ARGS[@]}" --defer=spill -n 5 -w 1 \
        --csv "$OUT/ep.csv"
    for d in 4 1; do
        vstep "bench_ep_spill$d" 90 "$X" bench ep "${PROFILE_ARGS[@]}" --schedule auto \
            --config "$MARGIN" --tokens 1024,2048 --defer=spill --spill-depth "$d" -n 5 -w 1 \
            --csv "$OUT/ep_spill$d.csv"
    done
    SAN_CASES="test_moe" SAN_TOOLS="memcheck synccheck" SAN_BUDGET=150 OUT="$OUT/san" \
        bash tests/gpu/sanitize.sh 2>&1 | tail -n 6
    ;;
frac)
    SAN_CASES="test_moe" SAN_TOOLS=racecheck SAN_BUDGET=100 OUT="$OUT/san_race" \
        bash tests/gpu/sanitize.sh 2>&1 | tail -n 5
    for f in 0.95 0.98 1.0; do
        vstep "bench_ep_frac$f" 90 "$X" bench ep "${PROFILE_ARGS[@]}" --schedule auto \
            --config "$MARGIN" --tokens 1024,2048 --defer=spill --pace-frac "$f" -n 5 -w 1 \
            --csv "$OUT/ep_spill_frac$(echo "$f" | tr -d .)$( [ "$f" = 1.0 ] && echo 0).csv"
    done
    ;;
autospill)
    vstep test_moe 120 build/tests/gpu/test_moe
    vstep bench_ep 300 "$X" bench ep "${PROFILE_ARGS[@]}" --defer=spill -n 5 -w 1 \
        --csv "$OUT/ep.csv"
    vstep bench_ep_autospill 300 "$X" bench ep "${PROFILE_ARGS[@]}" --auto-spill --defer=none \
        -n 5 -w 1 --csv "$OUT/ep_autospill.csv"
    ;;
confirm)
    for k in 1 2; do
        vstep "bench_ep_$k" 300 "$X" bench ep "${PROFILE_ARGS[@]}" --defer=none -n 5 -w 1 \
            --csv "$OUT/ep_$k.csv"
    done
    ;;
wavemax)
    vstep bench_ep_wavemax 400 "$X" bench ep "${PROFILE_ARGS[@]}" \
        --config qwen1.5-moe-a2.7b,deepseek-v2-lite,qwen3-30b-a3b,olmoe-1b-7b \
        --tokens 2048,4096,8192 --peers 2,4,8 -n 3 -w 1 \
        --csv "$OUT/ep_wavemax.csv"
    ;;
*)
    say "gpu_session13.sh: PART=${PART}: spill, frac, autospill, confirm or wavemax"
    exit 2
    ;;
esac
echo
grep -E '^# (bench ep|wave/interleaved|wave/auto|auto near bound|auto/auto_defer|auto_defer|spilling|stall prediction)' "$LOG"
vstep_report gpu_session13
