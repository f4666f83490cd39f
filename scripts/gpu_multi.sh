#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_multi.sh - the multigpu area on N GPUs of one host, from an already built tree (docs/MULTIGPU.md):
#   0. topology and versions: nvidia-smi -L, nvidia-smi topo -m, nvidia-smi, NCCL library
#   1. xstage calibrate --target peer -g N     (R, issue rate, Q(K) of the NVLink peer path;
#                                                producer p stores to rank p % N: all-to-all)
#   2. xstage replay --target peer -g N        (one schedule, quick smoke of the peer replay)
#   3. xstage validate --target peer -g N      (the host path's suite, on the peer profile)
#   4. xstage bench ep -g N                    (small sweep; NCCL's own ncclAlltoAll bandwidth
#                                                is printed first, for comparison with R)
#   5. xstage bench tp -g N                    (N > 1: real peers, a smoke of the three ops on
#                                                small widths, then llama3-8b at 4096 tokens on
#                                                both engines (mma, sm90);
#                                                N = 1: the one-GPU bench, virtual peers)
#   6. xstage bench up -g N                    (N > 1: real peers, a small sweep: two lengths
#                                                rounded to a multiple of 128 N, 16 heads, both
#                                                masks, -n 3; N = 1: the one-GPU bench --quick)
# NVLink SHARP stays off (NCCL_NVLS_ENABLE=0). Writes to $OUT: multi.log (everything),
# topo.txt, peer_profile.json, peer_samples.csv, validate.csv, validate_rows.csv, ep.csv,
# ep_tiles.csv (QUICK=0 only), tp_smoke.csv, tp.csv, tp_sm90.csv, up.csv. Each step is bounded by `timeout`
# (the launcher bounds the ranks again: XS_LAUNCH_TIMEOUT); one failure does not stop the
# others; PASS/FAIL table last.
# Usage: N=8 OUT=dir [BUILD=build] [QUICK=1] scripts/gpu_multi.sh
#   N      ranks = GPUs (default: every visible GPU)
#   QUICK  1 (default): calibrate --quick, validate --quick, the smallest EP sweep, TP and UP
#          small; 0: full calibrate and validate, bench ep --quick, tp every model (sm90), up
#          8192..65536 x 16,32 heads
set -u
# NCCL and cuBLAS are found in the active Python environment's nvidia-* wheels (docs/INSTALL.md):
# on the GPU machine that is the PyTorch venv (XS_VENV names another; XS_NCCL_LIB and
# XS_CUBLAS_LIB, when set, win over any search)
XS_VENV=${XS_VENV:-/opt/torch/.venv}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$XS_VENV" ]; then
    export VIRTUAL_ENV="$XS_VENV" PATH="$XS_VENV/bin:$PATH"
fi
BUILD=${BUILD:-build}
OUT=${OUT:-./out-multi}
QUICK=${QUICK:-1}
X="$BUILD/xstage"
export NCCL_NVLS_ENABLE=0
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
if [ -z "${N:-}" ]; then
    N=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
    [ "$N" -ge 1 ] || N=1
fi
mkdir -p "$OUT"
LOG="$OUT/multi.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
STEP_KILL_AFTER=20
# mstep NAME LIMIT CMD...: a -g run; the launcher's own bound is LIMIT (it stops every rank and
# names the slow one), `timeout` 30 s later only if the launcher itself hangs
mstep() {
    local name=$1 limit=$2
    shift 2
    step "$name" $((limit + 30)) env XS_LAUNCH_TIMEOUT="$limit" "$@"
}

{
    echo "# gpu_multi.sh N=$N QUICK=$QUICK $(date -u +%Y-%m-%dT%H:%M:%SZ) host $(hostname)"
    echo "# git $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
    echo "# NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE XS_NCCL_LIB=${XS_NCCL_LIB:-unset} VIRTUAL_ENV=${VIRTUAL_ENV:-unset}"
    nvidia-smi -L
    echo "## nvidia-smi topo -m"
    nvidia-smi topo -m
    echo "## nvidia-smi"
    nvidia-smi
    echo "## nvidia-smi nvlink --status (GPU 0)"
    nvidia-smi nvlink --status -i 0 2>&1 | head -30
} >"$OUT/topo.txt" 2>&1
cat "$OUT/topo.txt" >>"$LOG"
echo "topology in $OUT/topo.txt"

q=()
[ "$QUICK" = 1 ] && q=(--quick)
P="$OUT/peer_profile.json"
# calibrate -g N: every rank measures its own GPU; rank 0 reports and writes --out/--samples
# (docs/MULTIGPU.md); `profile check` below checks the file
mstep "calibrate peer -g $N" 600 "$X" calibrate --target peer -g "$N" "${q[@]}" \
    --out "$P" --samples "$OUT/peer_samples.csv"
