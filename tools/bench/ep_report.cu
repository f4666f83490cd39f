// SPDX-License-Identifier: Apache-2.0
/*
 * ep_report.cu - the output of `xstage bench ep` (tools/bench/ep.cu): the column table the
 * harness writes as the table, CSV and JSON (one row per point), and the closing summary of a
 * sweep (ratios, how close auto came to the bound, the candidates' counts). docs/EP.md defines
 * every column.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_bench.h"
#include "xstage.h"
#include "xstage_overlap.h"

/* ---- rows -------------------------------------------------------------------------------- */

/* XS_COL_DOUBLE getter: t[num].med / t[den].med, arg = num * 16 + den */
static double ep_ratio(const void *row, int arg)
{
    const ep_row *r = (const ep_row *)row;
    return r->t[arg >> 4].med / r->t[arg & 15].med;
}

#define EP_F XS_COL_FILE
#define EP_R(f) offsetof(ep_row, f)
#define EP_D(name, unit, fmt, f, fl) {name, unit, fmt, XS_COL_DOUBLE, EP_R(f), 0, 0, 0, 0, fl}
#define EP_I(name, f, fl) {name, "", "%d", XS_COL_INT, EP_R(f), 0, 0, 0, 0, fl}
#define EP_S(name, f, fl) {name, "", "%s", XS_COL_STR, EP_R(f), 0, 0, 0, 0, fl}
/* a variant's timing (median, spread, min, max) and its 10 % / 90 % quantiles */
#define EP_T(name, v, fl) {name "_us", "us", "%.1f", XS_COL_STAT, EP_R(t[v]), 0, 0, 0, 0, fl}
#define EP_Q(name, v) EP_D(name "_p10", "us", "%.1f", t[v].p10, EP_F), \
                      EP_D(name "_p90", "us", "%.1f", t[v].p90, EP_F)
#define EP_X(name, a, b, fl) \
    {name, "x", "%.4f", XS_COL_DOUBLE, 0, ep_ratio, 0, (a) * 16 + (b), 0, fl}
/* a field in ns, printed in us */
#define EP_NS(name, fmt, f) \
    {name, "us", fmt, XS_COL_DOUBLE, 0, xs_bench_ns_as_us, 0, (int)EP_R(f), 0, EP_F}

