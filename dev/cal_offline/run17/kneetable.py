"""Run 17 offline: the knee per calibrated K read from calibrate's own capacity samples (the
geometric mean of the last unstalled and the first stalled volume), interpolated in K for each
validate schedule and imposed on the profile (capacity_bytes = knee(K) - K (q + beta)), against the
profile as fitted, on that call's validate rows. Set XS_OV_FRAC/XS_OV_NS with a build of
experiment.patch (XSTAGE) for the overflow transient too. Usage: kneetable.py SAMPLES.gz PROFILE ROWS..."""
import sys, json, statistics as st, math, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run16'))
import qk
def knees(samp, prof):
    P = json.load(open(prof)); r = P['issue_bytes_per_ns']; o = P['issue_overhead_ns']
    d = qk.caps(samp); tab = {}
    for K, bb in sorted(d.items()):
        lo = hi = None
        for B in sorted(bb):
            mx = st.median(x[0] for x in bb[B])
            stalled = mx > 1.5 * (o + B / r) + 1000
            if stalled and hi is None: hi = K * B
            if not stalled and hi is None: lo = K * B
        if hi and lo: tab[K] = math.sqrt(lo * hi)
    return tab
samp, prof = sys.argv[1], sys.argv[2]
P = json.load(open(prof)); tab = knees(samp, prof)
per = P['queue_bytes_per_producer'] + P['buffer_bytes_per_producer']
print('knees MiB: ' + ' '.join('%d:%.2f' % (k, v / 2**20) for k, v in sorted(tab.items())), ' model Q(K): ' + ' '.join('%d:%.2f' % (k, (P['capacity_bytes'] + k * per) / 2**20) for k in sorted(tab)))
for v in sys.argv[3:]:
    for lab, t in (('profile', None), ('knee tab', tab)):
        cap = (lambda K, t=t: max(qk.interp(t, K) - K * per, 65536)) if t else None
        res = [(n, e) for n, e, _ in qk.score(v, prof, None, cap)]
        ae = [abs(e) for _, e in res]; w = max(res, key=lambda x: abs(x[1]))
        print('  %-34s %-8s med %4.1f max %6.1f (%s %+.1f)' % (os.path.basename(v), lab, st.median(ae), max(ae), w[0], w[1]))
