// SPDX-License-Identifier: Apache-2.0
/*
 * test_up_kv.c - the host side of the attention kernel's KV split (include/xstage_up.h,
 * src/up_kv.c, src/up_progs.c; docs/UP.md "KV split"), plain C against the core.
 *
 *   1. the task lists (xs_attn_kv_build) on many shapes: they pass the kernel's check
 *      (xs_attn_kv_check), every tile is cut into the stated number of parts and every part
 *      holds at most part_kb key blocks (a local tile's at most a CTA's share of the local key
 *      blocks, if fewer) unless the part cap forced more, the slots are the parts but the
 *      last, in every CTA's list the remote tiles come before the local ones, and list
 *      scheduling's bound holds: no CTA's cost (key blocks, plus one per task that stores its
 *      tile) exceeds the least loaded's by more than one task's;
 *   2. the check rejects hand-broken lists, each with its own reason: a part missing, a part
 *      twice, a gap in the key blocks, key blocks past the tile, a slot shared by two tiles, a
 *      slot past the count, parts disagreeing on their slots, a bad part code, a tile in no
 *      list, and two CTAs whose last parts wait for each other's queued parts (deadlock);
 *   3. the prediction (xs_attn_kv_predict) on a case worked by hand and its properties on
 *      random tile times: compute end = the replay of the lists, span = max(compute end, link
 *      end - headroom / drain), the link ends no earlier than the first store plus every remote
 *      byte at the drain rate, more headroom never ends later, and bad arguments are refused;
 *   4. the per-CTA programs (xs_attn_progs_plain / _kv / _simulate) on random shapes and
 *      times: every CTA's rows are its steps (its tiles in the order, or its KV tasks with the
 *      replay's times) - row 0 its first step's work, then each step's bytes in one row or in
 *      at most split slice rows whose gaps add up to the next step's time, then (0, 0) rows;
 *      the gaps add up to the steps' times (a KV CTA's to its last task's end, the longest to
 *      the prediction's compute end), the bytes (multiples of 16) to the tiles' remote bytes;
 *      simulated, the span is the free span on an unlimited stage and later on a slow one,
 *      never earlier than the free span, which is never earlier than the longest CTA's
 *      compute; bad arguments are refused.
 *
 * usage: test_up_kv [seed]   last line: "N passed, N failed"
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xt.h"
#include "xt_rand.h"
#include "xstage.h"
#include "xstage_up.h"

typedef struct {
    int seq, heads, causal, remote, grid, part_kb, tiles;
    int *off, ntasks, nslots;
    xs_attn_kvtask *tasks;
} kv_case;

static int kv_make(kv_case *c, int seq, int heads, int causal, int peers, int grid, int part_kb)
{
    c->seq = seq, c->heads = heads, c->causal = causal, c->part_kb = part_kb;
    c->tiles = xs_attn_tiles(seq, heads);
    c->remote = xs_attn_remote_tiles(seq, heads, seq / peers > 0 ? seq / peers : 1);
    c->grid = grid < c->tiles ? grid : c->tiles;
    const int cap = xs_attn_kv_max_tasks(seq, heads);
    c->off = (int *)malloc((size_t)(c->grid + 1) * sizeof(int));
    c->tasks = (xs_attn_kvtask *)malloc((size_t)cap * sizeof(xs_attn_kvtask));
    return xs_attn_kv_build(seq, heads, causal, c->remote, c->grid, part_kb, c->off, c->tasks,
                            cap, &c->ntasks, &c->nslots) == XS_OK;
}

static void kv_free(kv_case *c)
{
    free(c->off);
    free(c->tasks);
}

static int parts_of(int iters, int part_kb)
{
    if (part_kb <= 0 || iters <= part_kb)
        return 1;
    int n = (iters + part_kb - 1) / part_kb;
    return n < XS_ATTN_KV_MAX_PARTS ? n : XS_ATTN_KV_MAX_PARTS;
}

/* 1. The lists on many shapes. */
static void check_build(void)
{
    const int seqs[] = {1, 100, 128, 300, 1000, 2049, 4096};
    const int heads_l[] = {1, 3, 8};
    const int peers_l[] = {1, 2, 3, 8};
    const int grids[] = {1, 7, 132};
    const int kbs[] = {0, 1, 2, 8, 16};
    int cases = 0, bad = 0;
    for (int a = 0; a < 7; a++)
        for (int h = 0; h < 3; h++)
            for (int causal = 0; causal < 2; causal++)
                for (int pi = 0; pi < 4; pi++)
                    for (int g = 0; g < 3; g++)
                        for (int kb = 0; kb < 5; kb++) {
                            kv_case c;
                            int e = !kv_make(&c, seqs[a], heads_l[h], causal, peers_l[pi],
                                             grids[g], kbs[kb]);
                            if (!e)
                                e |= xs_attn_kv_check(c.seq, c.heads, c.causal, c.grid, c.off,
                                                      c.tasks, c.nslots) != XS_OK;
                            /* remote tiles in parts of at most part_kb key blocks; local
                             * ones of at most min(part_kb, a CTA's share of the local key
                             * blocks) */
                            long long lkb = 0;
                            for (int t = c.remote; t < c.tiles; t++)
                                lkb += xs_attn_tile_iters(c.seq, c.heads, c.causal, t);
                            const int share = (int)((lkb + c.grid - 1) / c.grid);
                            const int lpart = c.part_kb > 0 && share > 0 && share < c.part_kb
                                                  ? share
                                                  : c.part_kb;
                            int want_tasks = 0, want_slots = 0, too_long = 0;
                            for (int t = 0; t < c.tiles && !e; t++) {
                                const int it = xs_attn_tile_iters(c.seq, c.heads, c.causal, t);
                                const int pkb = t < c.remote ? c.part_kb : lpart;
                                const int np = parts_of(it, pkb);
                                want_tasks += np, want_slots += np - 1;
                                too_long |= np < XS_ATTN_KV_MAX_PARTS && pkb > 0 &&
                                            (it + np - 1) / np > pkb;
                            }
                            e |= too_long;
                            e |= c.ntasks != want_tasks || c.nslots != want_slots ||
                                 c.off[c.grid] != c.ntasks;
                            long long lo = -1, hi = 0, maxpart = 0;
                            for (int b = 0; b < c.grid && !e; b++) {
                                long long load = 0;
                                int seen_local = 0;
                                for (int i = c.off[b]; i < c.off[b + 1]; i++) {
                                    const xs_attn_kvtask tk = c.tasks[i];
                                    /* the builder's cost: key blocks, one more for a task
                                     * that stores its tile (whole, or its last part) */
                                    const int st = tk.part < 0 ||
                                                   ((tk.part >> 4) & 15) == (tk.part & 15) - 1;
                                    const int cost = tk.kb1 - tk.kb0 + st;
                                    load += cost;
                                    maxpart = cost > maxpart ? cost : maxpart;
                                    if (tk.tile >= c.remote)
                                        seen_local = 1;
                                    else if (seen_local)
                                        e = 1; /* a remote tile after a local one */
                                }
                                lo = lo < 0 || load < lo ? load : lo;
                                hi = load > hi ? load : hi;
                            }
                            e |= hi > lo + maxpart;
                            if (e && bad < 5)
                                printf("test_up_kv: lists of seq %d heads %d causal %d remote "
                                       "%d grid %d part_kb %d: %d tasks (want %d), %d slots "
                                       "(want %d), loads %lld..%lld (max part %lld), check: "
                                       "%s\n", c.seq, c.heads, c.causal, c.remote, c.grid,
                                       c.part_kb, c.ntasks, want_tasks, c.nslots, want_slots,
                                       lo, hi, maxpart, xs_errmsg());
                            bad += e;
                            cases++;
                            kv_free(&c);
                        }
    XT_CHECK(bad == 0, "KV lists: %d of %d shapes wrong", bad, cases);
    XT_CHECK(cases == 7 * 3 * 2 * 4 * 3 * 5, "KV lists: %d shapes", cases);
}

