#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# sanitize.sh - every GPU test binary and a small case of every GPU subcommand under
# compute-sanitizer memcheck, synccheck and racecheck, on one GPU, from an
# already built tree (make -j all); README.md "Robustness" says what it covers. In short:
#   test_attn 12345 (racecheck: --tiny), test_gemm --quick -n 1 (synccheck, racecheck: --tiny,
#   no cuBLAS, no throughput), test_tp --quick, test_moe --quick (both: --tiny under racecheck), test_signal,
#   test_win --quick
#   (XS_TEST_SKIP_LAUNCH=1: no launcher children), xstage replay of examples/mixed.csv -n 1
#   (host, and 4 virtual peers), validate --quick -n 1, calibrate --quick, bench up/tp/ep on
#   their smallest shapes (bench ep under racecheck: 4 tokens, --schedule wave), bench ep --bulk
#   --defer (racecheck: --schedule adaptive --bulk), probe --only bulk,bulkpace,bulkrows,rowpace; then the Hopper
#   engine (our own TMA / mbarrier / wgmma code, unlike cuBLAS's): test_gemm --tiny --sm90,
#   test_tp --quick --sm90 (racecheck: --tiny --sm90), bench tp --engine sm90 on the smallest
#   shape; calibrate --quick --load-probe --window 128M (the drain-under-load kernel; at 64M the
#   quick schedule, 69.21 MB per destination window, did not fit on two H200s).
# API errors: reported (--report-api-errors explicit) except in the two steps that load NCCL,
#   test_signal and test_win (its one-rank peer windows): NCCL probes the device on purpose
#   (cudaFuncGetAttributes on kernels it has no sm_90a image for, error 209, and cuMemCreate
#   with fabric handles, error 800, inside libnccl.so), which the sanitizer would count as 9
#   findings that are not ours; test_win also asks for 2^50 bytes, 2^46 pinned bytes and GPU
#   999 on purpose. --report-api-errors no leaves memory, race and barrier errors reported.
#   Every other step prints "NCCL not loaded" in its header.
# racecheck runs every step with XS_CUBLAS_SIMT=1: the tests' references and the benches'
#   unfused baselines then use a plain SIMT GEMM kernel (cuda/common/gpu.cu) instead of cuBLAS,
#   whose Hopper kernels (nvjet_sm90_*: TMA and mbarrier pipelines) racecheck cannot handle:
#   instrumented, thousands of hazard reports in test_gemm; excluded by name
#   (--kernel-name-exclude kns=nvjet), "Internal Sanitizer Error: failed to handle a hardware
#   exception" and an illegal address in every step that calls cuBLAS. Not our code either way;
#   memcheck and synccheck still run the real cuBLAS.
# Order: cheapest step first over all tools (an estimate per tool and case from a recorded run),
# so a slow racecheck step can only push out other slow steps. Every step is bounded by `timeout`
# and by what is left of SAN_BUDGET (default 420 s; the full set takes about 330 s on an
# H200): a step that no longer fits is SKIPPED,
# never started. A failing step does not stop the others. Device-side waits of the
# subcommands get a 120 s bound (sanitized kernels are 10-100x slower).
# Writes $OUT/sanitize.log (every step's full output) and $OUT/sanitize.csv
# (tool,case,findings,status,seconds after '#' lines: device, date, driver, CUDA, sanitizer
# and the exact command of every step). status: CLEAN (sanitizer summary with 0 findings, exit
# 0), FINDINGS (errors or racecheck hazards reported), FAIL (the program failed without a
# finding, or no sanitizer summary), TIMEOUT, SKIP (budget spent), MISSING (binary or
# compute-sanitizer not found). Prints a summary table last.
# Exit status: 0 all clean; 1 any finding; 2 no finding but a step not clean.
# Usage, from the repository root: OUT=dir [BUILD=build] [SAN_BUDGET=420]
#        [SAN_TOOLS="memcheck synccheck racecheck"] [SAN_CASES="test_attn replay ..."]
#        [SANITIZER=/path/compute-sanitizer] bash tests/gpu/sanitize.sh
set -u

