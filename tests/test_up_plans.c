// SPDX-License-Identifier: Apache-2.0
/*
 * test_up_plans.c - recorded decisions of the UP model and planner (src/up_model.c,
 * src/up_plan.c): over tests/xt_up.h's grid of configurations (sequence lengths, heads, causal,
 * ranks, SM counts, paced and unpaced couriers) on the embedded profile and on
 * tests/data/h200_host_profile.json, the fluid criterion, the split deltas with their
 * simulations, the couriers' rates and predictions, the KV splits' predictions and the planner's
 * decision and family under five option sets, every double printed with %.17g, must equal
 * tests/data/up_plans.txt line for line. The file was produced by the code before it moved into
 * src/ (bench up's planner); a change in any prediction shows here.
 *
 * usage: test_up_plans [-w]   (-w rewrites the expected file)   last line: "N passed, N failed"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt.h"
#include "xstage_up.h"
#include "xt_up.h"

#define EXPECTED "tests/data/up_plans.txt"

static void dump_plans(FILE *f, const xs_up_cfg *c, const xs_profile *prof, const double *dur,
                       const uint64_t *tns)
{
    for (int v = 0; v < XT_UP_N(xt_up_variants); v++) {
        const xt_up_variant *vr = &xt_up_variants[v];
        xs_up_plan_opts o = {vr->split, vr->order, vr->couriers, vr->kv, vr->kv_ok,
                             vr->load_drain, vr->slice_ns};
        xs_up_plan pl;
        xs_up_plan_run(&o, prof, c, dur, tns, &pl);
        const int crit_held_keff = pl.k_eff;
        char nm[32];
        fprintf(f, "plan %s: fluid %d crit %d held_us %.17g peak_mb %.17g sync_mb %.17g "
                "keff %d -> %s order %d split %d couriers %d kv %d pace %.17g d_pb %.17g "
                "d_fu %.17g n %d\n", vr->name, pl.fluid_ok, pl.criterion_ok, pl.pb.held_ns / 1e3,
                pl.fluid_peak_bytes / 1e6, pl.sync_bytes / 1e6, crit_held_keff,
                xs_up_plan_name(pl.order, pl.split, pl.couriers, pl.kv, nm, sizeof nm),
                pl.order, pl.split, pl.couriers, pl.kv, pl.courier_pace, pl.d_pb_ns, pl.d_fu_ns,
                pl.fam.n);
        const xs_up_family *fm = &pl.fam;
        for (int i = 0; i < fm->n; i++)
            fprintf(f, "member %d %s %d %d %d %d %.17g %.17g\n", i,
                    xs_up_plan_name(fm->ord[i], fm->spl[i], fm->cou[i], fm->kv[i], nm,
                                    sizeof nm),
                    fm->ord[i], fm->spl[i], fm->cou[i], fm->kv[i], fm->d[i], fm->dp[i]);
    }
}

static void dump_predictions(FILE *f, const xs_up_cfg *c, const xs_profile *prof,
                             const double *dur, const uint64_t *tns)
{
    double peak = 0, sync = 0;
    int keff = 0;
    int fl = xs_up_criterion_fluid(prof, c, tns, &peak, &keff, &sync);
    fprintf(f, "fluid %d peak %.17g keff %d sync %.17g\n", fl, peak, keff, sync);
    static const int splits[] = {0, 1, 3, 8, 16, 256};
    for (int o = 0; o <= 1; o++)
        for (int i = 0; i < 6; i++) {
            xs_attn_progsim sim;
            memset(&sim, 0, sizeof sim);
            double d = xs_up_predict_delta(prof, c, dur, o, splits[i], &sim);
            fprintf(f, "delta %d %d %.17g %.17g %.17g %.17g %.17g\n", o, splits[i], d,
                    sim.span_ns, sim.free_ns, sim.held_ns, sim.peak_bytes);
        }
    static const int cs[] = {1, 2, 4, 8, 16};
    for (int i = 0; i < 5; i++) {
        fprintf(f, "rate %d %.17g\n", cs[i], xs_up_courier_rate(prof, c, cs[i]));
        for (int o = 0; o <= 1; o++)
            fprintf(f, "courier %d %d %.17g\n", o, cs[i],
                    xs_up_predict_courier(prof, c, dur, o, cs[i]));
    }
    static const int kbs[] = {8, 16, 32, 64};
    for (int i = 0; i < 4; i++)
        for (int s = 0; s <= 8; s += 8) {
            int slices = -1, listed = 0;
            double d = xs_up_predict_kv(prof, c, dur, kbs[i], s, &slices, &listed);
            fprintf(f, "kv %d %d %.17g %d\n", kbs[i], s, d, slices);
        }
}

/* Every configuration of the grid on one profile. Returns the number of configurations. */
static int dump(FILE *f, const char *pname, const xs_profile *prof)
{
    int n = 0;
    for (int is = 0; is < XT_UP_N(xt_up_seqs); is++)
    for (int ih = 0; ih < XT_UP_N(xt_up_heads); ih++)
    for (int causal = 0; causal <= 1; causal++)
    for (int ip = 0; ip < XT_UP_N(xt_up_peers); ip++)
    for (int im = 0; im < XT_UP_N(xt_up_sms); im++, n++) {
        xs_up_cfg c;
        memset(&c, 0, sizeof c);
        c.seq = xt_up_seqs[is], c.heads = xt_up_heads[ih], c.causal = causal;
        c.peers = xt_up_peers[ip], c.sms = xt_up_sms[im];
        c.tiles = xs_attn_tiles(c.seq, c.heads);
        c.grid = c.tiles < c.sms ? c.tiles : c.sms;
        c.pace_bytes_per_ns = c.sms == 132 ? XT_UP_PACE * prof->drain_bytes_per_ns : 0.0;
        c.rows_per_rank = c.seq / c.peers;
        c.remote = xs_attn_remote_tiles(c.seq, c.heads, c.rows_per_rank);
        double *dur = (double *)malloc((size_t)c.tiles * sizeof(double));
        uint64_t *tns = (uint64_t *)malloc((size_t)c.tiles * sizeof(uint64_t));
        if (!dur || !tns) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        xt_up_inputs(c.seq, c.heads, c.causal, c.grid, c.tiles, dur, tns);
        fprintf(f, "cfg %s seq %d heads %d causal %d peers %d sms %d tiles %d grid %d remote %d "
                "pace %.17g\n", pname, c.seq, c.heads, c.causal, c.peers, c.sms, c.tiles, c.grid,
                c.remote, c.pace_bytes_per_ns);
        dump_predictions(f, &c, prof, dur, tns);
        dump_plans(f, &c, prof, dur, tns);
        free(dur), free(tns);
    }
    return n;
}

