// SPDX-License-Identifier: Apache-2.0
/*
 * ep_tasks.c - the fused kernel's task lists (include/xstage_ep.h, docs/EP.md "Schedules"): the
 * plan checks, the default lead and wave, the wave / interleaved / adaptive orders of the
 * Linear-1 and Linear-2 tiles, and the combine bytes of a Linear-2 tile. A schedule is nothing
 * but the order of this list: the kernel takes its tasks through one atomic counter.
 */
#include <stdlib.h>

#include "ep_sim.h"
#include "xstage_ep.h"

/* ---- task lists ------------------------------------------------------------------------------ */

int xs_moe_default_lead_ctas(const xs_moe_problem *pb, int ctas)
{
    if (ctas < 1)
        ctas = 1;
    return (ctas + pb->l1_per_rb - 1) / pb->l1_per_rb + 1;
}

int xs_moe_default_lead(const xs_moe_problem *pb)
{
    return xs_moe_default_lead_ctas(pb, pb->grid);
}

int xs_moe_default_wave(const xs_moe_problem *pb)
{
    /* experts in the first wave of the default rule (waves grow expert by expert until they
     * hold at least one machine-wide round of Linear-1 tiles) */
    int tiles = 0, e = 0;
    while (e < pb->E && tiles < pb->grid) {
        tiles += (pb->expert_rows[e] + XS_MOE_BM - 1) / XS_MOE_BM * pb->l1_per_rb;
        e++;
    }
    return e < 1 ? 1 : e;
}

xs_status xs_moe_plan_check(const xs_moe_problem *pb, const xs_moe_plan *p)
{
    if (p->kind != XS_MOE_WAVE && p->kind != XS_MOE_INTERLEAVED && p->kind != XS_MOE_ADAPTIVE)
        return xs_seterr(XS_EINVAL, "moe: a plan is wave, interleaved or adaptive (resolve auto "
                         "first)");
    if (p->kind == XS_MOE_ADAPTIVE &&
        (!(p->pace_bytes_per_ns > 0 && p->pace_bytes_per_ns < 1e9) ||
         !(p->admit_ahead_ns >= 0 && p->admit_ahead_ns < 1e12) || p->couriers))
        return xs_seterr(XS_EINVAL, "moe: an adaptive plan needs an admission rate in (0, 1e9) "
                         "bytes/ns, a lookahead in [0, 1e12) ns and no couriers (got %g bytes/ns, "
                         "%g ns, %d couriers)", p->pace_bytes_per_ns, p->admit_ahead_ns,
                         p->couriers);
    if (p->lead < 0 || p->wave_experts < 0)
        return xs_seterr(XS_EINVAL, "moe: negative lead %d or wave size %d", p->lead,
                         p->wave_experts);
    if (p->lead_end < 0 || (p->lead_end > 0 && p->lead_end >= p->lead))
        return xs_seterr(XS_EINVAL, "moe: lead_end=%d: 0 (no taper) or 1..lead-1 (lead %d)",
                         p->lead_end, p->lead);
    if (p->pace_bytes < 0 || !(p->pace_bytes < 1e15) ||
        (p->pace_bytes > 0 && !(p->pace_bytes_per_ns > 0 && p->pace_bytes_per_ns < 1e9)))
        return xs_seterr(XS_EINVAL, "moe: pacing needs pace_bytes >= 0 and, when pacing, a drain "
                         "rate in (0, 1e9) bytes/ns (got %g bytes, %g bytes/ns)", p->pace_bytes,
                         p->pace_bytes_per_ns);
    if (p->couriers < 0 || p->couriers >= pb->grid)
        return xs_seterr(XS_EINVAL, "moe: couriers=%d must be in 0..%d (at least one of the %d "
                         "CTAs computes)", p->couriers, pb->grid - 1, pb->grid);
    if (p->couriers > 0 && !(p->courier_bytes_per_ns > 0 && p->courier_bytes_per_ns < 1e9))
        return xs_seterr(XS_EINVAL, "moe: couriers need an issue rate in (0, 1e9) bytes/ns (got "
                         "%g)", p->courier_bytes_per_ns);
    if (p->couriers > 0 && p->pace_bytes > 0)
        return xs_seterr(XS_EINVAL, "moe: a plan either paces the epilogue's combine "
                         "(pace_bytes) or hands it to couriers, not both");
    if (p->spill_depth < 0 || p->spill_depth > XS_MOE_SPILL_MAX ||
        (p->spill_depth > 0 && (!(p->pace_bytes > 0) || p->kind == XS_MOE_ADAPTIVE)))
        return xs_seterr(XS_EINVAL, "moe: spill_depth=%d: 0, or 1..%d in a paced wave or "
                         "interleaved plan (pace_bytes %g, %s)", p->spill_depth, XS_MOE_SPILL_MAX,
                         p->pace_bytes, xs_moe_sched_name(p->kind));
    return XS_OK;
}

