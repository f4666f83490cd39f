// SPDX-License-Identifier: Apache-2.0
/*
 * up_report.cu - the report of `xstage bench up` (up.cu runs it): the column table that the
 * harness writes as the human table, CSV and JSON, the bench's header notes, and the summary of
 * the sweep (docs/UP.md "Current figures"; docs/METRICS.md defines the columns).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "up/up.h"
#include "up_bench.h"
#include "xstage_overlap.h"
#include "xstage_trace.h"

/* ---- columns -------------------------------------------------------------------------------- */

/* A stat's spread, % of its median (arg = offsetof the stat in the row). */
static double up_spread(const void *row, int off)
{
    xs_bench_stat s;
    memcpy(&s, (const char *)row + off, sizeof s);
    return xs_bench_spread_pct(&s);
}

#define UP_COL(name, unit, fmt, kind, field, flags)                                          \
    {name, unit, fmt, kind, offsetof(up_row, field), NULL, NULL, 0, 0, flags}
#define UP_SPREAD(name, stat)                                                                 \
    {name, "%", "%.1f", XS_COL_DOUBLE, 0, up_spread, NULL, (int)offsetof(up_row, stat), 0, 0}
#define F XS_COL_FILE

/* A per-tile stall column (xs_up_stall field f of the row): counts as they are, ns as us; NAN
 * where the point was not scored. */
