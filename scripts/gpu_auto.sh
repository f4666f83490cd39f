#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpu_auto.sh - `auto` (the model alone) and `tuned` (pilots) over every variant of bench tp and
# bench up (issue 33 items 5-6) on one H200, from an already-built tree (build/xstage): the
# declared subset below, every run verified. Builds nothing.
#   1. bench tp  --op gemm_rs,ag_gemm,mlp --model llama3-8b,llama3-70b --m 4096 --peers 4,8
#                (12 configurations), -n 5 -w 1           -> $OUT/tp_auto.csv
#   2. bench up  --seq 8192,16384 --heads 16 --causal both --peers 4,8
#                (8 configurations), -n 5 -w 1            -> $OUT/up_auto.csv
# Each row's "#   auto:" line says what auto chose and why; the summary lines say met / NOT met
# for auto_us <= 1.05 best_other_us, tuned_us <= 1.02 best_other_us, overlapped/auto >= 1.10 in
# the comm/compute band and auto near bound. Everything is logged to $OUT/auto.log. Expected
# wall time under 1 minute (the overlap run of this subset: tp 16 s, up 3 s; auto adds at most
# one variant per row and UP one pilot of its plan); at most 180 s: each bench stops starting
# configurations after its --max-time (tp 70 s, up 80 s) and is killed 15 s after that.
# The model uses PROFILE when given, else bench/results/<area>/profile.json, else the embedded
# profile (scripts/steps.sh pick_profile).
# usage: OUT=dir scripts/gpu_auto.sh [BUILD_DIR]      (BUILD_DIR defaults to build)
set -u
XS_VENV=${XS_VENV:-/opt/torch/.venv}
if [ -z "${VIRTUAL_ENV:-}" ] && [ -d "$XS_VENV" ]; then
    export VIRTUAL_ENV="$XS_VENV" PATH="$XS_VENV/bin:$PATH"
fi

B=${1:-${BUILD:-build}}
OUT=${OUT:-out}
mkdir -p "$OUT"
LOG="$OUT/auto.log"
: >"$LOG"

. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"

say "# gpu_auto.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) build=$B out=$OUT"
say "# git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

X=$(xstage_with tp "$B")
if [ -z "$X" ]; then
    say "FAIL: $B/xstage lacks the CUDA bench subcommands"
    exit 1
fi

pick_profile "${PROFILE:-}" tp
say "$PROFILE_LINE"
step bench_tp_auto 85 "$X" bench tp --op gemm_rs,ag_gemm,mlp --model llama3-8b,llama3-70b \
    --m 4096 --peers 4,8 -n 5 -w 1 --max-time 70 ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} \
    --csv "$OUT/tp_auto.csv"

pick_profile "${PROFILE:-}" up
say "$PROFILE_LINE"
step bench_up_auto 95 "$X" bench up --seq 8192,16384 --heads 16 --causal both --peers 4,8 \
    -n 5 -w 1 --max-time 80 ${PROFILE_ARGS[@]+"${PROFILE_ARGS[@]}"} --csv "$OUT/up_auto.csv"
case "$X" in "${TMPDIR:-/tmp}"/xstage-tp.*) rm -f "$X" ;; esac

# the new columns side by side
if [ -s "$OUT/tp_auto.csv" ]; then
    echo
    grep -E '^(op,|[a-z_]+,)' "$OUT/tp_auto.csv" |
        awk -F, 'NR==1{for(i=1;i<=NF;i++)c[$i]=i; printf "%-7s %-11s %2s %9s %9s %9s %9s %-22s %9s %9s %-12s %6s %3s\n","op","model","P","shaped","overlap","auto","auto_pred","auto","tuned","bound","best","c/c","ok"; next}
             {printf "%-7s %-11s %2s %9.1f %9.1f %9.1f %9.1f %-22.22s %9.1f %9.1f %-12s %6.3f %3s\n",$c["op"],$c["model"],$c["peers"],$c["shaped_us"],$c["overlapped_us"],$c["auto_us"],$c["auto_pred_us"],$c["auto"],$c["tuned_us"],$c["bound_us"],$c["best_other"],$c["comm_over_compute"],$c["verified"]}'
fi
if [ -s "$OUT/up_auto.csv" ]; then
    echo
    grep -E '^(seq,|[0-9]+,)' "$OUT/up_auto.csv" |
        awk -F, 'NR==1{for(i=1;i<=NF;i++)c[$i]=i; printf "%6s %3s %2s %2s %9s %9s %9s %9s %-16s %9s %9s %-10s %6s %3s\n","seq","H","c","P","fa","fused","overlap","auto","auto","tuned","bound","best","c/c","ok"; next}
             {printf "%6s %3s %2s %2s %9.1f %9.1f %9.1f %9.1f %-16.16s %9.1f %9.1f %-10s %6.3f %3s\n",$c["seq"],$c["heads"],$c["causal"],$c["peers"],$c["fa_us"],$c["fused_us"],$c["overlapped_us"],$c["auto_us"],$c["auto"],$c["tuned_us"],$c["bound_us"],$c["best_other"],$c["comm_over_compute"],$c["verified"]}'
fi
echo
grep -E '^#   auto:' "$LOG"
echo
grep -E '^# (summary: (auto|tuned|overlapped_us/auto)|bench (tp|up))' "$LOG" | tail -n 20
printf '%s\n' "${results[@]}"
[ "$fails" -eq 0 ] && echo "gpu_auto: ALL PASS" || echo "gpu_auto: SOME STEPS FAILED"
[ "$fails" -eq 0 ]
