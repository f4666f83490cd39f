#!/usr/bin/env bash
# gpu_session18.sh - run 18 (bench/results/h200-2026-11-30-r18): model variants side by side on
# one chip, each validated with the suite it sizes itself (issue 3; docs/MODEL.md "Run 18").
# Validate scales its capacity sweep by the profile's own Q(K), so a model change can be judged
# offline on recorded validate rows only where it leaves Q(K) alone: a fit that moves the knee
# also moves the bursts it would have been validated on. Here every variant is validated on the
# GPU with its own profile, from the same calibration samples, on the same chip, in turns:
#   old  the binary of fc3ca6e ($OLD/xstage), its profile refitted from this call's samples by
#        the same code ($OLD/refit; bit for bit what its calibrate fits);
#   l0   this binary, no overflow loss (the fit's grid entry 0: Q and the skew as fitted);
#   l2s  overflow loss 0.2 over 20 us, l4s 0.4 over 20 us, l4 0.4 at once: the fit's grid
#        entries, each with its own polished Q and skew (calibrate's "## overflow loss" table),
#        applied with --set to this binary's profile;
#   fit  the profile calibrate writes: at 208a534 (calls 1-3) whichever entry scored best on the
#        samples; from call 4 on entry 0 (the loss is scored, not adopted).
# VARIANTS (default "old l0 l2s l4s l4") and REPS_KEEP (default "a b") choose.
# PART=ab: keep, then flush: calibrate; the old refit; validate every variant (keep: twice,
# flush: once) in turns. PART=check: faults.sh and compute-sanitizer (steps.sh replay_checks).
# Writes $OUT/session18.log and s18.tar.gz.
# Usage: OUT=dir [COMMIT=sha] [OLD=dir] [PART=ab|check] [STATES="keep flush"] [VARIANTS=...]
#        [REPS_KEEP="a b"] scripts/gpu_session18.sh
set -u
OUT=${OUT:-./out-s18}
X=${BUILD:-build}/xstage
OLD=${OLD:-build-old}
mkdir -p "$OUT"
LOG="$OUT/session18.log"
: >"$LOG"
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
say "# gpu_session18.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit=${COMMIT:-unknown} part=${PART:-ab}"
log_device

# the --set arguments of grid entry LOSS NS from calibrate's table in LOG (the last one printed)
grid_sets() {
    awk -v l="$1" -v n="$2" '
        /^## overflow loss/ { t = 1; delete q; next }
        t && /^ *loss/ { next }
        t && NF == 5 && $1 + 0 == l + 0 && $2 + 0 == n + 0 { q[0] = $3; q[1] = $4 }
        t && NF != 5 { t = 0 }
        END { if (1 in q) printf "--set overflow_capacity_loss=%s --set overflow_loss_ns=%s --set capacity_bytes=%s --set arbitration_skew=%s", l, n, q[0], q[1] }
    ' "$LOG"
}

# validate state $1, variant $2, run $3
val() {
    local d=$1 v=$2 n=$3 bin=$X prof="$OUT/profile_${1}.json" sets=""
    case $v in
    old) bin=$OLD/xstage prof="$OUT/profile_${d}_old.json" ;;
    l0) sets=$(grid_sets 0 0) ;;
    l2s) sets=$(grid_sets 0.2 20000) ;;
    l4s) sets=$(grid_sets 0.4 20000) ;;
    l4) sets=$(grid_sets 0.4 0) ;;
    fit) sets=" " ;;
    esac
    if [ ! -s "$prof" ] || { [ "$v" != old ] && [ -z "$sets" ]; }; then
        results+=("FAIL  validate $d $v $n (no profile or no grid entry)")
        fails=$((fails + 1))
        return
    fi
    # shellcheck disable=SC2086
    step "validate --dest $d ($v $n) $sets" 200 "$bin" validate --dest "$d" --profile "$prof" \
        $sets --rows "$OUT/validate_${d}_${v}_${n}_rows.csv" --csv "$OUT/validate_${d}_${v}_$n.csv"
}

case ${PART:-ab} in
ab)
    for d in ${STATES:-keep flush}; do
        step "calibrate --dest $d" 120 "$X" calibrate --target host --dest "$d" \
            --out "$OUT/profile_${d}.json" --samples "$OUT/samples_${d}.csv"
        [ -s "$OUT/samples_${d}.csv" ] &&
            step "old refit ($d)" 120 "$OLD/refit" "$OUT/samples_${d}.csv" "$OUT/profile_${d}_old.json"
        reps=${REPS_KEEP:-a b}
        [ "$d" = flush ] && reps="a"
        for n in $reps; do
            for v in ${VARIANTS:-old l0 l2s l4s l4}; do val "$d" "$v" "$n"; done
        done
    done
    ;;
check)
    replay_checks
    ;;
*)
    say "unknown PART=${PART}"
    fails=1
    ;;
esac
session_end s18 gpu_session18
