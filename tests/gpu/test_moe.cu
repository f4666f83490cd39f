// SPDX-License-Identifier: Apache-2.0
/*
 * test_moe.cu - the fused MoE kernel (cuda/ep/): every schedule against an fp64 CPU reference
 * on small odd shapes (partial tiles, empty experts, 1..4 destinations, local and virtual-peer
 * windows), against the unfused cuBLAS path on a real configuration, the dependency order seen
 * in the trace, a missed dependency timing out with one line, bad input, the combine pacer
 * (paced plans verified, its waits traced, its timeout reported), couriers (C = 2 and 4: every
 * combined row verified and every window bit-identical to the non-courier fused run, every
 * Linear-2 tile copied once by its courier, a missing tile and a stuck courier pacer reported
 * in one line within the bound), and the model: without a GPU,
 * the per-tile stall model against src/sim.c's event model on every schedule both express, and
 * its blocked time; with one, the auto rule on synthetic cases. Before the schedules, each layer
 * runs alone
 * (stage_checks): Linear-1 against the reference's h expert by expert, and Linear-2 fed the
 * reference's h, so that a fault in the fused path names its layer, expert and row. The check
 * itself: every verified run is checked on the GPU (xs_moe_verify) and on the CPU
 * (xs_moe_verify_host), which must agree, and corrupted rows in device and host windows
 * (corrupt_checks) must be found by both.
 *
 * Tolerance: per combined row ||out - ref|| / ||ref|| <= 2e-2 and <= 1e-2 over the whole output
 * (bf16 h and bf16 output of fp32 accumulations; docs/EP.md).
 *
 * usage: test_moe [--quick | --tiny]                last line: "N passed, N failed"
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../xt.h"
#include "xstage.h"
#include "xstage_cuda.h"
#include "xstage_win.h"
#include "ep/ep.h"
#include "../xt_ep.h"


/* Linear-2 tiles start only after every Linear-1 tile of their row block stored its h rows. The
 * order comes from the device: one counter hands a ticket to every Linear-1 tile just before its
 * release and to every Linear-2 tile just after its acquire, so a Linear-2 ticket must exceed its
 * row block's Linear-1 tickets. (Comparing clocks of different CTAs failed under
 * compute-sanitizer, whose slow timing stretches the per-CTA clock->ns conversion; the clocks
 * are still compared, 2 us apart, and reported, not judged.) */
static void check_trace(xs_moe *m, const char *what)
{
    const xs_moe_tile *t;
    int n;
    xs_moe_trace(m, &t, &n);
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    XT_CHECK(n == info.l1_tiles + info.l2_tiles, "%s: trace has %d tasks, want %d", what, n,
             info.l1_tiles + info.l2_tiles);
    double *l1_end = (double *)calloc((size_t)info.row_blocks + 1, sizeof(double));
    long long *l1_seq = (long long *)calloc((size_t)info.row_blocks + 1, sizeof(long long));
    int *l1_cnt = (int *)calloc((size_t)info.row_blocks + 1, sizeof(int));
    int bad_order = 0, bad_time = 0, bad_rb = 0, no_seq = 0, clock_order = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].rb < 0 || t[i].rb >= info.row_blocks || t[i].cta < 0) {
            bad_rb++;
            continue;
        }
        if (!(t[i].mma0_ns >= t[i].fetch_ns - 1 && t[i].mma1_ns >= t[i].mma0_ns &&
              t[i].st0_ns >= t[i].mma1_ns && t[i].st1_ns >= t[i].st0_ns))
            bad_time++; /* one CTA's own clock: exact */
        no_seq += t[i].seq < 0;
        if (t[i].kind == 1) {
            l1_cnt[t[i].rb]++;
            if (t[i].st1_ns > l1_end[t[i].rb])
                l1_end[t[i].rb] = t[i].st1_ns;
            if (t[i].seq > l1_seq[t[i].rb])
                l1_seq[t[i].rb] = t[i].seq;
        }
    }
    for (int i = 0; i < n; i++)
        if (t[i].kind == 2 && t[i].rb >= 0 && t[i].rb < info.row_blocks && t[i].cta >= 0) {
            bad_order += l1_cnt[t[i].rb] != info.l1_per_rb || t[i].seq <= l1_seq[t[i].rb];
            clock_order += t[i].mma0_ns + 2000.0 < l1_end[t[i].rb];
        }
    XT_CHECK(bad_rb == 0, "%s: %d trace records with a bad row block or CTA", what, bad_rb);
    XT_CHECK(bad_time == 0, "%s: %d tasks with timestamps out of order", what, bad_time);
    XT_CHECK(no_seq == 0, "%s: %d tasks without an order ticket", what, no_seq);
    XT_CHECK(bad_order == 0, "%s: %d Linear-2 tiles acquired before their row block's Linear-1 "
             "tiles released (device order tickets)", what, bad_order);
    if (clock_order)
        printf("note %s: %d Linear-2 tiles appear > 2 us before their Linear-1 tiles ended on the "
               "clocks of different CTAs (the tickets say the order held)\n", what, clock_order);
    free(l1_end);
    free(l1_seq);
    free(l1_cnt);
}

/* a and b within rel of each other (both 0 counts as equal) */
static int close_rel(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b));
}

/* The GPU check (xs_moe_verify) against the host check (xs_moe_verify_host) of the same
 * windows: the same verdict, counts and worst row, the fp64 sums within 1e-9 (they add in
 * another order). *g gets the GPU's result. 0 when either fails or they disagree. */
static int both_checks(xs_moe *m, const xs_wintab *tab, const char *what, xs_moe_check *g)
{
    xs_moe_check h;
    xs_status st = xs_moe_verify(m, tab, g);
    XT_CHECK(st == XS_OK, "%s: verify (GPU): %s", what, xs_errmsg());
    if (st != XS_OK)
        return 0;
    st = xs_moe_verify_host(m, tab, &h);
    XT_CHECK(st == XS_OK, "%s: verify (host): %s", what, xs_errmsg());
    if (st != XS_OK)
        return 0;
    const int same = g->ok == h.ok && g->rows == h.rows && g->bad_rows == h.bad_rows &&
                     g->nonfinite == h.nonfinite && g->worst_row == h.worst_row &&
                     g->worst_expert == h.worst_expert &&
                     close_rel(g->rel_frob, h.rel_frob, 1e-9) &&
                     close_rel(g->max_row_rel, h.max_row_rel, 1e-9);
    XT_CHECK(same, "%s: GPU check ok=%d rows=%ld bad=%ld nonfinite=%ld worst=%ld (expert %d) "
             "rel=%.17g max=%.17g, host check ok=%d rows=%ld bad=%ld nonfinite=%ld worst=%ld "
             "(expert %d) rel=%.17g max=%.17g", what, g->ok, g->rows, g->bad_rows, g->nonfinite,
             g->worst_row, g->worst_expert, g->rel_frob, g->max_row_rel, h.ok, h.rows,
             h.bad_rows, h.nonfinite, h.worst_row, h.worst_expert, h.rel_frob, h.max_row_rel);
    return same;
}

static void verify(xs_moe *m, const xs_wintab *tab, const char *what)
{
    xs_moe_check c;
    if (!both_checks(m, tab, what, &c))
        return;
    XT_CHECK(c.ok, "%s: %ld of %ld rows off (%ld non-finite), rel err %.3g, worst row %.3g", what,
             c.bad_rows, c.rows, c.nonfinite, c.rel_frob, c.max_row_rel);
    printf("%s %-52s rows=%6ld rel_err=%.2e worst_row=%.2e\n", c.ok ? "ok  " : "FAIL", what,
           c.rows, c.rel_frob, c.max_row_rel);
}

static void run_and_verify(xs_moe *m, int slot, const xs_wintab *tab, const char *what)
{
    XT_CHECK(xs_moe_poison(m, tab, 0) == XS_OK, "%s: poison: %s", what, xs_errmsg());
    float ms = 0;
    xs_status st = xs_moe_run_fused(m, slot, tab, NULL, 0, &ms);
    XT_CHECK(st == XS_OK, "%s: run: %s", what, xs_errmsg());
    if (st != XS_OK)
        return;
    verify(m, tab, what);
    check_trace(m, what);
}

/* Localisers: Linear-1 alone (the gather, the expert's W1 rows, SwiGLU and the h layout) must
 * reproduce the reference's h expert by expert, and Linear-2 alone, fed the reference's h (the
 * expert's W2, the routing weights, the combine slots), must reproduce the combined rows. A
 * fault in the path shared by every schedule fails exactly one of them. (The first GPU run
 * failed every fused variant with rel err 1.4: Linear-2 read its A operand from X instead of
 * h, docs/EP.md; Linear-1 alone would have passed and Linear-2 alone failed.) */
static void stage_checks(xs_moe *m, const xs_wintab *local, const xs_wintab *virt,
                         const char *name)
{
    char what[160];
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    const xs_moe_plan wp = {XS_MOE_WAVE, 0, 0};
    xs_status st = xs_moe_set_plan(m, 0, &wp);
    XT_CHECK(st == XS_OK, "%s: plan: %s", name, xs_errmsg());
    if (st != XS_OK)
        return;
    xs_moe_run_opts ro;
    memset(&ro, 0, sizeof ro);
    float ms = 0;
    const xs_moe_tile *t;
    int n = 0;

    ro.only = 1; /* h is poisoned first: a missing store is non-finite */
    st = xs_moe_run_fused(m, 0, local, &ro, 0, &ms);
    XT_CHECK(st == XS_OK, "%s: Linear-1 alone: %s", name, xs_errmsg());
    if (st == XS_OK) {
        xs_moe_trace(m, &t, &n);
        XT_CHECK(n == info.l1_tiles, "%s: Linear-1 alone ran %d tasks, want %d", name, n,
                 info.l1_tiles);
        int bad = 0;
        for (int e = 0; e < info.experts; e++) {
            xs_moe_check c;
            st = xs_moe_verify_h(m, e, &c);
            XT_CHECK(st == XS_OK, "%s: verify h of expert %d: %s", name, e, xs_errmsg());
            if (st != XS_OK || c.ok)
                continue;
            if (bad < 4)
                printf("FAIL %s Linear-1 alone: expert %d: %ld of %ld h rows off (%ld "
                       "non-finite), rel err %.2e, worst row %ld (rel %.2e)\n", name, e,
                       c.bad_rows, c.rows, c.nonfinite, c.rel_frob, c.worst_row, c.max_row_rel);
            bad++;
        }
        XT_CHECK(bad == 0, "%s: Linear-1 alone: h of %d of %d experts differs from the reference "
                 "SwiGLU output", name, bad, info.experts);
        xs_moe_check c;
        st = xs_moe_verify_h(m, -1, &c);
        XT_CHECK(st == XS_OK && c.ok, "%s: Linear-1 alone: h %ld of %ld rows off (%ld "
                 "non-finite), rel err %.3g, worst row %ld of expert %d (%.3g)", name, c.bad_rows,
                 c.rows, c.nonfinite, c.rel_frob, c.worst_row, c.worst_expert, c.max_row_rel);
        snprintf(what, sizeof what, "%s Linear-1 alone: h vs reference", name);
        printf("%s %-52s rows=%6ld rel_err=%.2e worst_row=%.2e\n", c.ok ? "ok  " : "FAIL", what,
               c.rows, c.rel_frob, c.max_row_rel);
    }

    st = xs_moe_load_reference_h(m);
    XT_CHECK(st == XS_OK, "%s: load reference h: %s", name, xs_errmsg());
    const xs_wintab *tabs[2] = {local, virt};
    for (int i = 0; i < 2 && st == XS_OK; i++) {
        if (!tabs[i])
            continue;
        snprintf(what, sizeof what, "%s Linear-2 alone (reference h) %s", name,
                 i ? "virtual" : "local");
        XT_CHECK(xs_moe_poison(m, tabs[i], 0) == XS_OK, "%s: poison: %s", what, xs_errmsg());
        ro.only = 2;
        xs_status rs = xs_moe_run_fused(m, 0, tabs[i], &ro, 0, &ms);
        XT_CHECK(rs == XS_OK, "%s: run: %s", what, xs_errmsg());
        if (rs != XS_OK)
            continue;
        xs_moe_trace(m, &t, &n);
        XT_CHECK(n == info.l2_tiles, "%s: ran %d tasks, want %d", what, n, info.l2_tiles);
        verify(m, tabs[i], what);
    }
}