/* The CSV's columns in its order (docs/EP.md); the table shows those without EP_F. */
const xs_bench_col ep_cols[] = {
    {"config", "", "%s", XS_COL_STR, EP_R(config), 0, 0, 0, 18, 0},
    {"routing", "", "%s", XS_COL_STR, EP_R(routing), 0, 0, 0, 8, 0}, EP_I("tokens", tokens, 0),
    EP_I("peers", peers, 0), EP_T("unfused", EP_UNFUSED, 0), EP_T("wave", EP_WAVE, 0),
    EP_T("interleaved", EP_INTER, 0), EP_T("auto", EP_AUTO, 0),
    EP_D("bound_us", "us", "%.1f", bound_us, 0),
    /* the overlapped unfused pipeline and the columns over every variant (docs/METRICS.md) */
    EP_T("overlapped", EP_OVERLAP, 0), EP_I("overlapped_chunks", ovl_chunks, 0),
    {"overlapped_gemm", "", "%s", XS_COL_CHARS, EP_R(ovl_form), 0, 0, 0, 0, EP_F},
    EP_D("best_other_us", "us", "%.1f", best_other_us, EP_F),
    {"best_other", "", "%s", XS_COL_CHARS, EP_R(best_other), 0, 0, 0, 0, EP_F},
    EP_D("tuned_us", "us", "%.1f", tuned_us, 0),
    {"tuned", "", "%s", XS_COL_CHARS, EP_R(tuned), 0, 0, 0, 0, EP_F},
    EP_D("comm_over_compute", "x", "%.4f", comm_over_compute, EP_F),
    {"verified", "", NULL, XS_COL_BOOL, EP_R(verified), 0, 0, 0, 0, 0},
    {"local_us", "us", "%.1f", XS_COL_STAT, EP_R(local), 0, 0, 0, 0, 0},
    {"local_interleaved_us", "us", "%.1f", XS_COL_STAT, EP_R(local_inter), 0, 0, 0, 0, EP_F},
    EP_D("compute_us", "us", "%.1f", compute_us, EP_F),
    EP_D("drain_us", "us", "%.1f", drain_us, EP_F),
    EP_D("cublas_gemm_us", "us", "%.1f", cublas_gemm_us, EP_F),
    EP_D("gemm_eff", "x", "%.3f", gemm_eff, 0), EP_I("criterion_met", criterion_ok, 0),
    EP_S("auto_schedule", auto_choice, EP_F),
    {"auto_plan", "", "%s", XS_COL_CHARS, EP_R(auto_plan), 0, 0, 0, 17, 0},
    EP_I("auto_lead", auto_lead, EP_F), EP_I("lead", lead, EP_F),
    EP_D("pred_wave_us", "us", "%.1f", pred_wave_us, EP_F),
    EP_D("pred_interleaved_us", "us", "%.1f", pred_inter_us, EP_F),
    EP_X("wave_over_interleaved", EP_WAVE, EP_INTER, 0),
    EP_X("wave_over_auto", EP_WAVE, EP_AUTO, 0),
    EP_Q("unfused", EP_UNFUSED), EP_Q("wave", EP_WAVE), EP_Q("interleaved", EP_INTER),
    EP_Q("auto", EP_AUTO),
    EP_I("stall_tiles", stall_wave.tiles, EP_F),
    EP_NS("stall_meas_med_us", "%.3f", stall_wave.meas_stall_med_ns),
    EP_NS("stall_pred_med_us", "%.3f", stall_wave.pred_stall_med_ns),
    {"stall_abs_err_med_us", "us", "%.3f", XS_COL_DOUBLE, 0, xs_bench_ns_as_us, 0,
     (int)EP_R(stall_wave.abs_err_med_ns), 0, 0},
    EP_NS("stall_abs_err_p90_us", "%.3f", stall_wave.abs_err_p90_ns),
    EP_NS("stall_abs_err_interleaved_us", "%.3f", stall_inter.abs_err_med_ns),
    EP_NS("stall_abs_err_auto_us", "%.3f", stall_auto.abs_err_med_ns),
    EP_D("local_span_us", "us", "%.3f", local_span_us, EP_F),
    EP_D("local_issue_bytes_per_ns", "B/ns", "%.1f", local_issue, EP_F),
    EP_I("rows", rows, EP_F), EP_D("remote_mb", "MB", "%.2f", remote_mb, EP_F),
    EP_D("max_row_rel_err", "", "%.3g", max_rel_err, EP_F),
    EP_I("criterion_reshaped", reshape_ok, EP_F), EP_I("auto_paced", auto_paced, EP_F),
    EP_D("pred_paced_us", "us", "%.1f", pred_paced_us, EP_F),
    EP_D("pred_auto_us", "us", "%.1f", pred_auto_us, EP_F),
    EP_D("auto_gate_med_us", "us", "%.3f", auto_gate_us, EP_F),
    EP_NS("stall_meas_med_interleaved_us", "%.3f", stall_inter.meas_stall_med_ns),
    EP_NS("stall_pred_med_interleaved_us", "%.3f", stall_inter.pred_stall_med_ns),
    EP_I("mma_stall_tiles", stall_wave.mma_tiles, EP_F),
    EP_NS("mma_stall_meas_med_us", "%.3f", stall_wave.mma_meas_med_ns),
    EP_NS("mma_stall_pred_med_us", "%.3f", stall_wave.mma_pred_med_ns),
    {"mma_stall_abs_err_med_us", "us", "%.3f", XS_COL_DOUBLE, 0, xs_bench_ns_as_us, 0,
     (int)EP_R(stall_wave.mma_abs_err_med_ns), 0, 0},
    EP_NS("mma_stall_abs_err_p90_us", "%.3f", stall_wave.mma_abs_err_p90_ns),
    EP_NS("mma_stall_abs_err_interleaved_us", "%.3f", stall_inter.mma_abs_err_med_ns),
    EP_NS("mma_stall_abs_err_auto_us", "%.3f", stall_auto.mma_abs_err_med_ns),
    EP_NS("mma_stall_meas_med_interleaved_us", "%.3f", stall_inter.mma_meas_med_ns),
    EP_NS("mma_stall_pred_med_interleaved_us", "%.3f", stall_inter.mma_pred_med_ns),
    EP_NS("blocked_pred_wave_us", "%.1f", stall_wave.blocked_ns),
    EP_NS("blocked_pred_interleaved_us", "%.1f", stall_inter.blocked_ns),
    EP_D("block_bytes", "B", "%.0f", block_bytes, EP_F),
    EP_D("block_speed", "", "%.3f", block_speed, EP_F),
    EP_D("pace_bytes", "B", "%.0f", pace_bytes, EP_F),
    EP_D("point_s", "s", "%.3f", point_s, EP_F), EP_D("model_s", "s", "%.3f", model_s, EP_F),
    EP_D("fill_us", "us", "%.1f", fill_us, EP_F), EP_I("drain_bound", drain_bound, EP_F),
    EP_I("couriers", couriers, EP_F), EP_D("courier_pace", "R", "%.3f", courier_pace, EP_F),
    EP_S("courier_schedule", courier_sched, EP_F), EP_T("courier", EP_COURIER, 0),
    EP_Q("courier", EP_COURIER), EP_D("pred_courier_us", "us", "%.1f", pred_courier_us, EP_F),
    EP_I("auto_couriers", auto_couriers, EP_F),
    EP_X("wave_over_courier", EP_WAVE, EP_COURIER, EP_F),
    EP_T("wave_bulk", EP_WAVE_BULK, EP_F), EP_Q("wave_bulk", EP_WAVE_BULK),
    EP_T("interleaved_bulk", EP_INTER_BULK, EP_F), EP_Q("interleaved_bulk", EP_INTER_BULK),
    EP_T("auto_bulk", EP_AUTO_BULK, EP_F), EP_Q("auto_bulk", EP_AUTO_BULK),
    EP_X("wave_bulk_over_interleaved_bulk", EP_WAVE_BULK, EP_INTER_BULK, EP_F),
    EP_X("wave_over_auto_bulk", EP_WAVE, EP_AUTO_BULK, EP_F),
    EP_X("auto_over_auto_bulk", EP_AUTO, EP_AUTO_BULK, EP_F),
    EP_NS("mma_stall_meas_med_auto_us", "%.3f", stall_auto.mma_meas_med_ns),
    EP_NS("mma_stall_meas_med_wave_bulk_us", "%.3f", stall_bulk[0].mma_meas_med_ns),
    EP_NS("mma_stall_meas_med_interleaved_bulk_us", "%.3f", stall_bulk[1].mma_meas_med_ns),
    EP_NS("mma_stall_meas_med_auto_bulk_us", "%.3f", stall_bulk[2].mma_meas_med_ns),
    EP_T("adaptive", EP_ADAPT, EP_F), EP_Q("adaptive", EP_ADAPT),
    EP_D("pred_adaptive_us", "us", "%.1f", pred_adaptive_us, EP_F),
    EP_D("adaptive_ahead_us", "us", "%.1f", adaptive_ahead_us, EP_F),
    EP_X("wave_over_adaptive", EP_WAVE, EP_ADAPT, EP_F),
    EP_X("auto_over_adaptive", EP_AUTO, EP_ADAPT, EP_F),
    EP_NS("mma_stall_meas_med_adaptive_us", "%.3f", stall_adapt.mma_meas_med_ns),
    EP_T("auto_defer", EP_AUTO_DEFER, EP_F), EP_Q("auto_defer", EP_AUTO_DEFER),
    EP_X("wave_over_auto_defer", EP_WAVE, EP_AUTO_DEFER, EP_F),
    EP_X("auto_over_auto_defer", EP_AUTO, EP_AUTO_DEFER, EP_F),
    EP_NS("mma_stall_meas_med_auto_defer_us", "%.3f", stall_defer.mma_meas_med_ns),
    EP_D("auto_defer_gate_med_us", "us", "%.3f", defer_gate_us, EP_F),
    {"defer_kernel", "", "%s", XS_COL_CHARS, EP_R(defer_kernel), 0, 0, 0, 0, EP_F},
    EP_D("auto_defer_deferred_frac", "", "%.3f", defer_frac, EP_F),
    EP_D("pred_spill_us", "us", "%.1f", pred_spill_us, EP_F),
    EP_I("auto_spill", auto_spill, EP_F), EP_I("auto_lead_end", auto_lead_end, EP_F),
    EP_D("pred_paced_plain_us", "us", "%.1f", pred_paced_plain_us, EP_F),
    EP_T("auto_fixed", EP_AUTO_FIXED, EP_F), EP_Q("auto_fixed", EP_AUTO_FIXED),
    EP_X("auto_over_auto_fixed", EP_AUTO, EP_AUTO_FIXED, EP_F),
    EP_I("auto_fixed_lead", fixed_lead, EP_F), EP_I("auto_fixed_lead_end", fixed_lead_end, EP_F),
    EP_D("pred_auto_fixed_us", "us", "%.1f", pred_fixed_us, EP_F),
    EP_Q("overlapped", EP_OVERLAP),
    EP_D("overlapped_compute_us", "us", "%.1f", ovl_compute_us, EP_F),
    EP_D("overlapped_compute_per_expert_us", "us", "%.1f", ovl_compute_form_us[0], EP_F),
    EP_D("overlapped_compute_grouped_us", "us", "%.1f", ovl_compute_form_us[1], EP_F),
    EP_I("overlapped_model_grouped", ovl_model_grouped, EP_F),
    EP_D("overlapped_pilot_us", "us", "%.1f", ovl_pilot_us, EP_F),
    EP_D("overlapped_pred_us", "us", "%.1f", ovl_pred_us, EP_F),
    EP_I("overlapped_model_chunks", ovl_model_chunks, EP_F),
    EP_D("overlapped_model_pred_us", "us", "%.1f", ovl_model_pred_us, EP_F),
    EP_D("auto_pick_pred_us", "us", "%.1f", auto_pick_pred_us, EP_F),
    EP_D("auto_pilot_us", "us", "%.1f", auto_pilot_us, EP_F),
    /* per-tile stall where it matters (tiles stalled > XS_MOE_STALLED_NS): the model's median
     * |error| beside the zero predictor's, issue and MMA side, wave and interleaved */
    EP_I("stalled_tiles", stall_wave.stalled_tiles, EP_F),
    EP_NS("stalled_err_med_us", "%.3f", stall_wave.stalled_err_med_ns),
    EP_NS("stalled_zero_err_med_us", "%.3f", stall_wave.stalled_zero_err_med_ns),
    EP_I("mma_stalled_tiles", stall_wave.mma_stalled_tiles, EP_F),
    EP_NS("mma_stalled_err_med_us", "%.3f", stall_wave.mma_stalled_err_med_ns),
    EP_NS("mma_stalled_zero_err_med_us", "%.3f", stall_wave.mma_stalled_zero_err_med_ns),
    EP_I("stalled_tiles_interleaved", stall_inter.stalled_tiles, EP_F),
    EP_NS("stalled_err_med_interleaved_us", "%.3f", stall_inter.stalled_err_med_ns),
    EP_NS("stalled_zero_err_med_interleaved_us", "%.3f", stall_inter.stalled_zero_err_med_ns),
    EP_I("mma_stalled_tiles_interleaved", stall_inter.mma_stalled_tiles, EP_F),
    EP_NS("mma_stalled_err_med_interleaved_us", "%.3f", stall_inter.mma_stalled_err_med_ns),
    EP_NS("mma_stalled_zero_err_med_interleaved_us", "%.3f",
          stall_inter.mma_stalled_zero_err_med_ns)};
