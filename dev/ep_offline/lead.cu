/*
 * lead.cu - what bench ep's model predicts for the paced interleaved order at other leads and
 * with a tapered lead (xs_moe_plan.lead_end), on one point, with the tile costs of a measured
 * local-control trace (CPU only, host-only problem; docs/EP.md, "Run 21").
 *
 * usage: lead PROFILE.json TILES.csv CONFIG ROUTING TOKENS PEERS [COST_TOKENS [WAVE_US INTER_US]]
 *
 * TILES.csv is a `bench ep --tiles` trace (uncompressed). The costs are the medians of its
 * local-wave and local-interleaved tiles at (CONFIG, ROUTING, COST_TOKENS, PEERS); COST_TOKENS
 * defaults to TOKENS. WAVE_US and INTER_US replace the local controls' kernel times (the bench
 * CSV's local_us and local_interleaved_us of TOKENS), for a point whose own trace was not kept.
 * Prints xs_moe_auto's decision (a check of the reconstruction against the bench's pred_auto_us),
 * then the paced interleaved order at leads D/2..2D, each without and with tapers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tests/xt.h"
#include "xstage.h"
#include "../../cuda/moe.h"
#include "../../tests/xt_moe.h"

#define LEAD_MAX_COLS 64

/* The local-control tiles of one schedule at one point. Returns the count (0: none). */
static int read_trace(const char *path, const char *cfg, const char *routing, int tokens,
                      int peers, const char *sched, xs_moe_tile **out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "lead: cannot open %s\n", path);
        exit(1);
    }
    char line[4096];
    char *col[LEAD_MAX_COLS];
    int ncol = 0, idx[32];
    const char *want[] = {"config", "routing", "tokens", "peers", "schedule", "kind", "rb", "nb",
                          "cta", "smid", "remote_bytes", "total_bytes", "fetch_ns", "mma0_ns",
                          "mma1_ns", "st0_ns", "st1_ns", "gate_ns"};
    const int nwant = (int)(sizeof want / sizeof want[0]);
    int cap = 1024, n = 0;
    xs_moe_tile *t = (xs_moe_tile *)calloc((size_t)cap, sizeof *t);
    if (!t) {
        fprintf(stderr, "lead: out of host memory for a trace\n");
        exit(1);
    }
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        line[strcspn(line, "\r\n")] = 0;
        int nc = 0;
        for (char *s = line, *tok; (tok = strsep(&s, ",")) && nc < LEAD_MAX_COLS;)
            col[nc++] = tok;
        if (!ncol) {
            for (int w = 0; w < nwant; w++) {
                idx[w] = -1;
                for (int c = 0; c < nc; c++)
                    if (!strcmp(col[c], want[w]))
                        idx[w] = c;
                if (idx[w] < 0) {
                    fprintf(stderr, "lead: %s has no column %s\n", path, want[w]);
                    exit(1);
                }
            }
            ncol = nc;
            continue;
        }
        if (nc != ncol || strcmp(col[idx[0]], cfg) || strcmp(col[idx[1]], routing) ||
            atoi(col[idx[2]]) != tokens || atoi(col[idx[3]]) != peers ||
            strcmp(col[idx[4]], sched))
            continue;
        if (n == cap) {
            cap *= 2;
            xs_moe_tile *g = (xs_moe_tile *)realloc(t, sizeof *t * (size_t)cap);
            if (!g) {
                fprintf(stderr, "lead: out of host memory for a trace of %d tiles\n", n);
                exit(1);
            }
            t = g;
        }
        xs_moe_tile *x = &t[n++];
        memset(x, 0, sizeof *x);
        x->kind = atoi(col[idx[5]]);
        x->rb = atoi(col[idx[6]]);
        x->nb = atoi(col[idx[7]]);
        x->cta = atoi(col[idx[8]]);
        x->smid = atoi(col[idx[9]]);
        x->remote_bytes = atoi(col[idx[10]]);
        x->total_bytes = atoi(col[idx[11]]);
        x->fetch_ns = atof(col[idx[12]]);
        x->mma0_ns = atof(col[idx[13]]);
        x->mma1_ns = atof(col[idx[14]]);
        x->st0_ns = atof(col[idx[15]]);
        x->st1_ns = atof(col[idx[16]]);
        x->gate_ns = atof(col[idx[17]]);
        x->seq = -1;
    }
    fclose(f);
    *out = t;
    return n;
}

