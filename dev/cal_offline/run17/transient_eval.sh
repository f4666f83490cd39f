#!/usr/bin/env bash
# transient_eval.sh - the overflow transient of dev/cal_offline/experiment.patch (after the stage
# first fills, the drain runs at R*(1-FRAC) for NS ns) against today's model, offline: every
# calibration of runs 16 (calls 6-12) and 17 (calls 1-3, 6-8) refitted from its samples with
# the transient held at FRAC, NS (0 0: today's model), then its call's validate rows predicted
# (scripts/validate_offline.py). Prints one line per validate: call, state, totals median and
# maximum, per-row median.
# Usage: RB=build-with-the-patch FRAC=0.3 NS=20000 dev/cal_offline/run17/transient_eval.sh
set -u
RB=${RB:?the build folder of a tree with experiment.patch applied}
FRAC=${FRAC:-0} NS=${NS:-0}
T=$(mktemp -d /tmp/xs_tev_XXXXXX)
export XS_OV_FRAC=$FRAC XS_OV_NS=$NS XSTAGE=$RB/xstage
one() { # samples(.gz) rows... : refit, then score each rows file
    local s=$1 tag=$2
    shift 2
    case $s in *.gz) zcat "$s" >"$T/s.csv" ;; *) cp "$s" "$T/s.csv" ;; esac
    "$RB/dev/cal_offline/refit" "$T/s.csv" "$T/p.json" >/dev/null 2>&1 || { echo "$tag refit failed"; return; }
    for v in "$@"; do
        [ -s "$v" ] || continue
        printf '%-28s %s\n' "$tag $(basename "$v" _rows.csv | sed 's/.*validate_//')" \
            "$(python3 scripts/validate_offline.py "$v" "$T/p.json" | tail -n 1)"
    done
}
D=bench/results/h200-2026-11-30-r16
for c in 6 7 8 9 10 11 12; do
    for d in keep flush; do
        one "$D/h200_call${c}_samples_$d.csv.gz" "r16c$c" "$D/h200_call${c}_validate_${d}_n16a_rows.csv" \
            "$D/h200_call${c}_validate_${d}_n16b_rows.csv"
    done
done
D=bench/results/h200-2026-11-30-r17
for c in 1 2 3 8; do
    for d in keep flush; do
        one "$D/h200_call${c}_samples_$d.csv.gz" "r17c$c" "$D/h200_call${c}_validate_${d}_n16a_rows.csv" \
            "$D/h200_call${c}_validate_${d}_n16b_rows.csv"
    done
done
one "$D/h200_call6_samples_flush.csv.gz" r17c6 "$D/h200_call6_validate_flush_rows.csv"
one "$D/h200_call7_samples_keep.csv.gz" r17c7 "$D/h200_call7_validate_keep_rows.csv"
rm -rf "$T"