static double up_stall_col(const void *row, int arg)
{
    const up_row *r = (const up_row *)row;
    if (!r->stall_ok)
        return NAN;
    const char *p = (const char *)&r->stall + (arg >> 1);
    if (arg & 1) {
        int v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    double v;
    memcpy(&v, p, sizeof v);
    return v / 1e3;
}
#define UP_STALL_IS_INT(f) (sizeof(((xs_up_stall *)0)->f) == sizeof(int))
#define UP_STALL(name, f)                                                                     \
    {name, UP_STALL_IS_INT(f) ? "" : "us", UP_STALL_IS_INT(f) ? "%.0f" : "%.3f", XS_COL_DOUBLE, \
     0, up_stall_col, NULL, (int)(offsetof(xs_up_stall, f) * 2 + UP_STALL_IS_INT(f)), 0, F}

/* The CSV keeps the names and formats of the bench's earlier writer; the table shows the
 * columns without F (the headline times with their spread, the plan and the verdict). */
const xs_bench_col up_cols[] = {
    UP_COL("seq", "", "%d", XS_COL_INT, seq, 0),
    UP_COL("heads", "", "%d", XS_COL_INT, heads, 0),
    UP_COL("head_dim", "", "%d", XS_COL_INT, head_dim, F),
    UP_COL("causal", "", "%d", XS_COL_INT, causal, 0),
    UP_COL("peers", "", "%d", XS_COL_INT, peers, 0),
    UP_COL("grid", "", "%d", XS_COL_INT, grid, F),
    UP_COL("tiles", "", "%d", XS_COL_INT, tiles, F),
    UP_COL("comm_mb", "MB", "%.4f", XS_COL_DOUBLE, comm_mb, 0),
    UP_COL("fa_us", "us", "%.2f", XS_COL_DOUBLE, fa.med, 0),
    UP_SPREAD("fa_us_spread", fa),
    UP_COL("fa_min_us", "us", "%.2f", XS_COL_DOUBLE, fa.min, F),
    UP_COL("fa_max_us", "us", "%.2f", XS_COL_DOUBLE, fa.max, F),
    UP_COL("fa_evt_us", "us", "%.2f", XS_COL_DOUBLE, fa_evt_us, F),
    UP_COL("fa_tflops", "TFLOP/s", "%.2f", XS_COL_DOUBLE, fa_tflops, 0),
    UP_COL("copy_us", "us", "%.2f", XS_COL_DOUBLE, copy_us, F),
    UP_COL("serial_us", "us", "%.2f", XS_COL_DOUBLE, serial.med, 0),
    UP_SPREAD("serial_us_spread", serial),
    UP_COL("serial_min_us", "us", "%.2f", XS_COL_DOUBLE, serial.min, F),
    UP_COL("serial_max_us", "us", "%.2f", XS_COL_DOUBLE, serial.max, F),
    UP_COL("pb_us", "us", "%.2f", XS_COL_DOUBLE, pb.med, 0),
    UP_COL("pb_min_us", "us", "%.2f", XS_COL_DOUBLE, pb.min, F),
    UP_COL("pb_max_us", "us", "%.2f", XS_COL_DOUBLE, pb.max, F),
    UP_COL("pb_pred_us", "us", "%.2f", XS_COL_DOUBLE, pb_pred_us, F),
    UP_COL("pb_vis_us", "us", "%.2f", XS_COL_DOUBLE, pb_vis_us, F),
    UP_COL("criterion_ok", "", "%d", XS_COL_INT, criterion_ok, F),
    UP_COL("split", "", "%d", XS_COL_INT, split, F),
    {"plan", "", "%s", XS_COL_CHARS, offsetof(up_row, plan), NULL, NULL, 0, 6, 0},
    UP_COL("fused_us", "us", "%.2f", XS_COL_DOUBLE, fused.med, 0),
    UP_SPREAD("fused_us_spread", fused),
    UP_COL("fused_min_us", "us", "%.2f", XS_COL_DOUBLE, fused.min, F),
    UP_COL("fused_max_us", "us", "%.2f", XS_COL_DOUBLE, fused.max, F),
    UP_COL("fused_vis_us", "us", "%.2f", XS_COL_DOUBLE, fused_vis_us, F),
    UP_COL("pred_us", "us", "%.2f", XS_COL_DOUBLE, pred_us, 0),
    UP_COL("pred_err_pct", "%", "%.2f", XS_COL_DOUBLE, pred_err_pct, 0),
    UP_COL("store_us", "us", "%.3f", XS_COL_DOUBLE, store_us, F),
    UP_COL("hidden_pct", "%", "%.2f", XS_COL_DOUBLE, hidden_pct, 0),
    UP_COL("speedup", "x", "%.4f", XS_COL_DOUBLE, speedup, 0),
    UP_COL("max_err", "", "%.3g", XS_COL_DOUBLE, max_err, F),
    UP_COL("verified", "", NULL, XS_COL_BOOL, verified, 0),
    UP_COL("order", "", "%d", XS_COL_INT, order, F),
    UP_COL("comm_ratio", "x", "%.4f", XS_COL_DOUBLE, comm_ratio, F),
    UP_COL("crit_peak_mb", "MB", "%.4f", XS_COL_DOUBLE, crit_peak_mb, F),
    UP_COL("crit_sync_mb", "MB", "%.4f", XS_COL_DOUBLE, crit_sync_mb, F),
    UP_COL("crit_keff", "", "%d", XS_COL_INT, crit_keff, F),
    UP_COL("slice_us", "us", "%.2f", XS_COL_DOUBLE, slice_us, F),
    UP_COL("link_us", "us", "%.2f", XS_COL_DOUBLE, link_us, F),
    /* piggyback's per-tile stall against fa where it matters (docs/UP.md "Per-tile stall") */
    UP_STALL("stall_tiles", issue.tiles), UP_STALL("stall_err_med_us", issue.err_med_ns),
    UP_STALL("stalled_tiles", issue.stalled),
    UP_STALL("stalled_err_med_us", issue.stalled_err_med_ns),
    UP_STALL("stalled_zero_err_med_us", issue.stalled_zero_med_ns),
    UP_STALL("mma_stall_tiles", mma.tiles), UP_STALL("mma_stall_err_med_us", mma.err_med_ns),
    UP_STALL("mma_stalled_tiles", mma.stalled),
    UP_STALL("mma_stalled_err_med_us", mma.stalled_err_med_ns),
    UP_STALL("mma_stalled_zero_err_med_us", mma.stalled_zero_med_ns),
    UP_COL("hidden_lo_pct", "%", "%.2f", XS_COL_DOUBLE, hidden_lo, F),
    UP_COL("hidden_hi_pct", "%", "%.2f", XS_COL_DOUBLE, hidden_hi, F),
    UP_COL("couriers", "", "%d", XS_COL_INT, couriers, F),
    UP_COL("courier_pace", "B/ns", "%.3f", XS_COL_DOUBLE, courier_pace, F),
    UP_COL("kv_split", "", "%d", XS_COL_INT, kv, F),
    UP_COL("crit_held_us", "us", "%.3f", XS_COL_DOUBLE, crit_held_us, F),
    UP_COL("crit_fluid_ok", "", "%d", XS_COL_INT, crit_fluid_ok, F),
    /* the sender-visible times (never the headline), the overlapped pipeline and the columns
     * over every variant (docs/METRICS.md) */
    UP_COL("fa_sent_us", "us", "%.2f", XS_COL_DOUBLE, fa_sent_us, F),
    UP_COL("serial_sent_us", "us", "%.2f", XS_COL_DOUBLE, serial_sent_us, F),
    UP_COL("pb_sent_us", "us", "%.2f", XS_COL_DOUBLE, pb_sent_us, F),
    UP_COL("fused_sent_us", "us", "%.2f", XS_COL_DOUBLE, fused_sent_us, F),
    UP_COL("overlapped_us", "us", "%.2f", XS_COL_DOUBLE, ovl.med, 0),
    UP_SPREAD("overlapped_us_spread", ovl),
    UP_COL("overlapped_min_us", "us", "%.2f", XS_COL_DOUBLE, ovl.min, F),
    UP_COL("overlapped_max_us", "us", "%.2f", XS_COL_DOUBLE, ovl.max, F),
    UP_COL("overlapped_chunks", "", "%d", XS_COL_INT, ovl_chunks, 0),
    UP_COL("overlapped_sent_us", "us", "%.2f", XS_COL_DOUBLE, ovl_sent_us, F),
    UP_COL("best_other_us", "us", "%.2f", XS_COL_DOUBLE, best_other_us, F),
    {"best_other", "", "%s", XS_COL_CHARS, offsetof(up_row, best_other), NULL, NULL, 0, 10, F},
    UP_COL("bound_us", "us", "%.2f", XS_COL_DOUBLE, bound_us, F),
    UP_COL("comm_over_compute", "x", "%.4f", XS_COL_DOUBLE, comm_over_compute, F),
    UP_COL("overlapped_pred_us", "us", "%.2f", XS_COL_DOUBLE, ovl_pred_us, F),
    UP_COL("overlapped_model_chunks", "", "%d", XS_COL_INT, ovl_model_chunks, F),
    /* auto (the model alone) and tuned (pilots by the timing rule) over every variant */
    UP_COL("auto_us", "us", "%.2f", XS_COL_DOUBLE, auto_us, 0),
    UP_COL("auto_pred_us", "us", "%.2f", XS_COL_DOUBLE, auto_pred_us, F),
    {"auto", "", "%s", XS_COL_CHARS, offsetof(up_row, auto_name), NULL, NULL, 0, 16, F},
    UP_COL("tuned_us", "us", "%.2f", XS_COL_DOUBLE, tuned_us, 0),
    {"tuned", "", "%s", XS_COL_CHARS, offsetof(up_row, tuned_name), NULL, NULL, 0, 16, F}};
#undef F
const int up_ncols = (int)(sizeof up_cols / sizeof up_cols[0]);
const xs_bench_col up_grid_cols[2] = {
    {"grid_row", "", "%d", XS_COL_INT, offsetof(up_row, grid_row), NULL, NULL, 0, 0, 0},
    {"status", "", "%s", XS_COL_CHARS, offsetof(up_row, status), NULL, NULL, 0, 0, 0}};

/* ---- summary -------------------------------------------------------------------------------- */

/* "Communication and compute of the same size" (docs/UP.md): the serial all-to-all takes between
 * half and twice the attention, comm_ratio = copy_us / fa_us in [UP_SAME_LO, UP_SAME_HI], both
 * measured in the row. The acceptance row of a (heads, causal, peers) group is its shortest
 * swept sequence in that band (4096 included when swept); the speedup target applies there.
 * Next to it the summary prints the bound serial/fused can reach with every byte hidden,
 * 1 + min(r, 1/r) (r = comm_ratio: 1.5x at r = 0.5, 2x at r = 1), and, as a second reading, the
 * same rule over the issue's own sequences (>= UP_ISSUE_SEQ0) only. */
#define UP_ISSUE_SEQ0 8192
#define UP_SAME_LO 0.5
#define UP_SAME_HI 2.0
#define UP_SPEEDUP_TARGET 1.4
#define UP_HIDDEN_TARGET 90.0
#define UP_PRED_TOL_PCT 10.0

static int in_band(const up_row *r)
{
    return r->comm_ratio >= UP_SAME_LO && r->comm_ratio <= UP_SAME_HI;
}

/* The speedup target's rows among sequences >= seq0: per (heads, causal, peers) group the
 * shortest in the band. Notes one line per row when tag is non-NULL; returns the count and
 * *met those at or above the target. */
static int same_size_rows(xs_bench_report *rep, const up_row *rows, int nrows, int seq0,
                          const char *tag, int *met)
{
    int n = 0;
    *met = 0;
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        if (r->seq < seq0 || !in_band(r))
            continue;
        int shortest = 1;
        for (int j = 0; j < nrows; j++) {
            const up_row *q = &rows[j];
            if (q->heads == r->heads && q->causal == r->causal && q->peers == r->peers &&
                q->seq >= seq0 && q->seq < r->seq && in_band(q))
                shortest = 0;
        }
        if (!shortest)
            continue;
        n++;
        *met += r->speedup >= UP_SPEEDUP_TARGET;
        if (tag)
            xs_bench_report_note(rep, "summary: %s: seq %d heads %d causal %d peers %d: "
                                 "comm/compute %.2f (bound %.2fx), serial/fused %.3fx (%s), "
                                 "hidden %.1f%% (%.1f..%.1f), plan %s", tag, r->seq, r->heads,
                                 r->causal, r->peers, r->comm_ratio,
                                 1.0 + fmin(r->comm_ratio, 1.0 / r->comm_ratio), r->speedup,
                                 r->speedup >= UP_SPEEDUP_TARGET ? "met" : "below 1.4x",
                                 r->hidden_pct, r->hidden_lo, r->hidden_hi, r->plan);
    }
    return n;
}