const int ep_ncols = (int)(sizeof ep_cols / sizeof ep_cols[0]);
const xs_bench_col ep_grid_cols[2] = {
    {"grid_row", "", "%d", XS_COL_INT, EP_R(grid_row), 0, 0, 0, 0, 0},
    {"status", "", "%s", XS_COL_CHARS, EP_R(status), 0, 0, 0, 0, 0}};

/* The stall prediction where it matters: over the wave, interleaved and auto runs, the tiles
 * whose measured stall exceeds XS_MOE_STALLED_NS, the model's median |error| beside the zero
 * predictor's (the median measured stall), issue side and MMA side; medians over the runs of
 * the runs' medians, and the verdict (model at most half of zero). */
static void ep_summary_stalled(xs_bench_report *rep, const ep_row *rows, int n)
{
    for (int side = 0; side < 2; side++) {
        double *m = (double *)malloc(sizeof(double) * (size_t)(3 * n + 1));
        double *z = (double *)malloc(sizeof(double) * (size_t)(3 * n + 1));
        int k = 0, tiles = 0;
        for (int i = 0; m && z && i < n; i++) {
            const xs_moe_stall *sv[3] = {&rows[i].stall_wave, &rows[i].stall_inter,
                                         &rows[i].stall_auto};
            for (int j = 0; j < 3; j++) {
                const double em = side ? sv[j]->mma_stalled_err_med_ns : sv[j]->stalled_err_med_ns;
                const double ez =
                    side ? sv[j]->mma_stalled_zero_err_med_ns : sv[j]->stalled_zero_err_med_ns;
                if (!isfinite(em) || !isfinite(ez))
                    continue;
                m[k] = em / 1e3;
                z[k] = ez / 1e3;
                tiles += side ? sv[j]->mma_stalled_tiles : sv[j]->stalled_tiles;
                k++;
            }
        }
        if (k) {
            const double mm = xs_median(m, (size_t)k), zz = xs_median(z, (size_t)k);
            xs_bench_report_note(rep,
                                 "%-22s %s side, tiles stalled > %.1f us (%d tiles, %d runs): "
                                 "median |pred - meas| %.3f us, zero predictor %.3f us: %s "
                                 "(target: model <= half of zero)",
                                 "stalled tiles", side ? "MMA" : "issue",
                                 XS_MOE_STALLED_NS / 1e3, tiles, k, mm, zz,
                                 mm <= 0.5 * zz ? "met" : "NOT met");
        } else {
            xs_bench_report_note(rep, "%-22s %s side: no tile stalled > %.1f us", "stalled tiles",
                                 side ? "MMA" : "issue", XS_MOE_STALLED_NS / 1e3);
        }
        free(m);
        free(z);
    }
}