/* Every window of tab (window_bytes each: poisoned bytes included) into a host buffer. */
static unsigned char *read_windows(xs_moe *m, const xs_wintab *tab)
{
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    unsigned char *b = (unsigned char *)malloc(info.window_bytes * (size_t)info.peers + 1);
    if (!b)
        return NULL;
    for (int r = 0; r < info.peers; r++)
        if (cudaMemcpy(b + (size_t)r * info.window_bytes, tab->data[r], info.window_bytes,
                       cudaMemcpyDefault) != cudaSuccess) {
            free(b);
            return NULL;
        }
    return b;
}

/* Row gr of the combine at its destination (H bf16 values) into v (write = 0) or from v. */
static int row_io(const xs_wintab *tab, const xs_moe_problem *pb, int gr, uint16_t *v, int write)
{
    char *p = tab->data[pb->row_rank[gr]] + pb->row_off[gr];
    const size_t n = (size_t)pb->H * 2;
    return (write ? cudaMemcpy(p, v, n, cudaMemcpyDefault)
                  : cudaMemcpy(v, p, n, cudaMemcpyDefault)) == cudaSuccess;
}

static float bf16_value(uint16_t b)
{
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The check must see a wrong row wherever it lands. tab holds a verified run; rows of one
 * device window and of one host window (when tab has one) are corrupted in turn, five ways,
 * and restored: the GPU check must agree with the host check (both_checks) and find exactly
 * the corrupted rows, the worst of them as the worst row:
 *   flip   the sign of the row's largest value (bad when that moves the row by more than twice
 *          the row tolerance, as it does on these shapes; else only the agreement is checked)
 *   big    one value 10000 (finite, far off)
 *   nan    one value NaN: one non-finite value
 *   zero   the whole row 0: rel exactly 1
 *   shift  the row's bytes 16 bytes (8 values) along its slot, the last 8 wrapping round: a
 *          combine that stored at the wrong offset
 *   swap   the row and the next row of the same window in each other's slot: two bad rows */
static void corrupt_checks(xs_moe *m, const xs_wintab *tab, const char *name)
{
    char what[240];
    const xs_moe_problem *pb = xs_moe_host(m);
    const int H = pb->H;
    int pick[2] = {-1, -1}; /* a device-window row, a host-window row: the middle one of each */
    for (int kind = 0; kind < 2; kind++) {
        int n = 0;
        for (int gr = 0; gr < pb->rows; gr++)
            n += (tab->host_mem[pb->row_rank[gr]] != 0) == kind;
        for (int gr = 0, k = 0; gr < pb->rows && n; gr++)
            if ((tab->host_mem[pb->row_rank[gr]] != 0) == kind && k++ == n / 2) {
                pick[kind] = gr;
                break;
            }
    }
    uint16_t *keep = (uint16_t *)malloc((size_t)H * 2), *v = (uint16_t *)malloc((size_t)H * 2),
             *keep2 = (uint16_t *)malloc((size_t)H * 2);
    XT_CHECK(keep && v && keep2, "%s: host memory", name);
    for (int kind = 0; kind < 2 && keep && v && keep2; kind++) {
        const int gr = pick[kind];
        if (gr < 0)
            continue;
        /* the swap's partner: the first other row of the same window */
        int gr2 = -1;
        for (int q = 0; q < pb->rows && gr2 < 0; q++)
            if (q != gr && pb->row_rank[q] == pb->row_rank[gr])
                gr2 = q;
        if (!row_io(tab, pb, gr, keep, 0) || (gr2 >= 0 && !row_io(tab, pb, gr2, keep2, 0))) {
            XT_CHECK(0, "%s: reading row %d", name, gr);
            continue;
        }
        int big = 0;
        double norm2 = 0;
        for (int c = 0; c < H; c++) {
            const double x = bf16_value(keep[c]);
            norm2 += x * x;
            if (fabs(x) > fabs((double)bf16_value(keep[big])))
                big = c;
        }
        const int flip_bad = 2.0 * fabs((double)bf16_value(keep[big])) >
                             2.0 * XS_MOE_TOL_ROW * sqrt(norm2);
        for (int way = 0; way < 6; way++) {
            static const char *const names[6] = {"flip", "big", "nan", "zero", "shift", "swap"};
            if (way == 5 && gr2 < 0)
                continue;
            memcpy(v, keep, (size_t)H * 2);
            if (way == 0)
                v[big] ^= 0x8000u;
            else if (way == 1)
                v[H / 2] = 0x461cu; /* 9984: 10000 in bf16 */
            else if (way == 2)
                v[H / 3] = 0x7fc0u;
            else if (way == 3)
                memset(v, 0, (size_t)H * 2);
            else if (way == 4)
                for (int c = 0; c < H; c++)
                    v[c] = keep[(c + H - 8) % H];
            else
                memcpy(v, keep2, (size_t)H * 2);
            int wrote = row_io(tab, pb, gr, v, 1);
            if (way == 5)
                wrote = wrote && row_io(tab, pb, gr2, keep, 1);
            XT_CHECK(wrote, "%s: writing row %d", name, gr);
            snprintf(what, sizeof what, "%s %s row %d (%s window %d)", name, names[way], gr,
                     kind ? "host" : "device", pb->row_rank[gr]);
            xs_moe_check c;
            if (wrote && both_checks(m, tab, what, &c)) {
                const int want_bad = way == 5 ? 2 : way == 0 && !flip_bad ? -1 : 1;
                if (want_bad > 0) {
                    XT_CHECK(!c.ok && c.bad_rows == want_bad &&
                                 c.nonfinite == (way == 2 ? 1 : 0) &&
                                 (c.worst_row == gr || (way == 5 && c.worst_row == gr2)),
                             "%s: want %d bad row(s) (%d non-finite), worst %d; the check says "
                             "ok=%d, %ld bad, %ld non-finite, worst %ld", what, want_bad,
                             way == 2, gr, c.ok, c.bad_rows, c.nonfinite, c.worst_row);
                    if (way == 3)
                        XT_CHECK(c.max_row_rel == 1.0, "%s: a zero row's rel is %.17g, not 1",
                                 what, c.max_row_rel);
                }
                printf("%s %-52s found: %ld bad row(s), %ld non-finite, worst row %ld "
                       "(rel %.2e)\n", c.ok && want_bad > 0 ? "FAIL" : "ok  ", what, c.bad_rows,
                       c.nonfinite, c.worst_row, c.max_row_rel);
            }
            int restored = row_io(tab, pb, gr, keep, 1);
            if (way == 5)
                restored = restored && row_io(tab, pb, gr2, keep2, 1);
            XT_CHECK(restored, "%s: restoring row %d", name, gr);
        }
    }
    snprintf(what, sizeof what, "%s restored after the corruptions", name);
    verify(m, tab, what);
    free(keep);
    free(keep2);
    free(v);
}

/* The windows of tab now, byte for byte against want (a reference run's, reference_windows);
 * ref names that run in the messages. */
static void same_windows(xs_moe *m, const xs_wintab *tab, const unsigned char *want,
                         const char *what, const char *ref)
{
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    unsigned char *got = read_windows(m, tab);
    XT_CHECK(got != NULL, "%s: reading the windows", what);
    if (!got)
        return;
    long diff = 0, first = -1;
    for (size_t k = 0; k < info.window_bytes * (size_t)info.peers; k++)
        if (got[k] != want[k] && diff++ == 0)
            first = (long)k;
    XT_CHECK(diff == 0, "%s: %ld bytes differ from the %s run (first: rank %ld, byte %ld)", what,
             diff, ref, first < 0 ? -1 : first / (long)info.window_bytes,
             first < 0 ? -1 : first % (long)info.window_bytes);
    printf("%s %-52s windows bit-identical to the %s run\n", diff ? "FAIL" : "ok  ", what, ref);
    free(got);
}

/* The windows of a plain wave run (slot 0), verified: what a variant's run must reproduce byte
 * for byte. NULL (a failed check) when they cannot be read. */
static unsigned char *reference_windows(xs_moe *m, const xs_wintab *tab, const char *name,
                                        const char *tag)
{
    char what[200];
    const xs_moe_plan base = {XS_MOE_WAVE, 0, 0, 0, 0};
    XT_CHECK(xs_moe_set_plan(m, 0, &base) == XS_OK, "%s: plan: %s", name, xs_errmsg());
    snprintf(what, sizeof what, "%s wave (%s reference)", name, tag);
    run_and_verify(m, 0, tab, what);
    unsigned char *want = read_windows(m, tab);
    XT_CHECK(want != NULL, "%s: reading the windows", name);
    return want;
}

/* Couriers (docs/EP.md, "Couriers"): the plan's last C CTAs copy the combine from the staging
 * buffer. The destinations must be bit-identical to the non-courier fused run's (same tiles, same
 * accumulation order, the couriers copy the epilogue's bytes to the same addresses), every
 * Linear-2 tile copied exactly once by courier pos % C with its remote bytes, no task run by a
 * courier, and the bytes copied in all = the problem's remote bytes (0 into the local control).
 * Then Linear-2 alone (reference h) with couriers, verified. */
static void courier_checks(xs_moe *m, const xs_wintab *tab, int remote, const char *name)
{
    char what[200];
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    xs_profile dp;
    xs_profile_default(&dp);
    const double rate = XS_MOE_COURIER_PACE_FRAC * dp.drain_bytes_per_ns;
    unsigned char *want = reference_windows(m, tab, name, "courier");
    const xs_moe_plan plans[3] = {
        {XS_MOE_WAVE, 0, 0, 0, 0, 2, rate},
        {XS_MOE_INTERLEAVED, xs_moe_default_lead_ctas(xs_moe_host(m), info.grid - 4), 0, 0, 0, 4, rate},
        {XS_MOE_INTERLEAVED, 1, 0, 0, 0, 2, 0.5}, /* slow: couriers far behind the compute */
    };
    for (int i = 0; i < 3 && want; i++) {
        const xs_moe_plan *pl = &plans[i];
        const int C = pl->couriers;
        XT_CHECK(xs_moe_set_plan(m, 3, pl) == XS_OK, "%s: courier plan: %s", name, xs_errmsg());
        snprintf(what, sizeof what, "%s %s D=%d couriers=%d at %.1f B/ns", name,
                 xs_moe_sched_name(pl->kind), pl->lead, C, pl->courier_bytes_per_ns);
        run_and_verify(m, 3, tab, what);
        same_windows(m, tab, want, what, "non-courier");
        /* the copies */
        const xs_moe_tile *t;
        const xs_moe_copy *c;
        int n = 0, nc = 0;
        xs_moe_trace(m, &t, &n);
        xs_moe_courier_trace(m, &c, &nc);
        XT_CHECK(nc == info.l2_tiles, "%s: %d copies, want %d", what, nc, info.l2_tiles);
        int on_courier = 0, bad_cta = 0, bad_bytes = 0, bad_time = 0;
        double copied = 0;
        int *rem = (int *)calloc((size_t)info.l1_tiles + info.l2_tiles + 1, sizeof(int));
        for (int k = 0; k < n; k++) {
            on_courier += t[k].cta >= info.grid - C;
            if (rem && t[k].kind == 2 && t[k].id >= 0 && t[k].id < info.l1_tiles + info.l2_tiles)
                rem[t[k].id] = t[k].remote_bytes;
        }
        for (int j = 0; j < nc; j++) {
            bad_cta += c[j].cta != info.grid - C + c[j].pos % C;
            bad_bytes += rem && c[j].id >= 0 && c[j].id < info.l1_tiles + info.l2_tiles &&
                         c[j].bytes != rem[c[j].id];
            bad_time += c[j].bytes > 0 && !(c[j].end_ns >= c[j].ready_ns &&
                                             c[j].ready_ns >= c[j].wait_ns);
            copied += c[j].bytes;
        }
        free(rem);
        XT_CHECK(on_courier == 0, "%s: %d tasks ran on a courier CTA", what, on_courier);
        XT_CHECK(bad_cta == 0, "%s: %d copies by the wrong courier", what, bad_cta);
        XT_CHECK(bad_bytes == 0, "%s: %d copies whose bytes differ from the tile's remote bytes",
                 what, bad_bytes);
        XT_CHECK(bad_time == 0, "%s: %d copies with stamps out of order", what, bad_time);
        XT_CHECK(fabs(copied - (remote ? info.remote_bytes : 0.0)) < 0.5,
                 "%s: the couriers copied %.0f bytes, want %.0f", what, copied,
                 remote ? info.remote_bytes : 0.0);
    }
    /* Linear-2 alone with couriers: the combine from the reference's h, verified */
    if (want) {
        xs_moe_run_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.only = 2;
        float ms = 0;
        XT_CHECK(xs_moe_load_reference_h(m) == XS_OK, "%s: load reference h: %s", name,
                 xs_errmsg());
        XT_CHECK(xs_moe_set_plan(m, 3, &plans[0]) == XS_OK, "%s: plan: %s", name, xs_errmsg());
        snprintf(what, sizeof what, "%s Linear-2 alone couriers=2", name);
        XT_CHECK(xs_moe_poison(m, tab, 0) == XS_OK, "%s: poison: %s", what, xs_errmsg());
        const xs_status rs = xs_moe_run_fused(m, 3, tab, &ro, 0, &ms);
        XT_CHECK(rs == XS_OK, "%s: run: %s", what, xs_errmsg());
        if (rs == XS_OK)
            verify(m, tab, what);
    }
    free(want);
}

