// SPDX-License-Identifier: Apache-2.0
/*
 * predict.c - the smallest program against the installed C core: simulate a schedule on the
 * embedded H200 profile and print the rows as CSV, as `xstage predict --schedule FILE --csv -` does.
 *
 *     cc predict.c $(pkg-config --cflags --libs xstage) -o predict && ./predict schedule.csv
 */
#include <stdio.h>
#include <xstage.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCHEDULE.csv\n", argv[0]);
        return 2;
    }
    xs_profile p;
    xs_schedule s;
    xs_result r;
    xs_sim_opts o = {0}; /* free-running producers, no recording */
    xs_profile_default(&p);
    if (xs_schedule_load(argv[1], &s) != XS_OK) {
        fprintf(stderr, "predict: %s\n", xs_errmsg());
        return 1;
    }
    if (xs_simulate(&p, &s, &o, &r) != XS_OK) {
        fprintf(stderr, "predict: %s\n", xs_errmsg());
        xs_schedule_free(&s);
        return 1;
    }
    xs_result_print(&r, &s, 1, stdout); /* 1: CSV with its header line */
    xs_result_free(&r);
    xs_schedule_free(&s);
    return 0;
}