BUILD=${BUILD:-build}
OUT=${OUT:-./out-sanitize}
BUDGET=${SAN_BUDGET:-420}
TOOLS=${SAN_TOOLS:-memcheck synccheck racecheck}
ALL_CASES="test_attn test_gemm test_tp test_moe test_signal test_win replay replay_virtual
validate calibrate bench_up bench_up_kv bench_tp bench_ep bench_ep_bulk probe_bulk test_gemm90
test_tp90 bench_tp90 load_probe"
CASES=${SAN_CASES:-$ALL_CASES}
mkdir -p "$OUT"
LOG="$OUT/sanitize.log"
CSV="$OUT/sanitize.csv"
: >"$LOG"
T=$(mktemp -d /tmp/xs-san-XXXXXX)
trap 'rm -rf "$T"' EXIT
T0=$SECONDS

SAN=${SANITIZER:-$(command -v compute-sanitizer || true)}
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer
do
    [ -z "$SAN" ] && [ -x "$c" ] && SAN=$c
done
X="$BUILD/xstage"
G="$BUILD/tests/gpu"

# setup CASE TOOL: the case's command (CMD), environment (ENVV), API error reports (API),
# bound in seconds (LIMIT) and expected seconds (EST: measured for memcheck and synccheck, a guess
# for racecheck, which is slow on shared memory); racecheck gets 1.5x the bound
setup() {
    local c=$1 tool=$2
    CMD=() ENVV=() API=explicit LIMIT=45 EST=2
    case $c in
    test_attn)
        CMD=("$G/test_attn" 12345) LIMIT=40 EST=1
        [ "$tool" = racecheck ] && CMD+=(--tiny) EST=20 ;;
    test_gemm)
        CMD=("$G/test_gemm" --quick -n 1) LIMIT=60 EST=3
        [ "$tool" != memcheck ] && CMD=("$G/test_gemm" --tiny) EST=3
        [ "$tool" = racecheck ] && EST=10 ;;
    test_tp) # racecheck: GEMM tiles in shared memory, not measured yet: after memcheck's heavy steps
        CMD=("$G/test_tp" --quick) LIMIT=60 EST=2
        [ "$tool" = racecheck ] && CMD=("$G/test_tp" --tiny) EST=30 ;;
    test_moe)
        CMD=("$G/test_moe" --quick) LIMIT=60 EST=2
        [ "$tool" = racecheck ] && CMD=("$G/test_moe" --tiny) EST=30 ;;
    test_signal) CMD=("$G/test_signal") API=no LIMIT=40 EST=19 ;;
    test_win) CMD=("$G/test_win" --quick) ENVV=(XS_TEST_SKIP_LAUNCH=1) API=no LIMIT=60 EST=21 ;;
    replay) CMD=("$X" replay --schedule examples/mixed.csv -n 1 --timeout 120) LIMIT=30 EST=1 ;;
    replay_virtual)
        CMD=("$X" replay --schedule examples/mixed.csv -n 1 --timeout 120 --target virtual
            --virtual-peers 4) LIMIT=30 EST=1 ;;
    validate) CMD=("$X" validate --quick -n 1 --timeout 120) LIMIT=45 EST=1 ;;
    calibrate) CMD=("$X" calibrate --quick --timeout 120) LIMIT=60 EST=11 ;;
    bench_up)
        CMD=("$X" bench up --seq 1024 --heads 1 --peers 2 --causal both -n 1 -w 0
            --samples 16) LIMIT=45 EST=1 ;;
    bench_up_kv) # the KV-split kernel: 16 key blocks a tile, parts of 2 (8 parts, the most)
        CMD=("$X" bench up --seq 1024 --heads 1 --peers 2 --causal both --kv-split 2 -n 1 -w 0
            --samples 16) LIMIT=45 EST=1 ;;
    bench_tp)
        CMD=("$X" bench tp --op all --m 256 --n 256 --k 256 --peers 2 -n 1 -w 0 --timeout 120)
        LIMIT=60 EST=1 ;;
    bench_ep)
        CMD=("$X" bench ep --config olmoe-1b-7b --tokens 32 --peers 2 --routing balanced -n 1
            -w 0 --timeout 120) LIMIT=60 EST=1
        # racecheck: 4 tokens (a few dozen row blocks; T = 32 ran past 90 s), wave only
        [ "$tool" = racecheck ] && CMD=("$X" bench ep --config olmoe-1b-7b --tokens 4 --peers 2
            --routing balanced -n 1 -w 0 --timeout 120 --schedule wave) LIMIT=100 EST=60 ;;
    bench_ep_bulk) # the TMA bulk copies of the combine (--bulk) and the deferring kernel
        # (--defer); racecheck: the adaptive plan and --bulk
        CMD=("$X" bench ep --config olmoe-1b-7b --tokens 32 --peers 2 --routing balanced -n 1
            -w 0 --timeout 120 --bulk --defer) LIMIT=60 EST=1
        [ "$tool" = racecheck ] && CMD=("$X" bench ep --config olmoe-1b-7b --tokens 4 --peers 2
            --routing balanced -n 1 -w 0 --timeout 120 --schedule adaptive --bulk)
        [ "$tool" = racecheck ] && LIMIT=100 EST=60 ;;
    probe_bulk) # the probe's bulk-copy and paced row cases (cp.async.bulk from shared memory)
        CMD=("$X" probe --target host -n 1 --window 4M --only bulk,bulkpace,bulkrows,rowpace
            --timeout 120) LIMIT=60 EST=2 ;;
    # the Hopper engine (wgmma, TMA, mbarriers): its own cases, after the others
    test_gemm90) CMD=("$G/test_gemm" --tiny --sm90) LIMIT=60 EST=3 ;;
    test_tp90) CMD=("$G/test_tp" --quick --sm90) LIMIT=60 EST=3
        [ "$tool" = racecheck ] && CMD=("$G/test_tp" --tiny --sm90) EST=20 ;;
    bench_tp90)
        CMD=("$X" bench tp --engine sm90 --op all --m 256 --n 256 --k 256 --peers 2 -n 1 -w 0
            --timeout 120) LIMIT=60 EST=1 ;;
    load_probe) # calibrate's (f) kernel: stores and read-modify-write passes on the same SMs
        CMD=("$X" calibrate --quick --load-probe --window 128M --timeout 120) LIMIT=90 EST=15 ;;
    *) return 1 ;;
    esac
    case $tool in
    synccheck) [ "$EST" -gt 6 ] && EST=$((EST / 2)) ;;  # measured: about half of memcheck's
    racecheck)
        LIMIT=$((LIMIT * 3 / 2))
        [ "$EST" -lt 10 ] && EST=$((EST * 5)) ;;
    esac
    return 0
}

