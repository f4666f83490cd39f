// SPDX-License-Identifier: Apache-2.0
/*
 * test_tp_orders.c - recorded decisions of the TP planner (include/xstage_tp.h): every order the
 * builders make over 210 configurations (the three operations, P = 1..8, grids 1, 5 and 132,
 * first and last rank, 0, 1 or 4 couriers, a courier pace, llama3-8b widths, invalid requests),
 * on two cost sets and on the embedded and H200 host profiles (tests/data/h200_host_profile.json)
 * - naive, the XS_TP_NCAND shaped candidates, their ring ones stored, the front-loaded order and
 * its splits - with each order's status, task count, hash, couriers, statistics, walk, check and
 * xs_tp_predict's ns (%.17g), compared line by line with tests/data/tp_orders.txt. That file was
 * written by the planner before it moved from cuda/tp.cu to src/tp_*.c; a record equal to an
 * earlier one of its block is written as "=index".
 *
 * usage: test_tp_orders [-w FILE]   (-w: write the records to FILE instead of comparing)
 *        last line: "N passed, N failed"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"
#include "xstage_tp.h"
#include "xt.h"

#define EXPECTED "tests/data/tp_orders.txt"
#define PROFILE "tests/data/h200_host_profile.json"

/* Where records go: a file being written, or the expected file being compared with. */
typedef struct {
    FILE *w;        /* -w: the output */
    FILE *expect;   /* else: the expected records */
    long n, bad;    /* records, mismatches */
} od_out;

static void od_emit(od_out *o, const char *line)
{
    o->n++;
    if (o->w) {
        fprintf(o->w, "%s\n", line);
        return;
    }
    char want[2048];
    if (!fgets(want, sizeof want, o->expect))
        want[0] = 0;
    want[strcspn(want, "\n")] = 0;
    if (!strcmp(want, line))
        xt_passed++;
    else if (o->bad++ < 5) /* the first few in full */
        XT_CHECK(0, "record %ld:\n  got  %s\n  want %s", o->n, line, want);
    else
        xt_failed++;
}

#define OD_PLAN xs_tp_plan

static xs_status od_plan_new(const xs_tp_shape *s, int rank, int grid, xs_tp_plan **pl)
{
    return xs_tp_plan_create(s, rank, grid, pl);
}

static void od_plan_del(xs_tp_plan *pl) { xs_tp_plan_destroy(pl); }

static xs_status od_plan_couriers(xs_tp_plan *pl, int couriers, double pace)
{
    XS_TRY(xs_tp_plan_set_couriers(pl, couriers));
    return xs_tp_plan_set_courier_pace(pl, pace);
}

/* ---- the recorded cases ------------------------------------------------------------------------ */

static xs_tp_costs od_costs(const xs_tp_info *in, int comm_heavy)
{
    xs_tp_costs c;
    memset(&c, 0, sizeof c);
    for (int g = 0; g < in->ngemm; g++)
        c.tile_ns[g] = 2.0 * XS_TP_BM * XS_TP_BN * in->gk[g] / 2.65e12 * 1e9 + 1000;
    c.push_ns = 1600;
    c.reduce_ns = 3000;
    if (comm_heavy) {
        for (int g = 0; g < in->ngemm; g++)
            c.tile_ns[g] = c.tile_ns[g] / 8 + 200;
        c.push_ns = 20000;
        c.reduce_ns = 9000;
    }
    return c;
}

/* The record of the order in slot 0: status, task count, hash, couriers, statistics, walk,
 * check, and the prediction on profile prof (with the planner's one line where with_plan). */
