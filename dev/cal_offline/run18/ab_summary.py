"""Run 18: one line per validate of scripts/gpu_session18.sh (model variants side by side), from
the calls' logs and tarballs in a results folder. Writes CSV to stdout, then a tally per variant
of validates within the 15 % maximum. Usage: ab_summary.py RESULTS_DIR
(bench/results/h200-2026-11-30-r18: h200_callN_session18.log.gz, h200_callN_s18.tar.gz)"""
import sys, os, re, gzip, glob, tarfile, csv, io, collections

d = sys.argv[1]
w = csv.writer(sys.stdout, lineterminator='\n')
w.writerow(['call', 'commit', 'gpu', 'state', 'variant', 'rep', 'totals_median_pct',
            'totals_max_pct', 'per_row_median_pct', 'sync_vs_t_iss_last_pct', 'worst_schedule',
            'worst_err_pct', 'sets'])
tally = collections.defaultdict(lambda: [0, 0])
for log in sorted(glob.glob(os.path.join(d, 'h200_call*_session18.log.gz')),
                  key=lambda f: int(re.findall(r'call(\d+)', f)[0])):
    call = int(re.findall(r'call(\d+)', log)[0])
    text = gzip.open(log, 'rt').read()
    commit = re.findall(r'commit=(\S+)', text)[0]
    gpu = re.findall(r'GPU-[0-9a-f]{8}', text)[0]
    tab = {}
    with tarfile.open(os.path.join(d, 'h200_call%d_s18.tar.gz' % call)) as t:
        for m in t.getmembers():
            n = os.path.basename(m.name)
            if re.match(r'validate_\w+_\w+_[a-c]\.csv$', n):
                tab[n] = list(csv.DictReader(l for l in io.TextIOWrapper(t.extractfile(m))
                                             if not l.startswith('#')))
    # one block per validate: its header line up to the next '=== ... rc=' line
    for m in re.finditer(r'^=== validate --dest (\w+) \((\w+) (\w)\) ?(.*?) \(limit[^\n]*\n(.*?)^=== validate[^\n]*rc=',
                         text, re.S | re.M):
        st, var, rep, sets, body = m.groups()
        tot = re.search(r'# totals: median \|error\| ([\d.]+)%.*?max ([\d.]+)%', body)
        row = re.search(r'# per-row issue_max_ns: median \|error\| ([\d.]+)%', body)
        syn = re.search(r'\(T_iss_last\) ([-+][\d.]+)%', body)
        rows = tab.get('validate_%s_%s_%s.csv' % (st, var, rep), [])
        worst = max(rows, key=lambda r: abs(float(r['err_total_pct'])), default=None)
        w.writerow([call, commit, gpu, st, var, rep, tot and tot.group(1), tot and tot.group(2),
                    row and row.group(1), syn and syn.group(1),
                    worst and worst['schedule'], worst and worst['err_total_pct'], sets.strip()])
        if tot:
            tally[var][0] += float(tot.group(2)) <= 15
            tally[var][1] += 1
for v, (k, n) in tally.items():
    print('# %-4s %2d of %2d validates within the 15 %% maximum' % (v, k, n))