/* The combine's other ways out, against the 16-byte stores of the plain kernel:
 * - bulk combine (xs_moe_run_opts.bulk_combine): each Linear-2 epilogue hands its rows to the
 *   TMA;
 * - deferred (xs_moe_run_opts.defer = XS_MOE_DEFER_RING): the 3-stage kernel, where a tile the
 *   pacer holds back waits in a staging tile of its own (with the slow pacer, nearly every tile);
 * - spilled (XS_MOE_DEFER_SPILL): the 4-stage kernel, where such a tile's remote rows wait in
 *   device memory (queues of depth 2 and XS_MOE_SPILL_MAX).
 * With the slow pacer some tile must be deferred (xs_moe_tile.deferred), each with remote rows
 * and its flush after its main loop.
 * Same tiles, same accumulation order, same addresses: the windows must be bit-identical to the
 * 16-byte-store run's, for wave, interleaved, a slow pacer (most tiles held) and Linear-2 alone;
 * every tile ran once and in order (check_trace). With couriers the option is refused in one
 * line. */
static void store_variant_checks(xs_moe *m, const xs_wintab *tab, const char *name,
                                 const xs_moe_run_opts *variant, const char *label)
{
    char what[200];
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    unsigned char *want = reference_windows(m, tab, name, label);
    const xs_moe_plan plans[4] = {
        {XS_MOE_WAVE, 0, 0, 0, 0},
        {XS_MOE_INTERLEAVED, xs_moe_default_lead(xs_moe_host(m)), 0, 0, 0},
        /* a pacer slow enough to hold nearly every tile back even under the sanitizers (at 1
         * B/ns racecheck's slowed kernel outran it, and no tile was deferred) */
        {XS_MOE_INTERLEAVED, 1, 0, 4096, 0.01},
        {XS_MOE_WAVE, 0, 0, 0, 0}, /* Linear-2 alone, the reference's h */
    };
    xs_moe_run_opts ro = *variant;
    for (int i = 0; i < 4 && want; i++) {
        XT_CHECK(xs_moe_set_plan(m, 3, &plans[i]) == XS_OK, "%s: plan: %s", name, xs_errmsg());
        snprintf(what, sizeof what, "%s %s %s D=%d%s%s", name, label,
                 xs_moe_sched_name(plans[i].kind),
                 plans[i].lead, plans[i].pace_bytes > 0 ? " paced" : "",
                 i == 3 ? " Linear-2 alone" : "");
        ro.only = i == 3 ? 2 : 0;
        if (i == 3) {
            /* Linear-2 alone reads the reference's h, which differs from the fused h by an
             * occasional bf16 ulp: its own 16-byte-store run is the reference */
            XT_CHECK(xs_moe_load_reference_h(m) == XS_OK, "%s: load reference h: %s", what,
                     xs_errmsg());
            xs_moe_run_opts r2;
            memset(&r2, 0, sizeof r2);
            r2.only = 2;
            float ms2 = 0;
            XT_CHECK(xs_moe_poison(m, tab, 0) == XS_OK &&
                     xs_moe_run_fused(m, 3, tab, &r2, 0, &ms2) == XS_OK,
                     "%s: the 16-byte-store run: %s", what, xs_errmsg());
            free(want);
            want = read_windows(m, tab);
            XT_CHECK(want != NULL, "%s: reading the windows", what);
            if (!want)
                break;
        }
        XT_CHECK(xs_moe_poison(m, tab, 0) == XS_OK, "%s: poison: %s", what, xs_errmsg());
        float ms = 0;
        const xs_status st = xs_moe_run_fused(m, 3, tab, &ro, 0, &ms);
        XT_CHECK(st == XS_OK, "%s: run: %s", what, xs_errmsg());
        if (st != XS_OK)
            continue;
        verify(m, tab, what);
        if (i < 3)
            check_trace(m, what);
        same_windows(m, tab, want, what, "16-byte-store");
        if (i == 2) {
            const xs_moe_tile *t;
            int n = 0, held = 0;
            xs_moe_trace(m, &t, &n);
            for (int k = 0; k < n; k++)
                held += t[k].kind == 2 && t[k].gate_ns > 0;
            XT_CHECK(info.remote_bytes <= 3 * 4096 || held > 0, "%s: the pacer held no tile", what);
            if (ro.defer) {
                /* deferred tiles: some, each with remote rows, its flush after its own stage */
                int deferred = 0, bad = 0;
                for (int k = 0; k < n; k++)
                    if (t[k].deferred) {
                        deferred++;
                        bad += t[k].kind != 2 || t[k].remote_bytes <= 0 ||
                               t[k].st0_ns < t[k].mma1_ns || t[k].st1_ns < t[k].st0_ns;
                    }
                XT_CHECK(info.remote_bytes <= 3 * 4096 || deferred > 0, "%s: no tile deferred",
                         what);
                XT_CHECK(bad == 0, "%s: %d deferred tiles without remote rows or with a flush "
                         "before their main loop ended", what, bad);
            }
        }
    }
    free(want);
    /* with couriers: refused, one line */
    const xs_moe_plan cp = {XS_MOE_WAVE, 0, 0, 0, 0, 2, 10.0};
    XT_CHECK(xs_moe_set_plan(m, 3, &cp) == XS_OK, "%s: courier plan: %s", name, xs_errmsg());
    float ms = 0;
    ro.only = 0;
    const xs_status st = xs_moe_run_fused(m, 3, tab, &ro, 0, &ms);
    XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), "couriers") && !strchr(xs_errmsg(), '\n'),
             "%s: %s with couriers: want a one-line XS_EINVAL, got %d: %s", name, label, (int)st,
             xs_errmsg());
}

static void bulk_checks(xs_moe *m, const xs_wintab *tab, const char *name)
{
    xs_moe_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.bulk_combine = 1;
    store_variant_checks(m, tab, name, &ro, "bulk");
}

static void defer_checks(xs_moe *m, const xs_wintab *tab, const char *name)
{
    xs_moe_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.defer = XS_MOE_DEFER_RING;
    store_variant_checks(m, tab, name, &ro, "deferred");
    /* and not with bulk copies */
    ro.bulk_combine = 1;
    const xs_moe_plan wp = {XS_MOE_WAVE, 0, 0, 0, 0};
    float ms = 0;
    XT_CHECK(xs_moe_set_plan(m, 3, &wp) == XS_OK, "%s: plan: %s", name, xs_errmsg());
    const xs_status st = xs_moe_run_fused(m, 3, tab, &ro, 0, &ms);
    XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), "bulk") && !strchr(xs_errmsg(), '\n'),
             "%s: deferred with bulk copies: want a one-line XS_EINVAL, got %d: %s", name,
             (int)st, xs_errmsg());
}

