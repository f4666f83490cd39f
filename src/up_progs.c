// SPDX-License-Identifier: Apache-2.0
/*
 * up_progs.c - the fused attention kernel as one program per CTA (docs/UP.md "Per-CTA
 * programs"): the plain kernel's and the KV-split kernel's programs, and their simulation on a
 * profile (xs_simulate_programs) and on an unlimited stage (xs_simulate_free).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "up_kv.h"

/* ---- per-CTA programs (docs/UP.md "Per-CTA programs") ---------------------------------------- */

/* One step of a CTA: its time (from the previous step's end to its own), its key-block
 * iterations (where the previous step's slices go) and the bytes it stores after itself. */
typedef struct {
    double ns;
    int iters;
    double bytes;
} prog_step;

void xs_attn_progs_free(xs_attn_progs *p)
{
    if (!p)
        return;
    free(p->bytes), free(p->gap_ns);
    memset(p, 0, sizeof *p);
}

/* Emit CTA b's rows from its m steps (rows[] NULL: count them). Bytes round to 16 cumulatively,
 * so that a step's slices add up to its bytes. */
static int prog_rows(const prog_step *st, int m, int split, int64_t *bytes, double *gap, int grid,
                     int b)
{
    int n = 0;
#define PROG_ROW(b_, g_)                                                                      \
    do {                                                                                      \
        if (bytes)                                                                            \
            bytes[(size_t)n * grid + b] = (b_), gap[(size_t)n * grid + b] = (g_);             \
        n++;                                                                                  \
    } while (0)
    if (m < 1)
        return 0;
    PROG_ROW(0, st[0].ns);
    for (int i = 0; i < m; i++) {
        const double B = st[i].bytes;
        if (i + 1 == m) {
            PROG_ROW((int64_t)llround(B / 16.0) * 16, 0.0);
            break;
        }
        const prog_step *nx = &st[i + 1];
        if (split == 0 || B <= 0) {
            PROG_ROW((int64_t)llround(B / 16.0) * 16, nx->ns);
            continue;
        }
        const int nk = nx->iters > 0 ? nx->iters : 1;
        const double t_it = nx->ns / nk;
        /* The groups of slices due at the same iteration: one opens at iteration 0 and at every
         * iteration where xs_attn_slices_due grows, the last one closes at nk. The due count
         * ceil((j + 1) split / nk) exceeds d from j = floor(d nk / split) on, so the next group's
         * iteration is found directly instead of by walking the iterations. */
        int jg = 0, sent = 0, ng = xs_attn_slices_due(split, nk, 0); /* the open group */
        for (;;) {
            const int d = sent + ng;
            const long long jn_ = d >= split ? nk : (long long)d * nk / split;
            const int jn = jn_ < nk ? (int)jn_ : nk;
            const int64_t b0 = (int64_t)llround(B * sent / split / 16.0) * 16;
            const int64_t b1 = (int64_t)llround(B * (sent + ng) / split / 16.0) * 16;
            PROG_ROW(b1 - b0, t_it * (jn - jg));
            if (jn >= nk)
                break;
            sent = d, ng = xs_attn_slices_due(split, nk, jn) - d, jg = jn;
        }
    }
#undef PROG_ROW
    return n;
}

/* Programs from every CTA's steps (steps [soff[b], soff[b + 1]) of CTA b). */
static xs_status progs_from_steps(int grid, const int *soff, const prog_step *st, int split,
                                  xs_attn_progs *out)
{
    memset(out, 0, sizeof *out);
    int rows = 1;
    for (int b = 0; b < grid; b++) {
        const int n = prog_rows(st + soff[b], soff[b + 1] - soff[b], split, NULL, NULL, grid, b);
        rows = n > rows ? n : rows;
    }
    out->grid = grid, out->nrows = rows;
    out->bytes = (int64_t *)calloc((size_t)rows * grid, sizeof(int64_t));
    out->gap_ns = (double *)calloc((size_t)rows * grid, sizeof(double));
    if (!out->bytes || !out->gap_ns) {
        xs_attn_progs_free(out);
        return xs_seterr(XS_ENOMEM, "per-CTA programs: out of memory for %d rows x %d CTAs", rows,
                         grid);
    }
    for (int b = 0; b < grid; b++)
        prog_rows(st + soff[b], soff[b + 1] - soff[b], split, out->bytes, out->gap_ns, grid, b);
    return XS_OK;
}

