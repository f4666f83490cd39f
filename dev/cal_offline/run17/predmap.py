"""The knee map against a profile: per K and V, 100 (predicted / measured - 1) of the burst's
end_ns (replay's median repetition, km_K_B.csv) with `xstage predict`. Usage:
predmap.py DIR PROFILE [--set NAME=VALUE ...] (XSTAGE: the binary, default build/xstage)"""
import sys, glob, os, re, subprocess, tempfile, statistics as st
X = os.environ.get('XSTAGE', 'build/xstage')
d, prof = sys.argv[1], sys.argv[2]
sets = []
for a in sys.argv[3:]:
    if a != '--set':
        sets += ['--set', a]
meas = {}
for f in glob.glob(os.path.join(d, 'km_*_*.csv')):
    k, b = map(int, re.findall(r'km_(\d+)_(\d+)\.csv', f)[0])
    rows = [l.split(',') for l in open(f) if l[0].isdigit()]
    if rows:
        meas[(k, b)] = float(rows[-1][6])
with tempfile.TemporaryDirectory() as td:
    pred = {}
    for (k, b) in meas:
        fn = os.path.join(td, 's.csv')
        open(fn, 'w').write('producers,bytes_per_producer,gap_ns\n%d,%d,0\n' % (k, b))
        o = subprocess.run([X, 'predict', '--schedule', fn, '--csv', '--profile', prof] + sets,
                           capture_output=True, text=True).stdout
        last = [l for l in o.splitlines() if l and l[0].isdigit()][-1].split(',')
        pred[(k, b)] = float(last[6])
errs = []
for k in sorted({k for k, _ in meas}):
    line = []
    for b in sorted(b for kk, b in meas if kk == k):
        e = 100 * (pred[(k, b)] / meas[(k, b)] - 1)
        errs.append(abs(e))
        line.append('%+5.0f' % e)
    print('%4d %s' % (k, ' '.join(line)))
print('     ' + ' '.join('%5.2f' % (0.5 * 2 ** (i / 4)) for i in range(16)))
print('median |error| %.1f %%, within 15 %%: %d of %d' % (st.median(errs), sum(e <= 15 for e in errs), len(errs)))