/* Piggyback's per-tile stall where it matters, per side: over the scored rows with stalled
 * tiles, the median of each row's model and zero-predictor medians (as bench ep's "stalled
 * tiles" over its runs); target: model <= half of zero. */
static void summary_stall(xs_bench_report *rep, const up_row *rows, int nrows)
{
    double *m = (double *)malloc(sizeof(double) * (size_t)(2 * nrows + 1));
    if (!m)
        return;
    for (int side = 0; side < 2; side++) {
        int k = 0, tiles = 0;
        for (int i = 0; i < nrows; i++) {
            const xs_stall_score *sc = side ? &rows[i].stall.mma : &rows[i].stall.issue;
            if (rows[i].done && rows[i].stall_ok && sc->stalled > 0) {
                m[k] = sc->stalled_err_med_ns / 1e3;
                m[nrows + k] = sc->stalled_zero_med_ns / 1e3;
                tiles += sc->stalled;
                k++;
            }
        }
        if (k) {
            const double mm = xs_median(m, (size_t)k), zz = xs_median(m + nrows, (size_t)k);
            xs_bench_report_note(rep, "summary: piggyback per-tile stall, %s side, tiles stalled "
                                 "> %.1f us (%d tiles, %d rows): model median |error| %.3f us, "
                                 "zero predictor %.3f us: %s (target: model <= half of zero)",
                                 side ? "MMA" : "issue", XS_UP_STALLED_NS / 1e3, tiles, k, mm,
                                 zz, mm <= 0.5 * zz ? "met" : "NOT met");
        } else {
            xs_bench_report_note(rep, "summary: piggyback per-tile stall, %s side: no tile "
                                 "stalled > %.1f us", side ? "MMA" : "issue",
                                 XS_UP_STALLED_NS / 1e3);
        }
    }
    free(m);
}

