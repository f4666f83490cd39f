// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_overlap.c - the pieces of EP's overlapped pipeline (src/ep_overlap.c) and their model
 * (xs_ov_ep_predict), CPU only: the reordering is a permutation whose pieces hold whole tokens
 * in destination order and whose groups hold one expert each; the copies cover every window's
 * used bytes exactly once, each copy inside the slots of its piece's rows; the model against
 * its bounds and a hand-computed case; bad counts refused with one line.
 */
#include <stdlib.h>
#include <string.h>

#include "xstage_overlap.h"
#include "xt.h"

static void one(const char *name, int T, int N, xs_moe_routing rt, int C)
{
    const xs_moe_config *cfg = xs_moe_config_find(name);
    xs_moe_opts o = {T, N, rt, 0, 7};
    xs_moe_problem *pb = NULL;
    XT_CHECK(cfg && xs_moe_problem_create(cfg, &o, 132, &pb) == XS_OK, "create %s: %s", name,
             xs_errmsg());
    if (!pb)
        return;
    xs_moe_ovplan *p = NULL;
    XT_CHECK(xs_moe_ovplan_create(pb, C, &p) == XS_OK, "plan C=%d: %s", C, xs_errmsg());
    if (!p) {
        xs_moe_problem_destroy(pb);
        return;
    }
    const int E = pb->E, rows = pb->rows;
    const size_t row_b = (size_t)pb->H * 2;
    char *seen = (char *)calloc((size_t)rows, 1);
    int bad_perm = 0, bad_group = 0, bad_slot = 0;
    XT_CHECK(p->piece_off[0] == 0 && p->piece_off[C] == rows, "pieces cover the rows");
    for (int i = 0; i < C; i++) {
        int prev = -1;
        for (int e = 0; e < E; e++) {
            const int g0 = p->grp_off[(size_t)i * E + e], n = p->grp_rows[(size_t)i * E + e];
            bad_group += g0 < p->piece_off[i] || g0 + n > p->piece_off[i + 1];
            for (int q = g0; q < g0 + n; q++) {
                const int gr = p->perm[q];
                bad_perm += gr < 0 || gr >= rows || seen[gr]++;
                if (gr < 0 || gr >= rows)
                    continue;
                bad_group += pb->row_expert[gr] != e;
                bad_group += gr <= prev && q > g0; /* expert-sorted order kept */
                prev = gr;
                /* the row's slot lies in one of its piece's copies */
                int in = 0;
                for (int s = p->seg_off[i]; s < p->seg_off[i + 1]; s++)
                    in |= p->seg_rank[s] == pb->row_rank[gr] &&
                          (size_t)pb->row_off[gr] >= p->seg_start[s] &&
                          (size_t)pb->row_off[gr] + row_b <= p->seg_start[s] + p->seg_bytes[s];
                bad_slot += !in;
            }
        }
    }
    XT_CHECK(!bad_perm && !bad_group && !bad_slot, "%s T=%d N=%d C=%d: %d permutation, %d "
             "group, %d slot faults", name, T, N, C, bad_perm, bad_group, bad_slot);
    /* the copies cover each window's used bytes once (each rank's copies in order, adjacent) */
    int bad_cover = 0;
    for (int r = 0; r < N; r++) {
        size_t at = 0;
        for (int s = 0; s < p->nseg; s++)
            if (p->seg_rank[s] == r) {
                bad_cover += p->seg_start[s] != at || !p->seg_bytes[s];
                at = p->seg_start[s] + p->seg_bytes[s];
            }
        bad_cover += at != pb->rank_used[r];
    }
    XT_CHECK(!bad_cover && p->nseg <= C + N - 1, "%s T=%d N=%d C=%d: %d cover faults, %d copies",
             name, T, N, C, bad_cover, p->nseg);
    /* pieces: equal tokens, so rows within topk per token of T/C each; bytes add up */
    xs_ov_ep_piece pc[XS_MOE_OV_MAX_CHUNKS];
    xs_moe_ovplan_pieces(p, pb, pc);
    double rem = 0, loc = 0, frac = 0;
    for (int i = 0; i < C; i++) {
        rem += pc[i].remote_bytes, loc += pc[i].local_bytes, frac += pc[i].rows_frac;
        const int toks = (p->piece_off[i + 1] - p->piece_off[i]) / pb->K;
        XT_CHECK(toks >= T / C && toks <= T / C + 1, "piece %d: %d tokens of %d / %d", i, toks, T,
                 C);
        XT_CHECK(pc[i].groups >= 1 && pc[i].groups <= E && pc[i].calls == 2 * pc[i].groups + 3,
                 "piece %d: %d groups, %d calls", i, pc[i].groups, pc[i].calls);
    }
    xs_moe_info info;
    xs_moe_problem_info(pb, &info);
    XT_NEAR(rem, info.remote_bytes, 1e-12);
    XT_NEAR(rem + loc, info.total_bytes, 1e-12);
    XT_NEAR(frac, 1.0, 1e-12);
    /* the last piece ends with rank 0's window (local, last in destination order) */
    XT_CHECK(p->seg_rank[p->nseg - 1] == 0, "rank 0 last");
    free(seen);
    xs_moe_ovplan_destroy(p);
    xs_moe_problem_destroy(pb);
}