/* The lead of row block b's Linear-2 tiles: `lead`, or with lead_end the linear taper from lead
 * (b = 0) to lead_end (b = nrb - 1 - lead_end, whose Linear-2 tiles follow the last Linear-1
 * tile), rounded to the nearest row block. */
static int xs_moe_lead_at(const xs_moe_problem *pb, const xs_moe_plan *p, int b)
{
    if (p->lead_end <= 0 || p->lead_end >= p->lead)
        return p->lead;
    const long long span = (long long)pb->nrb - 1 - p->lead_end;
    if (span <= 0 || b >= span)
        return p->lead_end;
    return p->lead_end +
           (int)((2 * (long long)(p->lead - p->lead_end) * (span - b) + span) / (2 * span));
}

void xs_moe_lead_need(const xs_moe_problem *pb, const xs_moe_plan *p, int *need)
{
    for (int b = 0; b < pb->nrb; b++) {
        const long long n = (long long)b + xs_moe_lead_at(pb, p, b);
        need[b] = n > pb->nrb - 1 ? pb->nrb - 1 : (int)n;
    }
}

/* The task list of a (checked) plan into t[trace_cap]; returns the number of tasks. */
int xs_moe_tasks_build(const xs_moe_problem *pb, const xs_moe_plan *p, xs_moe_task *t)
{
    const int n1 = pb->nrb * pb->l1_per_rb, n2 = pb->nrb * pb->l2_per_rb;
    const int ctas = pb->grid - p->couriers; /* the CTAs that run the list */
    int q = 0;
    if (p->kind == XS_MOE_ADAPTIVE) {
        /* two queues in one list: the Linear-1 tiles [0, n1), the Linear-2 tiles [n1, n1 + n2),
         * each in row-block order; the CTAs choose between their heads */
        for (int b = 0; b < pb->nrb; b++)
            for (int nb = 0; nb < pb->l1_per_rb; nb++)
                t[q++] = xs_moe_task_make(1, b, nb);
        for (int b = 0; b < pb->nrb; b++)
            for (int nb = 0; nb < pb->l2_per_rb; nb++)
                t[q++] = xs_moe_task_make(2, b, nb);
    } else if (p->kind == XS_MOE_WAVE) {
        /* waves of consecutive experts: all Linear-1 tiles of the wave, then its Linear-2.
         * wave_experts = 0: a wave grows expert by expert until it holds >= one Linear-1 tile
         * per computing CTA (one machine-wide round), so skewed routing gives waves of equal
         * work */
        int b0 = 0, e0 = 0;
        while (e0 < pb->E) {
            int e1 = e0, tiles = 0;
            if (p->wave_experts) {
                e1 = e0 + p->wave_experts < pb->E ? e0 + p->wave_experts : pb->E;
            } else {
                while (e1 < pb->E && tiles < ctas) {
                    tiles += (pb->expert_rows[e1] + XS_MOE_BM - 1) / XS_MOE_BM * pb->l1_per_rb;
                    e1++;
                }
            }
            int b1 = b0;
            while (b1 < pb->nrb && pb->rb[b1].expert < e1)
                b1++;
            for (int b = b0; b < b1; b++)
                for (int nb = 0; nb < pb->l1_per_rb; nb++)
                    t[q++] = xs_moe_task_make(1, b, nb);
            for (int b = b0; b < b1; b++)
                for (int nb = 0; nb < pb->l2_per_rb; nb++)
                    t[q++] = xs_moe_task_make(2, b, nb);
            b0 = b1;
            e0 = e1;
        }
    } else {
        /* proportional merge of the Linear-1 and Linear-2 sequences (row-block order) with the
         * Linear-1 prefix at least `lead` row blocks ahead of every Linear-2 tile placed */
        long long i1 = 0, i2 = 0;
        int b = 0, nb = 0;      /* i2 = b * l2_per_rb + nb */
        int b1 = 0, nb1 = 0;    /* i1 = b1 * l1_per_rb + nb1 */
        long long need1 = -1;   /* Linear-1 tiles row block b's Linear-2 tiles need (-1: not yet) */
        while (i1 < n1 || i2 < n2) {
            if (i2 < n2) {
                if (need1 < 0) {
                    long long need_rb = (long long)b + xs_moe_lead_at(pb, p, b);
                    if (need_rb > pb->nrb - 1)
                        need_rb = pb->nrb - 1;
                    need1 = (need_rb + 1) * pb->l1_per_rb;
                }
                int ready = i1 >= need1;
                int behind = i1 >= n1 || i2 * (long long)n1 <= i1 * (long long)n2;
                if (ready && behind) {
                    t[q++] = xs_moe_task_make(2, b, nb);
                    i2++;
                    if (++nb == pb->l2_per_rb) {
                        nb = 0;
                        b++;
                        need1 = -1;
                    }
                    continue;
                }
            }
            t[q++] = xs_moe_task_make(1, b1, nb1);
            i1++;
            if (++nb1 == pb->l1_per_rb) {
                nb1 = 0;
                b1++;
            }
        }
    }
    return q;
}