/* ---- per-tile stamps ------------------------------------------------------------------------ */

xs_status up_tiles_open(up_tiles *t, int sms, int max_tiles)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < 2; i++) {
        t->cta[i] = (uint64_t *)calloc((size_t)sms * 3, sizeof(uint64_t));
        t->work[i] = (uint64_t *)calloc((size_t)max_tiles, sizeof(uint64_t));
        t->end[i] = (uint64_t *)calloc((size_t)max_tiles, sizeof(uint64_t));
        if (!t->cta[i] || !t->work[i] || !t->end[i]) {
            up_tiles_close(t);
            return xs_seterr(XS_ENOMEM, "bench up: out of host memory for %d tiles' stamps",
                             max_tiles);
        }
    }
    return XS_OK;
}

void up_tiles_close(up_tiles *t)
{
    for (int i = 0; i < 2; i++)
        free(t->cta[i]), free(t->work[i]), free(t->end[i]);
    memset(t, 0, sizeof *t);
}

xs_status up_tiles_point(up_tiles *t, const xs_profile *prof, const xs_up_cfg *c,
                         const char *trace_dir, const xs_bench_env *e, int real)
{
    const xs_up_stamps fa = {t->cta[0], t->work[0], t->end[0]};
    const xs_up_stamps pb = {t->cta[1], t->work[1], t->end[1]};
    xs_profile pm;
    xs_up_model_profile(prof, 0, &pm);
    t->row->stall_ok = 0;
    XS_TRY(xs_up_tile_stall(&pm, c, &fa, &pb, &t->row->stall, NULL));
    t->row->stall_ok = 1;
    if (!trace_dir || e->me != 0)
        return XS_OK;
    if (mkdir(trace_dir, 0777) != 0 && errno != EEXIST)
        return xs_seterr(XS_EIO, "--trace %s: %s", trace_dir, strerror(errno));
    char path[4096], dev[300], tgt[40], ker[200], np[40];
    const int l = snprintf(path, sizeof path, "%s/up_s%d_h%d_c%d_p%d_pb.csv", trace_dir, c->seq,
                           c->heads, c->causal, c->peers);
    if (l < 0 || (size_t)l >= sizeof path)
        return xs_seterr(XS_EINVAL, "--trace %s: path too long", trace_dir);
    xs_trace_record *rec = NULL;
    size_t n = 0;
    XS_TRY(xs_up_trace_records(c, &pb, 1, &rec, &n));
    snprintf(dev, sizeof dev, "device=%s", e->gi.name);
    snprintf(tgt, sizeof tgt, "target=%s", real ? "peer" : prof->path[0] ? prof->path : "host");
    snprintf(ker, sizeof ker, "kernel=xstage bench up seq %d heads %d causal %d peers %d "
             "piggyback (the last timed run; sm = CTA)", c->seq, c->heads, c->causal, c->peers);
    snprintf(np, sizeof np, "producers=%d", c->grid);
    const char *meta[] = {dev, tgt, ker, np, "clock=globaltimer", NULL};
    const xs_status st = xs_trace_write(path, rec, n, 0, meta);
    free(rec);
    return st;
}

