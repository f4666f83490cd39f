// SPDX-License-Identifier: Apache-2.0
/*
 * rescore.c - offline: re-predict recorded `xstage validate --random` rows with a profile (and
 * the library's current model), on the CPU, and print validate --random's per-row figures.
 *
 *   build/lab/rescore ROWS.csv DRAW_PROFILE.json [--profile P.json] [--set NAME=VALUE ...]
 *                     [-v] [--dump SCHED:ROW] [--sms N] [--max-bytes B]
 *
 * ROWS.csv is what `validate --random --random-rows` wrote on the GPU. The schedules are drawn
 * again from the seed in it with DRAW_PROFILE (the profile validate ran with: the draw depends
 * on its Q(K) and R), 132 producers and 16 MiB of room unless told; the prediction uses
 * --profile (default DRAW_PROFILE) with --set overrides. The measured columns are never
 * changed. -v prints every row; --dump S:R prints schedule S's row R per producer (bytes, gap
 * before, predicted start and window) for diagnosis. A third line splits the rows at validate's
 * stall threshold (measured issue_max above the zero predictor's by more than 0.5 us): the
 * model's and the zero predictor's median on the stalled rows and on the others, and on the
 * others how often the model equals the zero predictor and how often it predicts a stall; a
 * fourth the all-row median and model/zero of a model exact on the stalled rows and equal to
 * the zero predictor on the others (what the all-row ratio can reach without a better
 * unstalled issue time, which the zero predictor would share). Rows looked at to choose a change are
 * in-sample for it: say so when quoting the figures.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"

/* validate --random's stalled rows (XS_RAND_STALLED_NS): measured stall above this (ns) */
#define STALLED_NS 500.0

typedef struct {
    int sched, row, storing;
    double meas, model_old, zero_old;
    double meas_end;    /* the row's measured end (ns) */
} rec;

static int load_rows(const char *path, rec **out, int *n, unsigned long long *seed)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    int cap = 256, k = 0, have_hdr = 0;
    rec *a = malloc((size_t)cap * sizeof *a);
    int c_seed = -1, c_s = -1, c_r = -1, c_st = -1, c_m = -1, c_mo = -1, c_z = -1, c_e = -1;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *fld[64];
        int nf = 0;
        for (char *tok = strtok(line, ",\n"); tok && nf < 64; tok = strtok(NULL, ",\n"))
            fld[nf++] = tok;
        if (!have_hdr) {
            for (int i = 0; i < nf; i++) {
                if (!strcmp(fld[i], "seed")) c_seed = i;
                if (!strcmp(fld[i], "schedule")) c_s = i;
                if (!strcmp(fld[i], "row")) c_r = i;
                if (!strcmp(fld[i], "storing")) c_st = i;
                if (!strcmp(fld[i], "meas_issue_max_ns")) c_m = i;
                if (!strcmp(fld[i], "model_issue_max_ns")) c_mo = i;
                if (!strcmp(fld[i], "zero_issue_max_ns")) c_z = i;
                if (!strcmp(fld[i], "meas_end_ns")) c_e = i;
            }
            if (c_seed < 0 || c_s < 0 || c_r < 0 || c_m < 0 || c_mo < 0 || c_z < 0 || c_st < 0 ||
                c_e < 0) {
                fclose(f);
                free(a);
                return -2;
            }
            have_hdr = 1;
            continue;
        }
        if (k == cap)
            a = realloc(a, (size_t)(cap *= 2) * sizeof *a);
        *seed = strtoull(fld[c_seed], NULL, 10);
        a[k].sched = atoi(fld[c_s]);
        a[k].row = atoi(fld[c_r]);
        a[k].storing = atoi(fld[c_st]);
        a[k].meas = atof(fld[c_m]);
        a[k].model_old = atof(fld[c_mo]);
        a[k].zero_old = atof(fld[c_z]);
        a[k].meas_end = atof(fld[c_e]);
        k++;
    }
    fclose(f);
    *out = a;
    *n = k;
    return have_hdr ? 0 : -2;
}