/* a new xs_moe_plan field must be compared here too */
_Static_assert(sizeof(xs_moe_plan) == 64, "xs_moe_plan changed: update xs_moe_plan_equal");
int xs_moe_plan_equal(const xs_moe_plan *a, const xs_moe_plan *b)
{
    return a->kind == b->kind && a->lead == b->lead && a->wave_experts == b->wave_experts &&
           a->pace_bytes == b->pace_bytes && a->pace_bytes_per_ns == b->pace_bytes_per_ns &&
           a->couriers == b->couriers && a->courier_bytes_per_ns == b->courier_bytes_per_ns &&
           a->admit_ahead_ns == b->admit_ahead_ns && a->spill_depth == b->spill_depth &&
           a->lead_end == b->lead_end;
}

/* remote and total combine bytes of Linear-2 tile (rb, nb) for the virtual-peer layout */
void xs_moe_tile_bytes(const xs_moe_problem *pb, int rb, int nb, double *remote, double *total)
{
    int nv = pb->H - nb * XS_MOE_BN;
    int ncols = nv < XS_MOE_BN ? nv : XS_MOE_BN;
    *total = (double)pb->rb[rb].rows * ncols * 2.0;
    *remote = pb->N > 1 ? (double)pb->rb[rb].remote * ncols * 2.0 : 0.0;
}

xs_status xs_moe_problem_set_plan(xs_moe_problem *pb, int slot, const xs_moe_plan *p)
{
    if (slot < 0 || slot >= XS_MOE_SLOTS)
        return xs_seterr(XS_EINVAL, "moe: plan slot %d out of 0..%d", slot, XS_MOE_SLOTS - 1);
    XS_TRY(xs_moe_plan_check(pb, p));
    xs_moe_tasks *tl = &pb->slots[slot];
    const int n = pb->nrb * (pb->l1_per_rb + pb->l2_per_rb);
    if (!tl->tasks) {
        tl->tasks = malloc(sizeof(xs_moe_task) * (size_t)(pb->trace_cap + 1));
        if (!tl->tasks)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory for a task list");
    }
    const int q = xs_moe_tasks_build(pb, p, tl->tasks);
    if (q != n)
        return xs_seterr(XS_EINVAL, "moe: internal: task list of %d tasks, expected %d", q, n);
    tl->n = n;
    tl->plan = *p;
    return XS_OK;
}
