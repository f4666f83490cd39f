#!/usr/bin/env python3
"""Run 22 offline: a capacity per calibrated K, interpolated in K, judged on validate's own
24-producer capacity sweep of run 22's chips (CPU only; `xstage predict`, $XSTAGE).

    perk24.py RUN22_DIR [MODE...]      MODE: profile (as calibrated), all, knee, map24

RUN22_DIR holds c2..c7/ (each call's tarball unpacked: samples.csv, profile.json,
validate_{a,b}[_rows].csv, map_K24.csv). Per chip and mode, Q(K) at K = 24 is the profile's
(`profile`), or capacity_bytes fitted per calibrated K with every other field kept and
interpolated linearly in K between 16 and 32 (`all`: every capacity volume of that K scored, as
run 16's qk.py; `knee`: only the volumes from the last two unstalled to the third stalled one),
or fitted at 24 producers itself on the knee map's rows (`map24`: what a calibration at 24
producers would give; the map is then in-sample, and so is the measured time interpolated from
it).
The suite's five bursts of 24 producers (0.5, 0.9, 1.3, 2, 4 x Q(24), sized as validate does)
are predicted, and their measured time interpolated in volume between the chip's recorded
24-producer bursts: the knee map (1.0-2.6 MB, --sync rows) and both validates' bursts. Read the
1.3-4 x columns: a map row after the first starts without the kernel's prologue (start_ns), so
an unstalled burst interpolated from the map runs 0.3-0.4 us short of validate's one-row
schedule, and the 0.5 and 0.9 x columns compare two contexts.
"""
import csv, glob, json, math, os, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run16'))
import qk  # predict(rows, profile, sets)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chips_eval import capacity, interp


def caps(path):
    d = {}
    for r in csv.DictReader(l for l in open(path) if not l.startswith('#')):
        if r['experiment'] == 'capacity':
            d.setdefault(int(r['producers']), {}).setdefault(int(r['bytes_per_producer']), []) \
                .append((float(r['issue_max_ns']), float(r['issue_med_ns'])))
    return d


def fit_qk(bb, K, prof, Q0, knee_only):
    pts = sorted(bb.items())
    if knee_only:
        t0 = min(st.median(x[0] for x in v) for _, v in pts)
        stalled = [i for i, (b, v) in enumerate(pts) if st.median(x[0] for x in v) > 2 * t0 + 1000]
        if stalled:
            i = stalled[0]
            pts = pts[max(0, i - 2):i + 3]
    best = None
    for f in [0.5 + 0.025 * i for i in range(61)]:
        s = 0
        for B, v in pts:
            pr = qk.predict([(K, B, 0)], prof, [f'capacity_bytes={Q0 * f}'])[-1]
            mx = st.median(x[0] for x in v)
            md = st.median(x[1] for x in v)
            s += abs(math.log(float(pr['issue_max_ns']) / mx)) + \
                0.5 * abs(math.log(float(pr['issue_med_ns']) / md))
        if best is None or s < best[0]:
            best = (s, Q0 * f)
    return best[1]


def fit_map24(d, prof, Q0):
    """capacity_bytes that predicts the knee map of 24 producers (--sync rows) best."""
    rows = [r for r in csv.DictReader(l for l in open(os.path.join(d, 'map_K24.csv'))
                                      if not l.startswith('#'))]
    sched = [(r['producers'], r['bytes_per_producer'], r['gap_ns']) for r in rows]
    best = None
    for f in [0.5 + 0.025 * i for i in range(61)]:
        pr = qk.predict(sched, prof, [f'capacity_bytes={Q0 * f}'], True)
        s = sum(abs(math.log(float(q['issue_max_ns']) / float(m['issue_max_ns'])))
                for q, m in zip(pr, rows))
        if best is None or s < best[0]:
            best = (s, Q0 * f)
    return best[1]


def measured24(d):
    pts = {}
    for r in csv.DictReader(l for l in open(os.path.join(d, 'map_K24.csv'))
                            if not l.startswith('#')):
        pts.setdefault(24 * int(r['bytes_per_producer']), []).append(float(r['issue_max_ns']))
    for v in glob.glob(os.path.join(d, 'validate_?_rows.csv')):
        for r in csv.DictReader(l for l in open(v) if not l.startswith('#')):
            if r['schedule'].startswith('isolated') and r['producers'] == '24':
                pts.setdefault(24 * int(r['bytes_per_producer']), []).append(
                    float(r['meas_end_ns']))
    return sorted((V, st.median(t)) for V, t in pts.items())


def main():
    root, modes = sys.argv[1], sys.argv[2:] or ['profile', 'all', 'knee', 'map24']
    for d in sorted(glob.glob(os.path.join(root, 'c[0-9]*'))):
        prof = os.path.join(d, 'profile.json')
        P = json.load(open(prof))
        cv = caps(os.path.join(d, 'samples.csv'))
        curve = measured24(d)
        for mode in modes:
            if mode == 'profile':
                q24 = P['capacity_bytes']
            elif mode == 'map24':
                q24 = fit_map24(d, prof, P['capacity_bytes'])
            else:
                q16 = fit_qk(cv[16], 16, prof, P['capacity_bytes'], mode == 'knee')
                q32 = fit_qk(cv[32], 32, prof, P['capacity_bytes'], mode == 'knee')
                q24 = (q16 + q32) / 2
            Pq = dict(P, capacity_bytes=q24)
            errs = []
            for f in (0.5, 0.9, 1.3, 2.0, 4.0):
                b = max(16, int(f * capacity(Pq, 24) / 24) // 16 * 16)
                m = interp(curve, 24 * b)
                p = float(qk.predict([(24, b, 0)], prof, [f'capacity_bytes={q24}'])[-1]['end_ns'])
                errs.append(f'{f:.1f}x {24 * b / 1e6:4.2f}MB ' +
                            (f'{m / 1e3:5.1f}/{p / 1e3:5.1f} {100 * (p / m - 1):+5.0f}%' if m
                             else f'  -  /{p / 1e3:5.1f}'))
            print(f'{os.path.basename(d)} {mode:7s} Q {q24 / 1e6:.3f} MB | ' + ' | '.join(errs))


if __name__ == '__main__':
    main()
