// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_decisions.c - recorded decisions of the EP model (src/ep_*.c): for every configuration
 * of the table, two token counts, 1, 2 and 8 peers, both routings, two seeds and two profiles (the
 * embedded one and tests/data/h200_host_profile.json), the auto rule's decision and predictions
 * (the default model and a variant with every candidate allowed), the decisions' predicted
 * traces with and without the link, their costs and the stall replay, printed with %.17g, must
 * equal tests/data/ep_decisions.txt byte for byte. That file was written by the model before it
 * moved from cuda/moe.cu to src/: this test holds the move (and any later refactoring) to the
 * same numbers. A deliberate model change regenerates it: test_ep_decisions --dump > FILE.
 *
 * usage: test_ep_decisions [--dump] [expected-file]   last line: "N passed, N failed"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt.h"
#include "xstage.h"
#include "xstage_ep.h"
#include "xt_ep.h"

static void pplan(FILE *f, const char *tag, const xs_moe_plan *p)
{
    fprintf(f, " %s=%d/%d/%d/%.17g/%.17g/%d/%.17g/%.17g/%d/%d", tag, (int)p->kind, p->lead,
            p->wave_experts, p->pace_bytes, p->pace_bytes_per_ns, p->couriers,
            p->courier_bytes_per_ns, p->admit_ahead_ns, p->spill_depth, p->lead_end);
}

static void pauto(FILE *f, const xs_moe_auto_result *r)
{
    pplan(f, "plan", &r->plan);
    fprintf(f, " crit=%d reshape=%d drain=%d wave=%.17g inter=%.17g paced=%.17g auto=%.17g "
            "fill=%.17g spill=%.17g plain=%.17g adaptive=%.17g courier=%.17g cc=%.17g cl=%.17g",
            r->criterion_ok, r->reshape_ok, r->drain_bound, r->wave_ns, r->inter_ns, r->paced_ns,
            r->auto_ns, r->fill_ns, r->spill_ns, r->paced_plain_ns, r->adaptive_ns, r->courier_ns,
            r->courier_compute_ns, r->courier_link_ns);
    pplan(f, "courier", &r->courier);
    pplan(f, "adaptive", &r->adaptive);
    fprintf(f, "\n  how: %s\n", r->how);
}

/* one case: auto (default model and a variant), the auto plan's predicted trace with the link,
 * its costs, and the stall replay of that trace */
