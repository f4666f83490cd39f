/*
 * tools/bench/tp_report.cu - the report of `xstage bench tp` (tools/bench/tp.cu): the CSV
 * header and rows, the fixed-width table and the closing summary lines with their targets;
 * docs/TP.md defines the columns.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tp_bench.h"

static const char csv_header[] =
    "op,model,m,n,k,peers,grid,tiles,remote_mb,local_tflops,unfused_us,unfused_min_us,"
    "unfused_max_us,naive_us,naive_min_us,naive_max_us,shaped_us,shaped_min_us,shaped_max_us,"
    "local_us,shaped_local_us,comm_us,bound_us,floor_us,naive_pred_us,shaped_pred_us,shaped_order,model_rank,"
    "criterion_ok,unfused_over_shaped,naive_over_shaped,shaped_over_bound,shaped_over_floor,"
    "max_err,verified,engine";
/* appended with --slots both (nan where the op has no reduce-scatter: ag_gemm) */
static const char csv_header_tile[] =
    ",naive_tile_us,naive_tile_min_us,naive_tile_max_us,shaped_tile_us,shaped_tile_min_us,"
    "shaped_tile_max_us";

/* appended with --couriers, per courier count N */
static void csv_header_cour(FILE *f, int nc)
{
    fprintf(f, ",naive_c%d_us,naive_c%d_min_us,naive_c%d_max_us,shaped_c%d_us,shaped_c%d_min_us,"
            "shaped_c%d_max_us,shaped_c%d_pred_us,shaped_c%d_order,shaped_c%d_over_bound,"
            "shaped_c0_over_shaped_c%d", nc, nc, nc, nc, nc, nc, nc, nc, nc, nc);
}
/* appended always: the planner's choice (shaped_us is its time) and the default kernel's
 * shaped order (the whole family's column without couriers) */
static const char csv_header_pick[] =
    ",shaped_couriers,shaped_c0_us,shaped_c0_min_us,shaped_c0_max_us,shaped_c0_pred_us,"
    "shaped_c0_order";

void tpb_csv_row(FILE *f, const tpb_row *r, int both, int ncour)
{
    fprintf(f,
            "%s,%s,%d,%d,%d,%d,%d,%d,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,"
            "%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%s,%d,%d,%.4f,%.4f,%.4f,%.4f,%.3g,%d,%s",
            xs_tp_op_name(r->op), r->model, r->s.m, r->s.n, r->s.k, r->s.peers, r->grid, r->tiles,
            r->remote_mb, r->local_tflops, r->unf, r->unf_min, r->unf_max, r->nai, r->nai_min,
            r->nai_max, r->shp, r->shp_min, r->shp_max, r->local_us, r->shp_local, r->comm_us,
            r->bound_us,
            r->floor_us, r->nai_pred, r->shp_pred, r->cand, r->model_rank, r->crit_ok,
            r->unf / r->shp, r->nai / r->shp, r->shp / r->bound_us, r->shp / r->floor_us,
            r->max_err, r->verified, xs_tp_engine_name(r->engine));
    if (both)
        fprintf(f, ",%.1f,%.1f,%.1f,%.1f,%.1f,%.1f", r->nai_t, r->nai_t_min, r->nai_t_max,
                r->shp_t, r->shp_t_min, r->shp_t_max);
    for (int v = 0; v < ncour; v++) {
        const tpb_cour *c = &r->cour[v];
        fprintf(f, ",%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%s,%.4f,%.4f", c->nai, c->nai_min,
                c->nai_max, c->shp, c->shp_min, c->shp_max, c->shp_pred, c->cand,
                c->shp / r->bound_us, r->shp0 / c->shp);
    }
    fprintf(f, ",%d,%.1f,%.1f,%.1f,%.1f,%s", r->shp_cour, r->shp0, r->shp0_min, r->shp0_max,
            r->shp0_pred, r->cand0);
    fputc('\n', f);
}

static double spread_pct(double med, double lo, double hi) { return 100.0 * (hi - lo) / med; }