/* 2. Hand-broken lists. The base: seq 256, 1 head, non-causal: 2 tiles of 4 key blocks, each
 * in 2 parts ({0,2} and {2,4}), tile 0 slot 0, tile 1 slot 1, on 2 CTAs:
 *   CTA 0: t0 p0, t1 p0      CTA 1: t0 p1 (last), t1 p1 (last) */
static void base_lists(int *off, xs_attn_kvtask *tk)
{
    off[0] = 0, off[1] = 2, off[2] = 4;
    tk[0] = xs_attn_kvtask_of(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2));
    tk[1] = xs_attn_kvtask_of(1, 0, 2, XS_ATTN_KV_PART(1, 0, 2));
    tk[2] = xs_attn_kvtask_of(0, 2, 4, XS_ATTN_KV_PART(0, 1, 2));
    tk[3] = xs_attn_kvtask_of(1, 2, 4, XS_ATTN_KV_PART(1, 1, 2));
}

static void expect_refused(const char *what, const int *off, const xs_attn_kvtask *tk, int nslots,
                           const char *needle)
{
    xs_status st = xs_attn_kv_check(256, 1, 0, 2, off, tk, nslots);
    XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), needle), "%s: status %d, message '%s' "
             "(wanted '%s')", what, (int)st, xs_errmsg(), needle);
}

static void check_refusals(void)
{
    int off[3];
    xs_attn_kvtask tk[4];
    base_lists(off, tk);
    XT_CHECK(xs_attn_kv_check(256, 1, 0, 2, off, tk, 2) == XS_OK, "the base lists: %s",
             xs_errmsg());
    /* the same in the causal shape: tile 0 (rows 128..255) has 4 key blocks, tile 1 has 2 */
    {
        int o2[3] = {0, 2, 3};
        xs_attn_kvtask t2[3] = {xs_attn_kvtask_of(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2)), xs_attn_kvtask_of(1, 0, 2, -1),
                      xs_attn_kvtask_of(0, 2, 4, XS_ATTN_KV_PART(0, 1, 2))};
        XT_CHECK(xs_attn_kv_check(256, 1, 1, 2, o2, t2, 1) == XS_OK, "causal lists: %s",
                 xs_errmsg());
        t2[1].kb1 = 3;
        XT_CHECK(xs_attn_kv_check(256, 1, 1, 2, o2, t2, 1) == XS_EINVAL &&
                     strstr(xs_errmsg(), "key blocks [0, 3) of 2"),
                 "causal key blocks past the tile: %s", xs_errmsg());
    }
    base_lists(off, tk), tk[2] = xs_attn_kvtask_of(1, 2, 4, XS_ATTN_KV_PART(1, 1, 2));
    expect_refused("a part twice", off, tk, 2, "part 1 comes twice");
    base_lists(off, tk), off[2] = 3;
    expect_refused("a part missing", off, tk, 2, "part 1 of 2 is in no list");
    base_lists(off, tk), tk[2].kb0 = 3;
    expect_refused("a gap", off, tk, 2, "starts at key block 3, not 2");
    base_lists(off, tk), tk[2].kb1 = 5;
    expect_refused("past the tile", off, tk, 2, "key blocks [2, 5) of 4");
    base_lists(off, tk), tk[1].part = XS_ATTN_KV_PART(0, 0, 2), tk[3].part = XS_ATTN_KV_PART(0, 1, 2);
    expect_refused("a shared slot", off, tk, 2, "slot 0 is used by two tiles");
    base_lists(off, tk);
    expect_refused("a slot past the count", off, tk, 1, "1 slots");
    base_lists(off, tk), tk[2].part = XS_ATTN_KV_PART(1, 1, 2);
    expect_refused("parts disagree", off, tk, 3, "disagree");
    base_lists(off, tk), tk[0].part = XS_ATTN_KV_PART(0, 0, 1);
    expect_refused("a bad code", off, tk, 2, "part code");
    base_lists(off, tk), tk[1] = xs_attn_kvtask_of(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2));
    expect_refused("tile 1 twice over", off, tk, 2, "comes twice");
    {
        int o2[3] = {0, 1, 1};
        xs_attn_kvtask t2[1] = {xs_attn_kvtask_of(0, 0, 4, -1)};
        expect_refused("a tile in no list", o2, t2, 0, "tile 1 is in no list");
    }
    /* deadlock: CTA 0 starts with tile 0's last part, CTA 1 with tile 1's; each waits for the
     * other's first part, queued behind it */
    base_lists(off, tk);
    {
        xs_attn_kvtask d[4] = {tk[2], tk[1], tk[3], tk[0]};
        expect_refused("a wait cycle", off, d, 2, "deadlock");
    }
}

