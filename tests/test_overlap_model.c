// SPDX-License-Identifier: Apache-2.0
/*
 * test_overlap_model.c - the model of the overlapped unfused baselines (src/overlap_model.c):
 * the two-stream pipeline against hand-computed schedules and its closed form, the TP and UP
 * pieces against their bounds, and bad arguments refused with one line.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "xstage_overlap.h"
#include "xt.h"

static void pipeline(void)
{
    /* one piece: compute then copy */
    xs_ov_piece one = {10, 0, 4};
    XT_NEAR(xs_ov_pipeline_ns(&one, 1, 0), 14.0, 1e-12);
    XT_NEAR(xs_ov_pipeline_ns(&one, 1, 3), 17.0, 1e-12);
    XT_CHECK(xs_ov_pipeline_ns(&one, 0, 5) == 0, "no pieces");
    /* equal pieces: the closed form, copy-bound and compute-bound */
    for (int n = 1; n <= 16; n *= 2)
        for (int k = 0; k < 2; k++) {
            const double g = k ? 5.0 : 2.0, x = k ? 2.0 : 5.0;
            xs_ov_piece p[16];
            for (int i = 0; i < n; i++)
                p[i].compute_ns = g, p[i].in_ns = 0, p[i].out_ns = x;
            XT_NEAR(xs_ov_pipeline_ns(p, n, 0), xs_ov_uniform_ns(n, g, x), 1e-12);
        }
    XT_NEAR(xs_ov_uniform_ns(4, 2, 5), 2 + 3 * 5 + 5.0, 1e-12);
    XT_NEAR(xs_ov_uniform_ns(4, 5, 2), 5 + 3 * 5 + 2.0, 1e-12);
    /* by hand: pieces (compute, out) (3, 4), (1, 1), (6, 0): copies end 7 and 8, compute 10 */
    xs_ov_piece h[3] = {{3, 0, 4}, {1, 0, 1}, {6, 0, 0}};
    XT_NEAR(xs_ov_pipeline_ns(h, 3, 0), 10.0, 1e-12);
    h[2].compute_ns = 1; /* compute ends 5, the copies 7 then 8 */
    XT_NEAR(xs_ov_pipeline_ns(h, 3, 0), 8.0, 1e-12);
    /* in transfers first: piece 1 waits for its push (arrives at 2 + 3 = 5), its out copy
     * after every push: compute 0..1, 5..7; copies: pushes end 5, out 7..9 */
    xs_ov_piece a[2] = {{1, 2, 0}, {2, 3, 2}};
    XT_NEAR(xs_ov_pipeline_ns(a, 2, 0), 9.0, 1e-12);
}

static void tp(void)
{
    for (int op = 0; op < XS_TP_NOPS; op++)
        for (int P = 2; P <= 8; P *= 2) {
            xs_tp_shape s = {(xs_tp_op)op, 4096, 8192, 28672, P};
            if (op == XS_TP_MLP)
                s.n = 8192, s.k = 28672;
            xs_tp_info in;
            if (xs_tp_info_of(&s, &in) != XS_OK) {
                XT_CHECK(0, "xs_tp_info_of: %s", xs_errmsg());
                continue;
            }
            const double R = 50.0, comp = 400e3;
            const xs_ov_terms t = xs_ov_terms_default(R);
            const double comm = (in.ag_remote_bytes + in.rs_remote_bytes) / R;
            double prev = 0;
            for (int C = 1; C <= 16; C *= 2) {
                double ns = NAN;
                XT_CHECK(xs_ov_tp_predict(&in, P, comp, &t, C, &ns) == XS_OK, "%s",
                         xs_errmsg());
                /* never below the compute or the transfer alone */
                XT_CHECK(ns >= 0.999 * comp - P * 3 * t.call_ns && ns >= comm * (1 - 1e-12),
                         "op %d P %d C %d: "
                         "%.0f ns against compute %.0f, comm %.0f", op, P, C, ns, comp, comm);
                /* never above compute then transfer in series, with every call paid and
                 * every GEMM call reading its weights */
                const double wr = (double)in.gn[0] * in.gk[0] * 2 +
                                  (in.ngemm > 1 ? (double)in.gn[1] * in.gk[1] * 2 : 0);
                XT_CHECK(ns <= comp + comm + P * C * (3 * t.call_ns + t.copy_call_ns +
                                                      wr / t.weight_bytes_per_ns) * 2,
                         "op %d P %d C %d: %.0f ns above the serial sum", op, P, C, ns);
                prev = ns;
            }
            (void)prev;
            /* a free link: the compute alone (plus the calls the finer pieces add) */
            xs_ov_terms fast = {1e12, 0, 0, 0};
            double ns = 0;
            XT_CHECK(xs_ov_tp_predict(&in, P, comp, &fast, 4, &ns) == XS_OK, "%s", xs_errmsg());
            XT_NEAR(ns, comp, 1e-6);
            /* the weight floor: pieces of few rows take their weight read, not their share */
            fast.weight_bytes_per_ns = 1.0;
            XT_CHECK(xs_ov_tp_predict(&in, P, comp, &fast, 16, &ns) == XS_OK, "%s",
                     xs_errmsg());
            XT_CHECK(ns >= (double)P * 16 * in.gn[0] * in.gk[0] * 2, "op %d P %d: %.0f ns under "
                     "the weight reads", op, P, ns);
        }
    xs_tp_shape s = {XS_TP_GEMM_RS, 4096, 8192, 28672, 4};
    xs_tp_info in;
    XT_CHECK(xs_tp_info_of(&s, &in) == XS_OK, "%s", xs_errmsg());
    const xs_ov_terms t = xs_ov_terms_default(50);
    double ns;
    XT_CHECK(xs_ov_tp_predict(&in, 4, 1e5, &t, 0, &ns) == XS_EINVAL, "0 chunks refused");
    XT_CHECK(strchr(xs_errmsg(), '\n') == NULL && strlen(xs_errmsg()) > 0, "one line");
    XT_CHECK(xs_ov_tp_predict(&in, 4, 0, &t, 2, &ns) == XS_EINVAL, "no compute refused");
    /* gemm_rs by hand, C = 1, no call costs: P pieces of g, P - 1 copies of x, own last */
    xs_ov_terms h = {50, 0, 0, 0};
    const double g = 1e5 / 4, x = (double)in.rs_rows * in.rs_n * 2 / 50;
    XT_CHECK(xs_ov_tp_predict(&in, 4, 1e5, &h, 1, &ns) == XS_OK, "%s", xs_errmsg());
    /* copies start at g, 2g, 3g; each x long */
    double copy = 0;
    for (int i = 1; i <= 3; i++)
        copy = fmax(copy, i * g) + x;
    XT_NEAR(ns, fmax(4 * g, copy), 1e-9);
}

