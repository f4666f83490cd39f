#!/usr/bin/env python3
"""Run 19 offline: the 24-producer bursts above the knee, chip by chip (run 18).

For every call and destination state of bench/results/h200-2026-11-30-r18: the measured totals of
validate's 24-producer isolated bursts between 1.6 and 2.1 MB (all variants' suites: each sized
them by its own Q(K)), and the same calibration's own isolated bursts of 16 and 32 producers at
1.48 and 1.76 MB (medians of 4), each with the event model's prediction by that call's profile
(calibrate's, as written). The question: does anything the calibration measured tell a chip whose
24-producer burst stalls less from one whose burst stalls more?

    chip24.py RESULTS_DIR          (XSTAGE: the binary, default build/xstage)
"""
import glob, os, statistics as st, sys, tarfile, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run16'))
import qk  # qk.predict: one schedule through `xstage predict` ($XSTAGE)


def main():
    res = sys.argv[1]
    tmp = tempfile.mkdtemp()
    print('call state | validate K=24 (MB: measured us) | calibration K16@1.48, K16@1.76, '
          'K32@1.76, K32@2.10 MB: measured/predicted us (error)')
    for t in sorted(glob.glob(os.path.join(res, 'h200_call*_s18.tar.gz'))):
        call = os.path.basename(t).split('_')[1][4:]
        d = os.path.join(tmp, call)
        os.makedirs(d)
        with tarfile.open(t) as tf:
            tf.extractall(d, filter='data')
        for state in ('keep', 'flush'):
            cal = {}
            for line in open(os.path.join(d, f'samples_{state}.csv')):
                if line.startswith('capacity'):
                    f = line.split(',')
                    cal.setdefault((int(f[1]), int(f[2])), []).append(float(f[9]))
            val = []
            for rows in sorted(glob.glob(os.path.join(d, f'validate_{state}_*_rows.csv'))):
                for line in open(rows):
                    f = line.split(',')
                    if f[0].startswith('isolated') and f[3] == '24':
                        v = 24 * int(f[4])
                        if 1.6e6 <= v <= 2.1e6:
                            val.append((v, float(f[8])))
            val.sort()
            prof = os.path.join(d, f'profile_{state}.json')
            cells = []
            for k, v in ((16, 1.483e6), (16, 1.763e6), (32, 1.763e6), (32, 2.097e6)):
                key = min((kb for kb in cal if kb[0] == k), key=lambda kb: abs(kb[0] * kb[1] - v))
                m = st.median(cal[key])
                p = float(qk.predict([(key[0], key[1], 0)], prof, [])[-1]['end_ns'])
                cells.append(f'{m / 1e3:5.1f}/{p / 1e3:5.1f} ({100 * (p - m) / m:+4.0f} %)')
            print(f'{call:>4} {state:5s} | ' + ' '.join(f'{v / 1e6:.2f}:{t / 1e3:.1f}'
                                                     for v, t in val) + ' | ' + '  '.join(cells))


if __name__ == '__main__':
    main()
