#!/usr/bin/env bash
# gpu_session12.sh - run 12 (bench/results/h200-2026-11-29-r12): stores by the TMA.
# The fused MoE kernel's main loops lose time next to the combine stores even when the pacer
# keeps the stage below R (docs/EP.md, "Couriers", the probe: loads of an SM slow to 0.34-0.38
# while every SM issues 16-byte stores paced at 0.8 R). Does a store that the SM's load/store
# unit never sees - a cp.async.bulk copy from shared memory, issued by the TMA - cost the loads
# less?
#   1. xstage probe --target host: the probe's table, now with rowpace (512-byte rows of 32
#      interleaved CTAs, 16-byte stores paced at 0.8 R) and the bulk cases (the same bytes by
#      TMA copies: unpaced, paced at 0.8 and 0.5 R, 512-byte rows)
#   2. tests/gpu/test_moe: every check, with bulk_checks (bulk combine runs verified and
#      bit-identical to the 16-byte-store runs, refused with couriers)
#   3. xstage bench ep --bulk: the default sweep with wave_bulk, interleaved_bulk and auto_bulk
#      measured in the same rounds as wave, interleaved and auto
#   4. two points with every tile (--tiles), --bulk
# PART=adaptive (calls 3-): the adaptive plan (docs/EP.md, "Adaptive"): test_moe (adaptive
# plans verified), the default sweep with the adaptive column next to wave, interleaved, auto and
# the courier column, and the two traced points.
# PART=pace (call 5): auto's pacing rule (pace where the criterion fails unless predicted > 1 %
# slower): the default sweep, then the pacer's threshold at 128 KB and 512 KB (auto only, against
# wave) on the eight rows of calls 1-4 that stayed above 1.1 x bound_us: qwen1.5-moe-a2.7b,
# deepseek-v2-lite, qwen3-30b-a3b and qwen3-235b-a22b at T = 2048 (ep_pace128k.csv,
# ep_pace512k.csv; deepseek-v3 T = 4096, the ninth, is left out: 12 ms kernels).
# PART=pace2 (call 6): the whole sweep with the pacer's threshold at PACE_BYTES (default 128K),
# and the eight rows at 64K (ep_pace64k.csv).
# PART=frac (call 8): the pacer's rate at 0.95 (the default), 0.98 and 1.0 R, auto only against
# wave, on the four configurations of the rows at the margin at T = 1024 and 2048, both routings
# (ep_frac095.csv, ep_frac098.csv, ep_frac100.csv); no sweep.
# PART=defer (call 13): the deferring kernel (xs_moe_run_opts.defer, docs/EP.md "Run 12"):
# test_moe, compute-sanitizer on test_moe and on bench ep --bulk --defer (tests/gpu/sanitize.sh,
# SAN_CASES="test_moe bench_ep_bulk", racecheck on test_moe only), then the default sweep with the
# auto_defer column (--defer) and the two traced points.
# Writes $OUT/session12.log (everything), probe_host.csv, ep.csv, ep_tiles_points.csv,
# ep_tiles.csv.gz.
# Usage: OUT=dir [PROFILE=file] [COMMIT=sha] [PART=bulk|adaptive|pace|pace2|frac|defer]
#        [PACE_BYTES=B] scripts/gpu_session12.sh
set -u
OUT=${OUT:-./out-s12}
X=${BUILD:-build}/xstage
mkdir -p "$OUT"
LOG="$OUT/session12.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
pick_profile "${PROFILE:-}"
say "# gpu_session12.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown}"
say "$PROFILE_LINE"
log_device

if [ "${PART:-bulk}" = bulk ]; then
    vstep probe 120 "$X" probe --target host -n 5 --csv "$OUT/probe_host.csv"
    BULK=--bulk
fi
if [ "${PART:-bulk}" = frac ]; then
    for f in 0.95 0.98 1.0; do
        vstep "bench_ep_frac$f" 120 "$X" bench ep "${PROFILE_ARGS[@]}" --schedule auto \
            --config qwen1.5-moe-a2.7b,deepseek-v2-lite,qwen3-30b-a3b,qwen3-235b-a22b \
            --tokens 1024,2048 --pace-frac "$f" -n 5 -w 1 \
            --csv "$OUT/ep_frac$(echo "$f" | tr -d .)$( [ "$f" = 1.0 ] && echo 0).csv"
    done
    grep -E '^# (bench ep|wave/auto |auto near bound|auto/bound)' "$LOG"
    vstep_report gpu_session12
    exit
fi
case ${PART:-bulk} in pace*) ;; *) vstep test_moe 90 build/tests/gpu/test_moe ;; esac
if [ "${PART:-bulk}" = defer ]; then
    SAN_CASES="test_moe bench_ep_bulk" SAN_TOOLS="memcheck synccheck" SAN_BUDGET=120 \
        OUT="$OUT/san" bash tests/gpu/sanitize.sh 2>&1 | tail -n 8
    SAN_CASES="test_moe" SAN_TOOLS=racecheck SAN_BUDGET=90 OUT="$OUT/san_race" \
        bash tests/gpu/sanitize.sh 2>&1 | tail -n 5
    BULK=--defer
fi
[ "${PART:-bulk}" = pace2 ] && PACE="--pace-bytes ${PACE_BYTES:-128K}"
vstep bench_ep 260 "$X" bench ep "${PROFILE_ARGS[@]}" ${BULK:-} ${PACE:-} -n 5 -w 1 \
    --csv "$OUT/ep.csv"
vstep bench_ep_tiles 60 "$X" bench ep "${PROFILE_ARGS[@]}" ${BULK:-} ${PACE:-} \
    --config olmoe-1b-7b,deepseek-v2-lite --tokens 2048 --routing balanced -n 3 -w 1 \
    --csv "$OUT/ep_tiles_points.csv" --tiles "$OUT/ep_tiles.csv"
[ -s "$OUT/ep_tiles.csv" ] && gzip -f "$OUT/ep_tiles.csv"
if [ "${PART:-bulk}" = pace ] || [ "${PART:-bulk}" = pace2 ]; then
    PBS="128K 512K"
    [ "${PART:-bulk}" = pace2 ] && PBS=64K
    for pb in $PBS; do
        vstep "bench_ep_pace$pb" 90 "$X" bench ep "${PROFILE_ARGS[@]}" --schedule auto \
            --config qwen1.5-moe-a2.7b,deepseek-v2-lite,qwen3-30b-a3b,qwen3-235b-a22b \
            --tokens 2048 --pace-bytes "$pb" -n 5 -w 1 \
            --csv "$OUT/ep_pace$(echo "$pb" | tr K k).csv"
    done
fi
echo
grep -E '^(rowpace|bulk[a-z]*|paced|ref|control|all|rows) ' "$LOG" | head -n 50
grep -E '^# (bench ep|wave/interleaved|wave/auto |auto near bound|bulk|wave_b|wave/auto_bulk|auto/auto_bulk|auto_bulk|wave/adaptive|auto/adaptive|adaptive)' "$LOG"
vstep_report gpu_session12
