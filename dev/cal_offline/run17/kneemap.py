"""Run 17's knee map: per producer count K and total volume V, the median burst total, the share
of runs that stalled (total over 1.5x the unconstrained issue time o + B/r plus 1 us) and the
knee (the smallest V where half the runs stall). Usage: kneemap.py DIR [r_B_per_ns o_ns]"""
import sys, glob, os, re, statistics as st, collections
d = sys.argv[1]
r = float(sys.argv[2]) if len(sys.argv) > 2 else 53.2
o = float(sys.argv[3]) if len(sys.argv) > 3 else 159.0
runs = collections.defaultdict(dict)
for f in glob.glob(os.path.join(d, 'kp_*_*.csv')):
    k, b = map(int, re.findall(r'kp_(\d+)_(\d+)\.csv', f)[0])
    tot = [float(l.split(',')[1]) for l in open(f) if l[0].isdigit()]
    runs[k][b] = tot
vols = sorted({round(k * b / 2**20, 2) for k in runs for b in runs[k]})
print('median total (us) / share of runs stalled; V in MiB')
knees = {}
for k in sorted(runs):
    cells = []
    knee = None
    for b in sorted(runs[k]):
        t = runs[k][b]
        t0 = o + b / r
        sh = sum(x > 1.5 * t0 + 1000 for x in t) / len(t)
        if knee is None and sh >= 0.5:
            knee = k * b
        cells.append('%6.1f/%3.0f' % (st.median(t) / 1e3, 100 * sh))
    knees[k] = knee
    print('%4d %s  knee %s' % (k, ' '.join(cells), '%.2f MiB' % (knee / 2**20) if knee else '-'))
print('     ' + ' '.join('%10.2f' % (0.5 * 2 ** (i / 4)) for i in range(16)))