void ep_row_plan_text(ep_row *r)
{
    char *choice = r->auto_plan;
    const size_t n = sizeof r->auto_plan;
    if (r->auto_kind == EP_PICK_OVERLAP) {
        snprintf(choice, n, "overlapped C=%d%s", r->auto_ov_chunks, r->auto_ov_grouped ? "g" : "");
        return;
    }
    if (r->auto_kind == EP_PICK_UNFUSED) {
        snprintf(choice, n, "unfused");
        return;
    }
    if (!strcmp(r->auto_choice, "interleaved"))
        snprintf(choice, n, "inter D=%d%s", r->auto_lead, r->auto_paced ? " p" : "");
    else
        snprintf(choice, n, "%s", r->auto_choice);
    if (r->auto_couriers > 0) {
        const size_t k = strlen(choice);
        snprintf(choice + k, n - k, " c%d", r->auto_couriers);
    }
}

static void ep_summary_ratio(xs_bench_report *rep, const char *name, const double *x, int n)
{
    if (n <= 0) {
        xs_bench_report_note(rep, "%-22s no rows", name);
        return;
    }
    xs_bench_report_note(rep, "%-22s geomean %.3f  median %.3f  max %.3f  min %.3f  (%d rows)",
                         name, xs_geomean(x, (size_t)n), xs_median(x, (size_t)n),
                         xs_max(x, (size_t)n), xs_min(x, (size_t)n), n);
}

