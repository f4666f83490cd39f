#!/usr/bin/env python3
"""Run 22 offline: re-predict every recorded validate of runs 18-20 with a profile refitted from
the same chip's calibration samples, and count the validates whose totals maximum stays within
15 % (CPU only; `xstage predict`, $XSTAGE).

    chips_eval.py [-v] [--own] CAL_DIR PROFILE_DIR

CAL_DIR holds one folder per call (r18_call1 ... r20_call2) with the recorded files unpacked:
samples_<state>.csv and validate_<state>_<variant>_<rep>[_rows].csv. PROFILE_DIR holds
<call>_<state>.json, refitted from that call's samples (dev/cal_offline/refit). Every validate
of a chip is re-predicted, whichever variant's profile sized its suite, so the isolated bursts
of 24 and 96 producers come at many volumes. Measured numbers are never changed. The environment
is passed on to `xstage predict` (XS_GROUPS for a profile with group_capacity_bytes).

--own: the capacity sweeps (isolated bursts of 24 and 96 producers at 0.5-4 Q(K)) at the volumes
the candidate profile's own suite would run, as validate sizes them; their measured time is
interpolated in volume between the chip's recorded bursts of the same K (every variant's suite;
a volume outside the recorded ones is reported and left out). The other schedules as recorded.
"""
import bisect, csv, glob, json, math, os, statistics as st, sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run16'))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run19'))
import qk  # qk.predict: one schedule through `xstage predict` ($XSTAGE)
from ab_offline import schedules  # validate rows, by schedule (run 19)


def capacity(p, k):
    """xs_capacity: Q(K) of a profile (src/model.c)."""
    c = p.get('chunk_bytes', 0)
    whole = lambda b: math.floor(b / c) * c if c > 0 else 0
    q = p['capacity_bytes']
    if p.get('capacity_bytes_per_producer', 0) > 0:
        q = min(q, k * p['capacity_bytes_per_producer'])
    return q + k * (whole(p.get('queue_bytes_per_producer', 0)) +
                    p.get('reserve_bytes_per_producer', 0) +
                    whole(p.get('buffer_bytes_per_producer', 0)))


def measured_curves(d, state):
    """{K: sorted [(V, median end_ns)]} of the chip's recorded isolated free-running bursts."""
    pts = {}
    for v in glob.glob(os.path.join(d, f'validate_{state}_*_rows.csv')):
        for r in csv.DictReader(l for l in open(v) if not l.startswith('#')):
            if r['schedule'].startswith('isolated') and r['sync'] == '0':
                k, b = int(r['producers']), int(r['bytes_per_producer'])
                pts.setdefault(k, {}).setdefault(k * b, []).append(float(r['meas_end_ns']))
    return {k: sorted((V, st.median(t)) for V, t in vs.items()) for k, vs in pts.items()}


def interp(curve, V):
    xs = [c[0] for c in curve]
    i = bisect.bisect_left(xs, V)
    if i < len(xs) and xs[i] == V:
        return curve[i][1]
    if i == 0 or i == len(xs):
        return None
    (v0, t0), (v1, t1) = curve[i - 1], curve[i]
    return t0 + (t1 - t0) * (V - v0) / (v1 - v0)


