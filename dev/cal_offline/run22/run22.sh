#!/usr/bin/env bash
# run22.sh - redo run 22's offline trials (docs/MODEL.md "Run 22"; README.md here). CPU only, from
# the repository root after `make build/xstage build/dev/cal_offline/refit`. The groups refits
# take about a minute each on two cores, the others a few seconds.
#   WORK=dir (default /tmp/run22)  where the recorded calibrations are unpacked and refitted
set -eu
D=dev/cal_offline/run22
W=${WORK:-/tmp/run22}
R=bench/results
mkdir -p "$W/cal" "$W/refit"
# the recorded calibrations and validates of runs 18-20, one folder per call
for t in $R/h200-2026-11-30-r18/h200_call*_s18.tar.gz $R/h200-2026-11-30-r19/h200_call*_s1[89].tar.gz; do
    run=$(basename "$(dirname "$t")" | sed 's/.*-//')
    c="$W/cal/${run}_$(basename "$t" | cut -d_ -f2)"
    mkdir -p "$c" && tar xzf "$t" -C "$c"
done
c="$W/cal/r20_call2"
mkdir -p "$c"
zcat $R/h200-2026-11-30-r20/h200_call2_calib_h200_host_samples.csv.gz >"$c/samples_keep.csv"
cp $R/h200-2026-11-30-r20/h200_call2_calib_validate.csv "$c/validate_keep_fit_a.csv"
cp $R/h200-2026-11-30-r20/h200_call2_calib_validate_rows.csv "$c/validate_keep_fit_a_rows.csv"
# worktrees with the trial patches
P=$PWD
for v in groups fit_variants; do
    [ -d "$W/xp_$v" ] || { git worktree add -q "$W/xp_$v" HEAD &&
        (cd "$W/xp_$v" && git apply "$P/$D/$v.patch" && make -s build/xstage build/dev/cal_offline/refit); }
done
refit() { # NAME REFIT [ENV=VALUE ...]: every calibration's samples refitted into $W/refit/NAME
    local name=$1 bin=$2
    shift 2
    mkdir -p "$W/refit/$name"
    for c in "$W"/cal/*/; do
        for st in keep flush; do
            s=$c/samples_$st.csv
            [ -f "$s" ] || s=$c/samples_${st}_d4.csv
            [ -f "$s" ] || continue
            o="$W/refit/$name/$(basename "$c")_$st.json"
            [ -f "$o" ] || env "$@" "$bin" "$s" "$o" 2>"$o.log"
        done
    done
}
refit ctl build/dev/cal_offline/refit
refit adopt "$W/xp_fit_variants/build/dev/cal_offline/refit" XS_FIT_ADOPT_LOSS=1
refit medw0 "$W/xp_fit_variants/build/dev/cal_offline/refit" XS_FIT_MEDW=0
refit both "$W/xp_fit_variants/build/dev/cal_offline/refit" XS_FIT_MEDW=0 XS_FIT_ADOPT_LOSS=1
refit groups "$W/xp_groups/build/dev/cal_offline/refit" XS_GROUPS=$D/groups_r14.txt \
    XS_FIT_GROUPS=0.5,0.6,0.75
# the variants' profiles are read by the head's xstage; a field it lacks would be refused
for f in "$W"/refit/{ctl,adopt,medw0,both}/*.json; do
    python3 -c "import json,sys; p=json.load(open(sys.argv[1])); p.pop('group_capacity_bytes',None); json.dump(p,open(sys.argv[1],'w'),indent=2)" "$f"
done
XSTAGE=build/xstage python3 $D/sens.py bench/results >$D/sens.txt
for v in "ctl:this fit" "adopt:XS_FIT_ADOPT_LOSS=1" "medw0:XS_FIT_MEDW=0" \
    "both:XS_FIT_MEDW=0 XS_FIT_ADOPT_LOSS=1"; do
    echo "== ${v%%:*} (refit: ${v#*:})"
    XSTAGE=build/xstage python3 $D/chips_eval.py --own -v "$W/cal" "$W/refit/${v%%:*}" | grep -v '^  r'
done >$D/variants_own.txt
{
    echo "== this fit (ctl), on the calibrations the groups refit covers"
    XSTAGE=build/xstage python3 $D/chips_eval.py "$W/cal" "$W/refit/ctl"
    XSTAGE=build/xstage python3 $D/chips_eval.py --own "$W/cal" "$W/refit/ctl" | grep -v '^  r'
    echo "== groups"
    XS_GROUPS=$D/groups_r14.txt XSTAGE="$W/xp_groups/build/xstage" python3 $D/chips_eval.py "$W/cal" "$W/refit/groups"
    XS_GROUPS=$D/groups_r14.txt XSTAGE="$W/xp_groups/build/xstage" python3 $D/chips_eval.py --own "$W/cal" "$W/refit/groups" | grep -v '^  r'
} >$D/groups_eval.txt
# run 22's own chips: unpack the recorded files the way perk24.py reads them
for n in 2 3 4 5 6 7 8 9 10 11 12; do
    c="$W/r22/c$n"
    mkdir -p "$c"
    b=$R/h200-2026-11-30-r22/h200_call$n
    cp "${b}_profile.json" "$c/profile.json"
    zcat "${b}_samples.csv.gz" >"$c/samples.csv"
    for f in validate_a validate_a_rows validate_b validate_b_rows map_K24; do cp "${b}_$f.csv" "$c/$f.csv"; done
done
XSTAGE=build/xstage python3 $D/perk24.py "$W/r22" >$D/perk24.txt
