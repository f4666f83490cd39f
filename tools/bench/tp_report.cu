// SPDX-License-Identifier: Apache-2.0
/*
 * tools/bench/tp_report.cu - the report of `xstage bench tp` (tools/bench/tp.cu) on the shared
 * harness (tools/bench/harness.h): the column table (the human table, CSV and JSON write the
 * same columns), the '#' notes of the header, the detail lines under a row and the summary
 * lines with their targets; docs/TP.md defines the columns.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tp_bench.h"
#include "xstage_overlap.h"

/* ---- columns --------------------------------------------------------------------------------- */

/* Byte offsets into tpb_row, packed two to a getter's arg (16 bits each). */
static_assert(sizeof(tpb_row) < 32768, "tpb_row offsets fit the ratio getter's arg");
#define OFF(field) ((int)offsetof(tpb_row, field))
#define COUR_OFF(v, field) ((int)(offsetof(tpb_row, cour) + (v) * sizeof(tpb_cour) + \
                                  offsetof(tpb_cour, field)))

static double at(const void *row, int off)
{
    double v;
    memcpy(&v, (const char *)row + off, sizeof v);
    return v;
}

/* A ratio of two doubles of the row: arg = numerator offset << 16 | denominator offset. */
static double ratio(const void *row, int arg)
{
    return at(row, arg >> 16) / at(row, arg & 0xffff);
}

/* The spread of the xs_bench_stat at offset arg: 100 (max - min) / median, %. */
static double spread(const void *row, int arg)
{
    xs_bench_stat s;
    memcpy(&s, (const char *)row + arg, sizeof s);
    return xs_bench_spread_pct(&s);
}

static const char *op_name(const void *row, int arg)
{
    (void)arg;
    return xs_tp_op_name(((const tpb_row *)row)->op);
}

static const char *engine_name(const void *row, int arg)
{
    (void)arg;
    return xs_tp_engine_name(((const tpb_row *)row)->engine);
}

/* One column at cols[*n]. */
static void col(xs_bench_col *cols, int *n, const char *name, const char *unit, const char *fmt,
                int kind, size_t off, int flags)
{
    xs_bench_col *c = &cols[(*n)++];
    memset(c, 0, sizeof *c);
    c->name = name, c->unit = unit, c->fmt = fmt, c->kind = kind, c->off = off, c->flags = flags;
}

/* One computed column (get with arg). */
static void col_get(xs_bench_col *cols, int *n, const char *name, const char *unit,
                    const char *fmt, double (*get)(const void *, int), int arg, int flags)
{
    col(cols, n, name, unit, fmt, XS_COL_DOUBLE, 0, flags);
    cols[*n - 1].get = get, cols[*n - 1].arg = arg;
}

/* A timing as the columns NAME_us, [NAME_spread,] NAME_min_us, NAME_max_us (the spread in the
 * table next to the median; min and max in the files). names: 4 strings (spread NULL: none). */
static void col_time(xs_bench_col *cols, int *n, const char *const *names, int off, int flags)
{
    col(cols, n, names[0], "us", "%.1f", XS_COL_DOUBLE, off + offsetof(xs_bench_stat, med),
        flags);
    if (names[1])
        col_get(cols, n, names[1], "%", "%.1f", spread, off, flags);
    col(cols, n, names[2], "us", "%.1f", XS_COL_DOUBLE, off + offsetof(xs_bench_stat, min),
        XS_COL_FILE);
    col(cols, n, names[3], "us", "%.1f", XS_COL_DOUBLE, off + offsetof(xs_bench_stat, max),
        XS_COL_FILE);
}

/* The base set: the configuration, the default kernel's and the unfused timings, the local
 * control, the bounds, the predictions, the choice and the verdict. */