static void spill_checks(xs_moe *m, const xs_wintab *tab, const char *name)
{
    xs_moe_run_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.defer = XS_MOE_DEFER_SPILL;
    store_variant_checks(m, tab, name, &ro, "spilled");
    ro.spill_depth = XS_MOE_SPILL_MAX;
    store_variant_checks(m, tab, name, &ro, "spilled (full depth)");
    /* the plan's choice (xs_moe_plan.spill_depth, run with defer = XS_MOE_DEFER_PLAN): the
     * spilling kernel; XS_MOE_DEFER_NONE: the plain kernel for the same plan */
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    const xs_moe_plan sp = {XS_MOE_INTERLEAVED, 1, 0, 4096, 0.01, 0, 0, 0, 2};
    XT_CHECK(xs_moe_set_plan(m, 3, &sp) == XS_OK, "%s: spilling plan: %s", name, xs_errmsg());
    for (int k = 0; k < 2; k++) {
        xs_moe_run_opts po;
        memset(&po, 0, sizeof po);
        po.defer = k ? XS_MOE_DEFER_NONE : XS_MOE_DEFER_PLAN;
        float ms = 0;
        XT_CHECK(xs_moe_poison(m, tab, 0) == XS_OK, "%s: poison: %s", name, xs_errmsg());
        const xs_status st = xs_moe_run_fused(m, 3, tab, &po, 0, &ms);
        XT_CHECK(st == XS_OK, "%s: the spilling plan, defer=%d: %s", name, po.defer,
                 xs_errmsg());
        if (st != XS_OK)
            continue;
        char what[200];
        snprintf(what, sizeof what, "%s spilling plan, %s", name,
                 k ? "run on the plain kernel" : "as planned");
        verify(m, tab, what);
        const xs_moe_tile *t;
        int n = 0, deferred = 0;
        xs_moe_trace(m, &t, &n);
        for (int i = 0; i < n; i++)
            deferred += t[i].deferred;
        XT_CHECK(k ? deferred == 0 : info.remote_bytes <= 3 * 4096 || deferred > 0,
                 "%s: %d tiles deferred", what, deferred);
    }
    /* out-of-range options: one line each, nothing run */
    const xs_moe_plan wp = {XS_MOE_WAVE, 0, 0, 0, 0};
    XT_CHECK(xs_moe_set_plan(m, 3, &wp) == XS_OK, "%s: plan: %s", name, xs_errmsg());
    const struct {
        int defer, depth;
        const char *says;
    } bad[] = {{XS_MOE_DEFER_SPILL, XS_MOE_SPILL_MAX + 1, "spill_depth"},
               {XS_MOE_DEFER_SPILL, -1, "spill_depth"},
               {XS_MOE_DEFER_NONE + 1, 0, "defer"},
               {-1, 0, "defer"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ro.defer = bad[i].defer;
        ro.spill_depth = bad[i].depth;
        float ms = 0;
        const xs_status st = xs_moe_run_fused(m, 3, tab, &ro, 0, &ms);
        XT_CHECK(st == XS_EINVAL && strstr(xs_errmsg(), bad[i].says) &&
                     !strchr(xs_errmsg(), '\n'),
                 "%s: defer=%d spill_depth=%d: want a one-line XS_EINVAL naming %s, got %d: %s",
                 name, bad[i].defer, bad[i].depth, bad[i].says, (int)st, xs_errmsg());
    }
}

typedef struct {
    xs_moe_config cfg;
    int tokens, peers;
    xs_moe_routing routing;
} scase;

static void small_case(const scase *c, xs_cublas *cb, const xs_profile *prof)
{
    char what[160];
    xs_moe_weights *w = NULL;
    xs_moe *m = NULL;
    xs_status st = xs_moe_weights_create(&c->cfg, 11u, &w);
    XT_CHECK(st == XS_OK, "%s: weights: %s", c->cfg.name, xs_errmsg());
    if (st != XS_OK)
        return;
    xs_moe_opts o = {c->tokens, c->peers, c->routing, 0, 5u};
    st = xs_moe_create(w, &o, &m);
    XT_CHECK(st == XS_OK, "%s: create: %s", c->cfg.name, xs_errmsg());
    if (st != XS_OK) {
        xs_moe_weights_destroy(w);
        return;
    }
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    printf("# %s H=%d I=%d E=%d top-%d T=%d N=%d %s: rows=%d row_blocks=%d experts rows %d..%d\n",
           c->cfg.name, info.hidden, info.inter, info.experts, info.topk, info.tokens,
           info.peers, xs_moe_routing_name(c->routing), info.rows, info.row_blocks,
           info.min_expert_rows, info.max_expert_rows);
    st = xs_moe_reference_cpu(m);
    XT_CHECK(st == XS_OK, "%s: cpu reference: %s", c->cfg.name, xs_errmsg());

    xs_wintab local;
    XT_CHECK(xs_moe_local_table(m, &local) == XS_OK, "local table: %s", xs_errmsg());
    xs_winset *ws = NULL;
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = XS_TARGET_VIRTUAL;
    wo.virtual_peers = c->peers;
    wo.bytes = info.window_bytes;
    wo.nflags = 1;
    wo.device = 0;
    st = xs_win_open(&wo, &ws);
    XT_CHECK(st == XS_OK, "%s: virtual windows: %s", c->cfg.name, xs_errmsg());
    xs_wintab virt;
    memset(&virt, 0, sizeof virt);
    if (st == XS_OK)
        virt = *xs_win_table(ws);

    snprintf(what, sizeof what, "%s/%s", c->cfg.name, xs_moe_routing_name(c->routing));
    stage_checks(m, &local, ws ? &virt : NULL, what);

    const int d0 = xs_moe_default_lead(xs_moe_host(m));
    /* the last two pace the combine: a slow pacer (1 byte/ns) with a small slack holds
     * nearly every Linear-2 tile with remote rows */
    const xs_moe_plan plans[] = {
        {XS_MOE_WAVE, 0, 0, 0, 0},        {XS_MOE_WAVE, 0, 1, 0, 0},
        {XS_MOE_INTERLEAVED, 0, 0, 0, 0}, {XS_MOE_INTERLEAVED, 1, 0, 0, 0},
        {XS_MOE_INTERLEAVED, d0, 0, 0, 0}, {XS_MOE_INTERLEAVED, 1000, 0, 0, 0},
        {XS_MOE_INTERLEAVED, d0, 0, 4096, 1.0}, {XS_MOE_WAVE, 0, 0, 4096, 1.0},
        /* adaptive (the CTAs choose between the two queues): an open clock, unpaced stores;
         * then a closed clock (1 B/ns, no lookahead: Linear-2 tiles wait for the Linear-1 queue
         * to run dry) with the slow pacer */
        {XS_MOE_ADAPTIVE, 0, 0, 0, 50.0, 0, 0, 20000.0},
        {XS_MOE_ADAPTIVE, 0, 0, 4096, 1.0, 0, 0, 0.0},
        /* tapered leads (xs_moe_plan.lead_end): unpaced, from far beyond the row
         * blocks, and with the slow pacer */
        {XS_MOE_INTERLEAVED, d0, 0, 0, 0, 0, 0, 0, 0, d0 > 1 ? d0 / 2 : 0},
        {XS_MOE_INTERLEAVED, 1000, 0, 0, 0, 0, 0, 0, 0, 1},
        {XS_MOE_INTERLEAVED, d0, 0, 4096, 1.0, 0, 0, 0, 0, d0 > 1 ? d0 - 1 : 0},
    };
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        st = xs_moe_set_plan(m, 0, &plans[i]);
        XT_CHECK(st == XS_OK, "set plan: %s", xs_errmsg());
        const char *pc = plans[i].pace_bytes > 0 ? " paced" : "";
        snprintf(what, sizeof what, "%s/%s %s D=%d E=%d W=%d%s local", c->cfg.name,
                 xs_moe_routing_name(c->routing), xs_moe_sched_name(plans[i].kind), plans[i].lead,
                 plans[i].lead_end, plans[i].wave_experts, pc);
        run_and_verify(m, 0, &local, what);
        if (i == 0) /* the check itself: corrupted rows in device windows */
            corrupt_checks(m, &local, what);
        if (ws) {
            snprintf(what, sizeof what, "%s/%s %s D=%d E=%d W=%d%s virtual N=%d", c->cfg.name,
                     xs_moe_routing_name(c->routing), xs_moe_sched_name(plans[i].kind),
                     plans[i].lead, plans[i].lead_end, plans[i].wave_experts, pc, c->peers);
            run_and_verify(m, 0, &virt, what);
            if (i == 0) /* and in host windows */
                corrupt_checks(m, &virt, what);
            if (plans[i].pace_bytes > 0 && info.peers > 1 && info.remote_bytes > 3 * 4096) {
                /* the pacer held tiles: their waits are in the trace, between mma1 and st0 */
                const xs_moe_tile *t;
                int n, held = 0;
                xs_moe_trace(m, &t, &n);
                for (int k = 0; k < n; k++)
                    held += t[k].kind == 2 && t[k].gate_ns > 0 &&
                            t[k].st0_ns >= t[k].mma1_ns + 0.5 * t[k].gate_ns - 2000.0;
                XT_CHECK(held > 0, "%s: the pacer (4 KB slack at 1 B/ns) held no tile", what);
            }
        }
    }
    /* auto from the local-control costs of both orders */
    xs_moe_plan wp = {XS_MOE_WAVE, 0, 0, 0, 0}, ip = {XS_MOE_INTERLEAVED, d0, 0, 0, 0};
    xs_moe_costs wc, ic;
    const xs_moe_tile *tr;
    int ntr;
    float ms;
    XT_CHECK(xs_moe_set_plan(m, 0, &wp) == XS_OK && xs_moe_run_fused(m, 0, &local, NULL, 0, &ms) ==
             XS_OK, "local wave: %s", xs_errmsg());
    xs_moe_trace(m, &tr, &ntr);
    xs_moe_costs_from_trace(tr, ntr, &wc);
    /* the local wave trace: the courier prediction's ready times (the interleaved one: the
     * model's, scaled) */
    xs_moe_tile *wtr = (xs_moe_tile *)malloc(sizeof(xs_moe_tile) * (size_t)(ntr + 1));
    if (wtr)
        memcpy(wtr, tr, sizeof(xs_moe_tile) * (size_t)ntr);
    const xs_moe_local_traces lt = {wtr, wtr ? ntr : 0, NULL, 0};
    XT_CHECK(xs_moe_set_plan(m, 1, &ip) == XS_OK && xs_moe_run_fused(m, 1, &local, NULL, 0, &ms) ==
             XS_OK, "local interleaved: %s", xs_errmsg());
    xs_moe_trace(m, &tr, &ntr);
    xs_moe_costs_from_trace(tr, ntr, &ic);
    XT_CHECK(wc.c1_ns > 0 && wc.c2_ns > 0, "costs from trace: c1=%g c2=%g", wc.c1_ns, wc.c2_ns);
    xs_moe_auto_result ar;
    st = xs_moe_auto(xs_moe_host(m), prof, NULL, &wc, &ic, &lt, &ar);
    free(wtr);
    XT_CHECK(st == XS_OK, "auto: %s", xs_errmsg());
    if (st == XS_OK && ws) {
        XT_CHECK(xs_moe_set_plan(m, 2, &ar.plan) == XS_OK, "auto plan: %s", xs_errmsg());
        snprintf(what, sizeof what, "%s/%s auto(%s D=%d) virtual", c->cfg.name,
                 xs_moe_routing_name(c->routing), xs_moe_sched_name(ar.plan.kind), ar.plan.lead);
        run_and_verify(m, 2, &virt, what);
        printf("     auto: %s\n", ar.how);
    }
    if (st == XS_OK && info.peers == 1) /* the order may still change (compute alone) */
        XT_CHECK(ar.criterion_ok && ar.plan.pace_bytes == 0 && ar.plan.couriers == 0 &&
                 strstr(ar.how, "no remote"), "N=1 (every row local): auto should not pace or "
                 "use couriers and should say why: %s", ar.how);
    /* couriers against the non-courier run, into the local control and the virtual peers */
    snprintf(what, sizeof what, "%s/%s local", c->cfg.name, xs_moe_routing_name(c->routing));
    courier_checks(m, &local, 0, what);
    if (ws) {
        snprintf(what, sizeof what, "%s/%s virtual N=%d", c->cfg.name,
                 xs_moe_routing_name(c->routing), c->peers);
        courier_checks(m, &virt, info.peers > 1, what);
        bulk_checks(m, &virt, what);
        defer_checks(m, &virt, what);
        spill_checks(m, &virt, what);
    }
    /* the unfused baseline over the same windows */
    if (cb && ws) {
        float t = 0, g = 0;
        XT_CHECK(xs_moe_poison(m, &virt, 0) == XS_OK, "poison");
        st = xs_moe_run_unfused(m, cb, &virt, 0, &t, &g);
        XT_CHECK(st == XS_OK, "unfused: %s", xs_errmsg());
        snprintf(what, sizeof what, "%s/%s unfused virtual", c->cfg.name,
                 xs_moe_routing_name(c->routing));
        if (st == XS_OK)
            verify(m, &virt, what);
        /* the overlapped pipeline at several piece counts (a count above T refused), and its
         * compute alone leaves every window poisoned: the check sees a missing copy */
        for (int f = 0; f < (xs_cublas_has_grouped(cb) ? 2 : 1); f++)
            for (int C = 1; C <= 4 && C <= c->tokens; C++) {
                XT_CHECK(xs_moe_poison(m, &virt, 0) == XS_OK, "poison");
                st = xs_moe_run_overlapped(m, cb, &virt, C, f, 1, 0, &t);
                XT_CHECK(st == XS_OK && t > 0, "overlapped C=%d%s: %s", C, f ? " grouped" : "",
                         xs_errmsg());
                snprintf(what, sizeof what, "%s/%s overlapped C=%d%s virtual", c->cfg.name,
                         xs_moe_routing_name(c->routing), C, f ? " grouped" : "");
                if (st == XS_OK)
                    verify(m, &virt, what);
            }
        XT_CHECK(xs_moe_run_overlapped(m, cb, &virt, c->tokens + 1, 0, 1, 0, &t) == XS_EINVAL,
                 "overlapped: more pieces than tokens refused");
        XT_CHECK(xs_moe_poison(m, &virt, 0) == XS_OK, "poison");
        st = xs_moe_run_overlapped(m, cb, &virt, 2 <= c->tokens ? 2 : 1, 0, 0, 0, &t);
        xs_moe_check oc;
        XT_CHECK(st == XS_OK && xs_moe_verify(m, &virt, &oc) == XS_OK && !oc.ok &&
                 oc.nonfinite > 0, "overlapped without copies: the poisoned windows must fail "
                 "the check (%s)", xs_errmsg());
        /* the GPU reference agrees with the CPU one: the fused output passes against both */
        st = xs_moe_reference_gpu(m, cb);
        XT_CHECK(st == XS_OK, "gpu reference: %s", xs_errmsg());
        XT_CHECK(xs_moe_set_plan(m, 0, &wp) == XS_OK, "plan");
        snprintf(what, sizeof what, "%s/%s wave vs GPU reference", c->cfg.name,
                 xs_moe_routing_name(c->routing));
        if (st == XS_OK) {
            run_and_verify(m, 0, &virt, what);
            /* the reference's h is now the GPU path's: the fused h must match it too */
            xs_moe_check hc;
            st = xs_moe_verify_h(m, -1, &hc);
            XT_CHECK(st == XS_OK && hc.ok, "%s: h vs the GPU reference: %ld of %ld rows off, "
                     "rel err %.3g, worst row %ld of expert %d", what, hc.bad_rows, hc.rows,
                     hc.rel_frob, hc.worst_row, hc.worst_expert);
        }
    }
    if (ws)
        xs_win_close(ws);
    xs_moe_destroy(m);
    xs_moe_weights_destroy(w);
}

