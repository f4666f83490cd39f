import sys, gzip, csv, json, subprocess, statistics as st, collections, tempfile, os
samp, prof = sys.argv[1], sys.argv[2]
rows=[l for l in gzip.open(samp,'rt') if not l.startswith('#')]
d=collections.defaultdict(list)
for r in csv.DictReader(rows):
    if r['experiment']=='capacity':
        d[(int(r['producers']),int(r['bytes_per_producer']))].append(float(r['issue_max_ns']))
out={}
for (K,B),v in sorted(d.items()):
    with tempfile.NamedTemporaryFile('w',suffix='.csv',delete=False) as f:
        f.write('producers,bytes_per_producer,gap_ns\n%d,%d,0\n'%(K,B)); fn=f.name
    o=subprocess.run([os.environ.get('XSTAGE', 'build/xstage'),'predict','--schedule',fn,'--csv','--profile',prof],capture_output=True,text=True).stdout
    os.unlink(fn)
    last=[l for l in o.splitlines() if l and l[0].isdigit()][-1].split(',')
    out[(K,B)]=(st.median(v), float(last[5]), min(v), max(v))
for K in sorted(set(k for k,b in out)):
    print('%4d '%K+' '.join('%+4.0f'%(100*(p/m-1)) for (k,b),(m,p,lo,hi) in sorted(out.items()) if k==K))
print('     '+' '.join('%4.2f'%(k*b/2**20) for (k,b) in sorted(out) if k==1))