int main(int argc, char **argv)
{
    char *got = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&got, &len);
    xs_profile p;
    xs_profile_default(&p);
    int ncfg = dump(f, "embedded", &p);
    XT_CHECK(xs_profile_load("tests/data/h200_host_profile.json", &p) == XS_OK, "%s",
             xs_errmsg());
    ncfg += dump(f, "h200_host_profile", &p);
    fclose(f);
    if (argc > 1 && !strcmp(argv[1], "-w")) {
        FILE *w = fopen(EXPECTED, "w");
        XT_CHECK(w && fwrite(got, 1, len, w) == len, "cannot write %s", EXPECTED);
        if (w)
            fclose(w);
        free(got);
        return xt_done();
    }
    FILE *e = fopen(EXPECTED, "r");
    XT_CHECK(e != NULL, "cannot open %s (run from the repository root)", EXPECTED);
    if (e) {
        /* line by line: every line of the recorded file is one case */
        char *want = NULL;
        size_t cap = 0;
        int lineno = 0, bad = 0;
        char *g = got;
        ssize_t n;
        while ((n = getline(&want, &cap, e)) > 0) {
            lineno++;
            char *nl = strchr(g, '\n');
            const size_t gl = nl ? (size_t)(nl - g) + 1 : strlen(g);
            const int same = gl == (size_t)n && !memcmp(g, want, gl);
            if (same)
                xt_passed++;
            else if (xt_failed++, bad++ < 5) /* the first few differences, not thousands */
                fprintf(stderr, "FAIL line %d:\n  want %s  got  %.*s\n", lineno, want, (int)gl,
                        g);
            g += gl;
        }
        XT_CHECK(*g == 0, "%zu more bytes than recorded", strlen(g));
        printf("# %d configurations, %d recorded lines\n", ncfg, lineno);
        free(want);
        fclose(e);
    }
    free(got);
    return xt_done();
}
