#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_byo.sh - the bring-your-own-kernel loop on a GPU machine, from already built binaries
# (build/xstage, build/examples/byo or examples/byo/byo, build/tests/gpu/test_trace; nothing is
# built here): the trace stamps' GPU test, then examples/byo on three shapes x two seeds, each
# trace compared with what the model predicts on the given profile (a host-path calibrate
# profile of this GPU), then once with -g (one rank storing into its own NCCL window).
# Writes under $OUT: byo_<shape>_s<seed>.{csv,log} (the trace, the run's output),
# compare_<shape>_s<seed>.{csv,json,log} (per-tile comparison, Chrome timeline, summary),
# byo_nccl_r1.{csv,log} (the -g run), byo_nccl_none.log (-g without NCCL), test_trace.log,
# summary.log. The example takes no part in calibration or fitting.
# Usage: OUT=dir [BUILD=build] [BYO=build/examples/byo] [SHAPES="lognormal staggered bimodal"]
#        [SEEDS="1 2"] scripts/gpu_byo.sh PROFILE.json
# Exit status: non-zero when any step failed (each step is still attempted). About 1 minute.
set -u
# -g loads NCCL from the active Python environment's nvidia-nccl wheel: on the GPU machine the
# PyTorch venv (XS_VENV names another; XS_NCCL_LIB, when set, wins)
XS_VENV=${XS_VENV:-/opt/torch/.venv}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$XS_VENV" ]; then
    export VIRTUAL_ENV="$XS_VENV" PATH="$XS_VENV/bin:$PATH"
fi
OUT=${OUT:-./out}
BUILD=${BUILD:-build}
BYO=${BYO:-$BUILD/examples/byo}
[ -x "$BYO" ] || [ ! -x examples/byo/byo ] || BYO=examples/byo/byo
SHAPES=${SHAPES:-lognormal staggered bimodal}
SEEDS=${SEEDS:-1 2}
PROFILE=${1:-}
S="$OUT/summary.log"
mkdir -p "$OUT"
if [ -z "$PROFILE" ] || [ ! -s "$PROFILE" ]; then
    echo "xstage: error: gpu_byo.sh: give a profile (xstage calibrate --target host --out p.json)" >&2
    exit 2
fi
for b in "$BUILD/xstage" "$BYO"; do
    if [ ! -x "$b" ]; then
        echo "xstage: error: gpu_byo.sh: $b is not built (this script builds nothing)" >&2
        exit 2
    fi
done
fail=0
{
    echo "# gpu_byo.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) profile $PROFILE"
    echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
} | tee "$S"

if [ -x "$BUILD/tests/gpu/test_trace" ]; then
    timeout 120 "$BUILD/tests/gpu/test_trace" >"$OUT/test_trace.log" 2>&1 || fail=1
    echo "test_trace: $(tail -n 1 "$OUT/test_trace.log")" | tee -a "$S"
else
    echo "test_trace: not built ($BUILD/tests/gpu/test_trace)" | tee -a "$S"
fi

for shape in $SHAPES; do
    for seed in $SEEDS; do
        n="${shape}_s${seed}"
        if ! timeout 60 "$BYO" --shape "$shape" --seed "$seed" --out "$OUT/byo_$n.csv" \
            >"$OUT/byo_$n.log" 2>&1; then
            fail=1
            echo "byo $n: FAILED ($(tail -n 1 "$OUT/byo_$n.log"))" | tee -a "$S"
            continue
        fi
        echo "byo $n: $(grep '^# kernel' "$OUT/byo_$n.log")" | tee -a "$S"
        if ! timeout 120 "$BUILD/xstage" compare --trace "$OUT/byo_$n.csv" --profile "$PROFILE" \
            --csv "$OUT/compare_$n.csv" --timeline "$OUT/compare_$n.json" \
            >"$OUT/compare_$n.log" 2>&1; then
            fail=1
            echo "compare $n: FAILED ($(tail -n 1 "$OUT/compare_$n.log"))" | tee -a "$S"
            continue
        fi
        echo "compare $n:" | tee -a "$S"
        sed 's/^/    /' "$OUT/compare_$n.log" | tail -n 25 | tee -a "$S"
    done
done
# an overflowed trace must be refused: a run with too small a buffer exits 1, and compare
# rejects the trace it wrote
timeout 60 "$BYO" --shape lognormal --seed 1 --capacity 100 --out "$OUT/byo_overflow.csv" \
    >"$OUT/byo_overflow.log" 2>&1
rc=$?
timeout 60 "$BUILD/xstage" compare --trace "$OUT/byo_overflow.csv" --profile "$PROFILE" \
    >"$OUT/compare_overflow.log" 2>&1
crc=$?
if [ "$rc" = 1 ] && [ "$crc" != 0 ]; then
    echo "overflow: byo exit 1, compare refused: $(head -n 1 "$OUT/compare_overflow.log")" | tee -a "$S"
else
    fail=1
    echo "overflow: FAILED (byo exit $rc, compare exit $crc)" | tee -a "$S"
fi
# -g: the same kernel storing into an NCCL symmetric window, one rank (its own window), every
# byte checked there, its trace written like the host path's
if timeout 120 "$BYO" -g --shape lognormal --seed 1 --out "$OUT/byo_nccl_r1.csv" \
    >"$OUT/byo_nccl_r1.log" 2>&1; then
    echo "byo -g 1 rank: $(grep '^# byo:' "$OUT/byo_nccl_r1.log" | sed 's/.* MB to //')" | tee -a "$S"
    echo "    $(grep '^# window' "$OUT/byo_nccl_r1.log"); $(grep '^# kernel' "$OUT/byo_nccl_r1.log")" \
        | tee -a "$S"
else
    fail=1
    echo "byo -g 1 rank: FAILED ($(tail -n 1 "$OUT/byo_nccl_r1.log"))" | tee -a "$S"
fi
# -g without NCCL to load: one error line, exit 1
XS_NCCL_LIB=/nonexistent/libnccl.so.2 timeout 60 "$BYO" -g --out "$OUT/byo_nccl_none.csv" \
    >"$OUT/byo_nccl_none.log" 2>&1
rc=$?
if [ "$rc" = 1 ] && [ "$(grep -c '^byo: error' "$OUT/byo_nccl_none.log")" = 1 ]; then
    echo "byo -g without NCCL: exit 1, $(grep '^byo: error' "$OUT/byo_nccl_none.log" | cut -c1-100)" | tee -a "$S"
else
    fail=1
    echo "byo -g without NCCL: FAILED (exit $rc)" | tee -a "$S"
fi
# N ranks on one multi-GPU machine (each rank stores into the next one's window over NVLink;
# every rank writes byo_nccl.rank<r>.csv):
#   torchrun --standalone --nproc-per-node N --no-python "$BYO" -g --out "$OUT/byo_nccl.csv"
#   BYO_ID_FILE=/tmp/byo.id mpirun -np N "$BYO" -g --out "$OUT/byo_nccl.csv"
echo "# gpu_byo.sh $([ $fail = 0 ] && echo OK || echo FAILED)" | tee -a "$S"
exit $fail
