import csv, gzip, json, collections, os, statistics as st, sys
import numpy as np
R14=os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../bench/results/h200-2026-11-29-r14')
R15=os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../bench/results/h200-2026-11-30-r15')
place={}
for r in csv.DictReader(open(R14+'/h200_call11_placement_table.csv')):
    g=int(r['grid'])
    if g not in place: place[g]=[int(x) for x in r['smids'].split()]
def gpc(s):
    if s < 64: return (s // 2) % 8
    if s < 120: return 1 + ((s - 64) // 2) % 7
    if s < 124: return 6 + (s - 120) // 2
    return 0
def half(s): return 0 if gpc(s) in (1,2,3,7) else 1

def sim(K, B, prm, dt=None):
    r, R = prm['r'], prm['R']
    sms = place[K]
    if prm['groups']=='half': g = np.array([half(s) for s in sms])
    elif prm['groups']=='gpc': g=np.array([gpc(s) for s in sms])
    else: g = np.zeros(K, int)
    ng = g.max()+1
    cap = np.full(ng, prm['C'])
    if prm['unit']=='tpc':
        ids = {}; e = np.array([ids.setdefault(s//2, len(ids)) for s in sms])
    else: e = np.arange(K)
    ne = e.max()+1
    eg = np.zeros(ne, int); eg[e] = g
    beta = prm['beta']
    T = K*B/R + B/r
    if dt is None: dt = max(5.0, T/1500)
    left = np.full(K, float(B)); own = np.zeros(ne); fill = np.zeros(ng)
    done = np.full(K, np.nan); t = 0.0
    while np.isnan(done).any():
        # drain, fair among non-empty fifos
        d = R*dt
        for _ in range(ng):
            act = fill > 1e-9
            n = act.sum()
            if n == 0 or d <= 1e-9: break
            x = np.minimum(fill, d/n) * act
            fill -= x; d -= x.sum()
        want = np.minimum(left, r*dt)
        if beta > 0:
            tot = np.bincount(e, want, ne)
            room = np.maximum(beta - own, 0)
            frac = np.where(tot > 0, np.minimum(1, room/np.maximum(tot,1e-30)), 0)
            acc = want*frac[e]
            left -= acc; own += np.bincount(e, acc, ne)
            offer = own
            gt = np.bincount(eg, offer, ng)
            groom = np.maximum(cap - fill, 0)
            gf = np.where(gt > 0, np.minimum(1, groom/np.maximum(gt,1e-30)), 0)
            a2 = offer*gf[eg]
            own -= a2; fill += np.bincount(eg, a2, ng)
        else:
            gt = np.bincount(g, want, ng)
            groom = np.maximum(cap - fill, 0)
            gf = np.where(gt > 0, np.minimum(1, groom/np.maximum(gt,1e-30)), 0)
            acc = want*gf[g]
            left -= acc; fill += np.bincount(g, acc, ng)
        t += dt
        newly = np.isnan(done) & (left <= 1e-6)
        done[newly] = t
    return prm['t0'] + done.max()

import ctypes
_L=ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fl.so')); _L.fl_sim.restype=ctypes.c_double
_cache={}
def _layout(K, groups, unit):
    key=(K,groups,unit)
    if key in _cache: return _cache[key]
    sms=place[K]
    if groups=='half': g=[half(s) for s in sms]
    elif groups=='gpc': g=[gpc(s) for s in sms]
    else: g=[0]*K
    if unit=='tpc':
        ids={}; e=[ids.setdefault(s//2,len(ids)) for s in sms]
    else: e=list(range(K))
    ga=(ctypes.c_int*K)(*g); ea=(ctypes.c_int*K)(*e)
    _cache[key]=(ga,max(g)+1,ea,max(e)+1); return _cache[key]
def csim(K,B,prm,steps=2000):
    ga,ng,ea,ne=_layout(K,prm['groups'],prm['unit'])
    T=K*B/prm['R']+B/prm['r']; dt=max(2.0,T/steps)
    return prm['t0']+_L.fl_sim(K,ga,ng,ea,ne,ctypes.c_double(B),ctypes.c_double(prm['r']),ctypes.c_double(prm['R']),ctypes.c_double(prm['C']),ctypes.c_double(prm['beta']),ctypes.c_double(dt))

def samples(path):
    rows=[l for l in gzip.open(path,'rt') if not l.startswith('#')]
    d=collections.defaultdict(list)
    for r in csv.DictReader(rows):
        if r['experiment']=='capacity':
            d[(int(r['producers']),int(r['bytes_per_producer']))].append(float(r['end_ns']))
    return {k: st.median(v) for k,v in d.items()}

def vrows(path):
    out=[]
    for r in csv.DictReader(l for l in open(path) if not l.startswith('#')):
        if r['schedule'].startswith('isolated') and 'sync' not in r['schedule']:
            out.append((r['schedule'], int(r['producers']), int(r['bytes_per_producer']), float(r['meas_end_ns']), float(r['pred_end_ns'])))
    return out