xs_status xs_attn_progs_plain(int seq, int heads, int causal, int order, int remote,
                                         int grid, int split, const double *dur_ns,
                                         const double *remote_bytes, xs_attn_progs *out)
{
    const int tiles = seq >= 1 && heads >= 1 ? xs_attn_tiles(seq, heads) : 0;
    if (!out || !dur_ns || !remote_bytes || tiles < 1 || grid < 1 || grid > tiles ||
        remote < 0 || remote > tiles || split < 0 || split > 256 ||
        (order != XS_ATTN_ORDER_SNAKE && order != XS_ATTN_ORDER_EARLY))
        return xs_seterr(XS_EINVAL, "per-CTA programs: bad arguments (seq %d, heads %d, grid %d, "
                         "split %d, order %d)", seq, heads, grid, split, order);
    int *soff = (int *)malloc((size_t)(grid + 1) * sizeof(int));
    prog_step *st = (prog_step *)malloc((size_t)tiles * sizeof *st);
    if (!soff || !st) {
        free(soff), free(st);
        return xs_seterr(XS_ENOMEM, "per-CTA programs: out of memory for %d tiles", tiles);
    }
    for (int t = 0; t < tiles; t++)
        if (!(remote_bytes[t] >= 0) || !(dur_ns[t] < INFINITY)) {
            free(soff), free(st);
            return xs_seterr(XS_EINVAL, "per-CTA programs: tile %d: %g remote bytes, %g ns", t,
                             remote_bytes[t], dur_ns[t]);
        }
    int n = 0;
    for (int b = 0; b < grid; b++) {
        soff[b] = n;
        const int m = xs_attn_cta_count(tiles, grid, b);
        for (int k = 0; k < m; k++, n++) {
            const int t = xs_attn_cta_tile(order, tiles, remote, grid, b, k);
            st[n].ns = dur_ns[t] > 0 ? dur_ns[t] : 0;
            st[n].iters = xs_attn_tile_iters(seq, heads, causal, t);
            st[n].bytes = remote_bytes[t];
        }
    }
    soff[grid] = n;
    const xs_status s = progs_from_steps(grid, soff, st, split, out);
    free(soff), free(st);
    return s;
}

xs_status xs_attn_progs_kv(int seq, int heads, int causal, int grid,
                                      const int *task_off, const xs_attn_kvtask *tasks, int split,
                                      const double *dur_ns, const double *remote_bytes,
                                      xs_attn_progs *out)
{
    if (!out || !dur_ns || !remote_bytes || !task_off || !tasks || grid < 1 || split < 0 ||
        split > 256 || task_off[0] != 0)
        return xs_seterr(XS_EINVAL, "per-CTA programs: bad KV arguments (grid %d, split %d)",
                         grid, split);
    XS_TRY(xs_attn_kv_check(seq, heads, causal, grid, task_off, tasks,
                            xs_up_kv_named_slots(grid, task_off, tasks)));
    const int tiles = xs_attn_tiles(seq, heads), nt = task_off[grid];
    double *te = (double *)malloc((size_t)tiles * sizeof(double));
    double *pe = (double *)malloc((size_t)tiles * sizeof(double));
    int *pd = (int *)malloc((size_t)tiles * sizeof(int));
    double *tend = (double *)malloc((size_t)(nt > 0 ? nt : 1) * sizeof(double));
    prog_step *st = (prog_step *)malloc((size_t)(nt > 0 ? nt : 1) * sizeof *st);
    xs_status s = XS_OK;
    double end = 0;
    if (!te || !pe || !pd || !tend || !st)
        s = xs_seterr(XS_ENOMEM, "per-CTA programs: out of memory for %d tasks", nt);
    else if (xs_up_kv_replay(seq, heads, causal, grid, task_off, tasks, dur_ns, te, pd, pe, &end,
                       tend) < nt)
        s = xs_seterr(XS_EINVAL, "per-CTA programs: the KV lists do not run to the end");
    if (s == XS_OK) {
        for (int b = 0; b < grid; b++)
            for (int i = task_off[b]; i < task_off[b + 1]; i++) {
                const xs_attn_kvtask tk = tasks[i];
                const double prev = i > task_off[b] ? tend[i - 1] : 0.0;
                st[i].ns = tend[i] > prev ? tend[i] - prev : 0.0;
                st[i].iters = tk.kb1 - tk.kb0;
                st[i].bytes = xs_attn_kv_stores(tk.part) ? remote_bytes[tk.tile] : 0.0;
            }
        s = progs_from_steps(grid, task_off, st, split, out);
    }
    free(te), free(pe), free(pd), free(tend), free(st);
    return s;
}