static void od_record(char *line, size_t cap, OD_PLAN *t, xs_status built, const xs_tp_costs *c,
                      const xs_profile *prof, int with_plan)
{
    int k = snprintf(line, cap, "st=%d", (int)built);
    if (built != XS_OK) {
        snprintf(line + k, cap - k, " %s", xs_errmsg());
        return;
    }
    xs_tp_order_info oi;
    const xs_status sst = xs_tp_order_stats(t, 0, &oi);
    const int *walk;
    const int nw = xs_tp_order_walk(t, 0, &walk);
    unsigned long long wsum = 0;
    for (int i = 0; i < nw; i++)
        wsum = wsum * 1000003ull + (unsigned long long)(unsigned)walk[i];
    const xs_status cst = xs_tp_order_check(t, 0);
    k += snprintf(line + k, cap - k, " %d %016llx c%d s%d:%d/%d/%d/%d/%d/%d/%.17g w%d/%d/%llx k%d",
                  xs_tp_order_tasks(t, 0), xs_tp_order_hash(t, 0), xs_tp_order_couriers(t, 0),
                  (int)sst, oi.steps, oi.tasks, oi.remote_tiles, oi.pushes, oi.deferred,
                  oi.spread, oi.max_step_bytes, nw, xs_tp_order_walk_pushes(t, 0), wsum, (int)cst);
    xs_tp_pred pr;
    const xs_status pst = xs_tp_predict(t, 0, prof, c, with_plan, &pr);
    k += snprintf(line + k, cap - k, " p%d:%.17g/%.17g/%.17g/%d/%d", (int)pst, pr.model_ns,
                  pr.ideal_ns, pr.bytes, pr.rows, pr.criterion_ok);
    if (with_plan && pst == XS_OK && k < (int)cap)
        snprintf(line + k, cap - k, " [%s]", pr.how);
}

#define OD_MAXC (XS_TP_NCAND + 8)

/* Every order of one (shape, rank, grid, couriers, courier pace): per (cost set, profile) block
 * naive and the shaped candidates (the XS_TP_NCAND of xs_tp_candidates, their ring ones stored,
 * the front-loaded order and its splits); a record equal to an earlier one of its block is
 * written as a reference to it. */
static void od_config(od_out *o, const xs_tp_shape *s, int rank, int G, int C, double cpace,
                      const xs_profile *profs)
{
    static char rec[OD_MAXC + 1][640];
    char line[800];
    OD_PLAN *t = NULL;
    int k = snprintf(line, sizeof line, "# %s m=%d n=%d k=%d P=%d r=%d G=%d C=%d pace=%g",
                     xs_tp_op_name(s->op), s->m, s->n, s->k, s->peers, rank, G, C, cpace);
    xs_status st = od_plan_new(s, rank, G, &t);
    if (st == XS_OK)
        st = od_plan_couriers(t, C, cpace);
    if (st != XS_OK)
        snprintf(line + k, sizeof line - k, " setup=%d %s", (int)st, xs_errmsg());
    od_emit(o, line);
    if (st != XS_OK) {
        od_plan_del(t);
        return;
    }
    xs_tp_info in;
    xs_tp_info_of(s, &in);
    for (int b = 0; b < 3; b++) {
        const int cost = b == 2, p = b == 1;
        const xs_tp_costs c = od_costs(&in, cost);
        xs_tp_pace cand[OD_MAXC];
        int nc = xs_tp_candidates(0.9 * xs_capacity(&profs[p], G - C), cand, XS_TP_NCAND);
        for (int i = 0; i < XS_TP_NCAND; i++)
            if (cand[i].ring) {
                cand[nc] = cand[i];
                cand[nc++].spread = 0;
            }
        xs_tp_pace_front(&cand[nc++]);
        for (int sp = 2; sp <= 8; sp *= 2) {
            xs_tp_pace_front(&cand[nc]);
            cand[nc++].split = sp;
        }
        for (int i = -1; i < nc; i++) {
            char *r = rec[i + 1];
            const xs_status bst =
                i < 0 ? xs_tp_order_naive(t, 0) : xs_tp_order_shaped(t, 0, &cand[i], &c, &profs[p]);
            od_record(r, sizeof rec[0], t, bst, &c, &profs[p], i < 1);
            int same = -2;
            for (int j = -1; j < i && same < -1; j++)
                if (!strcmp(rec[j + 1], r))
                    same = j;
            if (same >= -1)
                snprintf(line, sizeof line, "%d.%d =%d", b, i, same);
            else
                snprintf(line, sizeof line, "%d.%d %.*s", b, i, 700, r);
            od_emit(o, line);
        }
    }
    od_plan_del(t);
}

