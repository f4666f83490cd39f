// SPDX-License-Identifier: Apache-2.0
/*
 * ep_trace.c - the fused MoE kernel's tile stamps (xs_moe_trace) as trace v1 records
 * (include/xstage_trace.h, docs/TRACE.md "Workload traces"), so that `xstage compare --trace`
 * and `--timeline` read a `bench ep` run.
 */
#include <math.h>
#include <stdlib.h>

#include "xstage_ep.h"
#include "xstage_trace.h"

typedef struct {
    int cta, i;
    double t;
} ep_key;

static int cmp_key(const void *x, const void *y)
{
    const ep_key *a = (const ep_key *)x, *b = (const ep_key *)y;
    if (a->cta != b->cta)
        return a->cta < b->cta ? -1 : 1;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

xs_status xs_moe_trace_records(const xs_moe_tile *t, int n, xs_trace_record **out,
                               size_t *nout)
{
    *out = NULL, *nout = 0;
    if (n < 0 || (n > 0 && !t))
        return xs_seterr(XS_EINVAL, "EP trace records: %d tiles", n);
    int k = 0;
    for (int i = 0; i < n; i++)
        k += t[i].cta >= 0;
    ep_key *key = (ep_key *)malloc(sizeof *key * (size_t)(k + 1));
    xs_trace_record *r = (xs_trace_record *)calloc((size_t)(k + 1), sizeof *r);
    if (!key || !r) {
        free(key), free(r);
        return xs_seterr(XS_ENOMEM, "EP trace records: out of memory for %d tiles", k);
    }
    k = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].cta < 0)
            continue;
        const xs_moe_tile *u = &t[i];
        if (!(u->mma1_ns >= u->mma0_ns) || !isfinite(u->mma0_ns) || !isfinite(u->mma1_ns) ||
            (isfinite(u->st0_ns) && isfinite(u->st1_ns) && u->st1_ns < u->st0_ns)) {
            free(key), free(r);
            return xs_seterr(XS_EINVAL, "EP trace records: tile %d (CTA %d): reversed or "
                             "missing span (main loop %.0f..%.0f ns, stores %.0f..%.0f ns)", i,
                             u->cta, u->mma0_ns, u->mma1_ns, u->st0_ns, u->st1_ns);
        }
        key[k++] = (ep_key){u->cta, i, u->mma0_ns};
    }
    qsort(key, (size_t)k, sizeof *key, cmp_key);
    int seq = 0;
    int64_t last_end = 0;
    for (int j = 0; j < k; j++) {
        const xs_moe_tile *u = &t[key[j].i];
        if (j == 0 || key[j].cta != key[j - 1].cta)
            seq = 0, last_end = INT64_MIN;
        const int stores = isfinite(u->st0_ns) && isfinite(u->st1_ns) && u->st1_ns >= u->st0_ns;
        int64_t s0 = llround(stores ? u->st0_ns : u->mma1_ns);
        int64_t s1 = llround(stores ? u->st1_ns : u->mma1_ns);
        /* a deferring kernel's flush can begin before the CTA's previous issue ended: v1 keeps
         * one CTA's issue windows apart, so the window starts at that end */
        if (s0 < last_end)
            s0 = last_end;
        if (s1 < s0)
            s1 = s0;
        r[j].cta = u->cta, r[j].sm = u->smid >= 0 ? u->smid : 0, r[j].seq = seq++;
        r[j].flags = XS_TRACE_WORK;
        r[j].bytes = u->kind == 2 && u->remote_bytes > 0 ? u->remote_bytes : 0;
        r[j].issue_start_ns = s0, r[j].issue_end_ns = s1;
        r[j].work_start_ns = llround(u->mma0_ns), r[j].work_end_ns = llround(u->mma1_ns);
        last_end = s1;
    }
    free(key);
    int64_t lo = 0; /* v1 times are >= 0: a stamp before the kernel's first fetch moves all */
    for (int j = 0; j < k; j++) {
        lo = r[j].issue_start_ns < lo ? r[j].issue_start_ns : lo;
        lo = r[j].work_start_ns < lo ? r[j].work_start_ns : lo;
    }
    for (int j = 0; lo < 0 && j < k; j++) {
        r[j].issue_start_ns -= lo, r[j].issue_end_ns -= lo;
        r[j].work_start_ns -= lo, r[j].work_end_ns -= lo;
    }
    *out = r, *nout = (size_t)k;
    return XS_OK;
}
