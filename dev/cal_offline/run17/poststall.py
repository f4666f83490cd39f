"""Run 17's knee map past the knee: per K, the stalled bursts (median total over 5 us) but the
first, fitted to T = (V - A) / R' by least squares, and A = V - R T at the drain step's R for
each of them (what the burst absorbed, if the link drained at R all along). Usage:
poststall.py DIR [R_B_per_ns]"""
import sys, statistics as st
from bursts import load
d = sys.argv[1]
R = float(sys.argv[2]) if len(sys.argv) > 2 else 52.6
med = {k: {b: st.median(t) for b, t in bb.items()} for k, bb in load(d).items()}
for k in sorted(med):
    pts = [(k * b, t) for b, t in sorted(med[k].items()) if t > 5000][1:]
    if len(pts) < 2:
        continue
    n = len(pts)
    sx = sum(v for v, _ in pts); sy = sum(t for _, t in pts)
    sxx = sum(v * v for v, _ in pts); sxy = sum(v * t for v, t in pts)
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    icpt = (sy - slope * sx) / n
    print('%4d  R\' %.1f B/ns  A %.2f MB   A at R = %.1f B/ns: %s' % (
        k, 1 / slope, -icpt / slope / 1e6, R, ' '.join('%.2f' % ((v - R * t) / 1e6) for v, t in pts)))