void tpb_table_header(void)
{
    printf("%-7s %-11s %6s %6s %6s %2s %7s %9s %5s %9s %5s %9s %5s %9s %9s %9s %9s %9s %9s "
           "%-17s %6s %6s %6s %6s %3s\n",
           "op", "model", "m", "n", "k", "P", "remote", "unfused", "sprd", "naive", "sprd",
           "shaped", "sprd", "local", "loc_shp", "bound", "floor", "pred_nai", "pred_shp", "shaped order",
           "unf/", "nai/", "shp/", "shp/", "ok");
    printf("%-7s %-11s %6s %6s %6s %2s %7s %9s %5s %9s %5s %9s %5s %9s %9s %9s %9s %9s %9s "
           "%-17s %6s %6s %6s %6s %3s\n",
           "", "", "", "", "", "", "MB", "us", "%", "us", "%", "us", "%", "us", "us", "us", "us",
           "us", "us", "", "shp", "shp", "bound", "floor", "");
}

void tpb_table_row(const tpb_row *r)
{
    printf("%-7s %-11s %6d %6d %6d %2d %7.1f %9.1f %5.1f %9.1f %5.1f %9.1f %5.1f %9.1f %9.1f %9.1f "
           "%9.1f %9.1f %9.1f %-17s %6.3f %6.3f %6.3f %6.3f %3s\n",
           xs_tp_op_name(r->op), r->model, r->s.m, r->s.n, r->s.k, r->s.peers, r->remote_mb, r->unf,
           spread_pct(r->unf, r->unf_min, r->unf_max), r->nai,
           spread_pct(r->nai, r->nai_min, r->nai_max), r->shp,
           spread_pct(r->shp, r->shp_min, r->shp_max), r->local_us, r->shp_local, r->bound_us,
           r->floor_us,
           r->nai_pred, r->shp_pred, r->cand, r->unf / r->shp, r->nai / r->shp,
           r->shp / r->bound_us, r->shp / r->floor_us, r->verified ? "yes" : "NO");
    if (r->pilot[0])
        printf("#   pilot runs, us: %s\n", r->pilot);
    if (isfinite(r->shp_t))
        printf("#   tile slots, us: naive %.1f (%.1f%%), shaped %.1f (%.1f%%); row/tile naive "
               "%.3f, shaped %.3f; shaped/bound %.3f\n", r->nai_t,
               spread_pct(r->nai_t, r->nai_t_min, r->nai_t_max), r->shp_t,
               spread_pct(r->shp_t, r->shp_t_min, r->shp_t_max), r->nai / r->nai_t,
               r->shp / r->shp_t, r->shp_t / r->bound_us);
    if (r->shp_cour > 0 || isfinite(r->cour[0].shp))
        printf("#   planner's choice: %d couriers; default kernel shaped %.1f us (%.1f%%) %s, pred "
               "%.1f\n", r->shp_cour, r->shp0, spread_pct(r->shp0, r->shp0_min, r->shp0_max),
               r->cand0, r->shp0_pred);
    for (int v = 0; v < TPB_MAX_COUR; v++) {
        const tpb_cour *c = &r->cour[v];
        if (!isfinite(c->shp))
            continue;
        printf("#   %d couriers, us: naive %.1f (%.1f%%), shaped %.1f (%.1f%%) %s, pred %.1f; "
               "naive/naive_c %.3f, shaped_c0/shaped_c %.3f; shaped_c/bound %.3f\n", c->n, c->nai,
               spread_pct(c->nai, c->nai_min, c->nai_max), c->shp,
               spread_pct(c->shp, c->shp_min, c->shp_max), c->cand, c->shp_pred, r->nai / c->nai,
               r->shp0 / c->shp, c->shp / r->bound_us);
        if (c->pilot[0])
            printf("#   %d couriers, pilot runs, us: %s\n", c->n, c->pilot);
    }
    fflush(stdout);
}

static void ratio_line(const char *what, const tpb_row *rows, int nrows, int op, int num)
{
    double v[512];
    int n = 0;
    for (int i = 0; i < nrows && n < 512; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ok || (op >= 0 && (int)r->op != op))
            continue;
        v[n++] = (num ? r->nai : r->unf) / r->shp;
    }
    if (!n)
        return;
    printf("# summary: %-7s %s/shaped: geomean %.3f, min %.3f, max %.3f over %d rows\n", what,
           num ? "naive" : "unfused", xs_geomean(v, (size_t)n), xs_min(v, (size_t)n),
           xs_max(v, (size_t)n), n);
}

/* --slots both: row/tile of the naive or shaped medians over the rows of op (> 1: tile-major
 * slots faster). */
