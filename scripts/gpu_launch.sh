#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_launch.sh - the launcher paths on a machine with 2 or more GPUs, from an already built
# tree (build/xstage; nothing is built): -g 2 (the fork launcher), torchrun, srun's variables with
# XS_ID_FILE, the collectives' communicator under torchrun (bench tp), and the bounds: a rank
# that fails before NCCL set-up (rank 0 must end within XS_RANK_TIMEOUT in one line) and a rank
# that never starts (the id exchange ends within the bound). docs/MULTIGPU.md, "Launchers" and
# "Ranks". Ends with a PASS/FAIL table in $OUT/launch_summary.txt; about 2 minutes.
# Usage: OUT=dir [BUILD=build] scripts/gpu_launch.sh
set -u
# NCCL and cuBLAS are found in the active Python environment's nvidia-* wheels (docs/INSTALL.md):
# on the GPU machine that is the PyTorch venv (XS_VENV names another; XS_NCCL_LIB and
# XS_CUBLAS_LIB, when set, win over any search)
XS_VENV=${XS_VENV:-/opt/torch/.venv}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$XS_VENV" ]; then
    export VIRTUAL_ENV="$XS_VENV" PATH="$XS_VENV/bin:$PATH"
fi
BUILD=${BUILD:-build}
OUT=${OUT:-./out-launch}
X="$BUILD/xstage"
mkdir -p "$OUT"
LOG="$OUT/launch.log"
SUM="$OUT/launch_summary.txt"
: >"$LOG"
: >"$SUM"
export NCCL_NVLS_ENABLE=0
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT SLURM_PROCID SLURM_NTASKS \
    SLURM_LOCALID SLURM_STEP_ID XS_ID_FILE XS_RANK XS_NRANKS XS_NCCL_ID XS_DEVICE
S="$OUT/smoke.csv"
printf 'producers,bytes_per_producer,gap_ns\n132,65536,20000\n132,65536,0\n' >"$S"
REPLAY=(replay --target peer -g 2 --schedule "$S")

verdict() { # NAME OK(0/1) DETAIL
    local v=PASS
    [ "$2" = 0 ] || v=FAIL
    printf '%-44s %s  %s\n' "$1" "$v" "$3" | tee -a "$SUM"
}
run() { # NAME LIMIT CMD...: exit 0 within LIMIT
    local name=$1 limit=$2
    shift 2
    echo "## $name: $*" >>"$LOG"
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" >>"$LOG" 2>&1
    local rc=$?
    verdict "$name" $((rc != 0)) "exit $rc, $((SECONDS - t0)) s"
}

run "replay -g 2 (fork launcher)" 120 "$X" "${REPLAY[@]}"

if command -v torchrun >/dev/null 2>&1; then
    run "replay under torchrun" 180 torchrun --nproc-per-node 2 --no-python \
        --master-addr 127.0.0.1 --master-port 29510 "$X" "${REPLAY[@]}"
    run "bench tp smoke under torchrun" 300 torchrun --nproc-per-node 2 --no-python \
        --master-addr 127.0.0.1 --master-port 29520 "$X" bench tp -g 2 --op gemm_rs,ag_gemm,mlp \
        --m 512 --n 4096 --k 8192 -n 2 -w 1 --timeout 5
else
    verdict "torchrun" 1 "torchrun not found (no venv with PyTorch active)"
fi

# srun's variables, the id through a file (two processes started here)
F="$OUT/id.$$"
echo "## srun variables + XS_ID_FILE" >>"$LOG"
t0=$SECONDS
for r in 0 1; do
    env SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r SLURM_STEP_ID=0 SLURM_JOB_ID=$$ \
        XS_ID_FILE="$F" timeout -k 10 180 "$X" "${REPLAY[@]}" >"$OUT/srun.$r.out" 2>&1 &
done
rc=0
for j in $(jobs -p); do wait "$j" || rc=1; done
cat "$OUT"/srun.*.out >>"$LOG"
verdict "replay, srun variables, XS_ID_FILE" $rc "$((SECONDS - t0)) s; files left: $(ls "$F"* 2>/dev/null | wc -l)"

# a rank that fails before NCCL set-up: rank 0 waits in ncclCommInitRank and must end within the
# bound (15 s) with one line
echo "## NCCL bound: rank 1 cannot load NCCL" >>"$LOG"
t0=$SECONDS
for r in 0 1; do
    lib=""
    [ $r = 1 ] && lib=/nonexistent/libnccl.so.2
    env RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29530 \
        XS_RANK_TIMEOUT=15 ${lib:+XS_NCCL_LIB=$lib} timeout -k 10 120 "$X" "${REPLAY[@]}" \
        >"$OUT/bound.$r.out" 2>"$OUT/bound.$r.err" &
done
for j in $(jobs -p); do wait "$j"; done
dt=$((SECONDS - t0))
cat "$OUT"/bound.* >>"$LOG"
ok=1
if [ "$(wc -l <"$OUT/bound.0.err")" -eq 1 ] && grep -q 'not complete within 15 s' "$OUT/bound.0.err" &&
    [ "$dt" -le 60 ]; then ok=0; fi
verdict "NCCL init bound (XS_RANK_TIMEOUT=15)" $ok "$dt s: $(head -c 160 "$OUT/bound.0.err")"

# a rank that never starts: rank 0 alone; the id exchange ends within the bound (10 s)
echo "## exchange bound: rank 1 never starts" >>"$LOG"
t0=$SECONDS
env RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29540 XS_RANK_TIMEOUT=10 \
    timeout -k 10 120 "$X" "${REPLAY[@]}" >"$OUT/alone.out" 2>"$OUT/alone.err"
rc=$?
dt=$((SECONDS - t0))
cat "$OUT/alone.err" >>"$LOG"
ok=1
if [ $rc -ne 0 ] && [ "$(wc -l <"$OUT/alone.err")" -eq 1 ] &&
    grep -q 'rank 1 of 2 did not join within 10 s' "$OUT/alone.err" && [ "$dt" -le 30 ]; then ok=0; fi
verdict "id exchange bound (XS_RANK_TIMEOUT=10)" $ok "$dt s: $(head -c 160 "$OUT/alone.err")"

echo "# $(grep -c PASS "$SUM") passed, $(grep -c FAIL "$SUM") failed" | tee -a "$SUM"
