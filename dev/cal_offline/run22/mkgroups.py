import csv, sys
def gpc(s):
    if s < 64: return (s // 2) % 8
    if s < 120: return 1 + ((s - 64) // 2) % 7
    if s < 124: return 6 + (s - 120) // 2
    return 0
def half(s): return 0 if gpc(s) in (1, 2, 3, 7) else 1
tab = {}
bad = 0
for r in csv.DictReader(open(sys.argv[1])):
    g = int(r['grid']); h = [half(int(x)) for x in r['smids'].split()]
    if g in tab and tab[g] != h: bad += 1
    tab.setdefault(g, h)
print('# groups per grid (half of the chip of each CTA), from', sys.argv[1], '; grids whose runs disagree:', bad)
for g in sorted(tab):
    print(g, ' '.join(map(str, tab[g])))