static void one_case(FILE *f, const xs_moe_config *cfg, int tokens, int peers, int rt,
                     unsigned seed, const xs_profile *pf, const char *pname)
{
    xs_moe_opts o = {tokens, peers, (xs_moe_routing)rt, 0, seed};
    xs_moe_problem *m = NULL;
    fprintf(f, "case %s T=%d N=%d %s seed=%u profile=%s\n", cfg->name, tokens, peers,
            rt ? "zipf" : "balanced", seed, pname);
    if (xs_moe_problem_create(cfg, &o, 132, &m) != XS_OK) {
        fprintf(f, "  create: %s\n", xs_errmsg());
        return;
    }
    xs_moe_costs c;
    xt_moe_synth_costs(cfg, &c);
    const xs_moe_plan wp = {.kind = XS_MOE_WAVE};
    double kern = NAN;
    if (xs_moe_problem_set_plan(m, 0, &wp) != XS_OK ||
        xs_moe_predict(m, 0, pf, NULL, &c, 0, &kern) != XS_OK)
        fprintf(f, "  wave local: %s\n", xs_errmsg());
    c.kernel_ns = kern;
    fprintf(f, "  wave_local=%.17g\n", kern);
    xs_moe_auto_result r;
    xs_status st = xs_moe_auto(m, pf, NULL, &c, NULL, NULL, &r);
    fprintf(f, "  auto st=%d", (int)st);
    pauto(f, &r);
    /* a variant: measured interleaved costs, every candidate allowed, no lead search */
    xs_moe_model mm;
    xs_moe_model_default(&mm);
    mm.auto_couriers = 1;
    mm.auto_adaptive = 1;
    mm.lead_search = (seed & 1) ? 0 : 1;
    mm.couriers = (seed & 1) ? 8 : XS_MOE_COURIERS_AUTO;
    xs_moe_costs ic = c;
    ic.c1_ns *= 1.02;
    ic.c2_ns *= 1.04;
    ic.kernel_ns = kern * 1.01;
    xs_moe_auto_result r2;
    st = xs_moe_auto(m, pf, &mm, &c, &ic, NULL, &r2);
    fprintf(f, "  auto2 st=%d", (int)st);
    pauto(f, &r2);
    /* the decision's predicted trace with the link, its costs and the stall replay */
    xs_moe_info info;
    xs_moe_problem_info(m, &info);
    const int n = info.l1_tiles + info.l2_tiles;
    xs_moe_tile *t = calloc((size_t)n + 1, sizeof *t);
    xs_moe_tile *tl = calloc((size_t)n + 1, sizeof *t);
    double *ref = malloc(sizeof(double) * ((size_t)n + 1));
    double *ps = malloc(sizeof(double) * ((size_t)n + 1));
    double *pm = malloc(sizeof(double) * ((size_t)n + 1));
    const xs_moe_plan *dp[2] = {&r.plan, &r2.plan};
    for (int k = 0; k < 2 && t && tl && ref && ps && pm; k++) {
        double tot = NAN, loc = NAN;
        st = xs_moe_problem_set_plan(m, 1, dp[k]);
        if (st == XS_OK)
            st = xs_moe_predict_trace(m, 1, pf, NULL, &c, 1, t, &tot);
        if (st == XS_OK)
            st = xs_moe_predict_trace(m, 1, pf, NULL, &c, 0, tl, &loc);
        fprintf(f, "  plan%d st=%d link=%.17g local=%.17g\n", k, (int)st, tot, loc);
        if (st != XS_OK)
            continue;
        xs_moe_costs ct;
        xs_moe_costs_from_trace(t, n, &ct);
        fprintf(f, "  costs c1=%.17g c2=%.17g mma1=%.17g mma2=%.17g span2=%.17g lr=%.17g "
                "wait=%.17g kern=%.17g\n", ct.c1_ns, ct.c2_ns, ct.mma1_ns, ct.mma2_ns, ct.span2_ns,
                ct.local_issue_bytes_per_ns, ct.wait_ns, ct.kernel_ns);
        for (int i = 0; i < n; i++)
            ref[tl[i].id] = tl[i].mma1_ns - tl[i].mma0_ns;
        xs_moe_stall s;
        st = xs_moe_stall_predict(t, n, pf, NULL, c.local_issue_bytes_per_ns, ref, n, &s, ps, pm);
        double sps = 0, spm = 0;
        for (int i = 0; i < n; i++) {
            sps += isnan(ps[i]) ? 0 : ps[i];
            spm += isnan(pm[i]) ? 0 : pm[i];
        }
        fprintf(f, "  stall st=%d tiles=%d meas=%.17g pred=%.17g err=%.17g p90=%.17g mt=%d "
                "mmeas=%.17g mpred=%.17g merr=%.17g mp90=%.17g blocked=%.17g sum_span=%.17g "
                "sum_mma=%.17g t0=%.17g\n", (int)st, s.tiles, s.meas_stall_med_ns,
                s.pred_stall_med_ns, s.abs_err_med_ns, s.abs_err_p90_ns, s.mma_tiles,
                s.mma_meas_med_ns, s.mma_pred_med_ns, s.mma_abs_err_med_ns, s.mma_abs_err_p90_ns,
                s.blocked_ns, sps, spm,
                xs_moe_tile_t0(pf, 30000.0, 65536.0, c.local_issue_bytes_per_ns));
    }
    free(t); free(tl); free(ref); free(ps); free(pm);
    xs_moe_problem_destroy(m);
}