/* the model's time of plan pl (link: 1 with the X-Stage, 0 the local control) x fi */
static double predict(xs_moe *m, const xs_profile *p, const xs_moe_plan *pl,
                      const xs_moe_costs *c, int link, double fi)
{
    double t = NAN;
    if (xs_moe_set_plan(m, 0, pl) != XS_OK ||
        xs_moe_predict(m, 0, p, NULL, c, link, &t) != XS_OK) {
        fprintf(stderr, "lead: %s\n", xs_errmsg());
        exit(1);
    }
    return t * fi;
}

int main(int argc, char **argv)
{
    if (argc != 7 && argc != 8 && argc != 10) {
        fprintf(stderr, "usage: lead PROFILE.json TILES.csv CONFIG ROUTING TOKENS PEERS "
                        "[COST_TOKENS [WAVE_US INTER_US]]\n");
        return 2;
    }
    xs_profile p;
    if (xs_profile_load(argv[1], &p) != XS_OK) {
        fprintf(stderr, "lead: %s\n", xs_errmsg());
        return 1;
    }
    const char *cfg = argv[3], *routing = argv[4];
    const int tokens = atoi(argv[5]), peers = atoi(argv[6]);
    const int ctok = argc >= 8 ? atoi(argv[7]) : tokens;
    xs_moe_tile *tw = NULL, *ti = NULL;
    const int nw = read_trace(argv[2], cfg, routing, ctok, peers, "local-wave", &tw);
    const int ni = read_trace(argv[2], cfg, routing, ctok, peers, "local-interleaved", &ti);
    if (!nw || !ni) {
        fprintf(stderr, "lead: no local-wave or local-interleaved tiles of %s %s T=%d N=%d in %s\n",
                cfg, routing, ctok, peers, argv[2]);
        return 1;
    }
    xs_moe_costs cw, ci;
    xs_moe_costs_from_trace(tw, nw, &cw);
    xs_moe_costs_from_trace(ti, ni, &ci);
    if (argc == 10) {
        cw.kernel_ns = atof(argv[8]) * 1e3;
        ci.kernel_ns = atof(argv[9]) * 1e3;
    }
    const xs_moe_routing rt = !strcmp(routing, "zipf") ? XS_ROUTE_ZIPF : XS_ROUTE_BALANCED;
    const xs_moe_config *c = xs_moe_config_find(cfg);
    xs_moe_opts o = {tokens, peers, rt, 0, 1u}; /* bench ep's default seed */
    xs_moe *m = NULL;
    if (!c || xs_moe_create_host(c, &o, 132, &m) != XS_OK) {
        fprintf(stderr, "lead: %s: %s\n", cfg, c ? xs_errmsg() : "no such configuration");
        return 1;
    }
    printf("# %s %s T=%d N=%d, costs of T=%d: c1 %.1f c2 %.1f us, local kernels wave %.1f "
           "interleaved %.1f us\n", cfg, routing, tokens, peers, ctok, ci.c1_ns / 1e3,
           ci.c2_ns / 1e3, cw.kernel_ns / 1e3, ci.kernel_ns / 1e3);
    xs_moe_auto_result ar;
    if (xs_moe_auto(m, &p, NULL, &cw, &ci, NULL, &ar) != XS_OK) {
        fprintf(stderr, "lead: auto: %s\n", xs_errmsg());
        return 1;
    }
    printf("# auto: %s\n", ar.how);
    /* the interleaved order's scale: its local control over the model's local time of D */
    const int d0 = xs_moe_default_lead(m);
    const xs_moe_plan ip = {XS_MOE_INTERLEAVED, d0, 0, 0, 0};
    const double fi = ci.kernel_ns / predict(m, &p, &ip, &ci, 0, 1.0);
    xs_moe_model mm;
    xs_moe_model_default(&mm);
    const double rp = mm.pace_drain_frac * p.drain_bytes_per_ns;
    const double bound = ci.kernel_ns < cw.kernel_ns ? ci.kernel_ns : cw.kernel_ns;
    printf("# D = %d, scale %.4f, bound (compute) %.1f us; paced at %.0f B, %.1f B/ns\n", d0, fi,
           bound / 1e3, mm.pace_bytes, rp);
    printf("%6s %8s %10s %8s\n", "lead", "lead_end", "pred_us", "/bound");
    for (int lead = d0 / 2 > 1 ? d0 / 2 : 1; lead <= 2 * d0; lead++) {
        for (int le = 0; le < lead; le += (le < 4 ? 1 : 2)) {
            xs_moe_plan pp = {XS_MOE_INTERLEAVED, lead, 0, mm.pace_bytes, rp};
            pp.lead_end = le;
            const double t = predict(m, &p, &pp, &ci, 1, fi);
            printf("%6d %8d %10.1f %8.3f\n", lead, le, t / 1e3, t / bound);
        }
    }
    free(tw);
    free(ti);
    xs_moe_destroy(m);
    return 0;
}
