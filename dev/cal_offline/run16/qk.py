"""Per-K capacity experiment: fit Q_K per calibrated K (other fields fixed), interpolate for the
validate schedules by their largest producer count, and score the validate rows."""
import sys, gzip, csv, json, subprocess, statistics as st, collections, tempfile, os, math
X=os.environ.get('XSTAGE', 'build/xstage')
def predict(rows, prof, sets, sync=False):
    with tempfile.NamedTemporaryFile('w',suffix='.csv',delete=False) as f:
        f.write('producers,bytes_per_producer,gap_ns\n')
        for K,B,G in rows: f.write(f'{K},{B},{G}\n')
        fn=f.name
    cmd=[X,'predict','--schedule',fn,'--csv','--profile',prof]
    for s in sets: cmd+=['--set',s]
    if sync: cmd.append('--sync')
    o=subprocess.run(cmd,capture_output=True,text=True)
    os.unlink(fn)
    if o.returncode: sys.exit(f'xstage predict: {o.stderr.strip()}')
    pr=list(csv.DictReader(l for l in o.stdout.splitlines() if not l.startswith('#')))
    return pr
def caps(samp):
    rows=[l for l in gzip.open(samp,'rt') if not l.startswith('#')]
    d=collections.defaultdict(lambda: collections.defaultdict(list))
    for r in csv.DictReader(rows):
        if r['experiment']=='capacity':
            d[int(r['producers'])][int(r['bytes_per_producer'])].append((float(r['issue_max_ns']),float(r['issue_med_ns'])))
    return d
def fitQ(samp, prof):
    P=json.load(open(prof)); Q0=P['capacity_bytes']
    d=caps(samp); out={}
    for K,bb in sorted(d.items()):
        best=None
        for f in [0.5+0.05*i for i in range(31)]:
            Q=Q0*f; s=0
            for B,v in bb.items():
                pr=predict([(K,B,0)],prof,[f'capacity_bytes={Q}'])[-1]
                mx=st.median(x[0] for x in v); md=st.median(x[1] for x in v)
                s+=abs(math.log(float(pr['issue_max_ns'])/mx))+0.5*abs(math.log(float(pr['issue_med_ns'])/md))
            if best is None or s<best[0]: best=(s,Q)
        out[K]=best[1]
    return out
def interp(tab, K):
    ks=sorted(tab)
    if K<=ks[0]: return tab[ks[0]]
    if K>=ks[-1]: return tab[ks[-1]]
    for a,b in zip(ks,ks[1:]):
        if a<=K<=b:
            return tab[a]+(tab[b]-tab[a])*(K-a)/(b-a)
def score(vrows, prof, tab, capacity=None):
    """(schedule, total error %, per-row |errors|) of each validate schedule, its capacity
    interpolated in tab at its largest K (capacity(K) instead, when given; neither: the profile's)"""
    recs=list(csv.DictReader(l for l in open(vrows) if not l.startswith('#')))
    sched=collections.OrderedDict()
    for r in recs: sched.setdefault(r['schedule'],[]).append(r)
    res=[]
    for name,rr in sched.items():
        K=max(int(r['producers']) for r in rr)
        sets=[f'capacity_bytes={capacity(K) if capacity else interp(tab,K)}'] if tab or capacity else []
        pr=predict([(r['producers'],r['bytes_per_producer'],r['gap_ns']) for r in rr],prof,sets,rr[0]['sync']=='1')
        mt=float(rr[-1]['meas_end_ns']); pt=float(pr[-1]['end_ns'])
        re=[abs(float(q['issue_max_ns'])/float(m['meas_issue_max_ns'])-1) for q,m in zip(pr,rr)]
        res.append((name,100*(pt/mt-1),re))
    return res
if __name__=='__main__':
    samp,prof=sys.argv[1],sys.argv[2]; vr=sys.argv[3:]
    tab=fitQ(samp,prof)
    P=json.load(open(prof))
    print('Q0 %.0f, per-K Q: %s'%(P['capacity_bytes'],' '.join('%d:%.0f'%(k,q) for k,q in sorted(tab.items()))))
    for v in vr:
        for lab,t in (('profile',None),('per-K Q',tab)):
            res=score(v,prof,t)
            ae=[abs(e) for _,e,_ in res]; rows=[x for _,_,r in res for x in r]
            worst=max(res,key=lambda x:abs(x[1]))
            print(f'  {os.path.basename(v):40s} {lab:8s} totals med {st.median(ae):5.1f} max {max(ae):6.1f} ({worst[0]}) per-row {100*st.median(rows):5.1f}')