static void plans(void)
{
    static const int cs[] = {1, 2, 3, 4, 8};
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        one("mixtral-8x7b", 256, 4, XS_ROUTE_BALANCED, cs[k]);
        one("deepseek-v2-lite", 250, 8, XS_ROUTE_ZIPF, cs[k]);
        one("olmoe-1b-7b", 97, 2, XS_ROUTE_ZIPF, cs[k]);
        one("qwen3-30b-a3b", 300, 1, XS_ROUTE_BALANCED, cs[k]);
    }
    const xs_moe_config *cfg = xs_moe_config_find("mixtral-8x7b");
    xs_moe_opts o = {16, 4, XS_ROUTE_BALANCED, 0, 1};
    xs_moe_problem *pb = NULL;
    XT_CHECK(cfg && xs_moe_problem_create(cfg, &o, 132, &pb) == XS_OK, "%s", xs_errmsg());
    xs_moe_ovplan *p = NULL;
    XT_CHECK(xs_moe_ovplan_create(pb, 0, &p) == XS_EINVAL && !p, "0 chunks refused");
    XT_CHECK(strchr(xs_errmsg(), '\n') == NULL && strlen(xs_errmsg()) > 0, "one line");
    XT_CHECK(xs_moe_ovplan_create(pb, 17, &p) == XS_EINVAL && !p, "more chunks than tokens");
    xs_moe_problem_destroy(pb);
}

static void model(void)
{
    /* by hand, no call costs, no weight floor: 2 pieces of half the rows; compute 100, copies
     * 50 B at 1 B/ns each: 50, then copies 50..100 and 100..150 */
    xs_ov_ep_piece p[2] = {{0.5, 1, 5, 0, 50, 0, 1}, {0.5, 1, 5, 0, 50, 0, 1}};
    xs_ov_terms h = {1.0, 0, 0, 0};
    double ns = 0;
    XT_CHECK(xs_ov_ep_predict(p, 2, 100, 5, &h, &ns) == XS_OK, "%s", xs_errmsg());
    XT_NEAR(ns, 150.0, 1e-12);
    /* one piece: compute then copy */
    xs_ov_ep_piece w = {1.0, 1, 5, 0, 50, 0, 1};
    XT_CHECK(xs_ov_ep_predict(&w, 1, 100, 5, &h, &ns) == XS_OK, "%s", xs_errmsg());
    XT_NEAR(ns, 150.0, 1e-12);
    /* the weight floor and the call costs: a piece of few rows reads all its weights */
    h.weight_bytes_per_ns = 10, h.call_ns = 1, h.copy_call_ns = 2;
    xs_ov_ep_piece f = {0.01, 1, 4, 5000, 10, 100, 2};
    XT_CHECK(xs_ov_ep_predict(&f, 1, 1000, 5, &h, &ns) == XS_OK, "%s", xs_errmsg());
    XT_NEAR(ns, 500 + 4 + 10 + 10 + 4.0, 1e-12);
    /* never below the compute or the link, never above their sum with every call paid */
    const xs_ov_terms t = xs_ov_terms_default(50);
    for (int C = 1; C <= 8; C *= 2) {
        xs_ov_ep_piece q[8];
        for (int i = 0; i < C; i++)
            q[i] = (xs_ov_ep_piece){1.0 / C, 8, 2 * 8 + 3, 0, 50e6 / C, 0, 1};
        XT_CHECK(xs_ov_ep_predict(q, C, 2e6, 19, &t, &ns) == XS_OK, "%s", xs_errmsg());
        XT_CHECK(ns >= 1e6 && ns <= 2e6 + 1e6 + C * (19 * t.call_ns + t.copy_call_ns),
                 "C %d: %.0f ns", C, ns);
    }
    XT_CHECK(xs_ov_ep_predict(p, 0, 100, 5, &t, &ns) == XS_EINVAL, "no pieces refused");
    XT_CHECK(xs_ov_ep_predict(p, 2, 0, 5, &t, &ns) == XS_EINVAL, "no compute refused");
    XT_CHECK(strchr(xs_errmsg(), '\n') == NULL, "one line");
}

int main(void)
{
    plans();
    model();
    return xt_done();
}