/* 3. The prediction. By hand: seq 256, 1 head, non-causal, the base lists; tile t takes 100
 * ns whole (50 ns per part); tile 0 sends 1000 B, tile 1 500 B at 10 B/ns: tile 0 is stored
 * at 50 ns (both its parts end then), tile 1 at 100 (its part 0 runs second on CTA 0); the
 * link drains tile 0 to 150 and tile 1 to 200; headroom 0: span 200; headroom 500 B: 200 - 50
 * = 150; headroom 1e9: the compute, 100. */
static void check_predict(void)
{
    int off[3];
    xs_attn_kvtask tk[4];
    base_lists(off, tk);
    double dur[2] = {100, 100}, rb[2] = {1000, 500};
    xs_attn_courier_pred p;
    XT_CHECK(xs_attn_kv_predict(256, 1, 0, 2, off, tk, dur, rb, 10.0, 0.0, &p) == XS_OK, "%s",
             xs_errmsg());
    XT_NEAR(p.compute_end_ns, 100.0, 1e-12);
    XT_NEAR(p.link_end_ns, 200.0, 1e-12);
    XT_NEAR(p.span_ns, 200.0, 1e-12);
    XT_CHECK(xs_attn_kv_predict(256, 1, 0, 2, off, tk, dur, rb, 10.0, 500.0, &p) == XS_OK, "%s",
             xs_errmsg());
    XT_NEAR(p.span_ns, 150.0, 1e-12);
    XT_CHECK(xs_attn_kv_predict(256, 1, 0, 2, off, tk, dur, rb, 10.0, 1e9, &p) == XS_OK, "%s",
             xs_errmsg());
    XT_NEAR(p.span_ns, 100.0, 1e-12);
    /* a last part waits for a slower other part: tile 0's part 0 behind 300 ns of tile 1 */
    {
        int o2[3] = {0, 2, 3};
        xs_attn_kvtask t2[3] = {xs_attn_kvtask_of(1, 0, 4, -1), xs_attn_kvtask_of(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2)),
                      xs_attn_kvtask_of(0, 2, 4, XS_ATTN_KV_PART(0, 1, 2))};
        double d2[2] = {100, 300};
        XT_CHECK(xs_attn_kv_predict(256, 1, 0, 2, o2, t2, d2, rb, 10.0, 0.0, &p) == XS_OK, "%s",
                 xs_errmsg());
        /* CTA 0: tile 1 to 300, tile 0 part 0 to 350; CTA 1: part 1 to 50, waits to 350 */
        XT_NEAR(p.compute_end_ns, 350.0, 1e-12);
        XT_NEAR(p.link_end_ns, 300.0 + 50.0 + 100.0, 1e-12); /* tile 1 then tile 0 */
    }
    XT_CHECK(xs_attn_kv_predict(256, 1, 0, 2, off, tk, dur, rb, 0.0, 0.0, &p) == XS_EINVAL,
             "drain 0 refused");
    XT_CHECK(xs_attn_kv_predict(256, 1, 0, 2, off, tk, NULL, rb, 10.0, 0.0, &p) == XS_EINVAL,
             "no durations refused");
    {
        xs_attn_kvtask d[4] = {tk[2], tk[1], tk[3], tk[0]};
        XT_CHECK(xs_attn_kv_predict(256, 1, 0, 2, off, d, dur, rb, 10.0, 0.0, &p) == XS_EINVAL,
                 "deadlocked lists refused");
    }

    /* random shapes and times */
    int bad = 0, cases = 0;
    for (int it = 0; it < 300; it++) {
        const int seq = 1 + (int)(xt_rng() % 3000), heads = 1 + (int)(xt_rng() % 6);
        const int causal = (int)(xt_rng() & 1), peers = 1 + (int)(xt_rng() % 8);
        const int grid = 1 + (int)(xt_rng() % 40), kb = (int)(xt_rng() % 12);
        kv_case c;
        if (!kv_make(&c, seq, heads, causal, peers, grid, kb)) {
            bad++;
            continue;
        }
        double *d = (double *)malloc((size_t)c.tiles * sizeof(double));
        double *r = (double *)malloc((size_t)c.tiles * sizeof(double));
        double total = 0;
        for (int t = 0; t < c.tiles; t++) {
            d[t] = 10.0 + (double)(xt_rng() % 1000);
            r[t] = t < c.remote ? (double)(256 + xt_rng() % 32768) : 0.0;
            total += r[t];
        }
        const double R = 1.0 + (double)(xt_rng() % 100), H = (double)(xt_rng() % 100000);
        xs_attn_courier_pred p0, p1, p2;
        int e = xs_attn_kv_predict(seq, heads, causal, c.grid, c.off, c.tasks, d, r, R, 0.0,
                                   &p0) != XS_OK;
        e |= xs_attn_kv_predict(seq, heads, causal, c.grid, c.off, c.tasks, d, r, R, H, &p1) !=
             XS_OK;
        e |= xs_attn_kv_predict(seq, heads, causal, c.grid, c.off, c.tasks, d, r, R, 2 * H,
                                &p2) != XS_OK;
        /* the replay by hand, without the waits: a lower bound of the compute end */
        double lb = 0;
        for (int b = 0; b < c.grid; b++) {
            double s = 0;
            for (int i = c.off[b]; i < c.off[b + 1]; i++) {
                const int t = c.tasks[i].tile;
                s += d[t] * (c.tasks[i].kb1 - c.tasks[i].kb0) /
                     xs_attn_tile_iters(seq, heads, causal, t);
            }
            lb = s > lb ? s : lb;
        }
        const double eps = 1e-9 * (p0.compute_end_ns + total / R + 1);
        if (!e) {
            e |= p0.compute_end_ns < lb - eps;
            e |= fabs(p0.span_ns - fmax(p0.compute_end_ns, p0.link_end_ns)) > eps;
            e |= fabs(p1.span_ns - fmax(p1.compute_end_ns, p1.link_end_ns - H / R)) > eps;
            e |= p2.span_ns > p1.span_ns + eps || p1.span_ns > p0.span_ns + eps;
            e |= p1.span_ns < p1.compute_end_ns - eps;
            if (c.remote > 0)
                e |= p0.link_end_ns < total / R - eps;
            else
                e |= p0.link_end_ns != 0.0;
        }
        if (e && bad < 5)
            printf("test_up_kv: prediction of seq %d heads %d causal %d grid %d kb %d: compute "
                   "%.6g (lower bound %.6g), link %.6g, spans %.6g %.6g %.6g\n", seq, heads,
                   causal, c.grid, kb, p0.compute_end_ns, lb, p0.link_end_ns, p0.span_ns,
                   p1.span_ns, p2.span_ns);
        bad += e;
        cases++;
        free(d), free(r);
        kv_free(&c);
    }
    XT_CHECK(bad == 0, "KV prediction: %d of %d random cases violate its properties", bad, cases);
}