static void large_case(const char *name, int tokens, int peers, xs_moe_routing routing,
                       xs_cublas *cb)
{
    char what[160];
    const xs_moe_config *cfg = xs_moe_config_find(name);
    XT_CHECK(cfg != NULL, "config %s", name);
    if (!cfg || !cb)
        return;
    xs_moe_weights *w = NULL;
    xs_moe *m = NULL;
    XT_CHECK(xs_moe_weights_create(cfg, 3u, &w) == XS_OK, "weights: %s", xs_errmsg());
    if (!w)
        return;
    xs_moe_opts o = {tokens, peers, routing, 0, 9u};
    XT_CHECK(xs_moe_create(w, &o, &m) == XS_OK, "create: %s", xs_errmsg());
    if (!m) {
        xs_moe_weights_destroy(w);
        return;
    }
    XT_CHECK(xs_moe_reference_gpu(m, cb) == XS_OK, "reference: %s", xs_errmsg());
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    xs_winset *ws = NULL;
    xs_win_opts wo;
    memset(&wo, 0, sizeof wo);
    wo.target = XS_TARGET_VIRTUAL;
    wo.virtual_peers = peers;
    wo.bytes = info.window_bytes;
    wo.nflags = 1;
    xs_status st = xs_win_open(&wo, &ws);
    XT_CHECK(st == XS_OK, "virtual windows: %s", xs_errmsg());
    if (st == XS_OK) {
        xs_wintab virt = *xs_win_table(ws);
        xs_wintab local;
        XT_CHECK(xs_moe_local_table(m, &local) == XS_OK, "local table: %s", xs_errmsg());
        snprintf(what, sizeof what, "%s T=%d N=%d %s", name, tokens, peers,
                 xs_moe_routing_name(routing));
        stage_checks(m, &local, &virt, what);
        /* the third: paced as auto would pace it (XS_MOE_PACE_BYTES at 0.95 R of the embedded
         * profile) */
        xs_profile dp;
        xs_profile_default(&dp);
        xs_moe_plan plans[3] = {{XS_MOE_WAVE, 0, 0, 0, 0},
                                {XS_MOE_INTERLEAVED, xs_moe_default_lead(xs_moe_host(m)), 0, 0, 0},
                                {XS_MOE_INTERLEAVED, xs_moe_default_lead(xs_moe_host(m)), 0,
                                 XS_MOE_PACE_BYTES,
                                 XS_MOE_PACE_DRAIN_FRAC * dp.drain_bytes_per_ns}};
        for (int i = 0; i < 3; i++) {
            XT_CHECK(xs_moe_set_plan(m, 0, &plans[i]) == XS_OK, "plan: %s", xs_errmsg());
            snprintf(what, sizeof what, "%s T=%d N=%d %s %s%s", name, tokens, peers,
                     xs_moe_routing_name(routing), xs_moe_sched_name(plans[i].kind),
                     plans[i].pace_bytes > 0 ? " paced" : "");
            run_and_verify(m, 0, &virt, what);
            if (i == 0) /* the check on a large shape, against the GPU reference */
                corrupt_checks(m, &virt, what);
        }
        float t, g;
        XT_CHECK(xs_moe_poison(m, &virt, 0) == XS_OK, "poison");
        XT_CHECK(xs_moe_run_unfused(m, cb, &virt, 0, &t, &g) == XS_OK, "unfused: %s",
                 xs_errmsg());
        snprintf(what, sizeof what, "%s T=%d N=%d %s unfused", name, tokens, peers,
                 xs_moe_routing_name(routing));
        verify(m, &virt, what);
        xs_win_close(ws);
    }
    xs_moe_destroy(m);
    xs_moe_weights_destroy(w);
}

static void timeout_case(void)
{
    xs_moe_config cfg = {"timeout", 256, 128, 4, 2, {0, 0, 0}};
    xs_moe_weights *w = NULL;
    xs_moe *m = NULL;
    XT_CHECK(xs_moe_weights_create(&cfg, 1u, &w) == XS_OK, "weights: %s", xs_errmsg());
    xs_moe_opts o = {200, 1, XS_ROUTE_BALANCED, 0, 1u};
    XT_CHECK(w && xs_moe_create(w, &o, &m) == XS_OK, "create: %s", xs_errmsg());
    if (!m) {
        xs_moe_weights_destroy(w);
        return;
    }
    xs_wintab local;
    xs_moe_local_table(m, &local);
    xs_moe_plan wp = {XS_MOE_WAVE, 0, 0, 0, 0};
    xs_moe_set_plan(m, 0, &wp);
    xs_moe_run_opts ro = {20000000ull /* 20 ms */, 1};
    double t0 = xs_now_s();
    float ms;
    xs_status st = xs_moe_run_fused(m, 0, &local, &ro, 0, &ms);
    double dt = xs_now_s() - t0;
    XT_CHECK(st == XS_ETIMEOUT, "missed dependency: got %s, want XS_ETIMEOUT", xs_status_name(st));
    XT_CHECK(dt < 2.0, "missed dependency took %.2f s to report (bound 20 ms)", dt);
    XT_CHECK(strchr(xs_errmsg(), '\n') == NULL && strlen(xs_errmsg()) > 10, "one-line message");
    printf("ok   timeout reported in %.3f s: %s\n", dt, xs_errmsg());
    /* the context survives: the next run completes */
    ro.fault_skip_l1 = 0;
    st = xs_moe_run_fused(m, 0, &local, &ro, 0, &ms);
    XT_CHECK(st == XS_OK, "run after a timeout: %s", xs_errmsg());
    xs_moe_destroy(m);
    xs_moe_weights_destroy(w);
}

/* The bounded-wait cases' problem: 600 tokens, top-1 of 2 experts (H 256, I 128), balanced, on
 * 2 virtual peers. Makes the weights, the context and its virtual windows; each stays NULL
 * when it could not be made (the failure counted). two_peer_close frees what was made. */
static void two_peer_open(const char *name, xs_moe_weights **w, xs_moe **m, xs_winset **ws)
{
    xs_moe_config cfg = {name, 256, 128, 2, 1, {0, 0, 0}, 0};
    XT_CHECK(xs_moe_weights_create(&cfg, 1u, w) == XS_OK, "weights: %s", xs_errmsg());
    xs_moe_opts o = {600, 2, XS_ROUTE_BALANCED, 0, 1u};
    XT_CHECK(*w && xs_moe_create(*w, &o, m) == XS_OK, "create: %s", xs_errmsg());
    if (*m) {
        xs_moe_info info;
        xs_moe_get_info(*m, &info);
        xs_win_opts wo;
        memset(&wo, 0, sizeof wo);
        wo.target = XS_TARGET_VIRTUAL;
        wo.virtual_peers = 2;
        wo.bytes = info.window_bytes;
        wo.nflags = 1;
        XT_CHECK(xs_win_open(&wo, ws) == XS_OK, "virtual windows: %s", xs_errmsg());
    }
}

static void two_peer_close(xs_moe_weights *w, xs_moe *m, xs_winset *ws)
{
    if (ws)
        xs_win_close(ws);
    xs_moe_destroy(m);
    xs_moe_weights_destroy(w);
}

/* a pacer that cannot let the second burst go within the bound reports it, in one line */
static void pacer_timeout_case(void)
{
    xs_moe_weights *w = NULL;
    xs_moe *m = NULL;
    xs_winset *ws = NULL;
    two_peer_open("pacer", &w, &m, &ws);
    if (m && ws) {
        /* 1 byte per microsecond: the first burst (~16 KB) holds the link for ~16 ms */
        xs_moe_plan pp = {XS_MOE_WAVE, 0, 0, 1, 1e-3};
        XT_CHECK(xs_moe_set_plan(m, 0, &pp) == XS_OK, "plan: %s", xs_errmsg());
        xs_moe_run_opts ro = {5000000ull /* 5 ms */, 0};
        float ms;
        double t0 = xs_now_s();
        xs_status st = xs_moe_run_fused(m, 0, xs_win_table(ws), &ro, 0, &ms);
        double dt = xs_now_s() - t0;
        XT_CHECK(st == XS_ETIMEOUT && strstr(xs_errmsg(), "pacer"),
                 "a stuck pacer: got %s (%s), want XS_ETIMEOUT naming the pacer",
                 xs_status_name(st), xs_errmsg());
        XT_CHECK(dt < 2.0, "the pacer's timeout took %.2f s to report (bound 5 ms)", dt);
        XT_CHECK(strchr(xs_errmsg(), '\n') == NULL, "one-line message");
        printf("ok   pacer timeout reported in %.3f s: %s\n", dt, xs_errmsg());
        /* unpaced, the same problem runs */
        xs_moe_plan wp = {XS_MOE_WAVE, 0, 0, 0, 0};
        XT_CHECK(xs_moe_set_plan(m, 0, &wp) == XS_OK &&
                 xs_moe_run_fused(m, 0, xs_win_table(ws), &ro, 0, &ms) == XS_OK,
                 "run after a pacer timeout: %s", xs_errmsg());
        /* a bad pacing plan is refused */
        xs_moe_plan bad = {XS_MOE_WAVE, 0, 0, 4096, 0};
        XT_CHECK(xs_moe_set_plan(m, 0, &bad) == XS_EINVAL, "pacing without a rate accepted");
    }
    two_peer_close(w, m, ws);
}

/* Couriers' bounded waits: a Linear-2 tile that never runs (its Linear-1 dependency is never
 * signalled) must not hang the couriers waiting for its ready flag, and a courier pacer that
 * cannot let the next chunk go within the bound must say so, in one line; a clean courier run
 * follows each. */
