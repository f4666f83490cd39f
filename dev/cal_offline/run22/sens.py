#!/usr/bin/env python3
"""Run 22 offline: how much each recorded validate schedule's prediction moves when the profile's
shared capacity Q is 5 % off, next to the error it was recorded with (CPU only; `xstage predict`).

    sens.py [-v] [--frac F] RESULTS_ROOT      (XSTAGE: the binary, default build/xstage)

For every recorded validate whose profile is in the record (runs 18-20: `fit`, `old`, `rf`, `kw2`,
`kw4` and run 20's calibration), each schedule is predicted three times from its own profile:
capacity_bytes as recorded, x (1 + F) and x (1 - F) (F = 0.05). Its sensitivity is the larger
change of the total, in % of the first. The recorded errors are the ones the validate printed
(measured numbers are never changed; the prediction of `old` was fc3ca6e's binary).

Prints, over all validates: how many schedules move by more than 15 % for Q +- F, which they are,
and how the errors past 15 % split between those and the others.
"""
import csv, glob, json, os, statistics as st, sys, tarfile, tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run16'))
import qk  # qk.predict: one schedule through `xstage predict` ($XSTAGE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run19'))
from ab_offline import schedules as rows_by_schedule  # validate rows, by schedule (run 19)


def errors(path):
    recs = csv.DictReader(l for l in open(path) if not l.startswith('#'))
    return {r['schedule']: float(r['err_total_pct']) for r in recs}


def jobs(root, tmp):
    """(label, profile, validate csv, rows csv) for every validate with its profile recorded."""
    out = []
    for run, tag in (('h200-2026-11-30-r18', 's18'), ('h200-2026-11-30-r19', 's18'),
                     ('h200-2026-11-30-r19', 's19')):
        for t in sorted(glob.glob(os.path.join(root, run, f'h200_call*_{tag}.tar.gz'))):
            call = os.path.basename(t).split('_')[1]
            d = os.path.join(tmp, run[-3:] + '_' + call + '_' + tag)
            os.makedirs(d, exist_ok=True)
            with tarfile.open(t) as tf:
                tf.extractall(d, filter='data')
            for v in sorted(glob.glob(os.path.join(d, 'validate_*_rows.csv'))):
                parts = os.path.basename(v)[len('validate_'):-len('_rows.csv')].split('_')
                state, var = parts[0], parts[1]
                cands = [os.path.join(d, f'profile_{state}_{var}.json')]
                if var in ('fit', 'l0'):
                    cands.append(os.path.join(d, f'profile_{state}.json'))
                prof = next((c for c in cands if os.path.exists(c)), None)
                if var == 'l0' and prof and json.load(open(prof)).get('overflow_capacity_loss'):
                    prof = None  # l0 is the fit with its loss set to 0: not this file
                if prof:
                    out.append((f'{run[-3:]} {call} {state} {var} {parts[-1]}', prof,
                                v[:-len('_rows.csv')] + '.csv', v))
    r20 = os.path.join(root, 'h200-2026-11-30-r20')
    out.append(('r20 call2 keep fit a', os.path.join(r20, 'h200_call2_calib_h200_host_profile.json'),
                os.path.join(r20, 'h200_call2_calib_validate.csv'),
                os.path.join(r20, 'h200_call2_calib_validate_rows.csv')))
    return out


def main():
    args = sys.argv[1:]
    verbose = '-v' in args
    args = [a for a in args if a != '-v']
    frac = 0.05
    if '--frac' in args:
        i = args.index('--frac')
        frac = float(args[i + 1])
        del args[i:i + 2]
    root = args[0] if args else 'bench/results'
    tmp = tempfile.mkdtemp()
    pool = ThreadPoolExecutor(max(2, os.cpu_count() or 2))
    recs = []  # (label, schedule, recorded error %, sensitivity %)
    js = jobs(root, tmp)
    for label, prof, vcsv, vrows in js:
        Q = json.load(open(prof))['capacity_bytes']
        err = errors(vcsv)
        futs = {}
        for name, rr in rows_by_schedule(vrows).items():
            rows = [(r['producers'], r['bytes_per_producer'], r['gap_ns']) for r in rr]
            sync = rr[0]['sync'] == '1'
            futs[name] = [pool.submit(qk.predict, rows, prof,
                                      [f'capacity_bytes={Q * f:.1f}'], sync)
                          for f in (1, 1 + frac, 1 - frac)]
        for name, fs in futs.items():
            t0, tp, tm = (float(f.result()[-1]['end_ns']) for f in fs)
            sens = 100 * max(abs(tp - t0), abs(tm - t0)) / t0
            recs.append((label, name, err[name], sens))
    nval = len(js)
    ill = [r for r in recs if r[3] > 15]
    well = [r for r in recs if r[3] <= 15]
    print(f'{nval} validates, {len(recs)} schedules; capacity x (1 +- {frac:g})')
    print(f'schedules whose total moves by more than 15 %: {len(ill)}')
    names = {}
    for r in ill:
        names.setdefault(r[1], []).append(r[3])
    for n, v in sorted(names.items(), key=lambda kv: -len(kv[1])):
        print(f'    {len(v):3d} x {n} (moves {min(v):.0f}-{max(v):.0f} %)')
    for lab, grp in (('those', ill), ('the others', well)):
        past = [r for r in grp if abs(r[2]) > 15]
        print(f'errors past 15 % among {lab}: {len(past)} of {len(grp)}'
              + (f'; |error| median {st.median(abs(r[2]) for r in grp):.1f} %' if grp else ''))
        if verbose or lab == 'the others':
            for r in past:
                print(f'        {r[0]:28s} {r[1]:26s} error {r[2]:+7.1f} %  moves {r[3]:5.1f} %')
    per = {}
    for r in recs:
        per.setdefault(r[0], []).append(r)
    both = sum(1 for v in per.values() if max(abs(r[2]) for r in v) <= 15)
    rest = sum(1 for v in per.values() if max([abs(r[2]) for r in v if r[3] <= 15] or [0]) <= 15)
    print(f'validates with the totals maximum within 15 %: {both} of {nval}; over the schedules '
          f'that move by 15 % or less: {rest} of {nval}')
    if verbose:
        for k, v in per.items():
            w = max(v, key=lambda r: abs(r[2]))
            print(f'    {k:28s} worst {w[1]:26s} {w[2]:+7.1f} %  moves {w[3]:5.1f} %')


if __name__ == '__main__':
    main()
