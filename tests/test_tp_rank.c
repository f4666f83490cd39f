// SPDX-License-Identifier: Apache-2.0
/*
 * test_tp_rank.c - the TP ranking's shortcuts (src/tp_plan.c xs_tp_predict_candidates) against
 * plain predictions. Over the default sweep's shapes (the three operations, the three models,
 * both token counts, each one's two default peer counts; 132 CTAs; lab/plan_timing.c's costs) on
 * the embedded profile, and with the first token count on the H200 host profile
 * (tests/data/h200_host_profile.json), with the engine
 * candidates and, for gemm_rs, the courier candidates (4 couriers):
 *   - the best alone (pred NULL: shared schedules, bounds, early stop) is the full ranking's;
 *   - every candidate's bound (tp_rank_bound) is at most its prediction (within the ranking's
 *     1e-9 relative slack: a bound equal to a prediction may round above it);
 *   - on the first shapes, the full ranking's pred[i] (shared between equal schedules) is
 *     xs_tp_predict's model_ns of candidate i built alone, bit for bit.
 * last line: "N passed, N failed"
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tp_plan.h"
#include "xstage.h"
#include "xt.h"

#define PROFILE "tests/data/h200_host_profile.json"

static void costs_of(const xs_tp_info *in, xs_tp_costs *c)
{
    memset(c, 0, sizeof *c);
    for (int g = 0; g < in->ngemm; g++)
        c->tile_ns[g] = 2.0 * XS_TP_BM * XS_TP_BN * in->gk[g] / 2.65e12 * 1e9 + 1000;
    c->push_ns = 1600;
    c->reduce_ns = 3000;
}

/* One shape on one profile with one candidate set; `alone`: also predict each candidate on its
 * own. */
static void check_shape(const char *what, xs_tp_plan *pl, const xs_tp_pace *cand,
                        const int *usable, int nc, const xs_tp_costs *c, const xs_profile *pf,
                        int alone)
{
    double pred[XS_TP_NCAND + 8];
    int full = -1, fast = -1;
    xs_status st = xs_tp_predict_candidates(pl, 2, cand, usable, nc, c, pf, pred, &full);
    XT_CHECK(st == XS_OK, "%s: full ranking: %s", what, xs_errmsg());
    st = xs_tp_predict_candidates(pl, 2, cand, usable, nc, c, pf, NULL, &fast);
    XT_CHECK(st == XS_OK, "%s: best alone: %s", what, xs_errmsg());
    XT_CHECK(fast == full && full >= 0, "%s: best alone %d, full ranking %d", what, fast, full);
    for (int i = 0; i < nc; i++) {
        if (!usable[i])
            continue;
        tp_rank_item it;
        st = xs_tp_order_shaped(pl, 3, &cand[i], c, pf);
        if (st == XS_OK)
            st = tp_rank_prep(pl, 3, pf, c, &it);
        XT_CHECK(st == XS_OK, "%s: candidate %d: %s", what, i, xs_errmsg());
        if (st != XS_OK)
            continue;
        st = tp_rank_bound(pf, &it);
        const double lb = it.lb;
        if (st == XS_OK)
            st = tp_rank_finish(pf, &it);
        /* the ranking's slack: a bound may round above a prediction it equals */
        XT_CHECK(st == XS_OK && lb * (1 - 1e-9) <= it.pred && it.pred == pred[i],
                 "%s: candidate %d: bound %.17g, prediction %.17g, in the ranking %.17g", what, i,
                 lb, it.pred, pred[i]);
        tp_rank_free(&it);
        if (alone) {
            xs_tp_pred pp;
            st = xs_tp_predict(pl, 3, pf, c, 0, &pp);
            XT_CHECK(st == XS_OK && pp.model_ns == pred[i],
                     "%s: candidate %d alone: %.17g, in the ranking %.17g", what, i, pp.model_ns,
                     pred[i]);
        }
    }
}

int main(void)
{
    xs_profile pfs[2];
    xs_profile_default(&pfs[0]);
    const int npf = xs_profile_load(PROFILE, &pfs[1]) == XS_OK ? 2 : 1;
    XT_CHECK(npf == 2, "%s (run from the repository root): %s", PROFILE, xs_errmsg());
    int shapes = 0;
    for (int f = 0; f < npf; f++)
        for (int op = 0; op < 3; op++)
            for (int mi = 0; mi < XS_TP_NMODELS; mi++) {
                const xs_tp_model *md = xs_tp_model_at(mi);
                int nn = 0, kk = 0;
                xs_tp_model_nk((xs_tp_op)op, md, &nn, &kk);
                for (int a = 0; a < (f ? 1 : 2); a++) {
                    int ps[8];
                    const int nps = xs_tp_default_peers((xs_tp_op)op, md, md->tokens[a],
                                                        pfs[f].drain_bytes_per_ns, 355.0, 2, ps);
                    for (int pi = 0; pi < nps; pi++) {
                        const xs_tp_shape s = {(xs_tp_op)op, md->tokens[a], nn, kk, ps[pi]};
                        xs_tp_info in;
                        xs_tp_plan *pl = NULL;
                        if (xs_tp_info_of(&s, &in) != XS_OK ||
                            xs_tp_plan_create(&s, 0, 132, &pl) != XS_OK) {
                            XT_CHECK(0, "shape %d: %s", shapes, xs_errmsg());
                            continue;
                        }
                        xs_tp_costs c;
                        costs_of(&in, &c);
                        char what[96];
                        snprintf(what, sizeof what, "profile %d %s %s m=%d P=%d", f,
                                 xs_tp_op_name((xs_tp_op)op), md->name, s.m, s.peers);
                        xs_tp_pace cand[XS_TP_NCAND + 4];
                        int usable[XS_TP_NCAND + 4];
                        const int nc = xs_tp_candidates(0.9 * xs_capacity(&pfs[f], 132), cand,
                                                        XS_TP_NCAND);
                        xs_tp_engine_candidates(1, cand, nc, usable);
                        check_shape(what, pl, cand, usable, nc, &c, &pfs[f], shapes < 4);
                        if (op == XS_TP_GEMM_RS && xs_tp_plan_set_couriers(pl, 4) == XS_OK) {
                            static const int split[3] = {2, 4, 8};
                            int front, fsplit[3];
                            const int ncc = xs_tp_courier_candidates(
                                0.9 * xs_capacity(&pfs[f], 128), split, s.peers > 1 ? 3 : 0,
                                cand, usable, &front, fsplit);
                            strncat(what, ", 4 couriers", sizeof what - strlen(what) - 1);
                            check_shape(what, pl, cand, usable, ncc, &c, &pfs[f], 0);
                        }
                        xs_tp_plan_destroy(pl);
                        shapes++;
                    }
                }
            }
    printf("ok tp_rank: %d shapes, the best alone equal to the full ranking, bounds below the "
           "predictions\n", shapes);
    return xt_done();
}
