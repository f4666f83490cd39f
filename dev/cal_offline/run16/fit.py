"""fit.py - run 15's calibrations refitted with five fluid stage structures (topo.py), each scored on
that call's validate isolated-burst rows next to the event model's profile (run 16 notes, README)."""
import topo, sys, json, itertools, math, statistics as st, glob
def score(prm, S):
    errs=[]
    for (K,B),T in S.items():
        errs.append(abs(math.log(topo.csim(K,B,prm)/T)))
    return st.mean(errs)
def fitone(S, base, groups, unit, Cs, betas):
    best=None
    for C in Cs:
        for b in betas:
            p=dict(base, groups=groups, unit=unit, C=C, beta=b)
            s=score(p,S)
            if best is None or s<best[0]: best=(s,p)
    return best
def evalrows(prm, rows):
    out=[]
    for name,K,B,Tm,Tp in rows:
        out.append((name, Tm, topo.csim(K,B,prm), Tp))
    return out
calls = [(c,s) for c in (1,2,3,4,5,6) for s in ('keep','flush')]
structs=[('one','sm'),('half','sm'),('half','tpc'),('one','tpc'),('gpc','sm')]
for c,s in (calls if __name__=="__main__" else []):
    sp=glob.glob(f'{topo.R15}/h200_call{c}_samples_{s}.csv.gz') or glob.glob(f'{topo.R15}/h200_call{c}_samples_{s}_dense.csv.gz')
    pp=glob.glob(f'{topo.R15}/h200_call{c}_profile_{s}.json') or glob.glob(f'{topo.R15}/h200_call{c}_profile_{s}_dense.json')
    if not sp: continue
    S=topo.samples(sp[0]); P=json.load(open(pp[0]))
    base=dict(r=P['issue_bytes_per_ns'], R=P['drain_bytes_per_ns'], t0=P['start_ns']+P['issue_overhead_ns'])
    vfiles=sorted(glob.glob(f'{topo.R15}/h200_call{c}_validate_{s}*_rows.csv'))
    vfiles=[v for v in vfiles if 'coarse' not in v and 'fixed' not in v]
    print(f'== call {c} {s}: profile Q {P["capacity_bytes"]:.0f} beta {P["buffer_bytes_per_producer"]:.0f}; validates {len(vfiles)}')
    for g,u in structs:
        Cs=[x*1e3 for x in range(300,2001,50)] if g!='gpc' else [x*1e3 for x in range(50,600,25)]
        betas=[0,4096,8192,12288,16384,24576,32768] if u=='sm' else [0,8192,16384,24576,32768,49152]
        sc,p=fitone(S,base,g,u,Cs,betas)
        res=[]
        for v in vfiles:
            rows=topo.vrows(v)
            for name,Tm,Tf,Tp in evalrows(p,rows):
                res.append((name,Tm,Tf,Tp))
        ef=[abs(Tf/Tm-1) for _,Tm,Tf,Tp in res]; ep=[abs(Tp/Tm-1) for _,Tm,Tf,Tp in res]
        print(f'  {g:4s}/{u:3s} C {p["C"]/1e3:6.0f}K beta {p["beta"]:6.0f} fitscore {sc:.3f} | isolated rows fluid med {100*st.median(ef):5.1f} max {100*max(ef):6.1f} | event-model profile med {100*st.median(ep):5.1f} max {100*max(ep):6.1f}')
        if '-v' in sys.argv:
            for name,Tm,Tf,Tp in res: print(f'      {name:28s} meas {Tm/1e3:7.2f} fluid {Tf/1e3:7.2f} ({100*(Tf/Tm-1):+6.1f}) event {Tp/1e3:7.2f} ({100*(Tp/Tm-1):+6.1f})')
