"""Run 17 call 7: the knee's transition per K: for each burst (kp_K_B.csv), the volume, the
share of runs that stalled (total over 1.5x o + B/r plus 1 us), the median and the range of the
totals. Usage: transition.py DIR [r_B_per_ns o_ns]"""
import sys, glob, os, re, statistics as st, collections
d = sys.argv[1]
r = float(sys.argv[2]) if len(sys.argv) > 2 else 53.2
o = float(sys.argv[3]) if len(sys.argv) > 3 else 159.0
runs = collections.defaultdict(dict)
for f in glob.glob(os.path.join(d, 'kp_*_*.csv')):
    k, b = map(int, re.findall(r'kp_(\d+)_(\d+)\.csv', f)[0])
    runs[k][b] = [float(l.split(',')[1]) for l in open(f) if l[0].isdigit()]
for k in sorted(runs):
    print('K = %d' % k)
    for b in sorted(runs[k]):
        t = runs[k][b]
        t0 = o + b / r
        sh = sum(x > 1.5 * t0 + 1000 for x in t) / len(t)
        print('  %6.3f MiB  stalled %3.0f %%  median %6.1f us  range %5.1f-%5.1f us  (%d runs)' % (
            k * b / 2**20, 100 * sh, st.median(t) / 1e3, min(t) / 1e3, max(t) / 1e3, len(t)))
