"""Run 17 offline: a capacity per K such that the event model's own stall criterion flips at the
knee measured on the same chip (the 50 % point of a knee map, interpolated in log V), for the
producer counts KS; interpolated in K for each validate schedule of that chip and imposed as
capacity_bytes. Usage: kneecap.py MAPDIR PROFILE KS(comma list) ROWS... (XSTAGE; XS_OV_FRAC,
XS_OV_NS with a build of experiment.patch)"""
import sys, os, math, json, statistics as st
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'run16')); sys.path.insert(0, HERE)
import qk, bursts
d, prof, ks = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(',')]
rows = sys.argv[4:]
P = json.load(open(prof)); r, o = P['issue_bytes_per_ns'], P['issue_overhead_ns']
runs = bursts.load(d); knee = {}
for k in ks:
    pts = sorted((k * b, bursts.share_stalled(t, b, r, o)) for b, t in runs[k].items())
    for (v0, s0), (v1, s1) in zip(pts, pts[1:]):
        if s0 < 0.5 <= s1:
            f = (0.5 - s0) / (s1 - s0); knee[k] = math.exp(math.log(v0) + f * (math.log(v1) - math.log(v0))); break
cap = {}
for k, v in sorted(knee.items()):
    b = int(v / k / 16) * 16
    thr = 1.5 * (o + b / r) + 1000
    lo, hi = 1e4, 2e7   # capacity: hi -> no stall, lo -> stall
    for _ in range(30):
        mid = math.sqrt(lo * hi)
        t = float(qk.predict([(k, b, 0)], prof, ['capacity_bytes=%g' % mid])[-1]['end_ns'])
        if t > thr: lo = mid
        else: hi = mid
    cap[k] = hi
print('knee MiB', ' '.join('%d:%.2f' % (k, v / 2**20) for k, v in sorted(knee.items())), '| capacity MB', ' '.join('%d:%.3f' % (k, c / 1e6) for k, c in sorted(cap.items())), '| profile Q %.3f' % (P['capacity_bytes'] / 1e6))
for v in rows:
    for lab, t in (('profile', None), ('per-K cap', cap)):
        res = [(n, e) for n, e, _ in qk.score(v, prof, t)]; ae = [abs(e) for _, e in res]; w = max(res, key=lambda x: abs(x[1]))
        print('  %-28s %-9s med %4.1f max %6.1f (%s %+.1f)' % (os.path.basename(v), lab, st.median(ae), max(ae), w[0], w[1]))