static void up(void)
{
    const xs_ov_terms t = xs_ov_terms_default(50);
    double ns = 0, one = 0;
    /* 16 heads, 64 tiles per head (seq 8192), 132 SMs, 4 peers, 12 MB crossing */
    XT_CHECK(xs_ov_up_predict(1e6, 16, 64, 132, 4, 0, 12e6, &t, 1, &one) == XS_OK, "%s",
             xs_errmsg());
    XT_NEAR(one, 1e6 + t.call_ns + 12e6 / 50 + 3 * t.copy_call_ns, 1e-9);
    double c8 = 0;
    for (int C = 2; C <= 8; C *= 2) {
        XT_CHECK(xs_ov_up_predict(1e6, 16, 64, 132, 4, 0, 12e6, &t, C, &ns) == XS_OK, "%s",
                 xs_errmsg());
        XT_CHECK(ns <= one && ns >= fmax(1e6, 12e6 / 50), "C %d: %.0f against serial %.0f", C,
                 ns, one);
        c8 = ns;
    }
    /* 16 chunks of one head: 64 tiles each, a partial wave of 132 SMs per chunk, 16 waves in
     * all against fa's 8: slower than 8 chunks and than serial */
    XT_CHECK(xs_ov_up_predict(1e6, 16, 64, 132, 4, 0, 12e6, &t, 16, &ns) == XS_OK, "%s",
             xs_errmsg());
    XT_CHECK(ns > c8 && ns > one, "C 16: %.0f against C 8 %.0f, serial %.0f", ns, c8, one);
    /* a chunk below one wave runs as long as a whole wave */
    XT_CHECK(xs_ov_up_predict(1e6, 8, 8, 132, 2, 0, 1e3, &t, 8, &ns) == XS_OK, "%s", xs_errmsg());
    XT_CHECK(ns >= 8 * 1e6, "8 chunks of one partial wave each: %.0f", ns);
    /* causal: a chunk of one wave waits for its longest tile, twice the mean; 16 heads of 64
     * tiles (8 waves) in 8 chunks of 128 tiles, each at least 2 fa / 8 */
    XT_CHECK(xs_ov_up_predict(1e6, 16, 64, 132, 4, 1, 12e6, &t, 8, &ns) == XS_OK, "%s",
             xs_errmsg());
    XT_CHECK(ns >= 8 * (2 * 1e6 / 8), "causal, 8 chunks: %.0f", ns);
    XT_NEAR(ns, 8 * (2 * 1e6 / 8 + t.call_ns) + 12e6 / 8 / 50 + 3 * t.copy_call_ns, 1e-6);
    /* causal and whole waves: the wave share dominates, as without causal */
    double nc = 0;
    XT_CHECK(xs_ov_up_predict(1e6, 16, 64, 132, 4, 1, 12e6, &t, 1, &ns) == XS_OK &&
             xs_ov_up_predict(1e6, 16, 64, 132, 4, 0, 12e6, &t, 1, &nc) == XS_OK, "%s",
             xs_errmsg());
    XT_NEAR(ns, nc, 1e-9);
    XT_CHECK(xs_ov_up_predict(1e6, 16, 64, 132, 4, 0, 12e6, &t, 3, &ns) == XS_EINVAL,
             "3 does not divide 16");
    XT_CHECK(xs_ov_up_predict(-1, 16, 64, 132, 4, 0, 12e6, &t, 2, &ns) == XS_EINVAL, "fa < 0");
}

