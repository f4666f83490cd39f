#!/usr/bin/env python3
"""Run 19 offline: re-predict every recorded validate schedule of run 18 (all variants' rows, so
the isolated bursts come at many volumes) with a candidate profile per chip and state, and count
the validates whose suite maximum stays within 15 %. Measured numbers are never changed.

    ab_offline.py [-v] RESULTS_DIR VARIANT [VARIANT...]   (XSTAGE: the binary, default build/xstage)

Per variant: the count, then the schedules past 15 % tallied by name and sign (over: predicted
longer than measured); -v lists every one.

VARIANT is NAME=SPEC; SPEC is 'fit' (the chip's calibrate profile as written) or 'fit,SET,SET'
(with --set overrides, e.g. fit,overflow_capacity_loss=0.2,overflow_loss_ns=20000) or
'refit:DIR' (DIR/c<call>_<state>.json, profiles refitted offline from the call's samples).
Rows files are read from RESULTS_DIR/h200_call*_s18.tar.gz (unpacked to a temporary folder).
"""
import csv, glob, os, statistics as st, sys, tarfile, tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run16'))
import qk  # qk.predict: one schedule through `xstage predict` ($XSTAGE)


def schedules(path):
    recs = list(csv.DictReader(l for l in open(path) if not l.startswith('#')))
    out = {}
    for r in recs:
        out.setdefault(r['schedule'], []).append(r)
    return out


def main():
    verbose = '-v' in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a != '-v']
    res, specs = args[0], args[1:]
    tmp = tempfile.mkdtemp()
    for t in sorted(glob.glob(os.path.join(res, 'h200_call*_s18.tar.gz'))):
        call = os.path.basename(t).split('_')[1][4:]
        d = os.path.join(tmp, 'c' + call)
        os.makedirs(d)
        with tarfile.open(t) as tf:
            tf.extractall(d, filter='data')
    jobs = []
    for c in sorted(glob.glob(os.path.join(tmp, 'c*'))):
        for rows in sorted(glob.glob(os.path.join(c, 'validate_*_rows.csv'))):
            state = os.path.basename(rows).split('_')[1]
            jobs.append((os.path.basename(c), state, rows))
    pool = ThreadPoolExecutor(max(2, os.cpu_count() or 2))
    for spec in specs:
        name, how = spec.split('=', 1)
        within, tot, rowmeds, misses, medians = 0, 0, [], [], []
        for c, state, rows in jobs:
            if how.startswith('refit:'):
                prof, sets = os.path.join(how[6:], f'{c}_{state}.json'), []
            else:
                parts = how.split(',')
                prof, sets = os.path.join(tmp, c, f'profile_{state}.json'), parts[1:]
            sc = schedules(rows)
            futs = {n: pool.submit(qk.predict, [(r['producers'], r['bytes_per_producer'],
                                                 r['gap_ns']) for r in rr], prof, sets,
                                   rr[0]['sync'] == '1') for n, rr in sc.items()}
            errs, rowe = {}, []
            for n, rr in sc.items():
                pr = futs[n].result()
                mt, pt = float(rr[-1]['meas_end_ns']), float(pr[-1]['end_ns'])
                errs[n] = 100 * (pt - mt) / mt
                rowe += [100 * abs(float(q['issue_max_ns']) - float(m['meas_issue_max_ns'])) /
                         float(m['meas_issue_max_ns']) for q, m in zip(pr, rr)]
            worst = max(errs, key=lambda n: abs(errs[n]))
            tot += 1
            within += abs(errs[worst]) <= 15
            rowmeds.append(st.median(rowe))
            medians.append(st.median(abs(e) for e in errs.values()))
            for n, e in errs.items():
                if abs(e) > 15:
                    misses.append(f'{c} {os.path.basename(rows)[9:-9]} {n} {e:+.1f}')
        print(f'{name:10s} {within:3d} of {tot} validates within 15 %; totals median '
              f'{min(medians):.1f}-{max(medians):.1f} %; per-row median {min(rowmeds):.1f}-'
              f'{max(rowmeds):.1f} %; {len(misses)} schedules past 15 %')
        tally = {}
        for m in misses:
            f = m.split()
            key = ' '.join(f[2:-1]) + (' over' if float(f[-1]) > 0 else ' under')
            tally[key] = tally.get(key, 0) + 1
        for key, n in sorted(tally.items(), key=lambda kv: -kv[1]):
            print(f'    {n:3d} x {key}')
        if verbose:
            for m in misses:
                print('        ' + m)
        sys.stdout.flush()


if __name__ == '__main__':
    main()