/* 4. Per-CTA programs (xs_attn_progs_plain / _kv / _simulate, docs/UP.md "Per-CTA programs"). */

/* Bytes tile t stores on other ranks: its rows at or past rows_per_rank, 256 B each (as
 * xs_up_tile_remote_bytes, written out here as the oracle): multiples of 256, so their rounding to 16 is exact. */
static double tile_rbytes(int seq, int heads, int rows_per_rank, int t)
{
    const int q0 = xs_attn_tile_row0(seq, heads, t);
    const int q1 = q0 + XS_ATTN_BM < seq ? q0 + XS_ATTN_BM : seq;
    const int lo = q0 > rows_per_rank ? q0 : rows_per_rank;
    return q1 > lo ? (double)(q1 - lo) * XS_ATTN_ROW_BYTES : 0.0;
}

/* A CTA's step as the header states it: its time, its key-block iterations, its bytes. */
typedef struct {
    double ns;
    int iters;
    double bytes;
} pstep;

/* Rows that a step's bytes take in split n over the next step's nk iterations: one per
 * iteration at which the slices due (xs_attn_slices_due) grow. */
static int slice_rows(int n, int nk)
{
    int rows = 0, prev = 0;
    for (int j = 0; j < nk; j++) {
        const int d = xs_attn_slices_due(n, nk, j);
        rows += d > prev;
        prev = d;
    }
    return rows;
}

static int rel_ok(double a, double b, double rel)
{
    return fabs(a - b) <= rel * (fabs(b) > 1.0 ? fabs(b) : 1.0);
}

/* CTA b's program against its m steps: row 0 is the first step's work (no bytes); then each
 * step's bytes (rounded to 16) in one row (split 0, no bytes, or the last step) or in the
 * slice rows, whose gaps add up to the next step's time (0 after the last); then (0, 0)
 * padding. Also the totals: the gaps add up to the steps' times, the bytes to their rounded
 * bytes. *rows_used gets the program's length. 0 = right; else why[] says what is wrong. */
static int check_program(const xs_attn_progs *pg, int b, const pstep *st, int m, int split,
                         int *rows_used, char *why, size_t nwhy)
{
    const int G = pg->grid;
#define PB(r) pg->bytes[(size_t)(r) * G + b]
#define PG(r) pg->gap_ns[(size_t)(r) * G + b]
    why[0] = 0;
    *rows_used = 0;
    double gsum = 0, want_g = 0;
    int64_t bsum = 0, want_b = 0;
    for (int r = 0; r < pg->nrows; r++) {
        if (PB(r) < 0 || PB(r) % 16 || !(PG(r) >= 0)) {
            snprintf(why, nwhy, "row %d: bytes %lld, gap %g", r, (long long)PB(r), PG(r));
            return 1;
        }
        gsum += PG(r), bsum += PB(r);
    }
    for (int i = 0; i < m; i++)
        want_g += st[i].ns, want_b += (int64_t)llround(st[i].bytes / 16.0) * 16;
    if (!rel_ok(gsum, want_g, 1e-9)) {
        snprintf(why, nwhy, "gaps add up to %.17g, its steps' times to %.17g", gsum, want_g);
        return 1;
    }
    if (bsum != want_b) {
        snprintf(why, nwhy, "bytes add up to %lld, its steps' bytes to %lld", (long long)bsum,
                 (long long)want_b);
        return 1;
    }
    int r = 0;
    if (m > 0) {
        if (PB(0) != 0 || !rel_ok(PG(0), st[0].ns, 1e-9)) {
            snprintf(why, nwhy, "row 0 is (%lld, %g), not (0, %g)", (long long)PB(0), PG(0),
                     st[0].ns);
            return 1;
        }
        r = 1;
        for (int i = 0; i < m; i++) {
            const int last = i + 1 == m;
            const int nk = last ? 1 : (st[i + 1].iters > 0 ? st[i + 1].iters : 1);
            const int n = !last && split > 0 && st[i].bytes > 0 ? slice_rows(split, nk) : 1;
            if (r + n > pg->nrows) {
                snprintf(why, nwhy, "step %d needs rows %d..%d of %d", i, r, r + n - 1,
                         pg->nrows);
                return 1;
            }
            double g = 0;
            int64_t by = 0;
            int nonzero = 0;
            for (int k = r; k < r + n; k++)
                g += PG(k), by += PB(k), nonzero += PB(k) > 0;
            const double wg = last ? 0.0 : st[i + 1].ns;
            const int64_t wb = (int64_t)llround(st[i].bytes / 16.0) * 16;
            if (!rel_ok(g, wg, 1e-9) || (last && g != 0.0) || by != wb ||
                nonzero > (split > 0 ? split : 1)) {
                snprintf(why, nwhy, "step %d of %d (rows %d..%d): gaps %.17g (want %.17g), "
                         "bytes %lld (want %lld) in %d rows (split %d)", i, m, r, r + n - 1, g,
                         wg, (long long)by, (long long)wb, nonzero, split);
                return 1;
            }
            r += n;
        }
    }
    *rows_used = r;
    for (int k = r; k < pg->nrows; k++)
        if (PB(k) != 0 || PG(k) != 0.0) {
            snprintf(why, nwhy, "padding row %d (program of %d rows) is (%lld, %g)", k, r,
                     (long long)PB(k), PG(k));
            return 1;
        }
#undef PB
#undef PG
    return 0;
}