static void tile_ratio_line(const tpb_row *rows, int nrows, int op, int shaped)
{
    double v[512];
    int n = 0;
    for (int i = 0; i < nrows && n < 512; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ok || (int)r->op != op || !isfinite(r->shp_t))
            continue;
        v[n++] = shaped ? r->shp / r->shp_t : r->nai / r->nai_t;
    }
    if (!n)
        return;
    printf("# summary: %-7s %s row/tile: geomean %.3f, min %.3f, max %.3f over %d rows\n",
           xs_tp_op_name((xs_tp_op)op), shaped ? "shaped" : "naive", xs_geomean(v, (size_t)n),
           xs_min(v, (size_t)n), xs_max(v, (size_t)n), n);
}

/* --couriers: shaped_c0/shaped_cN (the default kernel's shaped order over N couriers' shaped
 * order; > 1: couriers faster) over the rows of op, the gemm_rs rows within 10 % of bound_us
 * with couriers, and the courier prediction's error. */
static void cour_lines(const tpb_row *rows, int nrows, int v)
{
    int nc = 0;
    for (int op = 0; op < XS_TP_NOPS; op++) {
        double x[512];
        int n = 0;
        for (int i = 0; i < nrows && n < 512; i++) {
            const tpb_row *r = &rows[i];
            if (!r->ok || (int)r->op != op || !isfinite(r->cour[v].shp))
                continue;
            nc = r->cour[v].n;
            x[n++] = r->shp0 / r->cour[v].shp;
        }
        if (n)
            printf("# summary: %-7s shaped_c0/shaped_c%d (%d couriers): geomean %.3f, min %.3f, max "
                   "%.3f over %d rows\n", xs_tp_op_name((xs_tp_op)op), nc, nc,
                   xs_geomean(x, (size_t)n), xs_min(x, (size_t)n), xs_max(x, (size_t)n), n);
    }
    int nrs = 0, nrs10 = 0, npe = 0;
    double worst = 0, pe[512];
    for (int i = 0; i < nrows; i++) {
        const tpb_row *r = &rows[i];
        if (!r->ok || !isfinite(r->cour[v].shp))
            continue;
        if (npe < 512 && isfinite(r->cour[v].shp_pred))
            pe[npe++] = fabs(r->cour[v].shp_pred - r->cour[v].shp) / r->cour[v].shp * 100;
        if (r->op != XS_TP_GEMM_RS)
            continue;
        nrs++;
        nrs10 += r->cour[v].shp <= 1.10 * r->bound_us;
        worst = fmax(worst, r->cour[v].shp / r->bound_us);
    }
    if (nrs)
        printf("# summary: gemm_rs shaped, %d couriers, within 10%% of bound_us in %d of %d rows "
               "(worst %.3f x bound)\n", nc, nrs10, nrs, worst);
    if (npe)
        printf("# summary: %d couriers: shaped prediction error median %.1f%%, max %.1f%%\n", nc,
               xs_median(pe, (size_t)npe), xs_max(pe, (size_t)npe));
}