static int dump_all(FILE *f, const char *profile_path)
{
    xs_profile pfs[2];
    xs_profile_default(&pfs[0]);
    if (xs_profile_load(profile_path, &pfs[1]) != XS_OK) {
        fprintf(stderr, "%s\n", xs_errmsg());
        return -1;
    }
    const char *pnames[2] = {"embedded", "h200_host_profile.json"};
    int cases = 0;
    for (int ci = 0; ci < xs_moe_nconfigs; ci++) {
        const xs_moe_config *cfg = &xs_moe_configs[ci];
        const int toks[2] = {cfg->tokens[0] / 4, cfg->tokens[0] / 2};
        const int peers[3] = {1, 2, 8};
        for (int pi = 0; pi < 2; pi++)
            for (int ti = 0; ti < 2; ti++)
                for (int ni = 0; ni < 3; ni++)
                    for (int rt = 0; rt < 2; rt++) {
                        if (ni == 0 && rt == 1)
                            continue; /* N = 1: no remote bytes, one routing is enough */
                        const unsigned seed = 5u + (unsigned)(ti + 2 * rt);
                        one_case(f, cfg, toks[ti], peers[ni], rt, seed, &pfs[pi], pnames[pi]);
                        cases++;
                    }
    }
    /* the couriers' link on its own */
    const double ready[6] = {0, 100, 150, 900, 1000, 5000};
    const double bytes[6] = {65536, 0, 32768, 65536, 1000, 65536};
    for (int C = 0; C <= 4; C++)
        fprintf(f, "courier_drain C=%d %.17g %.17g\n", C,
                xs_moe_courier_drain(ready, bytes, 6, C, 50.0),
                xs_moe_courier_drain(ready, bytes, 6, C, 0));
    fprintf(f, "cases %d\n", cases);
    return cases;
}

/* The next line of a text (NUL-terminated, advancing *s), without its newline, into buf. */
static int next_line(const char **s, char *buf, size_t cap)
{
    if (!**s)
        return 0;
    const char *e = strchr(*s, '\n');
    size_t len = e ? (size_t)(e - *s) : strlen(*s);
    if (len >= cap)
        len = cap - 1;
    memcpy(buf, *s, len);
    buf[len] = 0;
    *s = e ? e + 1 : *s + strlen(*s);
    return 1;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b) {
        size_t got = fread(b, 1, (size_t)n, f);
        b[got] = 0;
    }
    fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    const char *want_path = "tests/data/ep_decisions.txt";
    int dump = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dump"))
            dump = 1;
        else
            want_path = argv[i];
    }
    const char *profile = "tests/data/h200_host_profile.json";
    if (dump)
        return dump_all(stdout, profile) > 0 ? 0 : 1;
    char *got = NULL;
    size_t got_len = 0;
    FILE *f = open_memstream(&got, &got_len);
    XT_CHECK(f != NULL, "open_memstream");
    if (!f)
        return xt_done();
    const int cases = dump_all(f, profile);
    fclose(f);
    char *want = read_file(want_path);
    XT_CHECK(want != NULL, "cannot read %s (run from the repository root)", want_path);
    XT_CHECK(cases > 0, "no cases computed: %s", xs_errmsg());
    if (want && cases > 0) {
        const char *a = got, *b = want;
        static char la[4096], lb[4096];
        int line = 0, bad = 0;
        for (;;) {
            const int ha = next_line(&a, la, sizeof la), hb = next_line(&b, lb, sizeof lb);
            if (!ha && !hb)
                break;
            line++;
            if (ha && hb && !strcmp(la, lb))
                continue;
            if (++bad <= 5)
                fprintf(stderr, "line %d differs:\n  want: %s\n  got:  %s\n", line,
                        hb ? lb : "(end)", ha ? la : "(end)");
        }
        XT_CHECK(bad == 0, "%d of %d lines differ from %s", bad, line, want_path);
        printf("%s %d cases (%d lines) equal to %s\n", bad ? "FAIL" : "ok  ", cases, line,
               want_path);
    }
    free(want);
    free(got);
    return xt_done();
}