/* All recorded configurations. */
static void od_all(od_out *o, const xs_profile *profs)
{
    static const int Ps[] = {1, 2, 3, 4, 8};
    for (int pi = 0; pi < 5; pi++) {
        const int P = Ps[pi];
        const xs_tp_shape small[] = {
            {XS_TP_GEMM_RS, 256 * P, 264, 64 * P, P},
            {XS_TP_GEMM_RS, 128 * P, 520, 24 * P, P},
            {XS_TP_GEMM_RS, 512 * P, 1024, 1024 * P, P},
            {XS_TP_AG_GEMM, 256 * P, 200 * P, 520, P},
            {XS_TP_AG_GEMM, 128 * P, 64 * P, 1032, P},
            {XS_TP_MLP, 128 * P, 264, 96 * P, P},
            {XS_TP_MLP, 384 * P, 136, 48 * P, P},
        };
        for (int i = 0; i < 7; i++) {
            if (P <= 2)
                od_config(o, &small[i], P - 1, 1, 0, 0, profs);
            od_config(o, &small[i], 0, 5, 0, 0, profs);
            od_config(o, &small[i], 0, 132, 0, 0, profs);
            if (P > 2)
                od_config(o, &small[i], P - 1, 132, 0, 0, profs);
            if (P == 1)
                continue;
            od_config(o, &small[i], 0, 5, 4, 0, profs);
            od_config(o, &small[i], P - 1, 132, 4, 0, profs);
            if (P == 2 || P == 4) {
                od_config(o, &small[i], 0, 132, 1, 0, profs);
                od_config(o, &small[i], 1, 132, 4, 30, profs);
            }
        }
    }
    /* model widths: llama3-8b over P = 2, 4 and 8 */
    for (int P = 2; P <= 8; P *= 2) {
        const xs_tp_shape big[] = {
            {XS_TP_GEMM_RS, 4096, 4096, 14336, P},
            {XS_TP_AG_GEMM, 4096, 2 * 14336, 4096, P},
            {XS_TP_MLP, 4096, 4096, 14336, P},
        };
        for (int i = 0; i < 3; i++) {
            od_config(o, &big[i], 0, 132, 0, 0, profs);
            od_config(o, &big[i], 1, 132, 4, 0, profs);
        }
    }
    /* invalid requests: their one-line errors are part of the behaviour */
    const xs_tp_shape bad = {XS_TP_GEMM_RS, 100, 64, 64, 2};
    od_config(o, &bad, 0, 4, 0, 0, profs);
    const xs_tp_shape one = {XS_TP_AG_GEMM, 256, 128, 64, 1};
    od_config(o, &one, 0, 4, 2, 0, profs);
    od_config(o, &one, 0, 4, 0, 0, profs);
}

int main(int argc, char **argv)
{
    xs_profile profs[2];
    xs_profile_default(&profs[0]);
    if (xs_profile_load(PROFILE, &profs[1]) != XS_OK) {
        fprintf(stderr, "test_tp_orders: %s\n", xs_errmsg());
        return 1;
    }
    od_out o;
    memset(&o, 0, sizeof o);
    if (argc == 3 && !strcmp(argv[1], "-w")) {
        if (!(o.w = fopen(argv[2], "w"))) {
            fprintf(stderr, "test_tp_orders: cannot write %s\n", argv[2]);
            return 1;
        }
        od_all(&o, profs);
        fclose(o.w);
        printf("%ld records written to %s\n", o.n, argv[2]);
        return 0;
    }
    if (!(o.expect = fopen(EXPECTED, "r"))) {
        fprintf(stderr, "test_tp_orders: cannot read %s\n", EXPECTED);
        return 1;
    }
    od_all(&o, profs);
    char extra[16];
    XT_CHECK(!fgets(extra, sizeof extra, o.expect), "%s has more records than the %ld made",
             EXPECTED, o.n);
    fclose(o.expect);
    if (o.bad)
        fprintf(stderr, "%ld of %ld records differ from %s\n", o.bad, o.n, EXPECTED);
    return xt_done();
}