static int cols_base(xs_bench_col *c)
{
    static const char *const unf[4] = {"unfused_us", "unfused_spread", "unfused_min_us",
                                       "unfused_max_us"};
    static const char *const nai[4] = {"naive_us", "naive_spread", "naive_min_us",
                                       "naive_max_us"};
    static const char *const shp[4] = {"shaped_us", "shaped_spread", "shaped_min_us",
                                       "shaped_max_us"};
    const int F = XS_COL_FILE;
    int n = 0;
    col(c, &n, "op", "", "%s", XS_COL_STR, 0, 0);
    c[n - 1].gets = op_name, c[n - 1].width = 7;
    col(c, &n, "model", "", "%s", XS_COL_STR, offsetof(tpb_row, model), 0);
    c[n - 1].width = 11;
    col(c, &n, "m", "", "%d", XS_COL_INT, offsetof(tpb_row, s.m), 0);
    col(c, &n, "n", "", "%d", XS_COL_INT, offsetof(tpb_row, s.n), 0);
    col(c, &n, "k", "", "%d", XS_COL_INT, offsetof(tpb_row, s.k), 0);
    col(c, &n, "peers", "", "%d", XS_COL_INT, offsetof(tpb_row, s.peers), 0);
    col(c, &n, "grid", "", "%d", XS_COL_INT, offsetof(tpb_row, grid), F);
    col(c, &n, "tiles", "", "%d", XS_COL_INT, offsetof(tpb_row, tiles), F);
    col(c, &n, "remote_mb", "MB", "%.3f", XS_COL_DOUBLE, offsetof(tpb_row, remote_mb), 0);
    col(c, &n, "local_tflops", "TFLOP/s", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, local_tflops),
        F);
    col_time(c, &n, unf, OFF(unf), 0);
    col_time(c, &n, nai, OFF(nai), 0);
    col_time(c, &n, shp, OFF(shp), 0);
    col(c, &n, "local_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, local_us), 0);
    col(c, &n, "shaped_local_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, shp_local), 0);
    col(c, &n, "comm_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, comm_us), F);
    col(c, &n, "bound_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, bound_us), 0);
    col(c, &n, "floor_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, floor_us), 0);
    col(c, &n, "naive_pred_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, nai_pred), 0);
    col(c, &n, "shaped_pred_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, shp_pred), 0);
    col(c, &n, "shaped_order", "", "%s", XS_COL_CHARS, offsetof(tpb_row, cand), 0);
    c[n - 1].width = 17;
    col(c, &n, "model_rank", "", "%d", XS_COL_INT, offsetof(tpb_row, model_rank), F);
    col(c, &n, "criterion_ok", "", "%d", XS_COL_INT, offsetof(tpb_row, crit_ok), F);
    col_get(c, &n, "unfused_over_shaped", "x", "%.4f", ratio,
            OFF(unf.med) << 16 | OFF(shp.med), 0);
    col_get(c, &n, "naive_over_shaped", "x", "%.4f", ratio, OFF(nai.med) << 16 | OFF(shp.med),
            0);
    col_get(c, &n, "shaped_over_bound", "x", "%.4f", ratio, OFF(shp.med) << 16 | OFF(bound_us),
            0);
    col_get(c, &n, "shaped_over_floor", "x", "%.4f", ratio, OFF(shp.med) << 16 | OFF(floor_us),
            0);
    col(c, &n, "max_err", "", "%.3g", XS_COL_DOUBLE, offsetof(tpb_row, max_err), F);
    col(c, &n, "verified", "", NULL, XS_COL_BOOL, offsetof(tpb_row, verified), 0);
    col(c, &n, "engine", "", "%s", XS_COL_STR, 0, F);
    c[n - 1].gets = engine_name;
    return n;
}

int tpb_cols(const tpb_opts *o, xs_bench_col *c)
{
    static char names[TPB_MAX_COUR][10][48]; /* the per-count names: one table per process */
    const int F = XS_COL_FILE;
    int n = cols_base(c);
    for (int v = 0; v < o->ncour; v++) {
        char(*nm)[48] = names[v];
        const int N = o->cour[v];
        static const char *const fmt[10] = {
            "naive_c%d_us",       "naive_c%d_min_us",     "naive_c%d_max_us",
            "shaped_c%d_us",      "shaped_c%d_min_us",    "shaped_c%d_max_us",
            "shaped_c%d_pred_us", "shaped_c%d_order",     "shaped_c%d_over_bound",
            "shaped_c0_over_shaped_c%d"};
        for (int i = 0; i < 10; i++)
            snprintf(nm[i], sizeof nm[i], fmt[i], N);
        const char *const nai[4] = {nm[0], NULL, nm[1], nm[2]};
        const char *const shp[4] = {nm[3], NULL, nm[4], nm[5]};
        col_time(c, &n, nai, COUR_OFF(v, nai), F);
        col_time(c, &n, shp, COUR_OFF(v, shp), F);
        col(c, &n, nm[6], "us", "%.1f", XS_COL_DOUBLE, COUR_OFF(v, shp_pred), F);
        col(c, &n, nm[7], "", "%s", XS_COL_CHARS, COUR_OFF(v, cand), F);
        col_get(c, &n, nm[8], "x", "%.4f", ratio, COUR_OFF(v, shp.med) << 16 | OFF(bound_us), F);
        col_get(c, &n, nm[9], "x", "%.4f", ratio, OFF(shp0.med) << 16 | COUR_OFF(v, shp.med), F);
    }
    /* the planner's choice (shaped_us is its time) and the default kernel's shaped order (the
     * whole family's column without couriers) */
    static const char *const shp0[4] = {"shaped_c0_us", NULL, "shaped_c0_min_us",
                                        "shaped_c0_max_us"};
    col(c, &n, "shaped_couriers", "", "%d", XS_COL_INT, offsetof(tpb_row, shp_cour), F);
    col_time(c, &n, shp0, OFF(shp0), F);
    col(c, &n, "shaped_c0_pred_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, shp0_pred), F);
    col(c, &n, "shaped_c0_order", "", "%s", XS_COL_CHARS, offsetof(tpb_row, cand0), F);
    /* the overlapped unfused pipeline and the columns over every variant (docs/METRICS.md) */
    static const char *const ovl[4] = {"overlapped_us", "overlapped_spread", "overlapped_min_us",
                                       "overlapped_max_us"};
    col_time(c, &n, ovl, OFF(ovl), 0);
    col(c, &n, "overlapped_chunks", "", "%d", XS_COL_INT, offsetof(tpb_row, ovl_chunks), 0);
    col(c, &n, "cublas_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, cublas_us), F);
    col(c, &n, "best_other_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, best_other_us), F);
    col(c, &n, "best_other", "", "%s", XS_COL_CHARS, offsetof(tpb_row, best_other), F);
    col(c, &n, "comm_over_compute", "x", "%.4f", XS_COL_DOUBLE,
        offsetof(tpb_row, comm_over_compute), F);
    col_get(c, &n, "overlapped_over_shaped", "x", "%.4f", ratio,
            OFF(ovl.med) << 16 | OFF(shp.med), F);
    col(c, &n, "overlapped_pred_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, ovl_pred_us),
        F);
    col(c, &n, "overlapped_model_chunks", "", "%d", XS_COL_INT,
        offsetof(tpb_row, ovl_model_chunks), F);
    /* auto (the model alone) and tuned (the pilots) over every variant */
    col(c, &n, "auto_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, auto_us), 0);
    col(c, &n, "auto_pred_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, auto_pred_us), F);
    col(c, &n, "auto", "", "%s", XS_COL_CHARS, offsetof(tpb_row, auto_name), F);
    col(c, &n, "tuned_us", "us", "%.1f", XS_COL_DOUBLE, offsetof(tpb_row, tuned_us), 0);
    col(c, &n, "tuned", "", "%s", XS_COL_CHARS, offsetof(tpb_row, tuned_name), F);
    if (o->grid) { /* every declared point is a row: its index in the grid and its status */
        col(c, &n, "grid_row", "", "%d", XS_COL_INT, offsetof(tpb_row, index), 0);
        col(c, &n, "status", "", "%s", XS_COL_CHARS, offsetof(tpb_row, status), 0);
    }
    return n;
}

/* ---- the header notes ------------------------------------------------------------------------ */

void tpb_report_notes(xs_bench_report *r, const xs_bench_env *e, const tpb_opts *o,
                      const xs_profile *prof)
{
    if (e->real)
        xs_bench_report_note(r, "peers: P = %d real peers: pushes and partials into the peers' "
                             "NCCL symmetric windows (LSA pointers); unfused: ncclAllGather / "
                             "ncclReduceScatter; every rank verifies every byte and signal its "
                             "window received (the slowest rank's medians under each row)",
                             e->nranks);
    xs_bench_report_note(r, "profile: %s R %.4g B/ns, Q %.6g B, Q/producer %.6g B, r %.4g B/ns%s",
                         e->c->b.pa.file ? e->c->b.pa.file : "embedded",
                         prof->drain_bytes_per_ns, prof->capacity_bytes,
                         prof->capacity_bytes_per_producer, prof->issue_bytes_per_ns,
                         prof->provisional ? " (provisional)" : "");
    xs_bench_report_note(r, "engine: %s",
        o->engine == XS_TP_ENGINE_SM90
            ? "sm90: cuda/gemm_sm90.cuh, bf16 wgmma m64n256k16 + TMA, producer warpgroup + 2 "
              "consumer warpgroups, fp32 accumulate; stored orders only (no streamed stores), "
              "signals raised right after their payload"
            : "mma: cuda/gemm.cuh, bf16 mma.sync, fp32 accumulate; stored and streamed orders, "
              "lazy signals");
    xs_bench_report_note(r, "slots: row-major reduce-scatter slots (a tile lands as 128 runs of "
                         "512 B)");
    char cour_line[384] = "none: every fused column runs the default kernel (no couriers)";
    if (o->ncour) {
        size_t cl = 0;
        for (int v = 0; v < o->ncour; v++)
            cl += (size_t)snprintf(cour_line + cl, sizeof cour_line - cl, "%s%d", v ? " and " : "",
                                   o->cour[v]);
        cl += (size_t)snprintf(cour_line + cl, sizeof cour_line - cl, " courier CTAs next to the "
                 "default kernel (0), same rounds (columns *_c<N>_*); local_us and bound_us "
                 "without couriers; they push the all-gather chunks (ag_gemm, mlp), then carry "
                 "the remote reduce-scatter tiles (gemm_rs, mlp); ");
        snprintf(cour_line + cl, sizeof cour_line - cl, "paced at %.2f x R = %.1f B/ns",
                 TPB_COURIER_PACE, TPB_COURIER_PACE * prof->drain_bytes_per_ns);
    }
    xs_bench_report_note(r, "couriers: %s", cour_line);
    xs_bench_report_note(r, "tiles %dx%d (engine %s), persistent grid = %d SMs; push chunks %d KB; "
                         "tolerance: relative Frobenius <= %.0e, rows <= %.0e vs fp32; times: "
                         "CUDA events (completion incl. drain), median of %d after %d warm-up, "
                         "L2 flushed, variants interleaved round by round", XS_TP_BM, XS_TP_BN,
                         xs_tp_engine_name(o->engine), e->gi.sm_count, XS_TP_CHUNK / 1024,
                         XS_TP_TOL_FROB, XS_TP_TOL_ROW, e->c->b.iters, e->c->b.warmup);
    static const int ch[TPB_OV_NCHUNKS] = TPB_OV_CHUNKS;
    char cl[64];
    size_t l = 0;
    for (int i = 0; i < TPB_OV_NCHUNKS && l < sizeof cl; i++)
        l += (size_t)snprintf(cl + l, sizeof cl - l, "%s%d", i ? "," : "", ch[i]);
    xs_bench_report_note(r, "overlapped: %s", e->real
        ? "not run with real peers"
        : "cuBLAS GEMM pieces on the bench stream, each finished piece's copy to its owner "
          "(cudaMemcpyAsync) on a side stream after an event; all-gather pieces pushed first, "
          "each GEMM piece waits for its shard's piece; chunks per rank block searched over");
    if (!e->real)
        xs_bench_report_note(r, "overlapped chunk counts: {%s} (those with >= %d rows per "
                             "piece), %d verified pilot runs each, the fastest median timed",
                             cl, XS_TP_OV_ROWS, TPB_PILOT_REPS);
}

/* ---- the detail lines under a row ------------------------------------------------------------ */

void tpb_detail(void *ctx, int i, const void *rowp, xs_bench_report *rep)
{
    const tpb_row *r = (const tpb_row *)rowp;
    (void)ctx, (void)i;
    if (!r->ok)
        return;
    if (r->pilot[0])
        xs_bench_report_note(rep, "  pilot runs, us: %s", r->pilot);
    if (r->shp_cour > 0 || isfinite(r->cour[0].shp.med))
        xs_bench_report_note(rep, "  planner's choice: %d couriers; default kernel shaped %.1f us "
                             "(%.1f%%) %s, pred %.1f", r->shp_cour, r->shp0.med,
                             xs_bench_spread_pct(&r->shp0), r->cand0, r->shp0_pred);
    for (int v = 0; v < TPB_MAX_COUR; v++) {
        const tpb_cour *c = &r->cour[v];
        if (!isfinite(c->shp.med))
            continue;
        xs_bench_report_note(rep, "  %d couriers, us: naive %.1f (%.1f%%), shaped %.1f (%.1f%%) "
                             "%s, pred %.1f; naive/naive_c %.3f, shaped_c0/shaped_c %.3f; "
                             "shaped_c/bound %.3f", c->n, c->nai.med, xs_bench_spread_pct(&c->nai),
                             c->shp.med, xs_bench_spread_pct(&c->shp), c->cand, c->shp_pred,
                             r->nai.med / c->nai.med, r->shp0.med / c->shp.med,
                             c->shp.med / r->bound_us);
        if (c->pilot[0])
            xs_bench_report_note(rep, "  %d couriers, pilot runs, us: %s", c->n, c->pilot);
    }
    if (r->ovl_pilot[0])
        xs_bench_report_note(rep, "  overlapped pilots, us: %s; GEMMs alone (cuBLAS) %.1f; "
                             "chosen C=%d %.1f (%.1f%%), model %.1f (its own choice C=%d); "
                             "best other: %s %.1f", r->ovl_pilot, r->cublas_us, r->ovl_chunks,
                             r->ovl.med, xs_bench_spread_pct(&r->ovl), r->ovl_pred_us,
                             r->ovl_model_chunks, r->best_other, r->best_other_us);
    if (r->auto_why[0])
        xs_bench_report_note(rep, "  auto: %s; timed %.1f us%s; tuned (pilots): %s %.1f us",
                             r->auto_why, r->auto_us,
                             r->auto_v == TPB_V_AUTO ? " (its own runs)" : "", r->tuned_name,
                             r->tuned_us);
    if (isfinite(r->rank_max[0]))
        xs_bench_report_note(rep, "  ranks: slowest rank's medians, us: naive %.1f, shaped %.1f, "
                             "unfused %.1f", r->rank_max[0], r->rank_max[1], r->rank_max[2]);
}

/* ---- the summary ----------------------------------------------------------------------------- */

enum { TPB_MAX_SUM = 512 };

/* geomean, min and max of v[0..n) as "geomean G, min A, max B over N rows". */
static const char *gmm(const double *v, int n, char *buf, size_t size)
{
    snprintf(buf, size, "geomean %.3f, min %.3f, max %.3f over %d rows", xs_geomean(v, (size_t)n),
             xs_min(v, (size_t)n), xs_max(v, (size_t)n), n);
    return buf;
}

/* unfused/shaped (num = 0), naive/shaped (num = 1) or overlapped/shaped (num = 2) over the
 * timed rows of op (-1: all) where both ran. */
static void ratio_line(xs_bench_report *rep, const char *what, const tpb_row *rows, int nrows,
                       int op, int num)
{
    static const char *const name[3] = {"unfused", "naive", "overlapped"};
    double v[TPB_MAX_SUM];
    char buf[128];
    int n = 0;
    for (int i = 0; i < nrows && n < TPB_MAX_SUM; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ok || (op >= 0 && (int)r->op != op))
            continue;
        const double a = num == 0 ? r->unf.med : num == 1 ? r->nai.med : r->ovl.med;
        if (isfinite(a))
            v[n++] = a / r->shp.med;
    }
    if (n)
        xs_bench_report_note(rep, "summary: %-7s %s/shaped: %s", what, name[num],
                             gmm(v, n, buf, sizeof buf));
}

/* --couriers: shaped_c0/shaped_cN (the default kernel's shaped order over N couriers' shaped
 * order; > 1: couriers faster) over the rows of op, the gemm_rs rows within 10 % of bound_us
 * with couriers, and the courier prediction's error. */
static void cour_lines(xs_bench_report *rep, const tpb_row *rows, int nrows, int v)
{
    int nc = 0;
    char buf[128];
    for (int op = 0; op < XS_TP_NOPS; op++) {
        double x[TPB_MAX_SUM];
        int n = 0;
        for (int i = 0; i < nrows && n < TPB_MAX_SUM; i++) {
            const tpb_row *r = &rows[i];
            if (!r->ok || (int)r->op != op || !isfinite(r->cour[v].shp.med))
                continue;
            nc = r->cour[v].n;
            x[n++] = r->shp0.med / r->cour[v].shp.med;
        }
        if (n)
            xs_bench_report_note(rep, "summary: %-7s shaped_c0/shaped_c%d (%d couriers): %s",
                                 xs_tp_op_name((xs_tp_op)op), nc, nc, gmm(x, n, buf, sizeof buf));
    }
    int nrs = 0, nrs10 = 0, npe = 0;
    double worst = 0, pe[TPB_MAX_SUM];
    for (int i = 0; i < nrows; i++) {
        const tpb_row *r = &rows[i];
        const tpb_cour *c = &r->cour[v];
        if (!r->ok || !isfinite(c->shp.med))
            continue;
        if (npe < TPB_MAX_SUM && isfinite(c->shp_pred))
            pe[npe++] = fabs(c->shp_pred - c->shp.med) / c->shp.med * 100;
        if (r->op != XS_TP_GEMM_RS)
            continue;
        nrs++;
        nrs10 += c->shp.med <= 1.10 * r->bound_us;
        worst = fmax(worst, c->shp.med / r->bound_us);
    }
    if (nrs)
        xs_bench_report_note(rep, "summary: gemm_rs shaped, %d couriers, within 10%% of bound_us "
                             "in %d of %d rows (worst %.3f x bound)", nc, nrs10, nrs, worst);
    if (npe)
        xs_bench_report_note(rep, "summary: %d couriers: shaped prediction error median %.1f%%, "
                             "max %.1f%%", nc, xs_median(pe, (size_t)npe),
                             xs_max(pe, (size_t)npe));
}

/* The planner's choice per row: how often each courier count won. */
static void choice_line(xs_bench_report *rep, const tpb_row *rows, int nrows, int ntimed)
{
    int cnt[XS_TP_COURIERS_MAX + 1], any = 0;
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < nrows; i++)
        if (rows[i].ok && rows[i].shp_cour >= 0 && rows[i].shp_cour <= XS_TP_COURIERS_MAX) {
            cnt[rows[i].shp_cour]++;
            any |= rows[i].shp_cour > 0 || isfinite(rows[i].cour[0].shp.med);
        }
    if (!any)
        return;
    char line[256];
    size_t l = 0;
    for (int c = 0; c <= XS_TP_COURIERS_MAX; c++)
        if (cnt[c] && l < sizeof line)
            l += (size_t)snprintf(line + l, sizeof line - l, "%s%d couriers in %d", l ? ", " : "",
                                  c, cnt[c]);
    xs_bench_report_note(rep, "summary: planner's choice (shaped): %s of %d rows", line, ntimed);
}

/* mlp unfused/shaped against the targets 1.5 (geomean) and 1.75 (max). */
static void mlp_line(xs_bench_report *rep, const tpb_row *rows, int nrows)
{
    double v[TPB_MAX_SUM];
    int n = 0;
    for (int i = 0; i < nrows && n < TPB_MAX_SUM; i++)
        if (rows[i].ok && rows[i].op == XS_TP_MLP)
            v[n++] = rows[i].unf.med / rows[i].shp.med;
    if (!n)
        return;
    const double g = xs_geomean(v, (size_t)n), mx = xs_max(v, (size_t)n);
    xs_bench_report_note(rep, "summary: mlp unfused/shaped geomean %.3f (target 1.5: %s), max "
                         "%.3f (target 1.75: %s)", g, g >= 1.5 ? "MET" : "NOT MET", mx,
                         mx >= 1.75 ? "MET" : "NOT MET");
}

/* auto and tuned against the other variants, near the bound, and against the overlapped
 * pipeline (xs_auto_summarize): one line each, met or NOT met. */
static void auto_lines(xs_bench_report *rep, const tpb_row *rows, int nrows)
{
    static double a[TPB_MAX_SUM], t[TPB_MAX_SUM], b[TPB_MAX_SUM], o[TPB_MAX_SUM],
        cc[TPB_MAX_SUM], bd[TPB_MAX_SUM];
    int k = 0;
    for (int i = 0; i < nrows && k < TPB_MAX_SUM; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ok)
            continue;
        a[k] = r->auto_us, t[k] = r->tuned_us, b[k] = r->best_other_us, o[k] = r->ovl.med;
        cc[k] = r->comm_over_compute, bd[k++] = r->bound_us;
    }
    xs_auto_sum s;
    char l[4][200];
    xs_auto_summarize(a, t, b, o, cc, bd, k, &s);
    xs_auto_sum_lines(&s, l);
    for (int i = 0; i < 4; i++)
        xs_bench_report_note(rep, "summary: %s", l[i]);
}

void tpb_summary(xs_bench_report *rep, const tpb_row *rows, int nrows)
{
    int nok = 0, nran = 0, ntimed = 0, nge = 0, nrs = 0, nrs10 = 0, nrsf10 = 0, nagree = 0;
    int nstream = 0;
    double worst_rs = 0, worst_rsf = 0, worst_ge = INFINITY;
    double perr[TPB_MAX_SUM];
    int npe = 0;
    for (int i = 0; i < nrows; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ran)
            continue;
        nran++;
        nok += r->verified;
        if (!r->ok)
            continue;
        ntimed++;
        /* within noise: the shaped median no slower than the naive one by more than the larger
         * of the two spreads */
        const double noise = fmax(r->nai.max - r->nai.min, r->shp.max - r->shp.min);
        nge += r->shp.med <= r->nai.med + noise;
        worst_ge = fmin(worst_ge, r->nai.med / r->shp.med);
        if (r->op == XS_TP_GEMM_RS) {
            nrs++;
            nrs10 += r->shp.med <= 1.10 * r->bound_us;
            nrsf10 += r->shp.med <= 1.10 * r->floor_us;
            worst_rs = fmax(worst_rs, r->shp.med / r->bound_us);
            worst_rsf = fmax(worst_rsf, r->shp.med / r->floor_us);
        }
        /* ring orders stream on the mma engine; sm90 runs them stored */
        nstream += strstr(r->cand, "stream") != NULL ||
                   (strstr(r->cand, "ring") != NULL && xs_tp_engine_streams(r->engine));
        nagree += r->model_rank == 1;
        if (npe < TPB_MAX_SUM && r->shp.med > 0)
            perr[npe++] = fabs(r->shp_pred - r->shp.med) / r->shp.med * 100;
    }
    xs_bench_report_note(rep, "summary: %d configurations run, %d verified, %d timed", nran, nok,
                         ntimed);
    ratio_line(rep, "all", rows, nrows, -1, 0);
    ratio_line(rep, "all", rows, nrows, -1, 1);
    ratio_line(rep, "all", rows, nrows, -1, 2);
    for (int op = 0; op < XS_TP_NOPS; op++) {
        ratio_line(rep, xs_tp_op_name((xs_tp_op)op), rows, nrows, op, 0);
        ratio_line(rep, xs_tp_op_name((xs_tp_op)op), rows, nrows, op, 1);
        ratio_line(rep, xs_tp_op_name((xs_tp_op)op), rows, nrows, op, 2);
    }
    if (ntimed)
        xs_bench_report_note(rep, "summary: shaped >= naive within noise in %d of %d rows (worst "
                             "naive/shaped %.3f)", nge, ntimed, worst_ge);
    if (nrs) {
        xs_bench_report_note(rep, "summary: gemm_rs shaped within 10%% of bound_us in %d of %d "
                             "rows (worst %.3f x bound)", nrs10, nrs, worst_rs);
        xs_bench_report_note(rep, "summary: gemm_rs shaped within 10%% of floor_us in %d of %d "
                             "rows (worst %.3f x floor)", nrsf10, nrs, worst_rsf);
    }
    for (int v = 0; v < TPB_MAX_COUR; v++)
        cour_lines(rep, rows, nrows, v);
    choice_line(rep, rows, nrows, ntimed);
    if (ntimed)
        xs_bench_report_note(rep, "summary: shaped order streams its stores in %d of %d rows",
                             nstream, ntimed);
    mlp_line(rep, rows, nrows);
    if (npe)
        xs_bench_report_note(rep, "summary: model picked the measured best order in %d of %d "
                             "rows; shaped prediction error median %.1f%%, max %.1f%%", nagree,
                             ntimed, xs_median(perr, (size_t)npe), xs_max(perr, (size_t)npe));
    auto_lines(rep, rows, nrows);
}
