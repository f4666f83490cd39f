"""Run 17 offline: the knee per calibrated K read from calibrate's own capacity samples (the
geometric mean of the last unstalled and the first stalled volume), interpolated in K for each
validate schedule and imposed on the profile (capacity_bytes = knee(K) - K (q + beta)), against the
profile as fitted, on that call's validate rows. Set XS_OV_FRAC/XS_OV_NS with a build of
experiment.patch (XSTAGE) for the overflow transient too. Usage: kneetable.py SAMPLES.gz PROFILE ROWS..."""
import sys, gzip, csv, json, statistics as st, collections, math, os
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
def score(vrows, prof, tab, P):
    recs = list(csv.DictReader(l for l in open(vrows) if not l.startswith('#')))
    sched = collections.OrderedDict()
    for rr in recs: sched.setdefault(rr['schedule'], []).append(rr)
    res = []
    per = P['queue_bytes_per_producer'] + P['buffer_bytes_per_producer']
    for name, rr in sched.items():
        K = max(int(x['producers']) for x in rr)
        sets = []
        if tab:
            q = qk.interp(tab, K) - K * per
            sets = ['capacity_bytes=%g' % max(q, 65536)]
        pr = qk.predict([(x['producers'], x['bytes_per_producer'], x['gap_ns']) for x in rr], prof, sets, rr[0]['sync'] == '1')
        mt = float(rr[-1]['meas_end_ns']); pt = float(pr[-1]['end_ns'])
        res.append((name, 100 * (pt / mt - 1)))
    return res
samp, prof = sys.argv[1], sys.argv[2]
P = json.load(open(prof)); tab = knees(samp, prof)
print('knees MiB: ' + ' '.join('%d:%.2f' % (k, v / 2**20) for k, v in sorted(tab.items())), ' model Q(K): ' + ' '.join('%d:%.2f' % (k, (P['capacity_bytes'] + k * (P['queue_bytes_per_producer'] + P['buffer_bytes_per_producer'])) / 2**20) for k in sorted(tab)))
for v in sys.argv[3:]:
    for lab, t in (('profile', None), ('knee tab', tab)):
        res = score(v, prof, t, P)
        ae = [abs(e) for _, e in res]; w = max(res, key=lambda x: abs(x[1]))
        print('  %-34s %-8s med %4.1f max %6.1f (%s %+.1f)' % (os.path.basename(v), lab, st.median(ae), max(ae), w[0], w[1]))
