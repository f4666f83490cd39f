"""Run 17 call 7: the knee's transition per K: for each burst (kp_K_B.csv), the volume, the
share of runs that stalled (total over 1.5x o + B/r plus 1 us), the median and the range of the
totals. Usage: transition.py DIR [r_B_per_ns o_ns]"""
import statistics as st
from bursts import args, load, share_stalled
d, r, o = args()
runs = load(d)
for k in sorted(runs):
    print('K = %d' % k)
    for b in sorted(runs[k]):
        t = runs[k][b]
        sh = share_stalled(t, b, r, o)
        print('  %6.3f MiB  stalled %3.0f %%  median %6.1f us  range %5.1f-%5.1f us  (%d runs)' % (
            k * b / 2**20, 100 * sh, st.median(t) / 1e3, min(t) / 1e3, max(t) / 1e3, len(t)))
