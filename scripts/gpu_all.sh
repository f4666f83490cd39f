#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_all.sh - one reference run on a GPU machine, from an already built tree (build/xstage,
# build/tests/gpu/*). Each area writes into $OUT/<area>/ the files that bench/results/<area>/
# keeps, plus env.txt (device, driver, CUDA, NCCL, commit, date, command): copy the folder over
# bench/results/<area>/ and regenerate its README from env.txt and the area's summary lines.
#   calibrate  scripts/gpu_calib.sh   calibrate (host, local, quick), validate twice, replays
#   ep         scripts/gpu_ep.sh      GPU tests of the EP kernel, the default bench ep sweep
#   tp         scripts/gpu_tp.sh      test_tp, the default bench tp sweep
#   up         scripts/gpu_up.sh      test_attn, the SDPA reference, the default bench up sweep
#   multigpu   scripts/gpu_multi.sh   the peer path over NVLink, N = the visible GPUs (N >= 2)
#   tests      every build/tests/gpu/test_* binary, last line of each
# Files above 1 MB are gzipped; everything is also packed into $OUT/results.tar.gz (a device
# call returns few files) after each area, so a call cut short returns what finished.
# Usage: OUT=dir [AREAS="calibrate ep tp up"] [BUILD=build] [EP_LONG=1] [XS_COMMIT=id]
#        scripts/gpu_all.sh
set -u
# NCCL and cuBLAS are found in the active Python environment's nvidia-* wheels (docs/INSTALL.md):
# on the GPU machine that is the PyTorch venv (XS_VENV names another; XS_NCCL_LIB and
# XS_CUBLAS_LIB, when set, win over any search)
XS_VENV=${XS_VENV:-/opt/torch/.venv}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$XS_VENV" ]; then
    export VIRTUAL_ENV="$XS_VENV" PATH="$XS_VENV/bin:$PATH"
fi
OUT=${OUT:-./out}
AREAS=${AREAS:-calibrate ep tp up}
BUILD=${BUILD:-build}
S="$OUT/summary.log"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0

# the facts every README's header block states, one "key: value" line each
env_facts() {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    # XS_COMMIT: the commit the carried binaries were built from (a device copy's git state can
    # be older than its working tree)
    echo "commit: ${XS_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git status --porcelain 2>/dev/null | grep -q . && echo ' (dirty)')}"
    echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//; s/ / x /')"
    echo "gpu_uuid: $(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | tr '\n' ' ')"
    echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
    echo "cuda: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2)"
    # the NCCL a -g run loads (the PyTorch environment's pip package); one-GPU areas load none
    echo "nccl: $(python3 -c 'import importlib.metadata as m; print(m.version("nvidia-nccl-cu13"))' 2>/dev/null || echo unknown) (pip nvidia-nccl-cu13; loaded only by -g runs)"
    echo "topology: $(nvidia-smi topo -m 2>/dev/null | sed -n 2p | tr -s ' \t' ' ')"
}

{ echo "# gpu_all.sh areas: $AREAS"; env_facts; } | tee "$S"
for a in $AREAS; do
    D="$OUT/$a"
    mkdir -p "$D"
    { env_facts; echo "command: AREAS=$a bash scripts/gpu_all.sh"; } >"$D/env.txt"
    echo "##### $a" | tee -a "$S"
    case $a in
    calibrate)
        OUT="$D" BUILD="$BUILD" bash scripts/gpu_calib.sh 2>&1 | tail -n 30 | tee -a "$S"
        # the workloads after it predict with this run's calibration
        if [ -s "$D/profile.json" ]; then
            export PROFILE="$D/profile.json"
            echo "# PROFILE=$PROFILE" | tee -a "$S"
        fi ;;
    ep) OUT="$D" timeout $([ "${EP_LONG:-0}" = 1 ] && echo 800 || echo 300) bash scripts/gpu_ep.sh "$BUILD" 2>&1 | tail -n 40 | tee -a "$S" ;;
    tp) OUT="$D" timeout 240 bash scripts/gpu_tp.sh "$BUILD" 2>&1 | tail -n 40 | tee -a "$S" ;;
    up) OUT="$D" BUILD="$BUILD" timeout 330 bash scripts/gpu_up.sh 2>&1 | tail -n 40 | tee -a "$S" ;;
    multigpu) OUT="$D" BUILD="$BUILD" N=${N:-$(nvidia-smi -L 2>/dev/null | wc -l)} QUICK=${QUICK:-0} \
        timeout ${MULTI_LIMIT:-900} bash scripts/gpu_multi.sh 2>&1 | tail -n 40 | tee -a "$S" ;;
    tests)
        for t in "$BUILD"/tests/gpu/test_*; do
            [ -x "$t" ] || continue
            echo "== $t" >>"$D/tests.log"
            timeout 180 "$t" >>"$D/tests.log" 2>&1
            echo "$(basename "$t"): rc=$? $(tail -n 1 "$D/tests.log")" | tee -a "$S"
        done ;;
    *) echo "unknown area $a (calibrate ep tp up multigpu tests)" | tee -a "$S" ;;
    esac
    find "$D" -type f -size +1M ! -name '*.gz' -exec gzip -f {} \;
    tar czf "$OUT/results.tar.gz" -C "$OUT" $(cd "$OUT" && ls -d */)
done
ls -la "$OUT"