/* check_program for CTA b, with its program's totals: 0 when it holds, else why is "CTA b: ...".
 * Raises *maxrows to the rows the program uses, adds its bytes to *all and sets *gaps to the sum
 * of its gaps. */
static int check_cta(const xs_attn_progs *pg, int b, const pstep *st, int m, int split,
                     int *maxrows, int64_t *all, double *gaps, char *why, size_t nwhy)
{
    int used;
    char w2[400];
    const int bad = check_program(pg, b, st, m, split, &used, w2, sizeof w2);
    if (bad)
        snprintf(why, nwhy, "CTA %d: %s", b, w2);
    *maxrows = used > *maxrows ? used : *maxrows;
    double g = 0;
    for (int r = 0; r < pg->nrows; r++) {
        g += pg->gap_ns[(size_t)r * pg->grid + b];
        *all += pg->bytes[(size_t)r * pg->grid + b];
    }
    *gaps = g;
    return bad;
}

/* A random shape: seq 128..8192 (a third of them multiples of 128), heads 1..16, peers 1..8. */
static void random_shape(int *seq, int *heads, int *causal, int *peers)
{
    *seq = 128 + (int)(xt_rng() % 8065);
    if (xt_rng() % 3 == 0)
        *seq = *seq / 128 * 128;
    *heads = 1 + (int)(xt_rng() % 16);
    *causal = (int)(xt_rng() & 1);
    *peers = 1 + (int)(xt_rng() % 8);
}

static const int progs_splits[] = {0, 2, 3, 8, 16};

/* Per-tile times (positive, not integers) and remote bytes; *total the remote bytes. Also
 * checks the helper against xs_attn_remote_tiles: a tile stores remotely iff t < remote. */
static int tile_inputs(int seq, int heads, int peers, int remote, double **dur, double **rb,
                       int64_t *total)
{
    const int tiles = xs_attn_tiles(seq, heads), rpr = seq / peers;
    *dur = (double *)malloc((size_t)tiles * sizeof(double));
    *rb = (double *)malloc((size_t)tiles * sizeof(double));
    *total = 0;
    int e = 0;
    for (int t = 0; t < tiles; t++) {
        (*dur)[t] = 1.0 + 2000.0 * xt_urand();
        (*rb)[t] = tile_rbytes(seq, heads, rpr, t);
        *total += (int64_t)(*rb)[t];
        e |= ((*rb)[t] > 0) != (t < remote);
    }
    return e;
}

/* The KV lists replayed as the header states it: each CTA runs its tasks back to back, a part
 * taking dur[t] x its share of the tile's key blocks, a last part ending no earlier than its
 * other parts. task_end[i] per task; returns the tasks that ran. */
static int test_kv_replay(const kv_case *c, const double *dur, double *task_end)
{
    int *pos = (int *)calloc((size_t)c->grid, sizeof(int));
    double *clk = (double *)calloc((size_t)c->grid, sizeof(double));
    int *done = (int *)calloc((size_t)c->tiles, sizeof(int));
    double *pend = (double *)calloc((size_t)c->tiles, sizeof(double));
    int ran = 0;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int b = 0; b < c->grid; b++)
            while (c->off[b] + pos[b] < c->off[b + 1]) {
                const int i = c->off[b] + pos[b];
                const xs_attn_kvtask tk = c->tasks[i];
                const int np = tk.part < 0 ? 1 : ((tk.part) & 15);
                const int p = tk.part < 0 ? 0 : (((tk.part) >> 4) & 15);
                if (np > 1 && p == np - 1 && done[tk.tile] < np - 1)
                    break;
                const int it = xs_attn_tile_iters(c->seq, c->heads, c->causal, tk.tile);
                double end = clk[b] + dur[tk.tile] * (tk.kb1 - tk.kb0) / it;
                if (np > 1 && p == np - 1)
                    end = fmax(end, pend[tk.tile]);
                else if (np > 1)
                    done[tk.tile]++, pend[tk.tile] = fmax(pend[tk.tile], end);
                clk[b] = task_end[i] = end;
                pos[b]++, ran++, progress = 1;
            }
    }
    free(pos), free(clk), free(done), free(pend);
    return ran;
}