declare -A RES       # tool/case -> "STATUS FINDINGS SECONDS"
declare -A NOTE      # tool/case -> one line: the first finding or the program's last line
ROWS=()              # CSV rows in order
STEPS=()             # "# step tool/case: command" lines for the CSV header

record() { # TOOL CASE STATUS FINDINGS SECONDS NOTE
    RES["$1/$2"]="$3 ${4:--} $5"
    NOTE["$1/$2"]=$6
    ROWS+=("$1,$2,$4,$3,$5")
    echo "=== $1 $2: $3 findings=${4:-?} ${5}s${6:+ ($6)}" | tee -a "$LOG"
}

run_step() { # TOOL CASE
    local tool=$1 c=$2
    if ! setup "$c" "$tool"; then
        record "$tool" "$c" MISSING "" 0 "unknown case"
        return
    fi
    if [ ! -x "${CMD[0]}" ]; then
        record "$tool" "$c" MISSING "" 0 "not built: ${CMD[0]}"
        return
    fi
    if [ -z "$SAN" ] || [ ! -x "$SAN" ]; then
        record "$tool" "$c" MISSING "" 0 "compute-sanitizer not found"
        return
    fi
    local left=$((BUDGET - (SECONDS - T0)))
    if [ "$left" -lt 10 ]; then
        record "$tool" "$c" SKIP "" 0 "SAN_BUDGET=${BUDGET}s spent"
        return
    fi
    local lim=$LIMIT
    [ "$lim" -gt "$left" ] && lim=$left
    local simt=()
    [ "$tool" = racecheck ] && simt=(XS_CUBLAS_SIMT=1)
    local full=(env ${ENVV[@]+"${ENVV[@]}"} ${simt[@]+"${simt[@]}"} "$SAN" --tool "$tool" --error-exitcode 3
        --report-api-errors "$API")
    full+=("${CMD[@]}")
    STEPS+=("# step $tool/$c: ${full[*]}")
    local sl="$T/$tool-$c.log"
    echo "=== $tool $c (limit ${lim}s): ${full[*]}" >>"$LOG"
    local t0=$SECONDS
    timeout --kill-after=5 "$lim" "${full[@]}" >"$sl" 2>&1 </dev/null
    local rc=$?
    local dt=$((SECONDS - t0))
    cat "$sl" >>"$LOG"
    # findings: the sum of "ERROR SUMMARY: N errors" lines (one per process), or racecheck's
    # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)" when larger
    local n h f
    n=$(awk '/^========= ERROR SUMMARY: [0-9]+ error/ {s += $4; seen = 1}
             END {if (seen) print s}' "$sl")
    h=$(awk '/^========= RACECHECK SUMMARY: [0-9]+ hazard/ {s += $4; seen = 1}
             END {if (seen) print s}' "$sl")
    f=$n
    if [ -n "$h" ] && { [ -z "$f" ] || [ "$h" -gt "$f" ]; }; then f=$h; fi
    local first last
    local pat='^========= +(Invalid|Race|Error|Barrier|Program hit|Malformed|Warning|Uninit|Cuda)'
    first=$(grep -m1 -E "$pat" "$sl" | cut -c1-200)
    last=$(grep -v '^=========' "$sl" | grep -v '^[[:space:]]*$' | tail -n 1 | cut -c1-200)
    if [ -n "$f" ] && [ "$f" -gt 0 ]; then
        record "$tool" "$c" FINDINGS "$f" "$dt" "${first:-see the log}"
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        record "$tool" "$c" TIMEOUT "$f" "$dt" "killed after ${lim}s; last: $last"
    elif [ "$rc" -eq 3 ]; then
        record "$tool" "$c" FINDINGS "${f:-1}" "$dt" "${first:-sanitizer exit 3}"
    elif [ "$rc" -ne 0 ]; then
        record "$tool" "$c" FAIL "$f" "$dt" "exit $rc; last: $last"
    elif [ -z "$f" ]; then
        record "$tool" "$c" FAIL "" "$dt" "no sanitizer summary; last: $last"
    else
        record "$tool" "$c" CLEAN "$f" "$dt" ""
    fi
}

{
    echo "# sanitize.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    echo "# git $(git rev-parse --short HEAD 2>/dev/null)," \
        "$(git status --porcelain 2>/dev/null | wc -l) changed files"
    echo "# sanitizer: ${SAN:-none}; tools: $TOOLS; budget ${BUDGET}s; cheapest steps first"
} | tee -a "$LOG"
echo "# racecheck: XS_CUBLAS_SIMT=1 (cuBLAS replaced by the SIMT reference GEMM, see the top)" |
    tee -a "$LOG"
# every step with its estimate, cheapest first (ties: memcheck, synccheck, racecheck, in the
# order of CASES)
ORDER=$(
    ti=0
    for tool in $TOOLS; do
        ci=0
        for c in $CASES; do
            EST=999
            setup "$c" "$tool" || true
            printf '%d %d %d %s %s\n' "$EST" "$ti" "$ci" "$tool" "$c"
            ci=$((ci + 1))
        done
        ti=$((ti + 1))
    done | sort -n -k1,1 -k2,2 -k3,3 | awk '{print $4, $5}'
)
while read -r tool c; do
    [ -n "$tool" ] && run_step "$tool" "$c"
done <<<"$ORDER"

# ---- the CSV: '#' lines, the header, one row per step --------------------------------------
gpu=$(nvidia-smi --query-gpu=name,driver_version,pci.bus_id,memory.total --format=csv,noheader \
    2>/dev/null | head -n 1)
cuda_drv=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
nvcc_v=$( (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | grep release |
    sed 's/^Cuda compilation tools, //')
san_v=$("${SAN:-false}" --version 2>/dev/null | grep -i version | tail -n 1)
{
    echo "# xstage tests/gpu/sanitize.sh: GPU tests and small GPU subcommand cases under" \
        "compute-sanitizer"
    echo "# date $(date -u +%Y-%m-%dT%H:%M:%SZ), host $(hostname)," \
        "git $(git rev-parse --short HEAD 2>/dev/null)"
    echo "# device: ${gpu:-unknown} (name, driver, PCI, memory)"
    echo "# CUDA: driver supports ${cuda_drv:-?}; toolkit: ${nvcc_v:-?}; sanitizer: ${san_v:-?}"
    echo "# budget ${BUDGET}s; findings = errors reported (racecheck: hazards); status CLEAN" \
        "FINDINGS FAIL TIMEOUT SKIP MISSING"
    for s in ${STEPS[@]+"${STEPS[@]}"}; do echo "$s"; done
    echo "tool,case,findings,status,seconds"
    for r in ${ROWS[@]+"${ROWS[@]}"}; do echo "$r"; done
} >"$CSV"

# ---- the summary table ------------------------------------------------------------------------
nfind=0 nbad=0 nclean=0 nall=0
for tool in $TOOLS; do
    for c in $CASES; do
        read -r st _ <<<"${RES["$tool/$c"]:-SKIP}"
        nall=$((nall + 1))
        case $st in
        CLEAN) nclean=$((nclean + 1)) ;;
        FINDINGS) nfind=$((nfind + 1)) ;;
        *) nbad=$((nbad + 1)) ;;
        esac
    done
