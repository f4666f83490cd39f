#!/bin/bash
# Run 19 offline (issue 3): refit run 18's 16 calibrations (8 GPUs x keep/flush) under model and fit
# variants and re-predict every recorded validate schedule of run 18 with each (ab_offline.py).
# Needs a worktree with variants.patch applied and built (make build/xstage
# build/dev/cal_offline/refit): XP=/path/to/that/worktree. Output: variants.txt.
set -euo pipefail
XP=${XP:?the patched worktree}
R18=bench/results/h200-2026-11-30-r18
T=$(mktemp -d)
for c in 1 2 3 4 5 6 7 8; do mkdir -p $T/c$c; tar xzf $R18/h200_call${c}_s18.tar.gz -C $T/c$c; done
refit() { # DIR ENV...
    local name=$1 d=$T/$1; shift; mkdir -p $d
    for c in 1 2 3 4 5 6 7 8; do for s in keep flush; do
        env "$@" $XP/build/dev/cal_offline/refit $T/c$c/samples_$s.csv $d/c${c}_$s.json 2> $d/c${c}_$s.log
    done; done
    echo "$name ($*): fit score mean $(grep -h 'event model err' $d/c*.log | awk '{s+=$7; n++} END{printf "%.2f %%", s/n}')"
}
setp() { # SRC DST FIELD=VALUE...
    local src=$T/$1 dst=$T/$2; shift 2; mkdir -p $dst
    for f in $src/*.json; do python3 - "$f" "$dst/$(basename $f)" "$@" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for kv in sys.argv[3:]:
    k, v = kv.split('='); p[k] = float(v)
json.dump(p, open(sys.argv[2], 'w'))
PY
    done
}
ab() { XSTAGE=$XP/build/xstage python3 dev/cal_offline/run19/ab_offline.py $R18 "$@"; }
refit fit X=0
refit beta12 FORCE_BETA=12288
refit beta8 FORCE_BETA=8192
refit beta16_l02_20us FORCE_BETA=16384 FORCE_LOSS=0.2 FORCE_LOSS_NS=20000
refit beta12_l02_20us FORCE_BETA=12288 FORCE_LOSS=0.2 FORCE_LOSS_NS=20000
refit beta12_l03_40us FORCE_BETA=12288 FORCE_LOSS=0.3 FORCE_LOSS_NS=40000
refit gpc0_slow SKEW_MODE=1
refit gpc0_slow_rest_fast SKEW_MODE=2
refit knee_w4 KNEE_W=4
for l in 0.2 0.3; do for t in 50000 100000; do
    setp fit held_l${l}_$t overflow_capacity_loss=$l overflow_loss_ns=$t; done; done
for s in 0.25 0.5 1.0; do setp fit skew$s arbitration_skew=$s; done
ab fit=refit:$T/fit beta12=refit:$T/beta12 beta8=refit:$T/beta8 \
   beta16_l02_20us=refit:$T/beta16_l02_20us beta12_l02_20us=refit:$T/beta12_l02_20us \
   beta12_l03_40us=refit:$T/beta12_l03_40us \
   held_l0.2_50us=refit:$T/held_l0.2_50000 held_l0.2_100us=refit:$T/held_l0.2_100000 \
   held_l0.3_50us=refit:$T/held_l0.3_50000 held_l0.3_100us=refit:$T/held_l0.3_100000 \
   skew0.25=refit:$T/skew0.25 skew0.5=refit:$T/skew0.5 skew1.0=refit:$T/skew1.0 \
   knee_w4=refit:$T/knee_w4
SKEW_MODE=1 ab gpc0_slow=refit:$T/gpc0_slow
SKEW_MODE=2 ab gpc0_slow_rest_fast=refit:$T/gpc0_slow_rest_fast
rm -rf $T