# N > 2: the same with every producer storing to the next rank (one destination; N = 2 is
# that already)
if [ "$N" -gt 2 ]; then
    mstep "calibrate peer -g $N one destination" 600 "$X" calibrate --target peer -g "$N" \
        --peer-dests one "${q[@]}" --out "$OUT/peer_profile_one.json"
fi
if [ -s "$P" ] && "$X" profile check "$P" >>"$LOG" 2>&1; then
    echo "profile $P checks out" | tee -a "$LOG"
else
    echo "profile $P missing or broken: validate and bench use the embedded profile" | tee -a "$LOG"
    P=""
fi
printf 'producers,bytes_per_producer,gap_ns\n132,65536,20000\n132,65536,20000\n132,65536,0\n' \
    >"$OUT/peer_smoke.csv"
mstep "replay peer -g $N" 120 "$X" replay --target peer -g "$N" --schedule "$OUT/peer_smoke.csv" \
    ${P:+--profile "$P"}
mstep "validate peer -g $N" 600 "$X" validate --target peer -g "$N" "${q[@]}" \
    ${P:+--profile "$P"} --csv "$OUT/validate.csv" --rows "$OUT/validate_rows.csv"

# bench ep -g N: small sweep (two configurations, balanced routing, one token count each)
if [ "$QUICK" = 1 ]; then
    mstep "bench ep -g $N" 600 "$X" bench ep -g "$N" -c olmoe-1b-7b,mixtral-8x7b -r balanced \
        -t 2048 -n 3 -w 1 ${P:+--profile "$P"} --csv "$OUT/ep.csv"
else
    mstep "bench ep -g $N" 600 "$X" bench ep -g "$N" --quick -n 5 -w 1 ${P:+--profile "$P"} \
        --csv "$OUT/ep.csv" --tiles "$OUT/ep_tiles.csv"
fi
if [ "$N" -eq 1 ]; then
    # one rank: tp and up accept -g 1 (the one-GPU benches, virtual peers over PCIe: the
    # embedded host profile, not the peer one)
    mstep "bench tp -g 1" 300 "$X" bench tp -g 1 --quick --csv "$OUT/tp.csv"
    mstep "bench up -g 1" 300 "$X" bench up -g 1 --quick --csv "$OUT/up.csv"
else
    # real peers: P = N; m a multiple of 128 N. First every op on small widths (a fast failure
    # names the op), then the 8B layer; --timeout 5: a wait on a peer that never signals ends
    # the kernel within 5 s and names the flag
    mstep "bench tp -g $N smoke" 300 "$X" bench tp -g "$N" --op gemm_rs,ag_gemm,mlp \
        --m $((256 * N)) --n 4096 --k 8192 -n 2 -w 1 --timeout 5 ${P:+--profile "$P"} \
        --csv "$OUT/tp_smoke.csv"
    mstep "bench tp -g $N" 600 "$X" bench tp -g "$N" --model llama3-8b --m 4096 -n 3 -w 1 \
        --max-time 400 ${P:+--profile "$P"} --csv "$OUT/tp.csv"
    # the same layer on the Hopper engine (wgmma + TMA, docs/TP.md "Engines"): the mma engine's
    # GEMM runs at about half of cuBLAS, which the NVLink baseline exposes
    # QUICK=0: every model at its default token counts (m a multiple of 128 N for N <= 8)
    tpm=(--model llama3-8b --m 4096)
    [ "$QUICK" = 1 ] || tpm=(--model all)
    mstep "bench tp -g $N sm90" 600 "$X" bench tp -g "$N" --engine sm90 "${tpm[@]}" \
        -n 3 -w 1 --max-time 400 ${P:+--profile "$P"} --csv "$OUT/tp_sm90.csv"
    # real peers: P = N; every length a multiple of N (rows per rank) - here of 128 N, so
    # that no query block straddles two ranks' shards. QUICK=0: the issue's lengths
    # 8192 .. 65536 and 16 and 32 heads
    u=$((128 * N))
    seqs=""
    lens="8192 16384"
    [ "$QUICK" = 1 ] || lens="8192 16384 32768 49152 65536"
    for l in $lens; do seqs="$seqs${seqs:+,}$(((l + u - 1) / u * u))"; done
    heads=16
    [ "$QUICK" = 1 ] || heads=16,32
    mstep "bench up -g $N" 500 "$X" bench up -g "$N" -s "$seqs" -H "$heads" -c both -n 3 -w 1 \
        ${P:+--profile "$P"} --csv "$OUT/up.csv"
fi

echo
echo "== gpu_multi summary (N=$N)" | tee -a "$LOG"
printf '%s\n' "${results[@]}" | tee -a "$LOG"
grep -h '^# nccl:' "$LOG" | tee -a "$OUT/summary.txt"
grep -h '^R = \|^Q = \|^# bench ep\|^# wave/\|^# ranks \|^# bench up\|^# summary: [0-9]* rows' \
    "$LOG" | tee -a "$OUT/summary.txt"
[ "$fails" -eq 0 ]
