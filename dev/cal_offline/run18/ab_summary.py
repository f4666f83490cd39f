"""Run 18: one line per validate of scripts/gpu_session18.sh (model variants side by side), from
the calls' logs and tarballs in a results folder. Writes CSV to stdout (`loss`: the overflow
loss of the profile validated, "old" for fc3ca6e's model), then tallies of validates within the
15 % maximum: per variant, and this code without a loss (l0, and fit where its profile has
none) against old. Usage: ab_summary.py RESULTS_DIR
(bench/results/h200-2026-11-30-r18: h200_callN_session18.log.gz, h200_callN_s18.tar.gz)"""
import sys, os, re, gzip, glob, tarfile, csv, io, json, collections


def validates(text, tab):
    """One tuple per `=== validate --dest STATE (VARIANT REP) ...` block of a session log: state,
    variant, repetition, the rest of the header (the --set arguments), totals median and maximum,
    per-row median and the synchronised burst against T_iss_last (strings, None where missing),
    and the worst schedule's row of its CSV (tab: CSV name -> rows; None if absent). Also used by
    run19/r19_summary.py."""
    for m in re.finditer(r'^=== validate --dest (\w+) \((\w+) (\w)\) ?([^\n]*?) \(limit[^\n]*\n'
                         r'(.*?)^=== validate[^\n]*rc=', text, re.S | re.M):
        st, var, rep, sets, body = m.groups()
        tot = re.search(r'# totals: median \|error\| ([\d.]+)%.*?max ([\d.]+)%', body)
        row = re.search(r'# per-row issue_max_ns: median \|error\| ([\d.]+)%', body)
        syn = re.search(r'\(T_iss_last\) ([-+][\d.]+)%', body)
        rows = tab.get('validate_%s_%s_%s.csv' % (st, var, rep), [])
        worst = max(rows, key=lambda r: abs(float(r['err_total_pct'])), default=None)
        yield (st, var, rep, sets, tot and tot.group(1), tot and tot.group(2),
               row and row.group(1), syn and syn.group(1), worst)


def main():
    d = sys.argv[1]
    w = csv.writer(sys.stdout, lineterminator='\n')
    w.writerow(['call', 'commit', 'gpu', 'state', 'variant', 'rep', 'totals_median_pct',
                'totals_max_pct', 'per_row_median_pct', 'sync_vs_t_iss_last_pct',
                'worst_schedule', 'worst_err_pct', 'loss', 'sets'])
    tally = collections.defaultdict(lambda: [0, 0])
    for log in sorted(glob.glob(os.path.join(d, 'h200_call*_session18.log.gz')),
                      key=lambda f: int(re.findall(r'call(\d+)', f)[0])):
        call = int(re.findall(r'call(\d+)', log)[0])
        text = gzip.open(log, 'rt').read()
        commit = re.findall(r'commit=(\S+)', text)[0]
        gpu = re.findall(r'GPU-[0-9a-f]{8}', text)[0]
        tab, prof = {}, {}
        with tarfile.open(os.path.join(d, 'h200_call%d_s18.tar.gz' % call)) as t:
            for m in t.getmembers():
                n = os.path.basename(m.name)
                if re.match(r'validate_\w+_\w+_[a-c]\.csv$', n):
                    tab[n] = list(csv.DictReader(l for l in io.TextIOWrapper(t.extractfile(m))
                                                 if not l.startswith('#')))
                elif re.match(r'profile_(keep|flush)\.json$', n):
                    prof[n[8:-5]] = json.load(t.extractfile(m))
        for st, var, rep, sets, tmed, tmax, rmed, syn, worst in validates(text, tab):
            ls = re.search(r'overflow_capacity_loss=(\S+) --set overflow_loss_ns=(\S+)', sets)
            loss = ('old' if var == 'old' else '%g/%g' % (float(ls.group(1)), float(ls.group(2)))
                    if ls else '%g/%g' % (prof[st]['overflow_capacity_loss'],
                                          prof[st]['overflow_loss_ns']))
            w.writerow([call, commit, gpu, st, var, rep, tmed, tmax, rmed, syn,
                        worst and worst['schedule'], worst and worst['err_total_pct'], loss,
                        sets.strip()])
            if tmax:
                ok = float(tmax) <= 15
                for key in [var] + (['this code, no loss'] if var in ('l0', 'fit') and
                                    loss == '0/0' else []):
                    tally[key][0] += ok
                    tally[key][1] += 1
    for v, (k, n) in tally.items():
        print('# %-18s %2d of %2d validates within the 15 %% maximum' % (v, k, n))


if __name__ == '__main__':
    main()