/* auto's pick: the least finite prediction, the runner-up named, the count in the line */
static void pick(void)
{
    char why[256];
    const xs_auto_cand c[] = {{"naive", 812.0},
                              {"shaped f0.95/b0.0/ring", 631.4},
                              {"unfused", NAN},
                              {"overlapped C=2", 515.3},
                              {"shaped_c4", INFINITY}};
    XT_CHECK(xs_auto_pick(c, 5, why, sizeof why) == 3, "overlapped has the least prediction");
    XT_CHECK(!strcmp(why, "overlapped C=2 (pred 515.3 us) over shaped f0.95/b0.0/ring (pred "
                          "631.4 us), the runner-up: the least predicted completion time of 3 "
                          "variants"), "why: %s", why);
    /* the fused order wins when the pipeline's prediction is larger */
    xs_auto_cand d[] = {{"overlapped C=4", 700}, {"shaped s8", 650}, {"naive", 650}};
    XT_CHECK(xs_auto_pick(d, 3, why, sizeof why) == 1, "first of equals");
    XT_CHECK(strstr(why, "shaped s8 (pred 650.0 us) over naive (pred 650.0 us)") == why, "%s",
             why);
    XT_CHECK(xs_auto_pick(d, 1, why, sizeof why) == 0, "one candidate");
    XT_CHECK(!strcmp(why, "overlapped C=4 (pred 700.0 us): the only variant with a prediction"),
             "%s", why);
    XT_CHECK(xs_auto_pick(c + 2, 1, why, sizeof why) == -1, "no prediction: -1");
    XT_CHECK(!strcmp(why, "no variant has a prediction"), "%s", why);
    XT_CHECK(xs_auto_pick(d, 0, NULL, 0) == -1, "no candidates");
    /* truncated, still terminated */
    char small[8];
    XT_CHECK(xs_auto_pick(d, 3, small, sizeof small) == 1 && strlen(small) == 7, "truncated");
}

/* the acceptance figures over rows, by hand */
static void summary(void)
{
    const double au[4] = {100, 106, 90, NAN}, tu[4] = {101, 103, NAN, 50},
                 bo[4] = {100, 100, 95, 50}, ov[4] = {110, 130, 99, 60},
                 cc[4] = {0.5, 2.5, 1.0, 1.0}, bd[4] = {95, 100, 70, 40};
    xs_auto_sum s;
    xs_auto_summarize(au, tu, bo, ov, cc, bd, 4, &s);
    XT_CHECK(s.rows == 3 && s.auto_met == 2, "auto: %d of %d", s.auto_met, s.rows);
    XT_NEAR(s.auto_worst, 1.06, 1e-12);
    XT_CHECK(s.tuned_rows == 3 && s.tuned_met == 2, "tuned: %d of %d", s.tuned_met,
             s.tuned_rows);
    XT_NEAR(s.tuned_worst, 1.03, 1e-12);
    /* band: rows 0 (0.5, edge in) and 2; row 1 (2.5) out, row 3 has no auto */
    XT_CHECK(s.band_rows == 2, "band rows %d", s.band_rows);
    XT_NEAR(s.band_gm, sqrt(1.1 * 1.1), 1e-12);
    XT_CHECK(s.bound_rows == 3 && s.bound_met == 2, "bound: %d of %d", s.bound_met,
             s.bound_rows);
    char l[4][200];
    xs_auto_sum_lines(&s, l);
    XT_CHECK(!strcmp(l[0], "auto_us <= 1.05 x best_other_us in 2 of 3 rows (worst 1.060): NOT "
                           "met"), "%s", l[0]);
    XT_CHECK(!strcmp(l[2], "overlapped_us/auto_us geomean 1.100 over 2 rows with "
                           "comm_over_compute in [0.5, 2] (target 1.10): met"), "%s", l[2]);
    XT_CHECK(!strcmp(l[3], "auto_us within 10% of bound_us in 2 of 3 rows (target 80%): NOT "
                           "met"), "%s", l[3]);
    xs_auto_summarize(au, tu, bo, ov, cc, bd, 0, &s);
    xs_auto_sum_lines(&s, l);
    XT_CHECK(strstr(l[1], "0 of 0 rows") && strstr(l[1], "NOT met"), "%s", l[1]);
    XT_CHECK(s.rows == 0 && isnan(s.band_gm), "no rows");
}

int main(void)
{
    summary();
    pipeline();
    pick();
    tp();
    up();
    return xt_done();
}
