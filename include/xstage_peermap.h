// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_peermap.h - where a replay producer's bytes land, and where a destination finds them
 * (cuda/common/replay.cu; docs/MULTIGPU.md "calibrate, replay and validate -g N").
 *
 * One process (host, local, virtual, peer -g 1): producer p stores to window p % N, slot p / N.
 * N > 1 peer ranks: producer p of rank `me` stores to rank (me + 1 + p % D) % N, slot p / D, in
 * region `me` of that window, with D = N - 1 destinations (all-to-all, none to itself) or D = 1
 * (one destination, the next rank). The destination side inverts it: the producers of source
 * `src` that land in window `d` are p = j, j + D, j + 2D, ... (slots 0, 1, 2, ...). Plain C, used
 * by the replay's host side (window sizes, destination-side verification) and
 * tests/test_peermap.c; the replay kernel writes xs_pm_dest / xs_pm_slot out
 * (cuda/common/replay.cu).
 */
#ifndef XSTAGE_PEERMAP_H
#define XSTAGE_PEERMAP_H

#ifdef __CUDACC__
#define XS_PM_FN static __host__ __device__ __forceinline__
#else
#define XS_PM_FN static inline
#endif

typedef struct {
    int n;     /* windows (ranks) */
    int me;    /* this source */
    int multi; /* N > 1 peer processes: per-source regions, no stores to itself */
    int dbase; /* the first destination */
    int ndest; /* D: destinations producers are spread over */
} xs_peermap;

XS_PM_FN xs_peermap xs_peermap_make(int n, int me, int multi, int one_dest)
{
    xs_peermap m;
    m.n = n;
    m.me = me;
    m.multi = multi && n > 1;
    m.dbase = m.multi ? me + 1 : 0;
    m.ndest = m.multi ? (one_dest ? 1 : n - 1) : n;
    return m;
}

/* destination window of producer p */
XS_PM_FN int xs_pm_dest(const xs_peermap *m, int p) { return (m->dbase + p % m->ndest) % m->n; }

/* slot of producer p in its destination (its region starts slot x the row's producer stride) */
XS_PM_FN int xs_pm_slot(const xs_peermap *m, int p) { return p / m->ndest; }

/* slots a row of k producers needs in any one destination window (its largest share) */
XS_PM_FN int xs_pm_slots_max(const xs_peermap *m, int k) { return (k + m->ndest - 1) / m->ndest; }

/* the first producer j of source src (a rank with this map's n, multi and ndest) that lands in
 * window d, or -1 if none of its producers do; the others are j + ndest, j + 2 ndest, ... */
XS_PM_FN int xs_pm_first(const xs_peermap *m, int src, int d)
{
    const int j = m->multi ? ((d - src - 1) % m->n + m->n) % m->n : d;
    return m->multi && d == src ? -1 : j < m->ndest ? j : -1;
}

/* how many of a row's k producers of one source land in the window whose first is j */
XS_PM_FN int xs_pm_slots(const xs_peermap *m, int k, int j)
{
    return j < 0 || j >= k ? 0 : (k - j + m->ndest - 1) / m->ndest;
}

/* Rotating destination offsets (docs/MODEL.md): where a run whose footprint is need16
 * 16-byte units starts in a region of cap16 units, given where the previous run started (prev16)
 * and its footprint (prev_need16; 0 before the first run). A run starts where the previous one's
 * footprint ended, rounded up to 4 KiB, so that consecutive runs store to disjoint lines and go
 * round the whole region before they store to the same lines again; it starts at 0 when it
 * would not fit before the region's end, and always when the region holds fewer than two
 * footprints (no room to rotate). Every rank of a multi-rank replay computes the same sequence
 * (the same schedules, in lockstep). */
XS_PM_FN unsigned long long xs_pm_rotate(unsigned long long prev16, unsigned long long prev_need16,
                                         unsigned long long need16, unsigned long long cap16)
{
    const unsigned long long page = 4096 / 16;
    if (need16 == 0 || cap16 < 2 * need16 + page)
        return 0;
    unsigned long long next = prev_need16 ? (prev16 + prev_need16 + page - 1) / page * page : 0;
    return next + need16 <= cap16 ? next : 0;
}

#endif
