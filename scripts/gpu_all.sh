#!/usr/bin/env bash
# gpu_all.sh - one device call: environment facts, then the area scripts named in AREAS (default:
# calib transport tests), each with its own output folder; everything is packed into
# $OUT/results.tar.gz (the device returns at most 8 files) next to summary.log.
# Usage: OUT=dir [AREAS="calib knee probe transport tests ep up tp tp90 sanitize faults gemm90 multi"]
#        scripts/gpu_all.sh        (multi: scripts/gpu_multi.sh with N = the visible GPUs)
set -u
OUT=${OUT:-./out}
AREAS=${AREAS:-calib transport tests}
W=$(mktemp -d /tmp/xs-all-XXXXXX)
S="$OUT/summary.log"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
{
    echo "# gpu_all.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) areas: $AREAS"
    echo "# git $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
    nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,memory.total --format=csv 2>&1
    nvidia-smi topo -m 2>&1 | head -5
    /opt/torch/.venv/bin/python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' 2>&1
    ls /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib/libnccl.so* 2>&1 | head -3
    nvcc --version 2>&1 | tail -1
    uname -r
} >"$S" 2>&1
cat "$S"
for a in $AREAS; do
    mkdir -p "$W/$a"
    echo "##### $a" | tee -a "$S"
    case $a in
    calib)
        OUT="$W/$a" bash scripts/gpu_calib.sh 2>&1 | tail -n 40 | tee -a "$S"
        # the workloads after it predict with this run's calibration (extended form)
        if [ -s "$W/calib/h200_host_profile.json" ]; then
            export PROFILE="$W/calib/h200_host_profile.json"
            echo "# PROFILE=$PROFILE" | tee -a "$S"
        fi ;;
    knee) OUT="$W/$a" timeout 300 bash scripts/gpu_knee.sh 2>&1 | tail -n 90 | tee -a "$S" ;;
    probe) OUT="$W/$a" timeout 420 bash scripts/gpu_probe.sh 2>&1 | tail -n 60 | tee -a "$S" ;;
    transport) OUT="$W/$a" timeout 300 bash scripts/gpu_transport.sh 2>&1 | tail -n 30 | tee -a "$S" ;;
    tests)
        for t in build/tests/gpu/test_*; do
            [ -x "$t" ] || continue
            case $t in *test_win|*test_signal) continue ;; esac
            echo "== $t" >>"$W/$a/tests.log"
            timeout 180 "$t" >>"$W/$a/tests.log" 2>&1
            echo "$(basename "$t"): rc=$? $(tail -n 1 "$W/$a/tests.log")" | tee -a "$S"
        done ;;
    ep) OUT="$W/$a" timeout 240 bash scripts/gpu_ep.sh build 2>&1 | tail -n 40 | tee -a "$S" ;;
    up) OUT="$W/$a" timeout 330 bash scripts/gpu_up.sh 2>&1 | tail -n 40 | tee -a "$S" ;;
    tp) OUT="$W/$a" TP_PROFILE="${PROFILE:-${TP_PROFILE:-}}" timeout 240 bash scripts/gpu_tp.sh 2>&1 |
        tail -n 40 | tee -a "$S" ;;
    tp90) # the TP workloads on the Hopper engine (bench tp --engine sm90; docs/TP.md)
        OUT="$W/$a" TP_PROFILE="${PROFILE:-${TP_PROFILE:-}}" TP_ARGS="${TP90_ARGS:---engine sm90 -n 5 -w 1}" \
            timeout 240 bash scripts/gpu_tp.sh 2>&1 | tail -n 40 | tee -a "$S" ;;
    sanitize) OUT="$W/$a" timeout 480 bash tests/gpu/sanitize.sh 2>&1 | tail -n 60 | tee -a "$S" ;;
    faults) OUT="$W/$a" timeout 300 bash tests/gpu/faults.sh 2>&1 | tail -n 20 | tee -a "$S" ;;
    gemm90) # the opt-in Hopper engine (docs/GEMM_SM90.md): host checks, small shapes, throughput
        G=build/tests/gpu/test_gemm
        for args in "--host" "--tiny --sm90" "--sm90 -n 20 --csv $W/$a/gemm_sm90.csv"; do
            echo "== test_gemm $args" >>"$W/$a/gemm90.log"
            timeout 180 $G $args >>"$W/$a/gemm90.log" 2>&1
            echo "test_gemm $args: rc=$? $(tail -n 1 "$W/$a/gemm90.log")" | tee -a "$S"
        done
        grep -E "geomean" "$W/$a/gemm90.log" | tail -n 3 | tee -a "$S" ;;
    multi) OUT="$W/$a" N=${N:-$(nvidia-smi -L 2>/dev/null | wc -l)} timeout ${MULTI_LIMIT:-900} \
        bash scripts/gpu_multi.sh 2>&1 | tail -n 40 | tee -a "$S" ;;
    *) echo "unknown area $a" | tee -a "$S" ;;
    esac
    # pack after every area: a call cut short still returns what finished
    tar czf "$OUT/results.tar.gz" -C "$W" .
done
ls -la "$OUT"