int tpb_summary(const tpb_row *rows, int nrows, int skipped)
{
    int nok = 0, nran = 0, ntimed = 0, nge = 0, nrs = 0, nrs10 = 0, nrsf10 = 0, nagree = 0;
    int nstream = 0, nrs_t = 0, nrs10_t = 0, ntile = 0;
    double worst_rs = 0, worst_rsf = 0, worst_ge = INFINITY, worst_rs_t = 0;
    double perr[512];
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
        ntile += isfinite(r->shp_t) != 0;
        /* within noise: the shaped median no slower than the naive one by more than the larger
         * of the two spreads */
        const double noise = fmax(r->nai_max - r->nai_min, r->shp_max - r->shp_min);
        nge += r->shp <= r->nai + noise;
        worst_ge = fmin(worst_ge, r->nai / r->shp);
        if (r->op == XS_TP_GEMM_RS) {
            nrs++;
            nrs10 += r->shp <= 1.10 * r->bound_us;
            nrsf10 += r->shp <= 1.10 * r->floor_us;
            worst_rs = fmax(worst_rs, r->shp / r->bound_us);
            worst_rsf = fmax(worst_rsf, r->shp / r->floor_us);
            if (isfinite(r->shp_t)) {
                nrs_t++;
                nrs10_t += r->shp_t <= 1.10 * r->bound_us;
                worst_rs_t = fmax(worst_rs_t, r->shp_t / r->bound_us);
            }
        }
        /* ring orders stream on the mma engine; sm90 runs them stored */
        nstream += strstr(r->cand, "stream") != NULL ||
                   (strstr(r->cand, "ring") != NULL && xs_tp_engine_streams(r->engine));
        nagree += r->model_rank == 1;
        if (npe < 512 && r->shp > 0)
            perr[npe++] = fabs(r->shp_pred - r->shp) / r->shp * 100;
    }
    printf("# summary: %d configurations run, %d verified, %d timed\n", nran, nok, ntimed);
    if (skipped)
        printf("# summary: %d configurations skipped (--max-time)\n", skipped);
    ratio_line("all", rows, nrows, -1, 0);
    ratio_line("all", rows, nrows, -1, 1);
    for (int op = 0; op < XS_TP_NOPS; op++) {
        ratio_line(xs_tp_op_name((xs_tp_op)op), rows, nrows, op, 0);
        ratio_line(xs_tp_op_name((xs_tp_op)op), rows, nrows, op, 1);
    }
    if (ntimed)
        printf("# summary: shaped >= naive within noise in %d of %d rows (worst naive/shaped "
               "%.3f)\n", nge, ntimed, worst_ge);
    if (nrs) {
        printf("# summary: gemm_rs shaped within 10%% of bound_us in %d of %d rows (worst %.3f x "
               "bound)\n", nrs10, nrs, worst_rs);
        printf("# summary: gemm_rs shaped within 10%% of floor_us in %d of %d rows (worst %.3f x "
               "floor)\n", nrsf10, nrs, worst_rsf);
    }
    if (ntile) /* --slots both: the rows above are row-major slots */
        for (int sh = 0; sh < 2; sh++) {
            tile_ratio_line(rows, nrows, XS_TP_GEMM_RS, sh);
            tile_ratio_line(rows, nrows, XS_TP_MLP, sh);
        }
    if (nrs_t) {
        printf("# summary: gemm_rs shaped, tile slots, within 10%% of bound_us in %d of %d rows "
               "(worst %.3f x bound)\n", nrs10_t, nrs_t, worst_rs_t);
    }
    for (int v = 0; v < TPB_MAX_COUR; v++)
        cour_lines(rows, nrows, v);
    {
        /* the planner's choice per row: how often each courier count won */
        int cnt[XS_TP_COURIERS_MAX + 1], any = 0;
        memset(cnt, 0, sizeof cnt);
        for (int i = 0; i < nrows; i++)
            if (rows[i].ok && rows[i].shp_cour >= 0 && rows[i].shp_cour <= XS_TP_COURIERS_MAX) {
                cnt[rows[i].shp_cour]++;
                any |= rows[i].shp_cour > 0 || isfinite(rows[i].cour[0].shp);
            }
        if (any) {
            char line[256];
            size_t l = 0;
            for (int c = 0; c <= XS_TP_COURIERS_MAX; c++)
                if (cnt[c] && l < sizeof line)
                    l += (size_t)snprintf(line + l, sizeof line - l, "%s%d couriers in %d",
                                          l ? ", " : "", c, cnt[c]);
            printf("# summary: planner's choice (shaped): %s of %d rows\n", line, ntimed);
        }
    }
    if (ntimed)
        printf("# summary: shaped order streams its stores in %d of %d rows\n", nstream, ntimed);
    {
        double v[512];
        int n = 0;
        for (int i = 0; i < nrows && n < 512; i++)
            if (rows[i].ok && rows[i].op == XS_TP_MLP)
                v[n++] = rows[i].unf / rows[i].shp;
        if (n) {
            const double g = xs_geomean(v, (size_t)n), mx = xs_max(v, (size_t)n);
            printf("# summary: mlp unfused/shaped geomean %.3f (target 1.5: %s), max %.3f (target "
                   "1.75: %s)\n", g, g >= 1.5 ? "MET" : "NOT MET", mx,
                   mx >= 1.75 ? "MET" : "NOT MET");
        }
    }
    if (npe)
        printf("# summary: model picked the measured best order in %d of %d rows; shaped "
               "prediction error median %.1f%%, max %.1f%%\n", nagree, ntimed,
               xs_median(perr, (size_t)npe), xs_max(perr, (size_t)npe));
    if (nok != nran || ntimed != nran) {
        printf("# bench tp FAILED: %d of %d configurations not verified or not run\n",
               nran - nok, nran);
        return 1;
    }
    printf("# bench tp OK\n");
    return 0;
}

void tpb_csv_header(FILE *f, const tpb_opts *o)
{
    fprintf(f, "%s%s", csv_header, o->slots == TPB_SLOTS_BOTH ? csv_header_tile : "");
    for (int v = 0; v < o->ncour; v++)
        csv_header_cour(f, o->cour[v]);
    fputs(csv_header_pick, f);
    fputc('\n', f);
}