/* The criterion (which = 0) or the fluid test (1) against the piggyback kernel they speak of:
 * how much of the all-to-all the measured pb run hides where it holds and where it fails. */
static void summary_criterion(xs_bench_report *rep, const up_row *rows, int nrows, int which)
{
    const size_t cap = (size_t)(nrows > 0 ? nrows : 1);
    double *h[2] = {(double *)malloc(cap * sizeof(double)), (double *)malloc(cap * sizeof(double))};
    int nh[2] = {0, 0};
    if (!h[0] || !h[1]) {
        free(h[0]), free(h[1]);
        return;
    }
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        const int ok = which ? r->crit_fluid_ok : r->criterion_ok;
        const double d = r->serial.med - r->fa.med;
        if (ok >= 0 && d > 0 && isfinite(r->pb.med))
            h[ok][nh[ok]++] = 100.0 * (r->serial.med - r->pb.med) / d;
    }
    xs_bench_report_note(rep, "summary: %s: piggyback (pb) hides median %.1f%% of the all-to-all "
                         "in the %d rows where it holds, %.1f%% in the %d where it fails",
                         which ? "fluid criterion" : "criterion",
                         nh[1] ? xs_median(h[1], (size_t)nh[1]) : NAN, nh[1],
                         nh[0] ? xs_median(h[0], (size_t)nh[0]) : NAN, nh[0]);
    free(h[0]), free(h[1]);
}

