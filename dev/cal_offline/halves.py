#!/usr/bin/env python3
"""halves.py - run 14's bursts from chosen SMs against three fluid stage structures (CPU only).

Run 14 (bench/results/h200-2026-11-29-r14, docs/MODEL.md "Run 14") replayed isolated bursts
from producers on chosen SMs (replay --sms). Where the producers sit sets how much the stage
absorbs: 16 producers in one GPC, or in four GPCs of one half of the chip, absorb about 0.8 MB
before they stall; two GPCs of each half about 1.5 MB. This script asks which simple structure
reproduces the measured totals. It is a fluid model (time steps of dt ns), not the event model
of src/sim.c, and nothing here is fitted: the parameters are given.

  one    one FIFO of capacity Q, plus a buffer of beta bytes per producer (tandem): the shape of
         the event model's profiles since run 6
  halves two FIFOs of capacity C, one per half of the GPCs (1, 2, 3, 7 and 0, 4, 5, 6; SMs
         124-131 are in GPC 0), drained fairly (each non-empty one at R / their number)
  both   halves, plus the per-producer buffer

A producer issues at r into its own buffer (beta; 0: straight into its FIFO), buffers hand bytes
on into their FIFO sharing its free room fairly, and a producer is done when its last byte has
left it (into its buffer). The total is the last producer's end; t0 is the start offset.

GPC of SM s (thread-block clusters, run 14 call 1): s < 64: (s / 2) % 8; 64 <= s < 120:
1 + ((s - 64) / 2) % 7; 120-123: 6, 6, 7, 7; 124-131: 0 (inferred from calls 5-7: SMs 124-131
alone, GPC 0's other SMs alone and both together absorb the same).

Usage: python3 dev/cal_offline/halves.py [-v] [--Q B] [--beta B] [--C B] [--R B/ns]
"""
import argparse
import glob
import os
import statistics as st
from collections import deque

R14 = os.path.join(os.path.dirname(__file__), '../../bench/results/h200-2026-11-29-r14')


def gpc(s):
    if s < 64:
        return (s // 2) % 8
    if s < 120:
        return 1 + ((s - 64) // 2) % 7
    if s < 124:
        return 6 + (s - 120) // 2
    return 0


def half(s):
    return 0 if gpc(s) in (1, 2, 3, 7) else 1


def load(path):
    """replay --placement: per run (total_ns, SMs of the producers)."""
    runs = []
    for line in open(path):
        if line[0].isdigit():
            f = line.rstrip('\n').split(',')
            runs.append((float(f[1]), [int(x) for x in f[3].split()]))
    return runs


def cases():
    """Calls 5-7 (producers on chosen SMs), and call 2's bursts from the block scheduler's own
    placement of 16-64 CTAs; all with the destination lines flushed."""
    out = []
    pats = ['h200_call5_sms_*.csv', 'h200_call6_sms_*.csv', 'h200_call7_sms_*.csv',
            'h200_call2_place_flush_*.csv']
    for pat in pats:
        for path in sorted(glob.glob(os.path.join(R14, pat))):
            name = os.path.basename(path)[5:-4]
            k, b = (int(x) for x in name.split('_')[-2:])
            runs = load(path)
            if k > 64:
                continue
            out.append({'name': name, 'K': k, 'B': b, 'T': st.median(r[0] for r in runs),
                        'sms': runs[0][1]})
    return out


def fluid(sms, nbytes, group, cap, beta, R, r=53.4, t0=505.0, dt=20.0):
    k = len(sms)
    g = [group(s) for s in sms]
    ng = len(cap)
    left = [float(nbytes)] * k
    own = [0.0] * k
    fill = [0.0] * ng
    done = [None] * k
    t = t0
    while any(d is None for d in done):
        # the link: fair among the non-empty FIFOs, work-conserving
        d = R * dt
        act = [j for j in range(ng) if fill[j] > 1e-9]
        while d > 1e-9 and act:
            share = d / len(act)
            for j in act:
                x = min(share, fill[j])
                fill[j] -= x
                d -= x
            act = [j for j in act if fill[j] > 1e-9]
        # issue: into the own buffer (beta > 0) or offered straight to the FIFO
        want = [min(left[i], r * dt) for i in range(k)]
        if beta > 0:
            for i in range(k):
                x = min(want[i], max(beta - own[i], 0.0))
                own[i] += x
                left[i] -= x
            offer = [min(own[i], 4 * r * dt) for i in range(k)]
        else:
            offer = want
        # buffers (or producers) into their FIFO: its free room shared fairly (water-filling)
        for j in range(ng):
            idx = [i for i in range(k) if g[i] == j and offer[i] > 1e-9]
            room = cap[j] - fill[j]
            got = {i: 0.0 for i in idx}
            while room > 1e-9 and idx:
                s = room / len(idx)
                for i in idx:
                    x = min(s, offer[i] - got[i])
                    got[i] += x
                    room -= x
                idx = [i for i in idx if offer[i] - got[i] > 1e-9]
            for i, x in got.items():
                fill[j] += x
                if beta > 0:
                    own[i] -= x
                else:
                    left[i] -= x
        t += dt
        for i in range(k):
            if done[i] is None and left[i] <= 1e-6:
                done[i] = t
    return max(done)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('-v', action='store_true', help='every burst')
    ap.add_argument('--Q', type=float, default=0.65e6, help='one: the FIFO (bytes)')
    ap.add_argument('--beta', type=float, default=16384, help='one, both: per producer (bytes)')
    ap.add_argument('--C', type=float, default=0.8e6, help='halves, both: per half (bytes)')
    ap.add_argument('--R', type=float, default=52.35, help='drain rate (bytes/ns)')
    a = ap.parse_args()
    models = {
        'one': (lambda s: 0, [a.Q], a.beta),
        'halves': (half, [a.C, a.C], 0.0),
        'both': (half, [a.C, a.C], a.beta),
    }
    cs = cases()
    errs = {m: [] for m in models}
    if a.v:
        print('%-30s %4s %8s  %s' % ('burst', 'K', 'meas_us', '  '.join('%-14s' % m for m in models)))
    for c in cs:
        dt = 20.0 if c['T'] < 40000 else 100.0
        cells = []
        for m, (grp, cap, beta) in models.items():
            t = fluid(c['sms'], c['B'], grp, cap, beta, a.R, dt=dt)
            e = (t - c['T']) / c['T']
            errs[m].append(e)
            cells.append('%6.1f %+6.1f%%' % (t / 1e3, 100 * e))
        if a.v:
            print('%-30s %4d %8.1f  %s' % (c['name'][-30:], c['K'], c['T'] / 1e3, '  '.join(cells)))
    print('%d bursts (runs 14 calls 2, 5-7), Q %.3g, beta %.3g, C %.3g, R %.4g' %
          (len(cs), a.Q, a.beta, a.C, a.R))
    for m, e in errs.items():
        ab = sorted(abs(x) for x in e)
        within = sum(1 for x in ab if x <= 0.10)
        print('%-7s |error| median %5.1f %%, max %6.1f %%, within 10 %%: %d of %d' %
              (m, 100 * st.median(ab), 100 * ab[-1], within, len(ab)))


if __name__ == '__main__':
    main()