/* Column v over bound_us on the rows where the criterion holds as is or reshaped, into q (n of
 * them), and how many are within 10 %, in all and on the rows where only reshaping meets it */
typedef struct {
    int n, near, n_resh, near_resh;
} ep_near;

static ep_near ep_near_bound(const ep_row *rows, int n, int v, double *q)
{
    ep_near nb = {0, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        const ep_row *r = &rows[i];
        const double x = r->t[v].med / r->bound_us;
        if (!(r->criterion_ok || r->reshape_ok) || !isfinite(x))
            continue;
        q[nb.n++] = x;
        nb.near += x <= 1.10;
        if (!r->criterion_ok) {
            nb.n_resh++;
            nb.near_resh += x <= 1.10;
        }
    }
    return nb;
}

static void ep_near_print(xs_bench_report *rep, const char *label, const double *q, ep_near nb)
{
    char name[48];
    snprintf(name, sizeof name, "%s/bound (met)", label);
    ep_summary_ratio(rep, name, q, nb.n);
    snprintf(name, sizeof name, "%s near bound", label);
    xs_bench_report_note(
        rep,
        "%-22s %d of %d rows where the criterion holds as is or reshaped within 10%% of "
        "bound_us; %d of %d where only reshaping meets it",
        name, nb.near, nb.n, nb.near_resh, nb.n_resh);
}

