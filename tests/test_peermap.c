// SPDX-License-Identifier: Apache-2.0
/*
 * test_peermap.c - the replay's producer-to-window map and its inverse (include/xstage_peermap.h)
 * for one process and for N = 2..8 peer ranks, all-to-all and one destination: every producer of
 * every source lands in exactly one window, never its own rank's (peers), within the row's share
 * of that window; and the destination side's enumeration (first producer, count) finds exactly
 * those producers at exactly those slots. Also a broken inverse, to show the check can fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/xt.h"
#include "xstage_peermap.h"

#define MAXN 8
#define MAXK 140

/* who[d][src][slot] = producer p + 1 (0: nobody) */
static int who[MAXN][MAXN][MAXK];

/* Check one (n, multi, one_dest, k) configuration; returns the number of mismatches. `broken`
 * shifts the inverse by one producer (the check must then fail). */
static int check(int n, int multi, int one_dest, int k, int broken)
{
    int bad = 0;
    memset(who, 0, sizeof who);
    const int nsrc = multi ? n : 1;
    for (int s = 0; s < nsrc; s++) {
        const xs_peermap m = xs_peermap_make(n, s, multi, one_dest);
        for (int p = 0; p < k; p++) {
            const int d = xs_pm_dest(&m, p), q = xs_pm_slot(&m, p);
            if (d < 0 || d >= n || (m.multi && d == s) || q < 0 ||
                q >= xs_pm_slots_max(&m, k) || who[d][s][q]) {
                bad++;
                continue;
            }
            who[d][s][q] = p + 1;
        }
    }
    /* the destination side: window d, source src, producers j + q D for q < slots */
    int found = 0;
    for (int d = 0; d < n; d++)
        for (int s = 0; s < nsrc; s++) {
            const xs_peermap m = xs_peermap_make(n, multi ? d : s, multi, one_dest);
            const int j = xs_pm_first(&m, s, d) + (broken && d == 0 && s == nsrc - 1 ? 1 : 0);
            const int slots = xs_pm_slots(&m, k, j);
            for (int q = 0; q < slots; q++) {
                if (who[d][s][q] != j + q * m.ndest + 1)
                    bad++;
                else
                    found++;
            }
            /* nothing stored beyond the enumerated slots */
            for (int q = slots; q < MAXK; q++)
                if (who[d][s][q])
                    bad++;
        }
    if (found != nsrc * k)
        bad++;
    return bad;
}

int main(void)
{
    /* one process: N windows, producer p to p % N (the virtual and host targets, peer -g 1) */
    for (int n = 1; n <= MAXN; n++)
        for (int k = 1; k <= MAXK; k += (k < 20 ? 1 : 7))
            XT_CHECK(check(n, 0, 0, k, 0) == 0, "one process, N %d, K %d", n, k);
    /* N > 1 peer ranks, all-to-all and one destination */
    for (int n = 2; n <= MAXN; n++)
        for (int one = 0; one <= 1; one++)
            for (int k = 1; k <= MAXK; k += (k < 20 ? 1 : 7))
                XT_CHECK(check(n, 1, one, k, 0) == 0, "peers N %d, %s, K %d", n,
                         one ? "one destination" : "all-to-all", k);
    /* concrete values the docs state (docs/MULTIGPU.md) */
    {
        xs_peermap m = xs_peermap_make(8, 3, 1, 0);
        XT_CHECK(xs_pm_dest(&m, 0) == 4 && xs_pm_dest(&m, 6) == 2 && xs_pm_dest(&m, 7) == 4,
                 "N 8 rank 3: producers 0, 6, 7 to ranks 4, 2, 4");
        XT_CHECK(xs_pm_slot(&m, 7) == 1 && xs_pm_slots_max(&m, 132) == 19, "slots of 132 over 7");
        XT_CHECK(xs_pm_first(&m, 3, 3) == -1, "a rank never stores to itself");
        m = xs_peermap_make(2, 1, 1, 0);
        XT_CHECK(xs_pm_dest(&m, 0) == 0 && xs_pm_dest(&m, 131) == 0 && xs_pm_slot(&m, 131) == 131,
                 "N 2: every producer to the one peer");
        m = xs_peermap_make(4, 0, 1, 1);
        XT_CHECK(xs_pm_dest(&m, 5) == 1 && xs_pm_first(&m, 0, 2) == -1,
                 "one destination: rank 0 stores only to rank 1");
        m = xs_peermap_make(4, 0, 0, 0);
        XT_CHECK(xs_pm_dest(&m, 5) == 1 && xs_pm_slot(&m, 5) == 1 && xs_pm_first(&m, 0, 0) == 0,
                 "one process: p %% N, its own window included");
    }
    /* rotating offsets: runs of one footprint go round the region on disjoint 4 KiB-aligned
     * places, never past its end, and come back to 0; a region of fewer than two footprints
     * does not rotate */
    {
        const unsigned long long page = 256; /* 4 KiB in 16-byte units */
        static const unsigned long long needs[] = {1, 255, 256, 257, 1000, 65536, 100000};
        static const unsigned long long caps[] = {512, 4096, 65536, 1ull << 24};
        for (int i = 0; i < 7; i++)
            for (int j = 0; j < 4; j++) {
                unsigned long long need = needs[i], cap = caps[j], prev = 0, pneed = 0;
                int bad = 0, wraps = 0, runs = 0;
                if (need > cap)
                    continue; /* refused before any run (xs_replay_check) */
                const int room = cap >= 2 * need + page;
                for (int r = 0; r < 2000; r++) {
                    unsigned long long b = xs_pm_rotate(prev, pneed, need, cap);
                    if (b % page || b + need > cap || (!room && b != 0))
                        bad++;
                    /* consecutive runs never share a line (with room to rotate) */
                    if (room && pneed && b != 0 && b < prev + pneed)
                        bad++;
                    if (room && pneed && b == 0)
                        wraps++;
                    prev = b;
                    pneed = need;
                    runs++;
                }
                XT_CHECK(bad == 0, "rotate: need %llu in %llu units, %d bad offsets in %d runs",
                         need, cap, bad, runs);
                /* it goes round: the number of places before it comes back to 0 */
                unsigned long long step = (need + page - 1) / page * page;
                unsigned long long places = room ? (cap - need) / step + 1 : 1;
                XT_CHECK(!room || wraps == (int)((runs - 1) / places),
                         "rotate: need %llu in %llu: %d wraps, expected %llu places", need, cap,
                         wraps, places);
            }
        XT_CHECK(xs_pm_rotate(0, 0, 1000, 1 << 20) == 0, "the first run starts at 0");
        XT_CHECK(xs_pm_rotate(0, 1000, 1000, 1 << 20) == 1024, "the next starts on the next page");
        XT_CHECK(xs_pm_rotate(1024, 1000, 5000, 6000) == 0,
                 "no room for two footprints: no rotation");
        XT_CHECK(xs_pm_rotate(4096, 1000, 3000, 8192) == 5120, "a larger footprint fits: it goes on");
        XT_CHECK(xs_pm_rotate(4096, 1000, 4000, 8192) == 0, "past the end: it wraps");
    }
    /* the check itself can fail: a destination that looks one producer too far */
    XT_CHECK(check(4, 1, 0, 40, 1) > 0, "a shifted inverse is caught");
    XT_CHECK(check(3, 0, 0, 10, 1) > 0, "a shifted inverse is caught (one process)");
    return xt_done();
}