done
{
    echo
    echo "=== summary ($((SECONDS - T0)) s; log $LOG, csv $CSV)"
    printf '%-16s' case
    for tool in $TOOLS; do printf ' %-15s' "$tool"; done
    echo
    for c in $CASES; do
        printf '%-16s' "$c"
        for tool in $TOOLS; do
            read -r st nf sec <<<"${RES["$tool/$c"]:-SKIP - 0}"
            [ "$st" = FINDINGS ] && st="FINDINGS:$nf"
            printf ' %-15s' "$st ${sec}s"
        done
        echo
    done
    skipped=""
    for tool in $TOOLS; do
        for c in $CASES; do
            read -r st _ <<<"${RES["$tool/$c"]:-SKIP}"
            case $st in
            CLEAN) ;;
            SKIP) skipped="$skipped $tool/$c" ;;
            *) echo "  $tool $c: $st: ${NOTE["$tool/$c"]:-}" ;;
            esac
        done
    done
    [ -n "$skipped" ] && echo "  skipped (SAN_BUDGET=${BUDGET}s spent):$skipped"
    echo "sanitize: $nall steps: $nclean clean, $nfind with findings, $nbad not clean" \
        "(failed, timed out, skipped or missing)"
} | tee -a "$LOG"
[ "$nfind" -gt 0 ] && exit 1
[ "$nbad" -gt 0 ] && exit 2
exit 0