/* A column next to wave and auto (courier, adaptive, auto_bulk): wave/label and auto/label over
 * the rows where it ran, where it beat auto, and label/bound. q: scratch of n + 1. Returns the
 * rows where it ran. */
static int ep_summary_column(xs_bench_report *rep, const ep_row *rows, int n, int v,
                             const char *label, double *q)
{
    char name[48];
    int k = 0, faster = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(rows[i].t[v].med) && isfinite(rows[i].t[EP_WAVE].med))
            q[k++] = rows[i].t[EP_WAVE].med / rows[i].t[v].med;
    if (!k)
        return 0;
    snprintf(name, sizeof name, "wave/%s", label);
    ep_summary_ratio(rep, name, q, k);
    k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(rows[i].t[v].med) && isfinite(rows[i].t[EP_AUTO].med)) {
            q[k++] = rows[i].t[EP_AUTO].med / rows[i].t[v].med;
            faster += rows[i].t[v].med < rows[i].t[EP_AUTO].med;
        }
    snprintf(name, sizeof name, "auto/%s", label);
    ep_summary_ratio(rep, name, q, k);
    snprintf(name, sizeof name, "%s < auto", label);
    xs_bench_report_note(rep, "%-22s the %s run faster than auto on %d of %d rows", name, label,
                         faster, k);
    ep_near_print(rep, label, q, ep_near_bound(rows, n, v, q));
    return k;
}

/* the adaptive column, and its prediction */
static void ep_summary_adaptive(xs_bench_report *rep, const ep_row *rows, int n, double *q)
{
    if (!ep_summary_column(rep, rows, n, EP_ADAPT, "adaptive", q))
        return;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const double ta = rows[i].t[EP_ADAPT].med;
        if (isfinite(ta) && ta > 0 && isfinite(rows[i].pred_adaptive_us))
            q[k++] = fabs(rows[i].pred_adaptive_us - ta) / ta;
    }
    if (k)
        xs_bench_report_note(
            rep, "%-22s |pred - meas| / meas median %.1f %%, max %.1f %% (%d rows)",
            "adaptive prediction", 100 * xs_median(q, (size_t)k), 100 * xs_max(q, (size_t)k), k);
}