def main():
    args = sys.argv[1:]
    verbose = '-v' in args
    own = '--own' in args
    cal, pdir = [a for a in args if a not in ('-v', '--own')]
    outside = 0
    chips, own_inputs = {}, {}
    pool = ThreadPoolExecutor(max(2, os.cpu_count() or 2))
    predicted = {}  # the validates of one chip and state share most schedules: predict each once

    def predict(rows, prof, sync):
        key = (tuple(tuple(str(x) for x in r) for r in rows), prof, sync)
        if key not in predicted:
            predicted[key] = pool.submit(qk.predict, rows, prof, [], sync)
        return predicted[key]
    within = total = 0
    meds, rowmeds, misses = [], [], []
    for d in sorted(glob.glob(os.path.join(cal, '*'))):
        chip = os.path.basename(d)
        for rows in sorted(glob.glob(os.path.join(d, 'validate_*_rows.csv'))):
            state = os.path.basename(rows).split('_')[1]
            prof = os.path.join(pdir, f'{chip}_{state}.json')
            if not os.path.exists(prof):
                continue
            sc = schedules(rows)
            if own:
                if (chip, state) not in own_inputs:  # one chip and state: many validates
                    own_inputs[(chip, state)] = (json.load(open(prof)), measured_curves(d, state))
                P, curves = own_inputs[(chip, state)]
                for n in list(sc):
                    if n.startswith('isolated') and 'sync' not in n:
                        del sc[n]
                for k in (96, 24):
                    for f in (0.5, 0.9, 1.3, 2.0, 4.0):
                        b = max(16, int(f * capacity(P, k) / k) // 16 * 16)
                        m = interp(curves.get(k, []), k * b)
                        if m is None:
                            outside += 1
                            continue
                        sc[f'isolated {f:.1f}xQ(K) K{k}'] = [{
                            'producers': k, 'bytes_per_producer': b, 'gap_ns': 0, 'sync': '0',
                            'meas_end_ns': m, 'meas_issue_max_ns': m}]
            futs = {n: predict([(r['producers'], r['bytes_per_producer'], r['gap_ns'])
                                for r in rr], prof, rr[0]['sync'] == '1')
                    for n, rr in sc.items()}
            errs, rowe = {}, []
            for n, rr in sc.items():
                pr = futs[n].result()
                mt, pt = float(rr[-1]['meas_end_ns']), float(pr[-1]['end_ns'])
                errs[n] = 100 * (pt - mt) / mt
                rowe += [100 * abs(float(q['issue_max_ns']) - float(m['meas_issue_max_ns'])) /
                         float(m['meas_issue_max_ns']) for q, m in zip(pr, rr)]
            worst = max(errs, key=lambda n: abs(errs[n]))
            if own:
                capw = max((n for n in errs if n.startswith('isolated') and 'sync' not in n),
                           key=lambda n: abs(errs[n]), default=None)
                if capw:
                    chips[(chip, state)] = (capw, errs[capw])
            total += 1
            within += abs(errs[worst]) <= 15
            meds.append(st.median(abs(e) for e in errs.values()))
            rowmeds.append(st.median(rowe))
            tag = os.path.basename(rows)[len('validate_'):-len('_rows.csv')]
            for n, e in errs.items():
                if abs(e) > 15:
                    misses.append((chip, tag, n, e))
            if verbose:
                print(f'  {chip:10s} {tag:16s} max {errs[worst]:+7.1f} % ({worst}); totals median '
                      f'{meds[-1]:.1f} %, per-row {rowmeds[-1]:.1f} %')
    if own:
        print(f'(--own: {outside} capacity bursts outside the recorded volumes, left out)')
        ok = sum(1 for w in chips.values() if abs(w[1]) <= 15)
        print(f'chips x states whose own capacity sweep stays within 15 %: {ok} of {len(chips)}')
        if verbose:
            for c, w in sorted(chips.items()):
                print(f'    {c[0]:10s} {c[1]:5s} worst {w[0]:24s} {w[1]:+7.1f} %')
    print(f'{within} of {total} validates within 15 %; totals median {st.median(meds):.1f} % '
          f'(max {max(meds):.1f}); per-row median {st.median(rowmeds):.1f} % (max '
          f'{max(rowmeds):.1f}); {len(misses)} schedules past 15 %')
    tally = {}
    for m in misses:
        key = m[2] + (' over' if m[3] > 0 else ' under')
        tally[key] = tally.get(key, 0) + 1
    for key, n in sorted(tally.items(), key=lambda kv: -kv[1]):
        print(f'    {n:3d} x {key}')


if __name__ == '__main__':
    main()
