"""Run 19: one line per validate of the three calls (bench/results/h200-2026-11-30-r19), from the
logs and tarballs: call, GPU, state, variant, repetition, the profile's Q and skew, totals median
and maximum, per-row median, the synchronised burst against T_iss_last, the worst schedule; then
the tally of validates within the 15 % maximum per variant. Usage: r19_summary.py RESULTS_DIR"""
import sys, os, re, gzip, glob, tarfile, csv, io, json, collections

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run18'))
from ab_summary import validates  # the session log's validate blocks and their figures

d = sys.argv[1]
w = csv.writer(sys.stdout, lineterminator='\n')
w.writerow(['call', 'gpu', 'state', 'variant', 'rep', 'capacity_bytes', 'arbitration_skew',
            'totals_median_pct', 'totals_max_pct', 'per_row_median_pct',
            'sync_vs_t_iss_last_pct', 'worst_schedule', 'worst_err_pct'])
tally = collections.defaultdict(lambda: [0, 0])
for log in sorted(glob.glob(os.path.join(d, 'h200_call*_session1?.log.gz'))):
    call, tag = re.findall(r'call(\d+)_session(\d+)', log)[0]
    text = gzip.open(log, 'rt').read()
    gpu = re.findall(r'GPU-[0-9a-f]{8}', text)[0]
    tab, prof = {}, {}
    with tarfile.open(os.path.join(d, 'h200_call%s_s%s.tar.gz' % (call, tag))) as t:
        for m in t.getmembers():
            n = os.path.basename(m.name)
            if re.match(r'validate_\w+_[a-c]\.csv$', n):
                tab[n] = list(csv.DictReader(l for l in io.TextIOWrapper(t.extractfile(m))
                                             if not l.startswith('#')))
            elif n.startswith('profile_') and n.endswith('.json'):
                prof[n[8:-5]] = json.load(t.extractfile(m))
    for st, var, rep, _, tmed, tmax, rmed, syn, worst in validates(text, tab):
        p = prof.get('%s_%s' % (st, var)) or (prof.get(st) if var == 'fit' else None)
        w.writerow([call, gpu, st, var, rep, p and round(p['capacity_bytes']),
                    p and p['arbitration_skew'], tmed, tmax, rmed, syn,
                    worst and worst['schedule'], worst and worst['err_total_pct']])
        if tmax:
            tally[var][0] += float(tmax) <= 15
            tally[var][1] += 1
for v, (k, n) in tally.items():
    print('# %-6s %2d of %2d validates within the 15 %% maximum' % (v, k, n))