/* The plans with couriers (kind 0) or a KV split (1): how many, and each one's figures. */
static void summary_plans(xs_bench_report *rep, const up_row *rows, int nrows, int kind)
{
    int cnt = 0;
    for (int i = 0; i < nrows; i++)
        cnt += kind ? rows[i].kv > 0 : rows[i].couriers > 0;
    xs_bench_report_note(rep, "summary: %s in %d of %d rows' plans", kind ? "KV split"
                         : "couriers", cnt, nrows);
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        if (kind ? r->kv <= 0 : r->couriers <= 0)
            continue;
        char pace[32] = "";
        if (!kind)
            snprintf(pace, sizeof pace, " at %.1f B/ns", r->courier_pace);
        xs_bench_report_note(rep, "summary:   %s%s: seq %d heads %d causal %d peers %d: fused "
                             "%.1f us (pred %.1f), fa %.1f, piggyback %.1f, serial %.1f: hidden "
                             "%.1f%% (%.1f..%.1f), serial/fused %.3fx, comm/compute %.2f",
                             r->plan, pace, r->seq, r->heads, r->causal, r->peers,
                             r->fused.med, r->pred_us, r->fa.med, r->pb.med, r->serial.med,
                             r->hidden_pct, r->hidden_lo, r->hidden_hi, r->speedup,
                             r->comm_ratio);
    }
}