static void dump_row(const xs_randsched *d, const xs_result *pm, const xs_result *pz, int r)
{
    const xs_programs pg = xs_randsched_programs(d);
    printf("# row %d: producer bytes gap_before start_model win_model start_zero win_zero\n", r);
    for (int q = 0; q < pg.producers; q++) {
        const size_t at = (size_t)r * pg.producers + q;
        const double gb = r > 0 ? pg.gap_ns[(size_t)(r - 1) * pg.producers + q] : 0;
        printf("%4d %8lld %10.1f %12.1f %10.1f %12.1f %10.1f\n", q,
               q < d->s.rows[r].producers ? (long long)pg.bytes[at] : 0LL, gb,
               pm->win_start[at], pm->win_end[at] - pm->win_start[at], pz->win_start[at],
               pz->win_end[at] - pz->win_start[at]);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: rescore ROWS.csv DRAW_PROFILE.json [--profile P.json] "
                        "[--set NAME=VALUE ...] [-v] [--dump S:R] [--sms N] [--max-bytes B]\n");
        return 2;
    }
    xs_profile pd, pp;
    if (xs_profile_load(argv[2], &pd) != XS_OK) {
        fprintf(stderr, "rescore: %s\n", xs_errmsg());
        return 1;
    }
    pp = pd;
    int verbose = 0, dump_s = -1, dump_r = -1;
    xs_rand_opts ro = {132, 16.0 * 1048576};
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--profile") && i + 1 < argc) {
            if (xs_profile_load(argv[++i], &pp) != XS_OK) {
                fprintf(stderr, "rescore: %s\n", xs_errmsg());
                return 1;
            }
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            if (xs_profile_set(&pp, argv[++i]) != XS_OK) {
                fprintf(stderr, "rescore: %s\n", xs_errmsg());
                return 1;
            }
        } else if (!strcmp(argv[i], "-v")) {
            verbose = 1;
        } else if (!strcmp(argv[i], "--dump") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d:%d", &dump_s, &dump_r) != 2) {
                fprintf(stderr, "rescore: --dump S:R\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--sms") && i + 1 < argc) {
            ro.max_producers = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
            ro.max_bytes = atof(argv[++i]);
        } else {
            fprintf(stderr, "rescore: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    rec *a;
    int n;
    unsigned long long seed = 0;
    if (load_rows(argv[1], &a, &n, &seed)) {
        fprintf(stderr, "rescore: %s: cannot read a validate --random-rows CSV\n", argv[1]);
        return 1;
    }
    int nsched = 0;
    for (int i = 0; i < n; i++)
        if (a[i].sched + 1 > nsched)
            nsched = a[i].sched + 1;
    double *em = calloc((size_t)n, sizeof *em), *ez = calloc((size_t)n, sizeof *ez),
           *eo = calloc((size_t)n, sizeof *eo);
    double *et = calloc((size_t)nsched + 1, sizeof *et);
    /* the same errors split at validate's stall threshold (docs/METRICS.md) */
    double *sm = calloc((size_t)n, sizeof *sm), *sz = calloc((size_t)n, sizeof *sz),
           *um = calloc((size_t)n, sizeof *um), *uz = calloc((size_t)n, sizeof *uz);
    double *eb = calloc((size_t)n, sizeof *eb); /* a model exact on the stalled rows, zero's
                                                 * prediction on the others: the ratio's bound */
    int ne = 0, nt = 0, ns = 0, nu = 0, u_same = 0, u_fp = 0;
    uint64_t state = seed;
    if (verbose)
        printf("sched row storing meas_ns model_ns zero_ns old_model_ns err_pct zero_err_pct\n");
    for (int s = 0; s < nsched; s++) {
        xs_randsched d;
        if (xs_randsched_draw(&pd, &ro, &state, &d) != XS_OK) {
            fprintf(stderr, "rescore: %s\n", xs_errmsg());
            return 1;
        }
        const xs_programs pg = xs_randsched_programs(&d);
        xs_sim_opts so;
        memset(&so, 0, sizeof so);
        so.record_windows = 1;
        xs_result pm, pz;
        if (xs_simulate_programs(&pp, &d.s, &pg, &so, &pm) != XS_OK ||
            xs_predict_zero(&pp, &d.s, &pg, &pz) != XS_OK) {
            fprintf(stderr, "rescore: %s\n", xs_errmsg());
            return 1;
        }
        for (int i = 0; i < n; i++) {
            if (a[i].sched != s)
                continue;
            const int r = a[i].row;
            if (r >= d.s.nrows) {
                fprintf(stderr, "rescore: schedule %d has no row %d: wrong draw profile?\n", s,
                        r);
                return 1;
            }
            const double mi = a[i].meas, pi = pm.rows[r].issue_max_ns,
                         zi = pz.rows[r].issue_max_ns;
            if (fabs(zi - a[i].zero_old) > 0.15 && !strcmp(argv[2], argv[2]) && pp.issue_overhead_ns == pd.issue_overhead_ns &&
                pp.issue_bytes_per_ns == pd.issue_bytes_per_ns &&
                pp.queue_bytes_per_producer == pd.queue_bytes_per_producer)
                fprintf(stderr, "rescore: schedule %d row %d: zero %.1f ns, recorded %.1f: "
                                "not the recorded draw?\n", s, r, zi, a[i].zero_old);
            em[ne] = 100 * fabs(pi - mi) / mi;
            ez[ne] = 100 * fabs(zi - mi) / mi;
            eo[ne] = 100 * fabs(a[i].model_old - mi) / mi;
            eb[ne] = mi - zi > STALLED_NS ? 0 : ez[ne];
            if (mi - zi > STALLED_NS) {
                sm[ns] = em[ne];
                sz[ns++] = ez[ne];
            } else {
                um[nu] = em[ne];
                uz[nu++] = ez[ne];
                u_same += fabs(pi - zi) <= 1;
                u_fp += pi - zi > STALLED_NS;
            }
            if (verbose)
                printf("%d %d %d %.1f %.1f %.1f %.1f %.2f %.2f\n", s, r, a[i].storing, mi, pi,
                       zi, a[i].model_old, em[ne], ez[ne]);
            ne++;
        }
        /* the total: the schedule's last row's end (validate's err_tot) */
        int last = -1;
        for (int i = 0; i < n; i++)
            if (a[i].sched == s && (last < 0 || a[i].row > a[last].row))
                last = i;
        if (last >= 0 && a[last].row == d.s.nrows - 1)
            et[nt++] = 100 * fabs(pm.rows[a[last].row].end_ns - a[last].meas_end) /
                       a[last].meas_end;
        if (s == dump_s && dump_r >= 0 && dump_r < d.s.nrows)
            dump_row(&d, &pm, &pz, dump_r);
        xs_result_free(&pm);
        xs_result_free(&pz);
        xs_randsched_free(&d);
    }
    const double mm = xs_median(em, (size_t)ne), mz = xs_median(ez, (size_t)ne);
    printf("seed %llu: %d rows: model row median %.1f%% p90 %.1f%% (recorded model %.1f%% / "
           "%.1f%%); zero %.1f%% / %.1f%%; model/zero %.2f\n", seed, ne, mm,
           xs_quantile(em, (size_t)ne, 0.9), xs_median(eo, (size_t)ne),
           xs_quantile(eo, (size_t)ne, 0.9), mz, xs_quantile(ez, (size_t)ne, 0.9), mm / mz);
    printf("seed %llu: totals |error| over %d schedules: median %.1f%%, max %.1f%%\n", seed, nt,
           xs_median(et, (size_t)nt), nt ? xs_max(et, (size_t)nt) : NAN);
    printf("seed %llu: %d of %d rows stall (measured - zero > %.0f ns): model median %.1f%%, zero "
           "%.1f%%, model/zero %.2f; the other %d: model %.1f%%, zero %.1f%%, model = zero on %d, "
           "model stall > %.0f ns on %d\n", seed, ns, ne, STALLED_NS,
           xs_median(sm, (size_t)ns), xs_median(sz, (size_t)ns),
           xs_median(sm, (size_t)ns) / xs_median(sz, (size_t)ns), nu, xs_median(um, (size_t)nu),
           xs_median(uz, (size_t)nu), u_same, STALLED_NS, u_fp);
    printf("seed %llu: a model exact on the stalled rows and equal to zero on the others: row "
           "median %.1f%%, model/zero %.2f\n", seed, xs_median(eb, (size_t)ne),
           xs_median(eb, (size_t)ne) / mz);
    free(eb);
    free(sm);
    free(sz);
    free(um);
    free(uz);
    free(et);
    free(em);
    free(ez);
    free(eo);
    free(a);
    return 0;
}
