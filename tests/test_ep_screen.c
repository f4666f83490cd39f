// SPDX-License-Identifier: Apache-2.0
/*
 * test_ep_screen.c - the auto rule's screen (src/ep_auto.c) never changes a result: on every
 * configuration of the EP table at 2 and 8 peers, both routings, the embedded profile (at half
 * the configuration's first token count) and tests/data/h200_host_profile.json (at a quarter of
 * it), and four model variants (the default; every candidate allowed with measured interleaved
 * costs; forced couriers without the lead search; a forced paced lead), xs_moe_auto (candidates
 * screened out by bounds, repeated lists skipped) must equal xs_moe_auto_exhaustive (every
 * candidate predicted in full) field by field: the decision, every prediction (bit for bit) and
 * the reason. And the screen's bounds hold: on each problem, wave and interleaved plans (leads
 * 1, D, 2D, a taper; paced or not) predicted with a best just above their own time
 * (xs_moe_predict_cut) must run to that very time, not be cut. Routing seeds are fresh per run
 * (printed; pass one to repeat it) besides a fixed one. The cases must include paced decisions
 * whose lead search ran, or the screen would go unexercised.
 *
 * usage: test_ep_screen [seed]   last line: "N passed, N failed"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xt.h"
#include "ep_sim.h"
#include "xstage.h"
#include "xstage_ep.h"
#include "xt_ep.h"

/* Every field of a result, doubles with %.17g (exact for a double; memcmp would compare the
 * plans' padding). */
static void fmt_plan(char *b, size_t n, const xs_moe_plan *p)
{
    snprintf(b, n, "%d/%d/%d/%.17g/%.17g/%d/%.17g/%.17g/%d/%d", (int)p->kind, p->lead,
             p->wave_experts, p->pace_bytes, p->pace_bytes_per_ns, p->couriers,
             p->courier_bytes_per_ns, p->admit_ahead_ns, p->spill_depth, p->lead_end);
}

static void fmt_result(char *b, size_t n, const xs_moe_auto_result *r)
{
    char p0[256], p1[256], p2[256];
    fmt_plan(p0, sizeof p0, &r->plan);
    fmt_plan(p1, sizeof p1, &r->courier);
    fmt_plan(p2, sizeof p2, &r->adaptive);
    snprintf(b, n, "%s %d %d %.17g %.17g %.17g %.17g %.17g %d %s %.17g %.17g %.17g %s %.17g "
             "%.17g %.17g | %s", p0, r->criterion_ok, r->reshape_ok, r->wave_ns, r->inter_ns,
             r->paced_ns, r->auto_ns, r->fill_ns, r->drain_bound, p1, r->courier_ns,
             r->courier_compute_ns, r->courier_link_ns, p2, r->adaptive_ns, r->spill_ns,
             r->paced_plain_ns, r->how);
}

static int searched; /* cases whose lead search ran (paced_plain_ns finite) */

/* The bounds of xs_moe_predict_cut never exceed the time: a best 1e-7 above it cuts nothing. */
static void check_bounds(xs_moe_problem *m, const xs_profile *pf, const xs_moe_costs *c,
                         const char *what)
{
    const int d0 = xs_moe_default_lead(m);
    const double rp = XS_MOE_PACE_DRAIN_FRAC * pf->drain_bytes_per_ns;
    const xs_moe_plan plans[5] = {
        {.kind = XS_MOE_WAVE},
        {.kind = XS_MOE_INTERLEAVED, .lead = 1, .pace_bytes = XS_MOE_PACE_BYTES,
         .pace_bytes_per_ns = rp},
        {.kind = XS_MOE_INTERLEAVED, .lead = d0, .pace_bytes = XS_MOE_PACE_BYTES,
         .pace_bytes_per_ns = rp},
        {.kind = XS_MOE_INTERLEAVED, .lead = d0 + 2, .lead_end = (d0 + 2) / 2,
         .pace_bytes = XS_MOE_PACE_BYTES, .pace_bytes_per_ns = rp},
        {.kind = XS_MOE_INTERLEAVED, .lead = 2 * d0}};
    for (int i = 0; i < 5; i++) {
        double full = NAN, cut = NAN;
        XT_CHECK(xs_moe_problem_set_plan(m, 2, &plans[i]) == XS_OK &&
                     xs_moe_predict(m, 2, pf, NULL, c, 1, &full) == XS_OK,
                 "%s plan %d: %s", what, i, xs_errmsg());
        const xs_moe_tasks *tl = &m->slots[2];
        XT_CHECK(xs_moe_predict_cut(m, tl->tasks, tl->n, &plans[i], pf, NULL, c, 1.0,
                                    full * (1 + 1e-7), &cut) == XS_OK && cut == full,
                 "%s plan %d (%s lead %d end %d, pace %g): cut at a best above its time: %.17g "
                 "vs %.17g", what, i, xs_moe_sched_name(plans[i].kind), plans[i].lead,
                 plans[i].lead_end, plans[i].pace_bytes, cut, full);
    }
}