/* The # lines of the report on stdout (and csv, with the column line, when not NULL): the
 * device, the ranks (nranks > 0: real peers), the profile, engine, slots, couriers, tiles,
 * tolerance and timing. */
void tpb_report_header(FILE *csv, const xs_gpu_info *gi, const tpb_opts *o,
                       const xs_profile *prof, int nranks, int argc, char **argv)
{
    xs_gpu_report_header(stdout, gi, argc, argv);
    if (nranks)
        printf("# ranks: %d processes, rank r on GPU r, P = %d real peers: pushes and partials "
               "into the peers' NCCL symmetric windows (LSA pointers); unfused: ncclAllGather / "
               "ncclReduceScatter; every rank verifies every byte and signal its window received; "
               "times are rank 0's (the slowest rank's medians under each row)\n", nranks, nranks);
    printf("# profile: %s R %.4g B/ns, Q %.6g B, Q/producer %.6g B, r %.4g B/ns%s\n",
           o->common.pa.file ? o->common.pa.file : "embedded", prof->drain_bytes_per_ns, prof->capacity_bytes,
           prof->capacity_bytes_per_producer, prof->issue_bytes_per_ns,
           prof->provisional ? " (provisional)" : "");
    const char *engine_line =
        o->engine == XS_TP_ENGINE_SM90
            ? "sm90: cuda/gemm_sm90.cuh, bf16 wgmma m64n256k16 + TMA, producer warpgroup + 2 "
              "consumer warpgroups, fp32 accumulate; stored orders only (no streamed stores), "
              "signals raised right after their payload"
            : "mma: cuda/gemm.cuh, bf16 mma.sync, fp32 accumulate; stored and streamed orders, "
              "lazy signals";
    printf("# engine: %s\n", engine_line);
    const char *slots_line =
        o->slots == TPB_SLOTS_BOTH
            ? "both: row-major slots in the naive_us/shaped_us columns, tile-major slots "
              "(xs_tp_set_slot_layout; one contiguous run per tile) in naive_tile_us/"
              "shaped_tile_us, the same orders and inputs in the same iterations"
        : o->slots == TPB_SLOTS_TILE
            ? "tile: tile-major reduce-scatter slots (one contiguous run per tile) in every "
              "fused column; the unfused baseline copies row-major"
            : "row: row-major reduce-scatter slots (a tile lands as 128 runs of 512 B)";
    printf("# slots: %s\n", slots_line);
    char cour_line[384] = "none: every fused column runs the default kernel (no couriers)";
    if (o->ncour) {
        size_t cl = 0;
        for (int v = 0; v < o->ncour; v++)
            cl += (size_t)snprintf(cour_line + cl, sizeof cour_line - cl, "%s%d", v ? " and " : "",
                                   o->cour[v]);
        cl += (size_t)snprintf(cour_line + cl, sizeof cour_line - cl, " courier CTAs next to the "
                 "default kernel (0), same iterations (columns *_c<N>_*); local_us and bound_us "
                 "without couriers; they push the all-gather chunks (ag_gemm, mlp), then carry "
                 "the remote reduce-scatter tiles (gemm_rs, mlp); ");
        if (o->cour_pace > 0)
            snprintf(cour_line + cl, sizeof cour_line - cl, "paced at %.2f x R = %.1f B/ns",
                     o->cour_pace, o->cour_pace * prof->drain_bytes_per_ns);
        else
            snprintf(cour_line + cl, sizeof cour_line - cl, "unpaced");
    }
    printf("# couriers: %s\n", cour_line);
    printf("# tiles %dx%d (engine %s), persistent grid = %d "
           "SMs; push chunks %d KB; tolerance: relative Frobenius <= %.0e, rows <= %.0e vs fp32; "
           "times: CUDA events (completion incl. drain), median of %d after %d warm-up, L2 "
           "flushed\n", XS_TP_BM, XS_TP_BN, xs_tp_engine_name(o->engine), gi->sm_count,
           XS_TP_CHUNK / 1024, XS_TP_TOL_FROB, XS_TP_TOL_ROW, o->common.iters, o->common.warmup);
    if (csv) {
        xs_gpu_report_header(csv, gi, argc, argv);
        fprintf(csv, "# engine: %s\n", engine_line);
        fprintf(csv, "# slots: %s\n", slots_line);
        fprintf(csv, "# couriers: %s\n", cour_line);
        tpb_csv_header(csv, o);
    }
}