static void check_progs_plain(void)
{
    int bad = 0, cases = 0, sliced = 0, with_bytes = 0, nm = 0;
    char why[512];
    for (int it = 0; it < 2000; it++) {
        int seq, heads, causal, peers;
        random_shape(&seq, &heads, &causal, &peers);
        const int tiles = xs_attn_tiles(seq, heads);
        const int remote = xs_attn_remote_tiles(seq, heads, seq / peers);
        const int gmax = tiles < 132 ? tiles : 132;
        const int grid = 1 + (int)(xt_rng() % gmax);
        const int order = xt_rng() & 1 ? XS_ATTN_ORDER_EARLY : XS_ATTN_ORDER_SNAKE;
        const int split = progs_splits[xt_rng() % 5];
        double *dur, *rb;
        int64_t total;
        int e = tile_inputs(seq, heads, peers, remote, &dur, &rb, &total);
        if (e)
            snprintf(why, sizeof why, "the test's remote bytes disagree with %d remote tiles",
                     remote);
        xs_attn_progs pg;
        if (!e && xs_attn_progs_plain(seq, heads, causal, order, remote, grid, split, dur, rb,
                                      &pg) != XS_OK) {
            snprintf(why, sizeof why, "refused: %s", xs_errmsg());
            e = 1;
        } else if (!e) {
            pstep *st = (pstep *)malloc((size_t)tiles * sizeof *st);
            int maxrows = 1;
            int64_t all = 0;
            if (pg.grid != grid || !pg.bytes || !pg.gap_ns) {
                snprintf(why, sizeof why, "grid %d", pg.grid);
                e = 1;
            }
            for (int b = 0; b < grid && !e; b++) {
                const int m = xs_attn_cta_count(tiles, grid, b);
                for (int k = 0; k < m; k++) {
                    const int t = xs_attn_cta_tile(order, tiles, remote, grid, b, k);
                    st[k].ns = dur[t], st[k].iters = xs_attn_tile_iters(seq, heads, causal, t);
                    st[k].bytes = rb[t];
                }
                double g;
                e = check_cta(&pg, b, st, m, split, &maxrows, &all, &g, why, sizeof why);
            }
            if (!e && (pg.nrows != maxrows || all != total)) {
                snprintf(why, sizeof why, "%d rows (the longest program %d), %lld bytes (tiles "
                         "%lld)", pg.nrows, maxrows, (long long)all, (long long)total);
                e = 1;
            }
            sliced += split > 0 && total > 0, with_bytes += total > 0;
            free(st);
            xs_attn_progs_free(&pg);
            nm += pg.bytes == NULL && pg.gap_ns == NULL && pg.nrows == 0 && pg.grid == 0;
        }
        if (e && bad < 5)
            printf("test_up_kv: plain programs of seq %d heads %d causal %d peers %d grid %d "
                   "order %d split %d: %s\n", seq, heads, causal, peers, grid, order, split,
                   why);
        bad += e;
        cases++;
        free(dur), free(rb);
    }
    XT_CHECK(bad == 0, "plain programs: %d of %d random shapes wrong", bad, cases);
    XT_CHECK(sliced > 50 && with_bytes > 100, "plain programs: only %d shapes with bytes, %d of "
             "them sliced", with_bytes, sliced);
    XT_CHECK(nm == cases - bad, "xs_attn_progs_free left %d of %d programs set", cases - bad - nm,
             cases - bad);
}

static void check_progs_kv(void)
{
    int bad = 0, cases = 0, parted = 0;
    char why[512];
    for (int it = 0; it < 600; it++) {
        int seq, heads, causal, peers;
        random_shape(&seq, &heads, &causal, &peers);
        const int tiles = xs_attn_tiles(seq, heads);
        const int grid = 1 + (int)(xt_rng() % (tiles < 132 ? tiles : 132));
        const int kb = 2 + (int)(xt_rng() % 31), split = progs_splits[xt_rng() % 5];
        kv_case c;
        double *dur = NULL, *rb = NULL, *tend = NULL;
        int64_t total = 0;
        int e = !kv_make(&c, seq, heads, causal, peers, grid, kb);
        if (e)
            snprintf(why, sizeof why, "xs_attn_kv_build: %s", xs_errmsg());
        if (!e && tile_inputs(seq, heads, peers, c.remote, &dur, &rb, &total)) {
            snprintf(why, sizeof why, "the test's remote bytes disagree with %d remote tiles",
                     c.remote);
            e = 1;
        }
        xs_attn_progs pg;
        xs_attn_courier_pred pr;
        if (!e) {
            tend = (double *)malloc((size_t)c.ntasks * sizeof(double));
            if (test_kv_replay(&c, dur, tend) != c.ntasks) {
                snprintf(why, sizeof why, "the test's replay stalls");
                e = 1;
            } else if (xs_attn_kv_predict(seq, heads, causal, c.grid, c.off, c.tasks, dur, rb,
                                          10.0, 0.0, &pr) != XS_OK) {
                snprintf(why, sizeof why, "xs_attn_kv_predict: %s", xs_errmsg());
                e = 1;
            } else if (xs_attn_progs_kv(seq, heads, causal, c.grid, c.off, c.tasks, split, dur,
                                        rb, &pg) != XS_OK) {
                snprintf(why, sizeof why, "refused: %s", xs_errmsg());
                e = 1;
            } else {
                pstep *st = (pstep *)malloc((size_t)c.ntasks * sizeof *st);
                double maxg = 0;
                int64_t all = 0;
                int maxrows = 1;
                for (int b = 0; b < c.grid && !e; b++) {
                    const int m = c.off[b + 1] - c.off[b];
                    for (int k = 0; k < m; k++) {
                        const int i = c.off[b] + k;
                        const xs_attn_kvtask tk = c.tasks[i];
                        const int stores = tk.part < 0 || (((tk.part) >> 4) & 15) ==
                                                            ((tk.part) & 15) - 1;
                        st[k].ns = tend[i] - (k > 0 ? tend[i - 1] : 0.0);
                        st[k].iters = tk.kb1 - tk.kb0;
                        st[k].bytes = stores ? rb[tk.tile] : 0.0;
                        parted += tk.part >= 0;
                    }
                    double g;
                    e = check_cta(&pg, b, st, m, split, &maxrows, &all, &g, why, sizeof why);
                    if (!e && m > 0 && !rel_ok(g, tend[c.off[b + 1] - 1], 1e-9)) {
                        snprintf(why, sizeof why, "CTA %d: gaps %.17g, its last task ends at "
                                 "%.17g", b, g, tend[c.off[b + 1] - 1]);
                        e = 1;
                    }
                    maxg = g > maxg ? g : maxg;
                }
                if (!e && (pg.grid != c.grid || pg.nrows != maxrows || all != total ||
                           !rel_ok(maxg, pr.compute_end_ns, 1e-9))) {
                    snprintf(why, sizeof why, "grid %d, %d rows (the longest program %d), %lld "
                             "bytes (tiles %lld), longest CTA %.17g (compute end %.17g)",
                             pg.grid, pg.nrows, maxrows, (long long)all, (long long)total, maxg,
                             pr.compute_end_ns);
                    e = 1;
                }
                free(st);
                xs_attn_progs_free(&pg);
            }
        }
        if (e && bad < 5)
            printf("test_up_kv: KV programs of seq %d heads %d causal %d peers %d grid %d "
                   "part_kb %d split %d: %s\n", seq, heads, causal, peers, grid, kb, split, why);
        bad += e;
        cases++;
        free(dur), free(rb), free(tend);
        kv_free(&c);
    }
    XT_CHECK(bad == 0, "KV programs: %d of %d random shapes wrong", bad, cases);
    XT_CHECK(parted > 0, "KV programs: no tile cut into parts");
}