/* One problem, four model variants: screened == exhaustive. */
static void one_case(const xs_moe_config *cfg, int T, int N, xs_moe_routing rt, unsigned seed,
                     const xs_profile *pf, const char *pname)
{
    xs_moe_opts o = {T, N, rt, 0, seed};
    xs_moe_problem *m = NULL;
    XT_CHECK(xs_moe_problem_create(cfg, &o, 132, &m) == XS_OK, "create %s T=%d: %s", cfg->name,
             T, xs_errmsg());
    if (!m)
        return;
    xs_moe_costs c;
    xt_moe_synth_costs(cfg, &c);
    const xs_moe_plan wp = {.kind = XS_MOE_WAVE};
    double kern = NAN;
    XT_CHECK(xs_moe_problem_set_plan(m, 0, &wp) == XS_OK &&
                 xs_moe_predict(m, 0, pf, NULL, &c, 0, &kern) == XS_OK,
             "wave local control %s: %s", cfg->name, xs_errmsg());
    c.kernel_ns = kern;
    char what[160];
    snprintf(what, sizeof what, "%s T=%d N=%d %s seed=%u profile=%s", cfg->name, T, N,
             xs_moe_routing_name(rt), seed, pname);
    check_bounds(m, pf, &c, what);
    xs_moe_costs ic = c;
    ic.c1_ns *= 1.02;
    ic.c2_ns *= 1.04;
    ic.kernel_ns = kern * 1.01;
    for (int v = 0; v < 4; v++) {
        xs_moe_model mm;
        xs_moe_model_default(&mm);
        if (v == 1) {
            mm.auto_couriers = mm.auto_adaptive = 1;
        } else if (v == 2) {
            mm.couriers = 8;
            mm.lead_search = 0;
        } else if (v == 3) {
            mm.paced_lead = xs_moe_default_lead(m) + 1;
            mm.paced_lead_end = mm.paced_lead / 2;
        }
        xs_moe_auto_result fast, full;
        const xs_status s1 = xs_moe_auto(m, pf, &mm, &c, v == 1 ? &ic : NULL, NULL, &fast);
        const xs_status s2 =
            xs_moe_auto_exhaustive(m, pf, &mm, &c, v == 1 ? &ic : NULL, NULL, &full);
        XT_CHECK(s1 == XS_OK && s2 == XS_OK, "%s T=%d N=%d: auto %d, exhaustive %d: %s",
                 cfg->name, T, N, (int)s1, (int)s2, xs_errmsg());
        static char a[2048], b[2048];
        fmt_result(a, sizeof a, &fast);
        fmt_result(b, sizeof b, &full);
        XT_CHECK(!strcmp(a, b), "%s T=%d N=%d %s seed=%u profile=%s model %d: screened and "
                 "exhaustive differ:\n  screened   %s\n  exhaustive %s", cfg->name, T, N,
                 xs_moe_routing_name(rt), seed, pname, v, a, b);
        searched += s1 == XS_OK && !isnan(fast.paced_plain_ns);
    }
    xs_moe_problem_destroy(m);
}

int main(int argc, char **argv)
{
    unsigned fresh = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10)
                              : (unsigned)time(NULL) ^ (unsigned)clock();
    printf("# routing seeds 5 and %u (test_ep_screen %u repeats this run)\n", fresh, fresh);
    xs_profile pfs[2];
    xs_profile_default(&pfs[0]);
    int npf = 1;
    if (xs_profile_load("tests/data/h200_host_profile.json", &pfs[1]) == XS_OK)
        npf = 2;
    XT_CHECK(npf == 2, "tests/data/h200_host_profile.json (run from the repository root)");
    const char *pnames[2] = {"embedded", "h200_host_profile.json"};
    for (int pi = 0; pi < npf; pi++)
        for (int ci = 0; ci < xs_moe_nconfigs; ci++) {
            const xs_moe_config *cfg = &xs_moe_configs[ci];
            const int T = pi ? cfg->tokens[0] / 4 : cfg->tokens[0] / 2;
            const int peers[2] = {2, 8};
            for (int ni = 0; ni < 2; ni++)
                for (int rt = 0; rt < 2; rt++)
                    one_case(cfg, T, peers[ni], (xs_moe_routing)rt, (ni + rt) & 1 ? fresh : 5u,
                             &pfs[pi], pnames[pi]);
        }
    XT_CHECK(searched > 0, "no case ran the paced lead search: the screen is not exercised");
    printf("# %d results with a lead search\n", searched);
    return xt_done();
}
