#!/usr/bin/env python3
"""mkgroups.py PLACEMENT_TABLE - the half of the chip of every CTA, per grid size, for $XS_GROUPS
of groups.patch (run 22). PLACEMENT_TABLE is run 14 call 11's `grid,run,smids` table; the half of
an SM is halves.py's (run 14's GPC map, GPCs 1, 2, 3, 7 against 0, 4, 5, 6). Prints
"n g_0 ... g_{n-1}" per grid size n, after a comment line that counts the grids whose recorded
runs put a CTA in a different half (the order of CTAs 0-7 alternates between launches).

    python3 dev/cal_offline/run22/mkgroups.py \
        bench/results/h200-2026-11-29-r14/h200_call11_placement_table.csv > groups_r14.txt
"""
import csv, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from halves import half  # noqa: E402

tab, bad = {}, 0
for r in csv.DictReader(open(sys.argv[1])):
    g = int(r['grid'])
    h = [half(int(x)) for x in r['smids'].split()]
    if g in tab and tab[g] != h:
        bad += 1
    tab.setdefault(g, h)
print('# groups per grid (half of the chip of each CTA), from', sys.argv[1],
      '; grids whose runs disagree:', bad)
for g in sorted(tab):
    print(g, ' '.join(map(str, tab[g])))