/* Largest CTA's compute: the most any CTA's gaps add up to. */
static double progs_longest(const xs_attn_progs *pg)
{
    double best = 0;
    for (int b = 0; b < pg->grid; b++) {
        double g = 0;
        for (int r = 0; r < pg->nrows; r++)
            g += pg->gap_ns[(size_t)r * pg->grid + b];
        best = g > best ? g : best;
    }
    return best;
}

/* Plain programs of a shape with the test's inputs (seq, heads, peers given). */
static int progs_of(int seq, int heads, int causal, int peers, int grid, int order, int split,
                    xs_attn_progs *pg)
{
    const int remote = xs_attn_remote_tiles(seq, heads, seq / peers);
    double *dur, *rb;
    int64_t total;
    tile_inputs(seq, heads, peers, remote, &dur, &rb, &total);
    const xs_status s = xs_attn_progs_plain(seq, heads, causal, order, remote, grid, split, dur,
                                            rb, pg);
    free(dur), free(rb);
    return s == XS_OK;
}

static void check_progs_simulate(void)
{
    xs_profile def, big, tiny;
    xs_profile_default(&def);
    big = def;
    big.drain_bytes_per_ns = 1e7, big.capacity_bytes = 1e13, big.capacity_bytes_per_producer = 0;
    tiny = def;
    tiny.drain_bytes_per_ns = 1.0, tiny.capacity_bytes = 4 * def.chunk_bytes;
    tiny.capacity_bytes_per_producer = 0;
    xs_attn_progsim sim;

    /* a fixed shape with remote bytes: seq 1024, 4 heads, 2 peers (half the tiles remote) */
    const int splits[] = {0, 4};
    for (int k = 0; k < 2; k++) {
        xs_attn_progs pg;
        if (!progs_of(1024, 4, 1, 2, 8, XS_ATTN_ORDER_EARLY, splits[k], &pg)) {
            XT_CHECK(0, "programs: %s", xs_errmsg());
            continue;
        }
        const double longest = progs_longest(&pg);
        XT_CHECK(xs_attn_progs_simulate(&big, &pg, &sim) == XS_OK, "%s", xs_errmsg());
        XT_NEAR(sim.span_ns, sim.free_ns, 1e-6);
        XT_CHECK(sim.held_ns == 0.0, "split %d: held %g ns on an unlimited stage", splits[k],
                 sim.held_ns);
        XT_CHECK(sim.free_ns >= longest * (1 - 1e-12), "split %d: free %.17g < compute %.17g",
                 splits[k], sim.free_ns, longest);
        XT_CHECK(xs_attn_progs_simulate(&tiny, &pg, &sim) == XS_OK, "%s", xs_errmsg());
        XT_CHECK(sim.span_ns > sim.free_ns && sim.held_ns > 0 && sim.peak_bytes > 0,
                 "split %d on 1 B/ns: span %.17g, free %.17g, held %g, peak %g", splits[k],
                 sim.span_ns, sim.free_ns, sim.held_ns, sim.peak_bytes);
        /* the last bytes enter the stage only once all but its capacity have drained */
        int64_t all = 0;
        for (size_t i = 0; i < (size_t)pg.nrows * pg.grid; i++)
            all += pg.bytes[i];
        XT_CHECK(all > 4 * tiny.capacity_bytes &&
                     sim.span_ns >= ((double)all - tiny.capacity_bytes) /
                                        tiny.drain_bytes_per_ns * (1 - 1e-9),
                 "split %d: span %.17g before %lld bytes less the capacity drain at 1 B/ns",
                 splits[k], sim.span_ns, (long long)all);
        xs_attn_progs_free(&pg);
    }

    /* random shapes, plain and KV, on random profiles between the two */
    int bad = 0, cases = 0, held = 0;
    for (int it = 0; it < 200; it++) {
        int seq, heads, causal, peers;
        random_shape(&seq, &heads, &causal, &peers);
        seq = 128 + seq % 2048, heads = 1 + heads % 4; /* keep the simulations small */
        const int tiles = xs_attn_tiles(seq, heads);
        const int grid = 1 + (int)(xt_rng() % (tiles < 132 ? tiles : 132));
        const int split = progs_splits[xt_rng() % 5];
        xs_profile p = def;
        p.drain_bytes_per_ns = def.drain_bytes_per_ns * pow(10.0, -1.5 + 2.0 * xt_urand());
        p.capacity_bytes = def.chunk_bytes * (1 + (double)(xt_rng() % 64));
        xs_attn_progs pg;
        int ok;
        if (it & 1) {
            kv_case c;
            ok = kv_make(&c, seq, heads, causal, peers, grid, 2 + (int)(xt_rng() % 31));
            double *dur = NULL, *rb = NULL;
            int64_t total;
            if (ok)
                tile_inputs(seq, heads, peers, c.remote, &dur, &rb, &total);
            ok = ok && xs_attn_progs_kv(seq, heads, causal, c.grid, c.off, c.tasks, split, dur,
                                        rb, &pg) == XS_OK;
            free(dur), free(rb);
            kv_free(&c);
        } else {
            ok = progs_of(seq, heads, causal, peers, grid,
                          xt_rng() & 1 ? XS_ATTN_ORDER_EARLY : XS_ATTN_ORDER_SNAKE, split, &pg);
        }
        int e = !ok;
        double longest = 0;
        if (ok) {
            longest = progs_longest(&pg);
            e = xs_attn_progs_simulate(&p, &pg, &sim) != XS_OK;
            e = e || !(sim.span_ns >= sim.free_ns * (1 - 1e-12)) ||
                !(sim.free_ns >= longest * (1 - 1e-12)) || !(sim.held_ns >= 0);
            held += !e && sim.held_ns > 0;
            xs_attn_progs_free(&pg);
        }
        if (e && bad < 5)
            printf("test_up_kv: simulated %s programs of seq %d heads %d causal %d peers %d "
                   "grid %d split %d (drain %g, capacity %g): %s, span %.17g, free %.17g, "
                   "held %g, compute %.17g\n", it & 1 ? "KV" : "plain", seq, heads, causal,
                   peers, grid, split, p.drain_bytes_per_ns, p.capacity_bytes,
                   ok ? "ran" : xs_errmsg(), sim.span_ns, sim.free_ns, sim.held_ns, longest);
        bad += e;
        cases++;
    }
    XT_CHECK(bad == 0, "simulated programs: %d of %d random cases wrong", bad, cases);
    XT_CHECK(held > 0, "simulated programs: no random case held back");

    xs_attn_progs none;
    memset(&none, 0, sizeof none);
    XT_CHECK(xs_attn_progs_simulate(&def, &none, &sim) == XS_EINVAL && xs_errmsg()[0],
             "empty programs refused");
    XT_CHECK(xs_attn_progs_simulate(NULL, &none, &sim) == XS_EINVAL, "no profile refused");
    XT_CHECK(xs_attn_progs_simulate(&def, NULL, &sim) == XS_EINVAL, "no programs refused");
}