xs_status xs_attn_progs_simulate(const xs_profile *p, const xs_attn_progs *pg,
                                            xs_attn_progsim *out)
{
    return xs_up_progs_simulate(p, pg, 1, 1, out);
}

xs_status xs_up_progs_simulate(const xs_profile *p, const xs_attn_progs *pg, int free_run,
                               int windows, xs_attn_progsim *out)
{
    if (!p || !pg || !out || pg->grid < 1 || pg->nrows < 1 || !pg->bytes || !pg->gap_ns)
        return xs_seterr(XS_EINVAL, "per-CTA programs: nothing to simulate");
    memset(out, 0, sizeof *out);
    out->free_ns = NAN;
    out->held_ns = windows && free_run ? 0 : NAN;
    xs_schedule s;
    memset(&s, 0, sizeof s);
    /* the rows' widths; the programs say the rest */
    for (int i = 0; i < pg->nrows; i++)
        XS_TRY(xs_schedule_append(&s, pg->grid, 16, 0.0));
    /* the CTAs' own store queues and buffers let a burst's last bytes issue while the stage is
     * full (the replay kernel's stamps see that); this kernel's next step loads its keys and
     * values from global memory, and an SM's loads wait behind its own held-back stores (the
     * probe, docs/MODEL.md: 100-250x slower), so its work resumes only once they are in the
     * shared stage: no queue, no buffer */
    xs_profile real = *p, ideal;
    real.start_ns = 0, real.row_start_ns = 0;
    real.queue_bytes_per_producer = 0, real.buffer_bytes_per_producer = 0;
    ideal = real;
    ideal.drain_bytes_per_ns = 1e9;
    ideal.capacity_bytes = 1e15;
    ideal.capacity_bytes_per_producer = 0;
    const xs_programs prog = {pg->grid, pg->bytes, pg->gap_ns};
    xs_sim_opts so;
    memset(&so, 0, sizeof so);
    so.record_windows = windows && free_run; /* held_ns compares the two runs' windows */
    so.skip_row_medians = 1; /* the rows are not read */
    xs_result a, f;
    xs_status st = xs_simulate_programs(&real, &s, &prog, &so, &a);
    if (st == XS_OK) {
        out->span_ns = a.makespan_ns;
        out->peak_bytes = a.peak_backlog_bytes;
        if (free_run) /* no heap: nothing waits */
            st = xs_simulate_free(&ideal, &s, &prog, &so, &f, NULL);
        if (free_run && st == XS_OK) {
            out->free_ns = f.makespan_ns;
            const size_t n = (size_t)pg->nrows * pg->grid;
            for (size_t k = 0; so.record_windows && k < n; k++)
                if (!isnan(a.win_end[k]) && !isnan(f.win_end[k])) {
                    const double d = (a.win_end[k] - a.win_start[k]) -
                                     (f.win_end[k] - f.win_start[k]);
                    if (d > out->held_ns)
                        out->held_ns = d;
                }
            xs_result_free(&f);
        }
        xs_result_free(&a);
    }
    xs_schedule_free(&s);
    return st;
}
