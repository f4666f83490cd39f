#!/usr/bin/env bash
# lossmap.sh - run 17's knee maps (calls 5, keep; 6, flush) against their chip's samples refitted
# by this code, for each entry of the fit's overflow-loss grid (its Q and skew polished; the
# refit prints the grid): median |error| of every burst's end_ns (run17/predmap.py).
# Usage: dev/cal_offline/run18/lossmap.sh   (after `make build/xstage build/dev/cal_offline/refit`;
# unpacks the two tarballs under a temporary folder)
set -eu
T=$(mktemp -d /tmp/xs_lossmap_XXXXXX)
R=bench/results/h200-2026-11-30-r17
for c in 5:keep 6:flush; do
    n=${c%:*} st=${c#*:}
    mkdir -p "$T/c$n"
    tar xzf "$R/h200_call${n}_bursts.tar.gz" -C "$T/c$n"
    zcat "$R/h200_call${n}_samples_$st.csv.gz" >"$T/s$n.csv"
    build/dev/cal_offline/refit "$T/s$n.csv" "$T/p$n.json" 2>"$T/g$n.txt" >/dev/null
    awk '/^## overflow loss/ { t = 1; next } t && NF == 5 && $1 ~ /^[0-9]/ { print $1, $2, $3, $4, $5 }' "$T/g$n.txt" |
        while read -r l ns q sk sc; do
            printf 'call %s (%s): loss %s over %s ns, Q %s, skew %s, fit score %s: %s\n' "$n" "$st" \
                "$l" "$ns" "$q" "$sk" "$sc" "$(XSTAGE=build/xstage python3 dev/cal_offline/run17/predmap.py \
                "$T/c$n" "$T/p$n.json" --set overflow_capacity_loss="$l" --set overflow_loss_ns="$ns" \
                --set capacity_bytes="$q" --set arbitration_skew="$sk" | tail -n 1)"
        done
done
rm -rf "$T"