static void courier_timeout_case(void)
{
    xs_moe_weights *w = NULL;
    xs_moe *m = NULL;
    xs_winset *ws = NULL;
    two_peer_open("courier", &w, &m, &ws);
    if (m && ws) {
        float ms;
        /* the first Linear-1 tile never signals: its row block's Linear-2 tiles time out, and
         * the couriers waiting for them stop (on the recorded failure or their own bound) */
        xs_moe_plan cp = {XS_MOE_WAVE, 0, 0, 0, 0, 2, 40.0};
        XT_CHECK(xs_moe_set_plan(m, 0, &cp) == XS_OK, "plan: %s", xs_errmsg());
        xs_moe_run_opts ro = {20000000ull /* 20 ms */, 1};
        double t0 = xs_now_s();
        xs_status st = xs_moe_run_fused(m, 0, xs_win_table(ws), &ro, 0, &ms);
        double dt = xs_now_s() - t0;
        XT_CHECK(st == XS_ETIMEOUT, "couriers, missed dependency: got %s (%s), want XS_ETIMEOUT",
                 xs_status_name(st), xs_errmsg());
        XT_CHECK(dt < 2.0, "couriers, missed dependency took %.2f s to report (bound 20 ms)", dt);
        XT_CHECK(strchr(xs_errmsg(), '\n') == NULL, "one-line message");
        printf("ok   couriers: missed dependency reported in %.3f s: %s\n", dt, xs_errmsg());
        ro.fault_skip_l1 = 0;
        XT_CHECK(xs_moe_run_fused(m, 0, xs_win_table(ws), &ro, 0, &ms) == XS_OK,
                 "courier run after a timeout: %s", xs_errmsg());
        /* 1 byte per microsecond: a courier's second 16 KB chunk waits ~16 s per courier */
        xs_moe_plan slow = {XS_MOE_WAVE, 0, 0, 0, 0, 2, 1e-3};
        XT_CHECK(xs_moe_set_plan(m, 0, &slow) == XS_OK, "plan: %s", xs_errmsg());
        ro.timeout_ns = 5000000ull; /* 5 ms */
        t0 = xs_now_s();
        st = xs_moe_run_fused(m, 0, xs_win_table(ws), &ro, 0, &ms);
        dt = xs_now_s() - t0;
        XT_CHECK(st == XS_ETIMEOUT && strstr(xs_errmsg(), "courier") && strstr(xs_errmsg(), "pacer"),
                 "a stuck courier pacer: got %s (%s), want XS_ETIMEOUT naming it",
                 xs_status_name(st), xs_errmsg());
        XT_CHECK(dt < 2.0, "the courier pacer's timeout took %.2f s to report (bound 5 ms)", dt);
        XT_CHECK(strchr(xs_errmsg(), '\n') == NULL, "one-line message");
        printf("ok   courier pacer timeout reported in %.3f s: %s\n", dt, xs_errmsg());
        XT_CHECK(xs_moe_set_plan(m, 0, &cp) == XS_OK &&
                 xs_moe_run_fused(m, 0, xs_win_table(ws), &ro, 0, &ms) == XS_OK,
                 "courier run after a courier pacer timeout: %s", xs_errmsg());
    }
    two_peer_close(w, m, ws);
}

static void bad_input(void)
{
    xs_moe_weights *w = NULL;
    xs_moe_config c1 = {"bad-h", 100, 128, 4, 2, {0, 0, 0}};
    XT_CHECK(xs_moe_weights_create(&c1, 1, &w) == XS_EINVAL, "H=100 accepted");
    printf("ok   %s\n", xs_errmsg());
    xs_moe_config c2 = {"bad-i", 128, 24, 4, 2, {0, 0, 0}};
    XT_CHECK(xs_moe_weights_create(&c2, 1, &w) == XS_EINVAL, "I=24 accepted");
    printf("ok   %s\n", xs_errmsg());
    xs_moe_config c3 = {"bad-k", 128, 32, 4, 5, {0, 0, 0}};
    XT_CHECK(xs_moe_weights_create(&c3, 1, &w) == XS_EINVAL, "top-5 of 4 accepted");
    printf("ok   %s\n", xs_errmsg());
    xs_moe_config c4 = {"ok", 128, 32, 4, 2, {0, 0, 0}};
    XT_CHECK(xs_moe_weights_create(&c4, 1, &w) == XS_OK, "valid weights: %s", xs_errmsg());
    if (!w)
        return;
    xs_moe *m = NULL;
    xs_moe_opts o = {0, 2, XS_ROUTE_BALANCED, 0, 1};
    XT_CHECK(xs_moe_create(w, &o, &m) == XS_EINVAL, "tokens=0 accepted");
    printf("ok   %s\n", xs_errmsg());
    o.tokens = 10;
    o.peers = XS_MAX_RANKS + 1;
    XT_CHECK(xs_moe_create(w, &o, &m) == XS_EINVAL, "too many peers accepted");
    printf("ok   %s\n", xs_errmsg());
    o.peers = 2;
    XT_CHECK(xs_moe_create(w, &o, &m) == XS_OK, "valid problem: %s", xs_errmsg());
    if (m) {
        xs_moe_plan p = {XS_MOE_AUTO, 0, 0, 0, 0};
        XT_CHECK(xs_moe_set_plan(m, 0, &p) == XS_EINVAL, "unresolved auto accepted");
        p.kind = XS_MOE_WAVE;
        XT_CHECK(xs_moe_set_plan(m, XS_MOE_SLOTS, &p) == XS_EINVAL, "bad slot accepted");
        xs_moe_info info;
        xs_moe_get_info(m, &info);
        const xs_moe_plan cbad[4] = {
            {XS_MOE_WAVE, 0, 0, 0, 0, info.grid, 40.0}, /* no CTA left to compute */
            {XS_MOE_WAVE, 0, 0, 0, 0, -1, 40.0},
            {XS_MOE_WAVE, 0, 0, 0, 0, 2, 0},            /* no rate */
            {XS_MOE_WAVE, 0, 0, 4096, 40.0, 2, 40.0},   /* paced epilogue and couriers */
        };
        for (int i = 0; i < 4; i++) {
            XT_CHECK(xs_moe_set_plan(m, 0, &cbad[i]) == XS_EINVAL, "courier plan %d accepted", i);
            XT_CHECK(strchr(xs_errmsg(), '\n') == NULL, "one-line message");
            printf("ok   %s\n", xs_errmsg());
        }
        xs_wintab small;
        xs_moe_local_table(m, &small);
        small.nranks = 1;
        XT_CHECK(xs_moe_set_plan(m, 0, &p) == XS_OK, "plan");
        float ms;
        XT_CHECK(xs_moe_run_fused(m, 0, &small, NULL, 0, &ms) == XS_EINVAL,
                 "a table with too few ranks accepted");
        printf("ok   %s\n", xs_errmsg());
        xs_moe_check chk;
        XT_CHECK(xs_moe_verify(m, &small, &chk) == XS_EINVAL, "verify without reference");
        XT_CHECK(xs_moe_verify_host(m, &small, &chk) == XS_EINVAL,
                 "host verify without reference");
        xs_moe_destroy(m);
    }
    xs_moe_weights_destroy(w);
}

/* the model on synthetic inputs: no GPU work beyond creating a small problem */
static void model_case(const xs_profile *prof)
{
    xs_moe_config cfg = {"model", 2048, 1024, 64, 8, {0, 0, 0}};
    xs_moe_weights *w = NULL;
    xs_moe *m = NULL;
    XT_CHECK(xs_moe_weights_create(&cfg, 2u, &w) == XS_OK, "weights: %s", xs_errmsg());
    xs_moe_opts o = {1024, 4, XS_ROUTE_BALANCED, 0, 2u};
    XT_CHECK(w && xs_moe_create(w, &o, &m) == XS_OK, "create: %s", xs_errmsg());
    if (!m) {
        xs_moe_weights_destroy(w);
        return;
    }
    xs_moe_info info;
    xs_moe_get_info(m, &info);
    /* each wave's Linear-2 bursts are drain-bound (6.5 MB per machine round against a 20 us
     * gap) while a wave's Linear-1 phase (150 us) leaves the stage idle: interleaving fills
     * those gaps, so it must be predicted faster and chosen */
    xs_moe_costs c;
    memset(&c, 0, sizeof c);
    c.c1_ns = 150000;
    c.c2_ns = 20000;
    xs_moe_auto_result ar;
    xs_moe_model mm;
    xs_moe_model_default(&mm);
    mm.couriers = 0; /* the rules for the other candidates (couriers: tests/test_moe_courier) */
    XT_CHECK(xs_moe_auto(xs_moe_host(m), prof, &mm, &c, NULL, NULL, &ar) == XS_OK, "auto: %s", xs_errmsg());
    /* sender-visible: the last store is accepted up to Q/R before the stage drains */
    double drain_ns = (info.remote_bytes - prof->capacity_bytes) / prof->drain_bytes_per_ns;
    printf("ok   model bursty: wave %.0f us, interleaved %.0f us, drain %.0f us: %s\n",
           ar.wave_ns / 1e3, ar.inter_ns / 1e3, drain_ns / 1e3, ar.how);
    XT_CHECK(!ar.criterion_ok, "bursty shape meets the criterion?");
    XT_CHECK(ar.wave_ns >= drain_ns * 0.999 && ar.inter_ns >= drain_ns * 0.999,
             "prediction below the drain bound: wave %g inter %g drain %g", ar.wave_ns,
             ar.inter_ns, drain_ns);
    XT_CHECK(ar.inter_ns < 0.95 * ar.wave_ns, "interleaving not predicted faster: %g vs %g",
             ar.inter_ns, ar.wave_ns);
    XT_CHECK(ar.plan.kind == XS_MOE_INTERLEAVED, "auto kept wave on a bursty shape");
    /* compute-bound: a fast link */
    xs_profile fast = *prof;
    fast.drain_bytes_per_ns = 1e6;
    fast.capacity_bytes = 1e12;
    fast.capacity_bytes_per_producer = 0;
    XT_CHECK(xs_moe_auto(xs_moe_host(m), &fast, &mm, &c, NULL, NULL, &ar) == XS_OK, "auto: %s", xs_errmsg());
    /* the order may change for balance alone, never for a gain below 2 %, and no pacing */
    XT_CHECK(ar.criterion_ok && ar.plan.pace_bytes == 0 &&
             (ar.plan.kind == XS_MOE_WAVE || ar.auto_ns <= 0.98 * ar.wave_ns),
             "compute-bound: auto chose %s%s (%.0f vs wave %.0f ns)",
             xs_moe_sched_name(ar.plan.kind), ar.plan.pace_bytes > 0 ? " paced" : "", ar.auto_ns,
             ar.wave_ns);
    printf("ok   model compute-bound: %s\n", ar.how);
    /* a GPU-wide stall above a small backlog: pacing keeps the backlog under it, so auto paces */
    xs_moe_model tight = mm;
    tight.block_bytes = 4.0 * 65536;
    XT_CHECK(xs_moe_auto(xs_moe_host(m), prof, &tight, &c, NULL, NULL, &ar) == XS_OK, "auto: %s", xs_errmsg());
    XT_CHECK(ar.plan.kind == XS_MOE_INTERLEAVED && ar.paced_ns < ar.inter_ns,
             "stalls above 256 KB: paced %.0f ns, unpaced %.0f ns, chose %s", ar.paced_ns,
             ar.inter_ns, xs_moe_sched_name(ar.plan.kind));
    printf("ok   model blocking at 256 KB: %s\n", ar.how);

    xs_moe_destroy(m);
    xs_moe_weights_destroy(w);
}

/* The per-tile stall model without a GPU: it is src/sim.c's event model. Every schedule both can
 * express (K producers, a burst, a gap, a burst; all rows remote) must give the same issue windows
 * when the replay starts each burst where the simulation started it; with the kernel's blocking,
 * the blocked time of one big burst is (V - X)/R up to the time the backlog took to reach X. */