/* --bulk: the bulk-copy variants against their 16-byte-store twins of the same rounds */
static void ep_summary_bulk(xs_bench_report *rep, const ep_row *rows, int n, double *q)
{
    int k = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        const double wb = rows[i].t[EP_WAVE_BULK].med, ib = rows[i].t[EP_INTER_BULK].med;
        if (isfinite(wb) && isfinite(ib) && ib > 0)
            q[k++] = wb / ib;
        ran += isfinite(wb) || isfinite(ib) || isfinite(rows[i].t[EP_AUTO_BULK].med);
    }
    if (!ran)
        return;
    xs_bench_report_note(
        rep, "%-22s the combine rows by TMA bulk copies, the same plans, the same rounds", "bulk");
    ep_summary_ratio(rep, "wave_b/interleaved_b", q, k);
    ep_summary_column(rep, rows, n, EP_AUTO_BULK, "auto_bulk", q);
}

/* auto and tuned against the other variants, near the bound, and against the overlapped
 * pipeline (xs_auto_summarize) over the verified rows: one line each, met or NOT met. */
static void ep_summary_auto(xs_bench_report *rep, const ep_row *rows, int n)
{
    double *v = (double *)malloc(sizeof(double) * 6 * (size_t)(n + 1));
    if (!v)
        return;
    double *a = v, *t = a + n + 1, *b = t + n + 1, *o = b + n + 1, *cc = o + n + 1,
           *bd = cc + n + 1;
    int k = 0, picked_ov = 0, picked_unf = 0;
    for (int i = 0; i < n; i++) {
        const ep_row *r = &rows[i];
        if (!r->verified)
            continue;
        a[k] = r->t[EP_AUTO].med, t[k] = r->tuned_us, b[k] = r->best_other_us;
        o[k] = r->t[EP_OVERLAP].med, cc[k] = r->comm_over_compute, bd[k++] = r->bound_us;
        picked_ov += r->auto_kind == EP_PICK_OVERLAP;
        picked_unf += r->auto_kind == EP_PICK_UNFUSED;
    }
    xs_bench_report_note(rep, "%-22s auto picked the overlapped pipeline on %d and unfused on %d "
                         "of %d verified rows, its fused plan on the others", "auto pick",
                         picked_ov, picked_unf, k);
    xs_auto_sum sm;
    char l[4][200];
    xs_auto_summarize(a, t, b, o, cc, bd, k, &sm);
    xs_auto_sum_lines(&sm, l);
    for (int i = 0; i < 4; i++)
        xs_bench_report_note(rep, "summary: %s", l[i]);
    free(v);
}

