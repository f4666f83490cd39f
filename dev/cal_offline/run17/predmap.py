"""The knee map against a profile: per K and V, 100 (predicted / measured - 1) of the burst's
end_ns (replay's median repetition, km_K_B.csv) with `xstage predict`. Usage:
predmap.py DIR PROFILE [--set NAME=VALUE ...] (XSTAGE: the binary, default build/xstage)"""
import sys, glob, os, re, statistics as st
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'run16'))
import qk
d, prof = sys.argv[1], sys.argv[2]
sets = [a for a in sys.argv[3:] if a != '--set']
meas = {}
for f in glob.glob(os.path.join(d, 'km_*_*.csv')):
    k, b = map(int, re.findall(r'km_(\d+)_(\d+)\.csv', f)[0])
    rows = [l.split(',') for l in open(f) if l[0].isdigit()]
    if rows:
        meas[(k, b)] = float(rows[-1][6])
pred = {(k, b): float(qk.predict([(k, b, 0)], prof, sets)[-1]['end_ns']) for (k, b) in meas}
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
