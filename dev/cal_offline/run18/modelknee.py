"""Run 18 offline: where the event model's own knee lies against the closed-form Q(K) that
validate's capacity sweep is scaled by. For each profile and K: Q(K) (xs_capacity) and the
smallest volume at which the model's isolated burst counts as stalled by the knee maps' rule
(total over 1.5 (o + B/r) + 1 us; run17/bursts.py), found by bisection in `xstage predict`.
Usage: modelknee.py K1,K2 PROFILE...   (XSTAGE: the binary)"""
import sys, os, json, math
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'run16'))
import qk

def capacity(P, k):
    q = P['capacity_bytes']
    if P.get('capacity_bytes_per_producer', 0) > 0:
        q = min(q, k * P['capacity_bytes_per_producer'])
    return q + k * (P.get('queue_bytes_per_producer', 0) + P.get('reserve_bytes_per_producer', 0)
                    + P.get('buffer_bytes_per_producer', 0))

def stalled(prof, P, k, b):
    t = float(qk.predict([(k, b, 0)], prof, [])[-1]['end_ns'])
    return t > 1.5 * (P['issue_overhead_ns'] + b / P['issue_bytes_per_ns']) + 1000

def model_knee(prof, P, k):
    lo, hi = 0.3 * capacity(P, k), 3.0 * capacity(P, k)
    if stalled(prof, P, k, int(lo / k / 16) * 16) or not stalled(prof, P, k, int(hi / k / 16) * 16):
        return float('nan')
    while hi / lo > 1.002:
        mid = math.sqrt(lo * hi)
        if stalled(prof, P, k, int(mid / k / 16) * 16): hi = mid
        else: lo = mid
    return hi

if __name__ == '__main__':
    ks = [int(x) for x in sys.argv[1].split(',')]
    print('%-44s' % 'profile' + ''.join('   Q(%d) MiB  knee  ratio' % k for k in ks))
    for prof in sys.argv[2:]:
        P = json.load(open(prof)); line = '%-44s' % os.path.relpath(prof)[-44:]
        for k in ks:
            q, kn = capacity(P, k), model_knee(prof, P, k)
            line += '   %8.3f %6.3f %6.3f' % (q / 2**20, kn / 2**20, kn / q)
        print(line)