void up_summary(xs_bench_report *rep, const up_row *rows, int nrows)
{
    double *sp = (double *)calloc((size_t)(nrows > 0 ? nrows : 1), sizeof(double));
    int nok = 0, ncrit = 0, ncrit90 = 0, nresh = 0, nresh90 = 0, npb = 0, nerr = 0, npred = 0;
    int nacc = 0, nacc_met = 0;
    double worst_err = 0, min_hid_crit = INFINITY, min_hid_resh = INFINITY;
    double min_tf = INFINITY, max_tf = 0;
    if (!sp)
        return;
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        sp[i] = r->speedup;
        nok += r->verified;
        const int reshaped = r->split > 0 || r->order == XS_ATTN_ORDER_EARLY || r->couriers > 0;
        if (r->criterion_ok == 1) { /* the plan's hiding, whichever member it chose */
            ncrit++;
            ncrit90 += r->hidden_pct >= UP_HIDDEN_TARGET;
            min_hid_crit = fmin(min_hid_crit, r->hidden_pct);
            npb += !reshaped;
        } else {
            nresh++;
            nresh90 += r->hidden_pct >= UP_HIDDEN_TARGET;
            min_hid_resh = fmin(min_hid_resh, r->hidden_pct);
        }
        if (isfinite(r->pred_err_pct)) {
            npred++;
            nerr += fabs(r->pred_err_pct) <= UP_PRED_TOL_PCT;
            worst_err = fmax(worst_err, fabs(r->pred_err_pct));
        }
        min_tf = fmin(min_tf, r->fa_tflops);
        max_tf = fmax(max_tf, r->fa_tflops);
    }
    xs_bench_report_note(rep, "summary: %d rows, %d verified; serial/fused geomean %.3fx", nrows,
                         nok, xs_geomean(sp, (size_t)nrows));
    free(sp);
    /* the speedup target: per group, the shortest swept sequence in the band */
    nacc = same_size_rows(rep, rows, nrows, 0, "same size", &nacc_met);
    xs_bench_report_note(rep, "summary: serial/fused >= %.1fx at the shortest sequence where "
                         "comm/compute is in [%.1f, %.1f]: %d of %d rows", UP_SPEEDUP_TARGET,
                         UP_SAME_LO, UP_SAME_HI, nacc_met, nacc);
    int met2 = 0, n2 = same_size_rows(rep, rows, nrows, UP_ISSUE_SEQ0, NULL, &met2);
    xs_bench_report_note(rep, "summary: the same rule over the issue's sequences only (>= %d): "
                         "%d of %d rows (groups with no row in the band there have no target)",
                         UP_ISSUE_SEQ0, met2, n2);
    xs_bench_report_note(rep, "summary: criterion holds (per-CTA piggyback, fa's tile times): "
                         "hidden >= 90%% in %d of %d rows (min %.1f%%; plan piggyback in %d of "
                         "them)%s", ncrit90, ncrit, ncrit ? min_hid_crit : NAN, npb,
                         ncrit ? "" : ": the criterion holds in no row");
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        if (r->criterion_ok == 1 && !(r->hidden_pct >= UP_HIDDEN_TARGET))
            xs_bench_report_note(rep, "summary:   hidden %.1f%% (%.1f..%.1f over repetitions): "
                                 "seq %d heads %d causal %d peers %d (plan %s, comm/compute "
                                 "%.2f; fused - fa: slices %.1f us + link %.1f us; piggyback "
                                 "%.1f us over fa)", r->hidden_pct, r->hidden_lo, r->hidden_hi,
                                 r->seq, r->heads, r->causal, r->peers, r->plan,
                                 r->comm_ratio, r->slice_us, r->link_us, r->pb.med - r->fa.med);
    }
    xs_bench_report_note(rep, "summary: criterion fails: hidden >= 90%% in %d of %d rows (min "
                         "%.1f%%)", nresh90, nresh, nresh ? min_hid_resh : NAN);
    summary_stall(rep, rows, nrows);
    summary_criterion(rep, rows, nrows, 0);
    summary_criterion(rep, rows, nrows, 1);
    {
        /* the overlapped pipeline against the fused kernel and serial, rows where it ran */
        double *x = (double *)calloc((size_t)(nrows > 0 ? nrows : 1), 2 * sizeof(double));
        int nx = 0;
        for (int i = 0; x && i < nrows; i++)
            if (rows[i].ovl_chunks > 0 && isfinite(rows[i].ovl.med)) {
                x[nx] = rows[i].ovl.med / rows[i].fused.med;
                x[nrows + nx++] = rows[i].serial.med / rows[i].ovl.med;
            }
        if (nx)
            xs_bench_report_note(rep, "summary: overlapped/fused geomean %.3f (min %.3f, max "
                                 "%.3f), serial/overlapped geomean %.3f, over %d rows",
                                 xs_geomean(x, (size_t)nx), xs_min(x, (size_t)nx),
                                 xs_max(x, (size_t)nx), xs_geomean(x + nrows, (size_t)nx), nx);
        free(x);
    }
    {
        /* auto and tuned against every other variant, the overlapped pipeline and the bound */
        const size_t m = (size_t)(nrows > 0 ? nrows : 1);
        double *x = (double *)calloc(m, 6 * sizeof(double));
        int nx = 0;
        for (int i = 0; x && i < nrows; i++)
            if (rows[i].done) {
                const up_row *r = &rows[i];
                x[nx] = r->auto_us, x[m + nx] = r->tuned_us, x[2 * m + nx] = r->best_other_us;
                x[3 * m + nx] = r->ovl_chunks > 0 ? r->ovl.med : NAN;
                x[4 * m + nx] = r->comm_over_compute, x[5 * m + nx++] = r->bound_us;
            }
        xs_auto_sum su;
        char l[4][200];
        if (x) {
            xs_auto_summarize(x, x + m, x + 2 * m, x + 3 * m, x + 4 * m, x + 5 * m, nx, &su);
            xs_auto_sum_lines(&su, l);
            for (int i = 0; i < 4; i++)
                xs_bench_report_note(rep, "summary: %s", l[i]);
        }
        free(x);
    }
    xs_bench_report_note(rep, "summary: planner's predicted fused time (sender-visible) within %.0f%% in %d of %d "
                         "rows (worst %.1f%%)", UP_PRED_TOL_PCT, nerr, npred, worst_err);
    for (int i = 0; i < nrows; i++) {
        const up_row *r = &rows[i];
        if (isfinite(r->pred_err_pct) && fabs(r->pred_err_pct) > UP_PRED_TOL_PCT)
            xs_bench_report_note(rep, "summary:   off by %+.1f%%: seq %d heads %d causal %d "
                                 "peers %d (plan %s, comm/compute %.2f)", r->pred_err_pct,
                                 r->seq, r->heads, r->causal, r->peers, r->plan,
                                 r->comm_ratio);
    }
    summary_plans(rep, rows, nrows, 0);
    summary_plans(rep, rows, nrows, 1);
    xs_bench_report_note(rep, "summary: attention %.1f..%.1f TFLOP/s (scripts/sdpa_ref.py: the "
                         "reference)", min_tf, max_tf);
}

