/* score.c - the fit's event-model score (mean |log pred/meas|, as fit.c's model_error) of a
 * profile on recorded calibration samples; -v prints every capacity/drift run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "xstage.h"
typedef struct {
    char e[16];
    int k, rows, nrep;
    long long b;
    double g;
    double mx[16][16], md[16][16], en[16][16];
} run;
static run runs[400];
static int nr;
int main(int argc, char **argv)
{
    xs_samples s;
    xs_profile p;
    if (argc < 3) {
        fprintf(stderr, "usage: score SAMPLES PROFILE [-v] [NAME=VALUE...]\n");
        return 2;
    }
    if (xs_samples_load(argv[1], &s) || xs_profile_load(argv[2], &p)) {
        fprintf(stderr, "%s\n", xs_errmsg());
        return 1;
    }
    int verbose = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else if (xs_profile_set(&p, argv[i])) {
            fprintf(stderr, "%s\n", xs_errmsg());
            return 1;
        }
    }
    for (size_t i = 0; i < s.n; i++) {
        xs_sample_row *a = &s.v[i];
        if (strcmp(a->experiment, "capacity") && strcmp(a->experiment, "drift") &&
            strcmp(a->experiment, "issue"))
            continue;
        int k;
        for (k = 0; k < nr; k++)
            if (!strcmp(runs[k].e, a->experiment) && runs[k].k == a->producers &&
                runs[k].b == a->bytes_per_producer && runs[k].g == a->gap_ns &&
                runs[k].rows == a->rows)
                break;
        if (k == nr) {
            if (nr == (int)(sizeof runs / sizeof runs[0])) {
                fprintf(stderr, "score: more than %d distinct runs in %s\n", nr, argv[1]);
                return 1;
            }
            memset(&runs[k], 0, sizeof runs[k]);
            snprintf(runs[k].e, sizeof runs[k].e, "%s", a->experiment);
            runs[k].k = a->producers;
            runs[k].b = a->bytes_per_producer;
            runs[k].g = a->gap_ns;
            runs[k].rows = a->rows;
            nr++;
        }
        if (a->rep >= 16 || a->row >= 16)
            continue;
        if (a->rep + 1 > runs[k].nrep)
            runs[k].nrep = a->rep + 1;
        runs[k].mx[a->row][a->rep] = a->issue_max_ns;
        runs[k].md[a->row][a->rep] = a->issue_med_ns;
        runs[k].en[a->row][a->rep] = a->end_ns;
    }
    double E[2] = {0}, W[2] = {0};
    for (int k = 0; k < nr; k++) {
        run *rn = &runs[k];
        int wt = !strcmp(rn->e, "drift") ? 2 : 1, iss = !strcmp(rn->e, "issue");
        xs_schedule sc = {0};
        for (int r = 0; r < rn->rows; r++)
            xs_schedule_append(&sc, rn->k, rn->b, r + 1 < rn->rows ? rn->g : 0);
        xs_result res;
        if (xs_simulate(&p, &sc, NULL, &res)) {
            fprintf(stderr, "%s\n", xs_errmsg());
            return 1;
        }
        double err = 0, w = 0;
        for (int r = 0; r < rn->rows; r++) {
            double mm = xs_median(rn->mx[r], rn->nrep), mdd = xs_median(rn->md[r], rn->nrep);
            err += wt * fabs(log(res.rows[r].issue_max_ns / mm));
            w += wt;
            err += 0.5 * wt * fabs(log(res.rows[r].issue_med_ns / mdd));
            w += 0.5 * wt;
        }
        int l = rn->rows - 1;
        double me = xs_median(rn->en[l], rn->nrep);
        if (rn->rows > 1) {
            err += wt * fabs(log(res.rows[l].end_ns / me));
            w += wt;
        }
        E[0] += err;
        W[0] += w;
        if (!iss) {
            E[1] += err;
            W[1] += w;
        }
        if (verbose && !iss) {
            double mm = xs_median(rn->mx[l], rn->nrep);
            printf("%-8s K %3d B %8lld rows %d  V %6.2f MB  issue_max(last row) meas %9.1f pred "
                   "%9.1f  %+6.1f%%",
                   rn->e, rn->k, rn->b, rn->rows, rn->k * (double)rn->b / 1e6, mm,
                   res.rows[l].issue_max_ns, 100 * (res.rows[l].issue_max_ns / mm - 1));
            if (rn->rows > 1)
                printf("  end meas %9.1f pred %9.1f", me, res.rows[l].end_ns);
            printf("\n");
        }
        xs_result_free(&res);
        xs_schedule_free(&sc);
    }
    printf("score (fit, with issue runs) %.4f; reported (capacity+drift) %.1f%%\n", E[0] / W[0],
           100 * (exp(E[1] / W[1]) - 1));
    return 0;
}