static void model_checks(void)
{
    xs_profile pf[2];
    xs_profile_default(&pf[0]);
    pf[1] = pf[0]; /* the H200 calibration's shape: queue, reserve, skew, no cap */
    const char *sets[] = {"capacity_bytes=920782", "capacity_bytes_per_producer=0",
                          "chunk_bytes=1024", "queue_bytes_per_producer=6144",
                          "reserve_bytes_per_producer=12288", "arbitration_skew=1.25",
                          "issue_bytes_per_ns=53.79", "issue_overhead_ns=175.2",
                          "drain_bytes_per_ns=52.37"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        XT_CHECK(xs_profile_set(&pf[1], sets[i]) == XS_OK, "profile: %s", xs_errmsg());
    xs_moe_model mm;
    xs_moe_model_default(&mm);
    const int ks[] = {1, 7, 64, 132};
    const long bs[] = {4096, 49152, 262144};
    double worst = 0;
    int cases = 0;
    for (int pi = 0; pi < 2; pi++)
        for (int ki = 0; ki < 4; ki++)
            for (int bi = 0; bi < 3; bi++) {
                const int K = ks[ki];
                xs_schedule sc = {0};
                xs_schedule_append(&sc, K, bs[bi], 20000);
                xs_schedule_append(&sc, K, bs[bi], 0);
                xs_sim_opts so;
                memset(&so, 0, sizeof so);
                so.record_windows = 1;
                xs_result res;
                if (xs_simulate(&pf[pi], &sc, &so, &res) != XS_OK) {
                    XT_CHECK(0, "simulate: %s", xs_errmsg());
                    xs_schedule_free(&sc);
                    continue;
                }
                xs_moe_tile *t = (xs_moe_tile *)calloc((size_t)2 * K, sizeof *t);
                double *ps = (double *)malloc(sizeof(double) * 2 * (size_t)K);
                for (int row = 0; row < 2; row++)
                    for (int k = 0; k < K; k++) {
                        xs_moe_tile *u = &t[row * K + k];
                        u->kind = 2;
                        u->cta = k;
                        u->id = -1;
                        u->remote_bytes = u->total_bytes = (int)bs[bi];
                        u->st0_ns = u->mma0_ns = u->mma1_ns =
                            res.win_start[(size_t)row * res.nproducers + k];
                        u->st1_ns = res.win_end[(size_t)row * res.nproducers + k];
                    }
                xs_moe_stall st;
                XT_CHECK(xs_moe_stall_predict(t, 2 * K, &pf[pi], &mm, 0, NULL, 0, &st, ps,
                                              NULL) == XS_OK, "stall: %s", xs_errmsg());
                for (int i = 0; i < 2 * K; i++) {
                    const double meas = t[i].st1_ns - t[i].st0_ns;
                    const double e = fabs(ps[i] - meas) / meas;
                    if (e > worst)
                        worst = e;
                }
                cases++;
                free(t);
                free(ps);
                xs_result_free(&res);
                xs_schedule_free(&sc);
            }
    XT_CHECK(worst < 2e-3, "stall model vs src/sim.c: worst window off by %.2e", worst);
    printf("%s model: per-tile stall replay = src/sim.c on %d schedules (worst window %.1e)\n",
           worst < 2e-3 ? "ok  " : "FAIL", cases, worst);

    /* 64 producers x 64 KB at once (4 MB) into the calibrated stage, blocking above 0.55 MB: the
     * main loops stall from when the backlog passed X until it drained back to X */
    enum { NB = 64 };
    xs_moe_tile t[NB + 1];
    memset(t, 0, sizeof t);
    for (int i = 0; i < NB; i++) {
        t[i].kind = 2;
        t[i].cta = i;
        t[i].id = -1;
        t[i].remote_bytes = t[i].total_bytes = 65536;
        t[i].st0_ns = t[i].mma0_ns = t[i].mma1_ns = 0;
        t[i].st1_ns = 1000;
    }
    t[NB].kind = 1; /* a Linear-1 tile of another CTA computing across the whole burst */
    t[NB].cta = NB;
    t[NB].id = 0;
    t[NB].mma0_ns = 0;
    t[NB].mma1_ns = 200000;
    t[NB].st0_ns = t[NB].st1_ns = 200000;
    const double ref = 100000; /* its main loop without the link */
    double pm[NB + 1];
    xs_moe_stall st;
    XT_CHECK(xs_moe_stall_predict(t, NB + 1, &pf[1], &mm, 0, &ref, 1, &st, NULL, pm) == XS_OK,
             "stall: %s", xs_errmsg());
    const double V = NB * 65536.0, R = pf[1].drain_bytes_per_ns;
    const double hi = (V - mm.block_bytes) / R, lo = hi - mm.block_bytes / R;
    XT_CHECK(st.blocked_ns > lo && st.blocked_ns <= hi * 1.01,
             "blocked %.0f ns, expected within (%.0f, %.0f]", st.blocked_ns, lo, hi);
    XT_NEAR(pm[NB], (1 - mm.block_speed) * st.blocked_ns, 1e-6);
    XT_CHECK(st.mma_tiles == 1 && fabs(st.mma_meas_med_ns - 100000) < 1e-6,
             "MMA side: %d tiles, measured %.0f ns (want 1, 100000)", st.mma_tiles,
             st.mma_meas_med_ns);
    printf("ok   model: 4 MB burst blocks the main loops for %.1f us (expect %.1f..%.1f); a "
           "spanning main loop's predicted stall %.1f us\n", st.blocked_ns / 1e3, lo / 1e3,
           hi / 1e3, pm[NB] / 1e3);
    /* without blocking (the published model): no blocked time */
    xs_moe_model none = mm;
    none.block_bytes = 0;
    XT_CHECK(xs_moe_stall_predict(t, NB + 1, &pf[1], &none, 0, &ref, 1, &st, NULL, pm) ==
             XS_OK && st.blocked_ns == 0 && pm[NB] == 0, "no blocking: blocked %.0f ns",
             st.blocked_ns);
    /* blocked time within a main loop is additive: [a, c] = [a, b] + [b, c] for any b, whatever
     * intervals it spans (60 bursts of 1.3 MB every 40 us: one blocked interval each), also for
     * a loop spanning > 9 intervals that ends inside one */
    {
        enum { NR = 60, NK = 20, NQ = 200 };
        xs_moe_tile *u = (xs_moe_tile *)calloc(NR * NK + 3 * NQ + 1, sizeof *u);
        double *pq = (double *)malloc(sizeof(double) * (NR * NK + 3 * NQ + 1));
        for (int r = 0; r < NR; r++)
            for (int k = 0; k < NK; k++) {
                xs_moe_tile *v = &u[r * NK + k];
                v->kind = 2;
                v->cta = k;
                v->id = -1;
                v->remote_bytes = v->total_bytes = 65536;
                v->st0_ns = v->mma0_ns = v->mma1_ns = r * 40000.0;
                v->st1_ns = r * 40000.0 + 1300;
            }
        uint64_t z = 12345;
        for (int q = 0; q < NQ; q++) {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            const double a = (double)(z >> 40) / (1 << 24) * NR * 40000.0;
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            const double c = a + (double)(z >> 40) / (1 << 24) * 800000.0;
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            const double b = a + (double)(z >> 40) / (1 << 24) * (c - a);
            const double ab[3][2] = {{a, c}, {a, b}, {b, c}};
            for (int j = 0; j < 3; j++) {
                xs_moe_tile *v = &u[NR * NK + 3 * q + j];
                v->kind = 1;
                v->cta = NK + j;
                v->id = -1;
                v->mma0_ns = ab[j][0];
                v->mma1_ns = v->st0_ns = v->st1_ns = ab[j][1];
            }
        }
        xs_moe_stall sx;
        const double t0 = xs_now_s();
        const xs_status rs = xs_moe_stall_predict(u, NR * NK + 3 * NQ, &pf[1], &mm, 0, NULL, 0,
                                                  &sx, NULL, pq);
        const double dt = xs_now_s() - t0;
        XT_CHECK(rs == XS_OK, "stall (many intervals): %s", xs_errmsg());
        int bad = 0, spanning = 0;
        for (int q = 0; rs == XS_OK && q < NQ; q++) {
            const double *v = pq + NR * NK + 3 * q;
            bad += fabs(v[0] - (v[1] + v[2])) > 1e-9 * (v[0] > 1 ? v[0] : 1);
            spanning += v[0] > 10 * (1 - mm.block_speed) * 1000.0;
        }
        XT_CHECK(bad == 0 && sx.blocked_ns > 0, "blocked time not additive on %d of %d splits "
                 "(blocked %.0f ns)", bad, NQ, sx.blocked_ns);
        XT_CHECK(dt < 2.0, "stall replay with %d bursts took %.2f s", NR * NK, dt);
        printf("%s model: blocked time within main loops additive on %d splits (%d spanning many "
               "intervals), %.0f us blocked, %.3f s\n", bad ? "FAIL" : "ok  ", NQ, spanning,
               sx.blocked_ns / 1e3, dt);
        free(u);
        free(pq);
    }
    /* T_iss0: the queue takes the burst's last bytes, local rows at their own rate */
    XT_NEAR(xs_moe_tile_t0(&pf[1], 65536, 65536, 0),
            pf[1].issue_overhead_ns + (65536 - 6144) / pf[1].issue_bytes_per_ns, 1e-9);
    XT_NEAR(xs_moe_tile_t0(&pf[1], 0, 65536, 50.0), 65536 / 50.0, 1e-9);
}

/* ---- the host side of `bench ep` without a GPU ----------------------------------------------- */

/* Synthetic local-control costs of a configuration (tests/xt_ep.h): a constant time per 64-wide
 * k-step (measured local wave times give 1.5-1.8 us) plus a fixed epilogue; Linear-2's store
 * span at 52 B/ns. */

typedef struct {
    double create_s, auto_s, trace_s, stall_s;
    double pred_wave_ns, pred_inter_ns, pred_auto_ns; /* auto's predictions */
    double stall_sum;                                 /* a checksum of the stall results */
    double drain_over_compute;  /* remote bytes / R over the model's local wave time */
    double pred_courier_ns;     /* auto's best courier candidate (NaN: none) */
    int inter, paced, lead, couriers; /* couriers: auto's C (0: none) */
    int cand;                   /* the courier candidate's C (0: none) */
    const char *crit; /* met, resh (reshaping meets it), no */
} sweep_point;

/* One point as bench ep does it on the host: the local control's costs of both orders (here: the
 * model's own local trace), xs_moe_auto, then per-tile stall predictions of the wave, interleaved
 * and auto runs (here: the model's traces of them with the link stand in for measured ones). */
static int sweep_point_run(const xs_moe_config *cfg, int tokens, int peers, xs_moe_routing rt,
                           const xs_profile *prof, const xs_moe_model *mm, sweep_point *sp)
{
    memset(sp, 0, sizeof *sp);
    double t0 = xs_now_s();
    xs_moe_problem *m = NULL;
    xs_moe_opts o = {tokens, peers, rt, 0, 1u};
    if (xs_moe_problem_create(cfg, &o, 132, &m) != XS_OK)
        return 0;
    xs_moe_info info;
    xs_moe_problem_info(m, &info);
    const int ntot = info.l1_tiles + info.l2_tiles;
    xs_moe_tile *tr = (xs_moe_tile *)calloc((size_t)ntot + 1, sizeof *tr);
    double *ref[2] = {(double *)malloc(sizeof(double) * (size_t)(ntot + 1)),
                      (double *)malloc(sizeof(double) * (size_t)(ntot + 1))};
    /* the local traces of both orders: the courier prediction's ready times */
    xs_moe_tile *ltr[2] = {(xs_moe_tile *)calloc((size_t)ntot + 1, sizeof *tr),
                           (xs_moe_tile *)calloc((size_t)ntot + 1, sizeof *tr)};
    int ok = tr && ref[0] && ref[1] && ltr[0] && ltr[1];
    xs_moe_costs base, cost[2];
    xt_moe_synth_costs(cfg, &base);
    const xs_moe_plan wp = {XS_MOE_WAVE, 0, 0, 0, 0};
    const xs_moe_plan ip = {XS_MOE_INTERLEAVED, xs_moe_default_lead(m), 0, 0, 0};
    ok = ok && xs_moe_problem_set_plan(m, 0, &wp) == XS_OK && xs_moe_problem_set_plan(m, 1, &ip) == XS_OK;
    sp->create_s = xs_now_s() - t0;
    const double drain_ns = info.remote_bytes / prof->drain_bytes_per_ns;
    for (int slot = 0; slot < 2 && ok; slot++) {
        double t = 0;
        ok = xs_moe_predict_trace(m, slot, prof, mm, &base, 0, tr, &t) == XS_OK;
        cost[slot] = base;
        cost[slot].kernel_ns = t;
        if (slot == 0)
            sp->drain_over_compute = drain_ns / t;
        for (int i = 0; ok && i < ntot; i++)
            ref[slot][tr[i].id] = tr[i].mma1_ns - tr[i].mma0_ns;
        if (ok)
            memcpy(ltr[slot], tr, sizeof *tr * (size_t)ntot);
    }
    t0 = xs_now_s();
    xs_moe_auto_result ar;
    const xs_moe_local_traces lt = {ltr[0], ntot, ltr[1], ntot};
    ok = ok && xs_moe_auto(m, prof, mm, &cost[0], &cost[1], &lt, &ar) == XS_OK;
    sp->auto_s = xs_now_s() - t0;
    if (ok) {
        sp->pred_wave_ns = ar.wave_ns;
        sp->pred_inter_ns = ar.inter_ns;
        sp->pred_auto_ns = ar.auto_ns;
        sp->inter = ar.plan.kind == XS_MOE_INTERLEAVED;
        sp->paced = ar.plan.pace_bytes > 0;
        sp->lead = ar.plan.lead;
        sp->couriers = ar.plan.couriers;
        sp->pred_courier_ns = ar.courier_ns;
        sp->cand = ar.courier.couriers;
        sp->crit = ar.criterion_ok ? "met" : ar.reshape_ok ? "resh" : "no";
        /* the courier prediction is max(compute, link): never below the scaled local control,
         * never below the remote bytes at the couriers' rate */
        if (ar.courier.couriers > 0) {
            const double g = info.grid, sc = g / (g - ar.courier.couriers);
            const double kmin = (cost[0].kernel_ns < cost[1].kernel_ns ? cost[0].kernel_ns
                                                                       : cost[1].kernel_ns);
            XT_CHECK(ar.courier_ns >= kmin * sc * (1 - 1e-9) &&
                     ar.courier_ns >= info.remote_bytes / ar.courier.courier_bytes_per_ns *
                                          (1 - 1e-9),
                     "%s T=%d N=%d: courier prediction %.1f us below compute %.1f us x %.3f or "
                     "drain %.1f us", cfg->name, tokens, peers, ar.courier_ns / 1e3, kmin / 1e3,
                     sc, info.remote_bytes / ar.courier.courier_bytes_per_ns / 1e3);
        }
        /* the reshaped criterion's rate part spreads the bursts after the fill (c1 + c2): where
         * it holds, fill + drain fits in the local control's kernel */
        const double kern = cost[0].kernel_ns < cost[1].kernel_ns ? cost[0].kernel_ns
                                                                  : cost[1].kernel_ns;
        XT_CHECK(!ar.reshape_ok || ar.fill_ns + drain_ns <= kern * (1 + 1e-9),
                 "%s T=%d N=%d: reshaped criterion holds with fill %.1f us + drain %.1f us > "
                 "kernel %.1f us", cfg->name, tokens, peers, ar.fill_ns / 1e3, drain_ns / 1e3,
                 kern / 1e3);
        XT_CHECK(fabs(ar.fill_ns - (base.c1_ns + base.c2_ns)) < 1e-6,
                 "%s T=%d N=%d: fill %.1f us, expected c1 + c2 = %.1f us", cfg->name, tokens,
                 peers, ar.fill_ns / 1e3, (base.c1_ns + base.c2_ns) / 1e3);
        XT_CHECK(ar.drain_bound == (drain_ns >= 0.9 * kern), "%s T=%d N=%d: drain_bound %d "
                 "with drain %.1f us, kernel %.1f us", cfg->name, tokens, peers, ar.drain_bound,
                 drain_ns / 1e3, kern / 1e3);
        ok = xs_moe_problem_set_plan(m, 2, &ar.plan) == XS_OK;
    }
    for (int slot = 0; slot < 3 && ok; slot++) {
        double t = 0;
        t0 = xs_now_s();
        ok = xs_moe_predict_trace(m, slot, prof, mm, slot == 1 ? &cost[1] : &cost[0], 1, tr,
                                  &t) == XS_OK;
        sp->trace_s += xs_now_s() - t0;
        xs_moe_stall st;
        t0 = xs_now_s();
        const double *rf = slot == 1 || (slot == 2 && sp->inter) ? ref[1] : ref[0];
        ok = ok && xs_moe_stall_predict(tr, ntot, prof, mm, base.local_issue_bytes_per_ns, rf,
                                        ntot, &st, NULL, NULL) == XS_OK;
        sp->stall_s += xs_now_s() - t0;
        if (ok)
            sp->stall_sum += st.pred_stall_med_ns + st.abs_err_med_ns + st.mma_pred_med_ns +
                             st.mma_abs_err_med_ns + st.blocked_ns;
    }
    if (!ok)
        fprintf(stderr, "model sweep %s T=%d N=%d: %s\n", cfg->name, tokens, peers, xs_errmsg());
    free(tr);
    free(ref[0]);
    free(ref[1]);
    free(ltr[0]);
    free(ltr[1]);
    xs_moe_problem_destroy(m);
    return ok;
}

/* The sweep's host side with the sweep's real shapes (every configuration of the default sweep x
 * both routings x its three token counts at its peer count, grid 132) and synthetic costs: times
 * per point, and the model's predictions for the sweep (docs/EP.md, "Choosing the sweep"). */
static void model_sweep(const xs_profile *prof, int verbose)
{
    xs_moe_model mm;
    xs_moe_model_default(&mm);
    double total = 0, worst = 0;
    int n = 0, bad = 0;
    double lg = 0, mx = 0, wa_min = INFINITY;
    int chose_c = 0, c_inter = 0, c_auto = 0;
    if (verbose)
        printf("# %-18s %-8s %5s %2s %8s %8s %8s %8s %5s %9s %9s %9s %9s %2s %6s %s\n", "config",
               "routing", "T", "N", "auto_s", "trace_s", "stall_s", "total_s", "d/c", "wave_us",
               "inter_us", "auto_us", "cour_us", "C", "w/i", "crit auto");
    for (int ci = 0; ci < xs_moe_nconfigs; ci++)
        for (int ri = 0; ri < 2; ri++)
            for (int ti = 0; ti < 3; ti++) {
                const xs_moe_config *c = &xs_moe_configs[ci];
                if (!c->sweep)
                    continue;
                sweep_point sp;
                const double t0 = xs_now_s();
                const int tok = c->tokens[ti], peers = c->peers > 0 ? c->peers : 4;
                const int ok = sweep_point_run(c, tok, peers,
                                               ri ? XS_ROUTE_ZIPF : XS_ROUTE_BALANCED, prof,
                                               &mm, &sp);
                const double dt = xs_now_s() - t0;
                bad += !ok;
                total += dt;
                worst = dt > worst ? dt : worst;
                n++;
                const double wi = sp.pred_wave_ns / sp.pred_inter_ns;
                lg += log(wi);
                mx = wi > mx ? wi : mx;
                const double wa = sp.pred_wave_ns / sp.pred_auto_ns;
                wa_min = wa < wa_min ? wa : wa_min;
                chose_c += sp.couriers > 0;
                c_inter += sp.pred_courier_ns < sp.pred_inter_ns;
                c_auto += sp.couriers == 0 && sp.pred_courier_ns < sp.pred_auto_ns;
                if (verbose)
                    printf("# %-18s %-8s %5d %2d %8.3f %8.3f %8.3f %8.3f %5.2f %9.1f %9.1f %9.1f "
                           "%9.1f %2d %6.3f %-4s %s%s%s\n",
                           c->name, ri ? "zipf" : "balanced", tok, peers,
                           sp.auto_s, sp.trace_s, sp.stall_s, dt, sp.drain_over_compute,
                           sp.pred_wave_ns / 1e3, sp.pred_inter_ns / 1e3, sp.pred_auto_ns / 1e3,
                           sp.pred_courier_ns / 1e3, sp.cand, wi, sp.crit ? sp.crit : "?",
                           sp.inter ? "inter" : "wave", sp.paced ? " paced" : "",
                           sp.couriers == 4 ? " c4" : sp.couriers == 8 ? " c8"
                                            : sp.couriers ? " c" : "");
            }
    XT_CHECK(bad == 0, "model sweep: %d of %d points failed", bad, n);
    printf("%s model sweep (host side of bench ep, synthetic costs): %d points in %.2f s, %.3f s "
           "per point (worst %.3f s); predicted wave/interleaved geomean %.3f max %.3f, "
           "wave/auto min %.3f; couriers predicted faster than unpaced interleaved on %d, "
           "faster than the other rules' choice (by < 2 %%) on %d, chosen on %d\n",
           bad ? "FAIL" : "ok  ", n, total, total / n, worst, exp(lg / n), mx, wa_min, c_inter,
           c_auto, chose_c);
}

int main(int argc, char **argv)
{
    /* --tiny: the sanitizer's racecheck case (tests/gpu/sanitize.sh): bad input and the two
     * small shapes of --quick; no large shape (racecheck tracks every shared-memory access of
     * every tile: test_moe --quick runs past 90 s under it) and no timeout cases (their 5 and
     * 20 ms bounds measure timing, which racecheck slows 10-100x: the runs that must succeed
     * after a timeout time out themselves) */
    int tiny = argc > 1 && !strcmp(argv[1], "--tiny");
    int quick = tiny || (argc > 1 && !strcmp(argv[1], "--quick"));
    int model_only = argc > 1 && !strcmp(argv[1], "--model");
    if (argc > 3 || (argc > 1 && !quick && !model_only) || (argc > 2 && !model_only)) {
        fprintf(stderr, "usage: test_moe [--quick | --tiny | --model [PROFILE.json]]\n");
        return 2;
    }
    model_checks(); /* no GPU needed */
    if (model_only) {
        xs_profile prof;
        xs_profile_default(&prof);
        if (argc > 2 && xs_profile_load(argv[2], &prof) != XS_OK) {
            fprintf(stderr, "test_moe: %s\n", xs_errmsg());
            return 2;
        }
        model_sweep(&prof, 1);
        return xt_done();
    }
    xs_gpu_info gi;
    if (xs_gpu_open(0, &gi) != XS_OK) {
        fprintf(stderr, "test_moe: %s\n", xs_errmsg());
        XT_CHECK(0, "no GPU");
        return xt_done();
    }
    xs_gpu_report_header(stdout, &gi, argc, argv);
    xs_profile prof;
    xs_profile_default(&prof);
    xs_cublas *cb = NULL;
    if (xs_cublas_open(&cb) != XS_OK) {
        fprintf(stderr, "test_moe: %s\n", xs_errmsg());
        XT_CHECK(0, "cuBLAS unavailable: unfused and large checks not run");
        cb = NULL;
    }

    bad_input();
    model_case(&prof);
    if (!tiny) {
        timeout_case();
        pacer_timeout_case();
        courier_timeout_case();
    }

    /* small odd shapes: partial Linear-1 tiles (2I < 256, 2I = 384), ragged H (520 = 2*256+8),
     * few rows per expert, empty experts (zipf), 1..4 destinations */
    const scase smalls[] = {
        {{"small-a", 256, 192, 6, 2, {0, 0, 0}}, 300, 3, XS_ROUTE_BALANCED},
        {{"small-a", 256, 192, 6, 2, {0, 0, 0}}, 300, 3, XS_ROUTE_ZIPF},
        {{"small-b", 320, 80, 5, 3, {0, 0, 0}}, 257, 1, XS_ROUTE_BALANCED},
        {{"small-c", 520, 144, 9, 2, {0, 0, 0}}, 190, 4, XS_ROUTE_ZIPF},
    };
    for (size_t i = 0; i < sizeof smalls / sizeof smalls[0]; i++)
        if (!quick || i % 2 == 0)
            small_case(&smalls[i], cb, &prof);

    if (!tiny)
        large_case("qwen1.5-moe-a2.7b", 1024, 4, XS_ROUTE_ZIPF, cb);
    if (!quick)
        large_case("mixtral-8x7b", 512, 2, XS_ROUTE_BALANCED, cb);

    if (cb)
        xs_cublas_close(cb);
    return xt_done();
}
