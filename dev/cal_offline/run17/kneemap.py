"""Run 17's knee map: per producer count K and total volume V, the median burst total, the share
of runs that stalled (total over 1.5x the unconstrained issue time o + B/r plus 1 us) and the
knee (the smallest V where half the runs stall). Usage: kneemap.py DIR [r_B_per_ns o_ns]"""
import statistics as st
from bursts import args, load, share_stalled
d, r, o = args()
runs = load(d)
print('median total (us) / share of runs stalled; V in MiB')
knees = {}
for k in sorted(runs):
    cells = []
    knee = None
    for b in sorted(runs[k]):
        t = runs[k][b]
        sh = share_stalled(t, b, r, o)
        if knee is None and sh >= 0.5:
            knee = k * b
        cells.append('%6.1f/%3.0f' % (st.median(t) / 1e3, 100 * sh))
    knees[k] = knee
    print('%4d %s  knee %s' % (k, ' '.join(cells), '%.2f MiB' % (knee / 2**20) if knee else '-'))
print('     ' + ' '.join('%10.2f' % (0.5 * 2 ** (i / 4)) for i in range(16)))