void ep_summary(xs_bench_report *rep, const ep_row *rows, int n)
{
    double *a = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *b = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *c = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *d = (double *)malloc(sizeof(double) * (size_t)(3 * n + 1));
    double *dm = (double *)malloc(sizeof(double) * (size_t)(3 * n + 1));
    double *e = (double *)malloc(sizeof(double) * (size_t)(n + 1)); /* scratch of the columns */
    if (!a || !b || !c || !d || !dm || !e) {
        free(a);
        free(b);
        free(c);
        free(d);
        free(dm);
        free(e);
        return;
    }
    int na = 0, nb = 0, nc = 0, nd = 0, ndm = 0, below = 0;
    int met = 0, resh = 0, notmet = 0, inter = 0, paced = 0, chose_c = 0, ncour = 0;
    for (int i = 0; i < n; i++) {
        const ep_row *r = &rows[i];
        double wi = r->t[EP_WAVE].med / r->t[EP_INTER].med;
        double wa = r->t[EP_WAVE].med / r->t[EP_AUTO].med;
        if (isfinite(wi) && wi > 0)
            a[na++] = wi;
        if (isfinite(wa) && wa > 0) {
            b[nb++] = wa;
            below += wa < 0.99;
        }
        if (isfinite(r->gemm_eff) && r->gemm_eff > 0)
            c[nc++] = r->gemm_eff;
        const xs_moe_stall *sv[3] = {&r->stall_wave, &r->stall_inter, &r->stall_auto};
        for (int k = 0; k < 3; k++) {
            if (isfinite(sv[k]->abs_err_med_ns))
                d[nd++] = sv[k]->abs_err_med_ns / 1e3;
            if (isfinite(sv[k]->mma_abs_err_med_ns))
                dm[ndm++] = sv[k]->mma_abs_err_med_ns / 1e3;
        }
        inter += !strcmp(r->auto_choice, "interleaved");
        paced += r->auto_paced;
        met += r->criterion_ok;
        resh += !r->criterion_ok && r->reshape_ok;
        notmet += !r->criterion_ok && !r->reshape_ok;
        chose_c += r->auto_couriers > 0;
        ncour += isfinite(r->t[EP_COURIER].med);
    }
    xs_bench_report_note(rep,
                         "summary over %d points (criterion met: %d; not met, met "
                         "reshaped: %d; not met even reshaped: %d); auto chose interleaved on %d "
                         "(paced %d)",
                         n, met, resh, notmet, inter, paced);
    ep_summary_ratio(rep, "wave/interleaved", a, na);
    ep_summary_ratio(rep, "wave/auto", b, nb);
    xs_bench_report_note(rep, "%-22s %d of %d rows below 0.99", "wave/auto < 0.99", below, nb);
    ep_near_print(rep, "auto", e, ep_near_bound(rows, n, EP_AUTO, e));
    xs_bench_report_note(
        rep, "%-22s auto chose couriers on %d of %d points; the courier column ran on %d",
        "couriers", chose_c, n, ncour);
    ep_summary_column(rep, rows, n, EP_COURIER, "courier", e);
    ep_summary_adaptive(rep, rows, n, e);
    {
        int spilled = 0, paced = 0;
        for (int i = 0; i < n; i++) {
            spilled += rows[i].auto_spill;
            paced += rows[i].auto_paced;
        }
        xs_bench_report_note(
            rep, "%-22s auto ran its plan on the spilling kernel on %d of the %d paced rows",
            "spilling", spilled, paced);
        int tapered = 0, moved = 0;
        for (int i = 0; i < n; i++) {
            tapered += rows[i].auto_paced && rows[i].auto_lead_end > 0;
            moved += rows[i].auto_paced && isfinite(rows[i].pred_paced_plain_us) &&
                     rows[i].pred_paced_plain_us > rows[i].pred_paced_us;
        }
        xs_bench_report_note(
            rep,
            "%-22s the paced plan's lead or taper moved on %d of the %d paced rows "
            "(tapered: %d)",
            "lead search", moved, paced, tapered);
        ep_summary_column(rep, rows, n, EP_AUTO_FIXED, "auto_fixed", e);
        if (n && ep_summary_column(rep, rows, n, EP_AUTO_DEFER, "auto_defer", e))
            xs_bench_report_note(rep, "%-22s the auto_defer column ran auto's plans on: %s",
                                 "auto_defer", rows[0].defer_kernel);
    }
    ep_summary_bulk(rep, rows, n, e);
    ep_summary_ratio(rep, "cuBLAS GEMMs / local", c, nc);
    double pt = 0, mt = 0, pmax = 0;
    for (int i = 0; i < n; i++) {
        pt += rows[i].point_s;
        mt += rows[i].model_s;
        pmax = rows[i].point_s > pmax ? rows[i].point_s : pmax;
    }
    xs_bench_report_note(
        rep, "%-22s %.1f s over %d points (worst point %.2f s), of it the host-side model %.2f s",
        "wall time", pt, n, pmax, mt);
    if (nd)
        xs_bench_report_note(
            rep,
            "%-22s issue side: median over runs of the per-tile median |pred - meas| = "
            "%.3f us (max %.3f, %d runs)",
            "stall prediction", xs_median(d, (size_t)nd), xs_max(d, (size_t)nd), nd);
    if (ndm)
        xs_bench_report_note(
            rep,
            "%-22s MMA side: median over runs of the per-tile median |pred - meas| = %.3f "
            "us (max %.3f, %d runs)",
            "stall prediction", xs_median(dm, (size_t)ndm), xs_max(dm, (size_t)ndm), ndm);
    ep_summary_stalled(rep, rows, n);
    ep_summary_auto(rep, rows, n);
    free(a);
    free(b);
    free(c);
    free(d);
    free(dm);
    free(e);
}
