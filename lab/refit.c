// SPDX-License-Identifier: Apache-2.0
/* refit.c - offline: fit a profile from recorded calibration samples; optionally print the event
 * model against every capacity/drift run (median over reps). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "xstage.h"
int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "refit SAMPLES OUT.json [set...]\n");
        return 2;
    }
    xs_samples s;
    if (xs_samples_load(argv[1], &s) != XS_OK) {
        fprintf(stderr, "%s\n", xs_errmsg());
        return 1;
    }
    xs_profile p;
    xs_profile_default(&p);
    for (int i = 3; i < argc; i++)
        if (xs_profile_set(&p, argv[i]) != XS_OK) {
            fprintf(stderr, "%s\n", xs_errmsg());
            return 1;
        }
    xs_fit_report rep;
    double t0 = xs_now_s();
    if (xs_fit_profile(&s, &p, &rep) != XS_OK) {
        fprintf(stderr, "%s\n", xs_errmsg());
        return 1;
    }
    snprintf(p.command, sizeof p.command, "refit %s", argv[1]);
    xs_profile_save(&p, argv[2]);
    fprintf(stderr, "fit %.1f s, event model err %.1f%%\n", xs_now_s() - t0, 100 * rep.chunk_err);
    xs_profile_print(&p, stderr);
    xs_fit_report_loss_print(&rep, stderr);
    return 0;
}