void up_header_notes(xs_bench_report *rep, const xs_bench_env *e, const up_opts *o,
                     const xs_profile *prof, const char *profile_file)
{
    if (e->real)
        xs_bench_report_note(rep, "ulysses group: P = %d real peers: every rank runs the same "
                             "problem, shard r of its output to GPU (me + r) %% P, into the "
                             "source's region and flag slot of that GPU's NCCL symmetric window "
                             "(LSA pointers); serial: attention, then one NCCL group of "
                             "send/recv; every rank verifies every byte and signal its window "
                             "received", e->nranks);
    xs_bench_report_note(rep, "profile: %s R %.4g B/ns, Q %.6g B, Q/producer %.6g B, queue %.6g "
                         "B, reserve %.6g B, skew %.3g, chunk %.6g B, r %.4g B/ns, o %.4g ns%s; "
                         "Q(%d) = %.6g B", profile_file ? profile_file : "embedded",
                         prof->drain_bytes_per_ns, prof->capacity_bytes,
                         prof->capacity_bytes_per_producer, prof->queue_bytes_per_producer,
                         prof->reserve_bytes_per_producer, prof->arbitration_skew,
                         prof->chunk_bytes, prof->issue_bytes_per_ns, prof->issue_overhead_ns,
                         prof->provisional ? " (provisional)" : "", e->gi.sm_count,
                         xs_capacity(prof, e->gi.sm_count));
    if (o->slice_ns > 0)
        xs_bench_report_note(rep, "model: %.4g ns per output slice of the busiest CTA "
                             "(--slice-ns: the kernel's own cost of a split)", o->slice_ns);
    const double ld = prof->drain_under_load_bytes_per_ns;
    if (ld > 0)
        xs_bench_report_note(rep, "model: the fused kernel's stores drain at %.4g B/ns (the "
                             "profile's drain_under_load_bytes_per_ns: stores under L2 load), "
                             "%.3f x R", ld, ld / prof->drain_bytes_per_ns);
    xs_bench_report_note(rep, "layout [seq, heads, 128] bf16; BLOCK_M %d, BLOCK_N %d, %d warps, "
                         "persistent grid = min(tiles, %d SMs); tolerance %.0e + %.0e|ref|",
                         XS_ATTN_BM, XS_ATTN_BN, XS_ATTN_WARPS, e->gi.sm_count, UP_ATOL,
                         UP_RTOL);
    if (o->couriers != 0) {
        char who[64];
        if (o->couriers < 0)
            snprintf(who, sizeof who, "C = 4 and 8 in the planner's family");
        else
            snprintf(who, sizeof who, "C = %d forced", o->couriers);
        xs_bench_report_note(rep, "couriers: %s, paced at %.2f x R = %.1f B/ns in all (0: "
                             "unpaced); staged in a buffer apart from O (docs/UP.md "
                             "\"Couriers\")", who, o->courier_pace,
                             o->courier_pace * prof->drain_bytes_per_ns);
    }
    xs_bench_report_note(rep, "times: median of %d repetitions after %d warm-up, one of each "
                         "variant per repetition (ls, fa, serial, pb, fused, overlapped), L2 "
                         "flushed before each; *_us: CUDA events around the whole operation "
                         "until every byte is at its destination (kernels: their completion; "
                         "copies: their completion); *_sent_us: sender-visible (in-kernel span "
                         "to the last store issued, serial plus its copies' event time); "
                         "pred_us and pred_err_pct on the sender-visible time; spread = (max - "
                         "min) / median", e->c->b.iters, e->c->b.warmup);
    if (!e->real)
        xs_bench_report_note(rep, "overlapped: the attention kernel per head chunk (inputs laid "
                             "out head-chunk-major before the runs) on the bench stream, each "
                             "finished chunk's all-to-all (one 2-D cudaMemcpyAsync per rank) "
                             "on a side stream after an event; head chunks searched over "
                             "{1,2,4,8,16} dividing the heads, 3 verified runs each, the "
                             "fastest median timed");
}

