#!/bin/sh
# Print what predict, plan and criterion say about every examples/ schedule, on the embedded
# profile and on the calibrated test profile. tests/cli/test_golden.sh compares this with
# tests/golden/model.out: refactoring the model, the engine or the planner must leave it
# byte-identical. Usage: tests/golden/gen.sh BUILD_DIR > tests/golden/model.out
build=${1:-build}
X="$build/xstage"
T=$(mktemp -d /tmp/xs-golden-XXXXXX)
trap 'rm -rf "$T"' EXIT
for prof in "" "--profile tests/data/h200_host_profile.json"; do
    for s in examples/*.csv; do
        for sync in "" "--sync"; do
            echo "== predict $s $sync $prof"
            "$X" predict --schedule "$s" $sync $prof --csv - 2>&1
        done
        echo "== plan $s $prof"
        "$X" plan --schedule "$s" $prof --out "$T/plan.csv" 2>&1 | sed "s|$T/|TMP/|"
        cat "$T/plan.csv"
        echo "== plan --no-move $s $prof"
        "$X" plan --schedule "$s" --no-move --headroom 0.7 $prof 2>&1
    done
    for k in 8 24 66 132; do
        for b in 4K 32K 256K; do
            for g in 0 1us 100us; do
                echo "== criterion $k $b $g $prof"
                "$X" criterion --producers $k --bytes $b --gap $g $prof 2>&1
            done
        done
    done
done