/* Bad arguments: XS_EINVAL with a message. */
static void check_progs_refusals(void)
{
    double dur[8] = {1, 2, 3, 4, 5, 6, 7, 8}, rb[8] = {256, 256, 0, 0, 0, 0, 0, 0};
    xs_attn_progs pg;
    /* seq 512, 2 heads: 8 tiles */
#define PLAIN_REFUSED(what, seq, heads, order, remote, grid, split, d, r, out)                  \
    XT_CHECK(xs_attn_progs_plain(seq, heads, 0, order, remote, grid, split, d, r, out) ==        \
                     XS_EINVAL && strstr(xs_errmsg(), "per-CTA programs"),                    \
             "plain programs, %s: message '%s'", what, xs_errmsg())
    XT_CHECK(xs_attn_progs_plain(512, 2, 0, XS_ATTN_ORDER_SNAKE, 2, 8, 2, dur, rb, &pg) == XS_OK,
             "the base arguments: %s", xs_errmsg());
    xs_attn_progs_free(&pg);
    PLAIN_REFUSED("NULL out", 512, 2, XS_ATTN_ORDER_SNAKE, 2, 8, 2, dur, rb, NULL);
    PLAIN_REFUSED("grid 0", 512, 2, XS_ATTN_ORDER_SNAKE, 2, 0, 2, dur, rb, &pg);
    PLAIN_REFUSED("grid > tiles", 512, 2, XS_ATTN_ORDER_SNAKE, 2, 9, 2, dur, rb, &pg);
    PLAIN_REFUSED("split -1", 512, 2, XS_ATTN_ORDER_SNAKE, 2, 8, -1, dur, rb, &pg);
    PLAIN_REFUSED("order 2", 512, 2, 2, 2, 8, 2, dur, rb, &pg);
    PLAIN_REFUSED("order -1", 512, 2, -1, 2, 8, 2, dur, rb, &pg);
    PLAIN_REFUSED("NULL times", 512, 2, XS_ATTN_ORDER_SNAKE, 2, 8, 2, NULL, rb, &pg);
    PLAIN_REFUSED("NULL bytes", 512, 2, XS_ATTN_ORDER_SNAKE, 2, 8, 2, dur, NULL, &pg);
    PLAIN_REFUSED("seq 0", 0, 2, XS_ATTN_ORDER_SNAKE, 0, 1, 2, dur, rb, &pg);
    PLAIN_REFUSED("heads 0", 512, 0, XS_ATTN_ORDER_SNAKE, 0, 1, 2, dur, rb, &pg);
    PLAIN_REFUSED("remote > tiles", 512, 2, XS_ATTN_ORDER_SNAKE, 9, 8, 2, dur, rb, &pg);
#undef PLAIN_REFUSED
    /* KV: the base lists of section 2 (seq 256, 1 head, 2 tiles on 2 CTAs) */
    int off[3];
    xs_attn_kvtask tk[4];
    base_lists(off, tk);
    XT_CHECK(xs_attn_progs_kv(256, 1, 0, 2, off, tk, 2, dur, rb, &pg) == XS_OK,
             "the base KV lists: %s", xs_errmsg());
    xs_attn_progs_free(&pg);
#define KV_REFUSED(what, grid, o, t, split, out, needle)                                         \
    XT_CHECK(xs_attn_progs_kv(256, 1, 0, grid, o, t, split, dur, rb, out) == XS_EINVAL &&         \
                     xs_errmsg()[0] && strstr(xs_errmsg(), needle),                           \
             "KV programs, %s: message '%s'", what, xs_errmsg())
    KV_REFUSED("NULL out", 2, off, tk, 2, NULL, "per-CTA programs");
    KV_REFUSED("grid 0", 0, off, tk, 2, &pg, "per-CTA programs");
    KV_REFUSED("split -1", 2, off, tk, -1, &pg, "per-CTA programs");
    KV_REFUSED("no lists", 2, NULL, tk, 2, &pg, "per-CTA programs");
    {
        int o2[3] = {1, 2, 4};
        KV_REFUSED("task_off[0] = 1", 2, o2, tk, 2, &pg, "per-CTA programs");
    }
    {
        xs_attn_kvtask d[4] = {tk[2], tk[1], tk[3], tk[0]};
        KV_REFUSED("a wait cycle", 2, off, d, 2, &pg, "deadlock");
    }
    base_lists(off, tk), tk[2].kb1 = 5;
    KV_REFUSED("key blocks past the tile", 2, off, tk, 2, &pg, "key blocks [2, 5) of 4");
#undef KV_REFUSED
    xs_attn_progs_free(NULL); /* no-op */
    XT_CHECK(1, "xs_attn_progs_free(NULL)");
}

static void test_programs(void)
{
    check_progs_plain();
    check_progs_kv();
    check_progs_simulate();
    check_progs_refusals();
}

int main(int argc, char **argv)
{
    xt_seed("test_up_kv", argc > 1 ? argv[1] : NULL);
    check_build();
    check_refusals();
    check_predict();
    test_programs();
    return xt_done();
}
