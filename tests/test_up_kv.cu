/*
 * test_up_kv.cu - the host side of the attention kernel's KV split (cuda/attn.cuh, docs/UP.md
 * "KV split"), CPU only: no CUDA call (built with nvcc because attn.cuh is a CUDA header).
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
 *      byte at the drain rate, more headroom never ends later, and bad arguments are refused.
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
#include "../cuda/attn.cuh"

typedef struct {
    int seq, heads, causal, remote, grid, part_kb, tiles;
    int *off, ntasks, nslots;
    int4 *tasks;
} kv_case;

static int kv_make(kv_case *c, int seq, int heads, int causal, int peers, int grid, int part_kb)
{
    c->seq = seq, c->heads = heads, c->causal = causal, c->part_kb = part_kb;
    c->tiles = xs_attn_tiles(seq, heads);
    c->remote = xs_attn_remote_tiles(seq, heads, seq / peers > 0 ? seq / peers : 1);
    c->grid = grid < c->tiles ? grid : c->tiles;
    const int cap = xs_attn_kv_max_tasks(seq, heads);
    c->off = (int *)malloc((size_t)(c->grid + 1) * sizeof(int));
    c->tasks = (int4 *)malloc((size_t)cap * sizeof(int4));
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
                                const int kb = t < c.remote ? c.part_kb : lpart;
                                const int np = parts_of(it, kb);
                                want_tasks += np, want_slots += np - 1;
                                too_long |= np < XS_ATTN_KV_MAX_PARTS && kb > 0 &&
                                            (it + np - 1) / np > kb;
                            }
                            e |= too_long;
                            e |= c.ntasks != want_tasks || c.nslots != want_slots ||
                                 c.off[c.grid] != c.ntasks;
                            long long lo = -1, hi = 0, maxpart = 0;
                            for (int b = 0; b < c.grid && !e; b++) {
                                long long load = 0;
                                int seen_local = 0;
                                for (int i = c.off[b]; i < c.off[b + 1]; i++) {
                                    const int4 tk = c.tasks[i];
                                    /* the builder's cost: key blocks, one more for a task
                                     * that stores its tile (whole, or its last part) */
                                    const int st = tk.w < 0 ||
                                                   ((tk.w >> 4) & 15) == (tk.w & 15) - 1;
                                    const int cost = tk.z - tk.y + st;
                                    load += cost;
                                    maxpart = cost > maxpart ? cost : maxpart;
                                    if (tk.x >= c.remote)
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
static void base_lists(int *off, int4 *tk)
{
    off[0] = 0, off[1] = 2, off[2] = 4;
    tk[0] = make_int4(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2));
    tk[1] = make_int4(1, 0, 2, XS_ATTN_KV_PART(1, 0, 2));
    tk[2] = make_int4(0, 2, 4, XS_ATTN_KV_PART(0, 1, 2));
    tk[3] = make_int4(1, 2, 4, XS_ATTN_KV_PART(1, 1, 2));
}

static void expect_refused(const char *what, const int *off, const int4 *tk, int nslots,
                           const char *needle)
{
    xs_status st = xs_attn_kv_check(256, 1, 0, 2, off, tk, nslots);
    XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), needle), "%s: status %d, message '%s' "
             "(wanted '%s')", what, (int)st, xs_errmsg(), needle);
}

static void check_refusals(void)
{
    int off[3];
    int4 tk[4];
    base_lists(off, tk);
    XT_CHECK(xs_attn_kv_check(256, 1, 0, 2, off, tk, 2) == XS_OK, "the base lists: %s",
             xs_errmsg());
    /* the same in the causal shape: tile 0 (rows 128..255) has 4 key blocks, tile 1 has 2 */
    {
        int o2[3] = {0, 2, 3};
        int4 t2[3] = {make_int4(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2)), make_int4(1, 0, 2, -1),
                      make_int4(0, 2, 4, XS_ATTN_KV_PART(0, 1, 2))};
        XT_CHECK(xs_attn_kv_check(256, 1, 1, 2, o2, t2, 1) == XS_OK, "causal lists: %s",
                 xs_errmsg());
        t2[1].z = 3;
        XT_CHECK(xs_attn_kv_check(256, 1, 1, 2, o2, t2, 1) == XS_EINVAL &&
                     strstr(xs_errmsg(), "key blocks [0, 3) of 2"),
                 "causal key blocks past the tile: %s", xs_errmsg());
    }
    base_lists(off, tk), tk[2] = make_int4(1, 2, 4, XS_ATTN_KV_PART(1, 1, 2));
    expect_refused("a part twice", off, tk, 2, "part 1 comes twice");
    base_lists(off, tk), off[2] = 3;
    expect_refused("a part missing", off, tk, 2, "part 1 of 2 is in no list");
    base_lists(off, tk), tk[2].y = 3;
    expect_refused("a gap", off, tk, 2, "starts at key block 3, not 2");
    base_lists(off, tk), tk[2].z = 5;
    expect_refused("past the tile", off, tk, 2, "key blocks [2, 5) of 4");
    base_lists(off, tk), tk[1].w = XS_ATTN_KV_PART(0, 0, 2), tk[3].w = XS_ATTN_KV_PART(0, 1, 2);
    expect_refused("a shared slot", off, tk, 2, "slot 0 is used by two tiles");
    base_lists(off, tk);
    expect_refused("a slot past the count", off, tk, 1, "1 slots");
    base_lists(off, tk), tk[2].w = XS_ATTN_KV_PART(1, 1, 2);
    expect_refused("parts disagree", off, tk, 3, "disagree");
    base_lists(off, tk), tk[0].w = XS_ATTN_KV_PART(0, 0, 1);
    expect_refused("a bad code", off, tk, 2, "part code");
    base_lists(off, tk), tk[1] = make_int4(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2));
    expect_refused("tile 1 twice over", off, tk, 2, "comes twice");
    {
        int o2[3] = {0, 1, 1};
        int4 t2[1] = {make_int4(0, 0, 4, -1)};
        expect_refused("a tile in no list", o2, t2, 0, "tile 1 is in no list");
    }
    /* deadlock: CTA 0 starts with tile 0's last part, CTA 1 with tile 1's; each waits for the
     * other's first part, queued behind it */
    base_lists(off, tk);
    {
        int4 d[4] = {tk[2], tk[1], tk[3], tk[0]};
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
    int4 tk[4];
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
        int4 t2[3] = {make_int4(1, 0, 4, -1), make_int4(0, 0, 2, XS_ATTN_KV_PART(0, 0, 2)),
                      make_int4(0, 2, 4, XS_ATTN_KV_PART(0, 1, 2))};
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
        int4 d[4] = {tk[2], tk[1], tk[3], tk[0]};
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
                const int t = c.tasks[i].x;
                s += d[t] * (c.tasks[i].z - c.tasks[i].y) /
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

int main(int argc, char **argv)
{
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);
    xt_rng_state = seed;
    printf("test_up_kv: seed %llu (pass it as the first argument to repeat)\n",
           (unsigned long long)seed);
    check_build();
    check_refusals();
    check_predict();
    return xt_done();
}
