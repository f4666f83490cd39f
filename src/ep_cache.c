// SPDX-License-Identifier: Apache-2.0
/*
 * ep_cache.c - the EP auto rule's decision cache (include/xstage_ep.h, "the decision cache"): a
 * set-associative table of xs_moe_auto results keyed by the inputs that decide them, exactly (the
 * default) or by bucket (opt-in), with hit and miss counts.
 *
 * A key is a byte string built from the inputs; entries keep their key whole, so an entry is
 * found only when the whole key is equal (the 64-bit hash only picks the set and skips most
 * compares). Four entries per set, the least recently used one replaced.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_ep.h"

#define XS_MC_WAYS 4

typedef struct {
    uint64_t h;
    unsigned char *key; /* [klen], owned; NULL: empty */
    size_t klen;
    unsigned long long used; /* the cache's clock at the last hit or store */
    xs_moe_auto_result res;
} xs_mc_entry;

struct xs_moe_cache {
    xs_moe_cache_opts o;
    int nsets;
    xs_mc_entry *e;         /* [nsets * XS_MC_WAYS] */
    unsigned char *kb;      /* the key being built */
    size_t kn, kcap;
    int oom;                /* the key buffer could not grow */
    unsigned long long clock;
    xs_moe_cache_stats st;
};

xs_status xs_moe_cache_create(const xs_moe_cache_opts *o, xs_moe_cache **out)
{
    *out = NULL;
    xs_moe_cache_opts d = {XS_MOE_CACHE_EXACT, 0, 0, 0, 0};
    if (o)
        d = *o;
    if (d.key != XS_MOE_CACHE_EXACT && d.key != XS_MOE_CACHE_BUCKETED)
        return xs_seterr(XS_EINVAL, "moe cache: key %d: expected exact (0) or bucketed (1)",
                         (int)d.key);
    if (d.entries < 0 || d.tokens_per_octave < 0 || !(d.imbalance_step >= 0) ||
        !(d.remote_step >= 0))
        return xs_seterr(XS_EINVAL, "moe cache: entries %d, tokens_per_octave %d, imbalance_step "
                         "%g, remote_step %g: none may be negative", d.entries,
                         d.tokens_per_octave, d.imbalance_step, d.remote_step);
    if (d.entries > (1 << 20))
        return xs_seterr(XS_EINVAL, "moe cache: %d entries: at most %d", d.entries, 1 << 20);
    if (d.entries == 0)
        d.entries = 256;
    if (d.tokens_per_octave == 0)
        d.tokens_per_octave = 4;
    if (d.imbalance_step == 0)
        d.imbalance_step = 0.25;
    if (d.remote_step == 0)
        d.remote_step = 1.0 / 16;
    xs_moe_cache *c = calloc(1, sizeof *c);
    const int nsets = (d.entries + XS_MC_WAYS - 1) / XS_MC_WAYS;
    if (c)
        c->e = calloc((size_t)nsets * XS_MC_WAYS, sizeof *c->e);
    if (!c || !c->e) {
        free(c);
        return xs_seterr(XS_ENOMEM, "moe cache: out of host memory for %d entries", d.entries);
    }
    d.entries = nsets * XS_MC_WAYS;
    c->o = d;
    c->nsets = nsets;
    c->st.capacity = d.entries;
    *out = c;
    return XS_OK;
}

void xs_moe_cache_clear(xs_moe_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nsets * XS_MC_WAYS; i++) {
        free(c->e[i].key);
        c->e[i].key = NULL;
        c->e[i].klen = 0;
    }
    const int cap = c->st.capacity;
    memset(&c->st, 0, sizeof c->st);
    c->st.capacity = cap;
    c->clock = 0;
}

void xs_moe_cache_destroy(xs_moe_cache *c)
{
    if (!c)
        return;
    xs_moe_cache_clear(c);
    free(c->e);
    free(c->kb);
    free(c);
}

void xs_moe_cache_stats_get(const xs_moe_cache *c, xs_moe_cache_stats *out)
{
    *out = c->st;
}

/* ---- keys ------------------------------------------------------------------------------------ */

static void key_bytes(xs_moe_cache *c, const void *p, size_t n)
{
    if (c->kn + n > c->kcap) {
        size_t nc = c->kcap ? 2 * c->kcap : 4096;
        while (nc < c->kn + n)
            nc *= 2;
        unsigned char *nb = realloc(c->kb, nc);
        if (!nb) {
            c->oom = 1;
            return;
        }
        c->kb = nb;
        c->kcap = nc;
    }
    if (p)
        memcpy(c->kb + c->kn, p, n);
    c->kn += n;
}

static void key_int(xs_moe_cache *c, int v) { key_bytes(c, &v, sizeof v); }

/* The cost fields the key holds (kernel_ns only where with_kernel). */
static void key_costs(xs_moe_cache *c, const xs_moe_costs *k, int with_kernel)
{
    key_int(c, k != NULL);
    if (!k)
        return;
    const double v[8] = {k->c1_ns, k->c2_ns, k->mma1_ns, k->mma2_ns, k->span2_ns,
                         k->local_issue_bytes_per_ns, k->wait_ns,
                         with_kernel ? k->kernel_ns : 0.0};
    key_bytes(c, v, sizeof v);
}

/* What decides besides the problem: the profile's numbers (its leading doubles: names, dates and
 * notes do not decide), the model terms field by field (the struct has padding), the costs. */
static void key_terms(xs_moe_cache *c, const xs_profile *p, const xs_moe_model *mm,
                      const xs_moe_costs *wc, const xs_moe_costs *ic, int with_kernel)
{
    key_bytes(c, p, offsetof(xs_profile, device));
    const double md[7] = {mm->block_bytes, mm->block_speed, mm->pace_bytes,
                          mm->pace_drain_frac, mm->courier_pace_frac,
                          mm->courier_copy_bytes_per_ns, 0.0};
    key_bytes(c, md, sizeof md);
    const int mi[7] = {mm->couriers, mm->auto_couriers, mm->auto_adaptive, mm->auto_spill,
                       mm->lead_search, mm->paced_lead, mm->paced_lead_end};
    key_bytes(c, mi, sizeof mi);
    key_costs(c, wc, with_kernel);
    key_costs(c, ic, with_kernel);
}

/* The exact key: every field of the problem that the auto rule reads. */
static void key_exact(xs_moe_cache *c, const xs_moe_problem *pb)
{
    const int s[12] = {XS_MOE_CACHE_EXACT, pb->H, pb->I, pb->E, pb->K, pb->N, pb->T,
                       pb->rows, pb->grid, pb->nrb, pb->l1_per_rb, pb->l2_per_rb};
    key_bytes(c, s, sizeof s);
    key_bytes(c, pb->expert_rows, sizeof(int) * (size_t)pb->E);
    /* per row block its expert, rows and remote rows (what the model reads of it): packed in
     * one word where every block's fit (rows <= 128 always; experts < 2^16), else three */
    int packed = pb->E <= 65535;
    for (int b = 0; b < pb->nrb && packed; b++)
        packed = pb->rb[b].rows >= 0 && pb->rb[b].rows <= 255 && pb->rb[b].remote >= 0 &&
                 pb->rb[b].remote <= 255;
    key_int(c, packed);
    const size_t at = c->kn;
    key_bytes(c, NULL, sizeof(int) * (packed ? 1 : 3) * (size_t)pb->nrb);
    if (c->oom)
        return;
    unsigned char *w = c->kb + at;
    for (int b = 0; b < pb->nrb; b++) {
        const xs_moe_rb *r = &pb->rb[b];
        if (packed) {
            const unsigned v = (unsigned)r->expert << 16 | (unsigned)r->rows << 8 |
                               (unsigned)r->remote;
            memcpy(w + sizeof v * b, &v, sizeof v);
        } else {
            const int v[3] = {r->expert, r->rows, r->remote};
            memcpy(w + sizeof v * b, v, sizeof v);
        }
    }
}

/* The bucketed key: the configuration, T's bucket and the routing histogram's bucket. */
static void key_bucketed(xs_moe_cache *c, const xs_moe_problem *pb)
{
    const int tb = (int)ceil(log2((double)pb->T) * c->o.tokens_per_octave - 1e-9);
    int emax = 0;
    for (int e = 0; e < pb->E; e++)
        emax = pb->expert_rows[e] > emax ? pb->expert_rows[e] : emax;
    double remote = 0;
    for (int b = 0; b < pb->nrb; b++)
        remote += pb->rb[b].remote;
    const double mean = (double)pb->rows / pb->E;
    const int ib = (int)floor(emax / mean / c->o.imbalance_step);
    const int rbk = pb->N > 1 ? (int)floor(remote / pb->rows / c->o.remote_step) : -1;
    const int s[11] = {XS_MOE_CACHE_BUCKETED, pb->H, pb->I, pb->E, pb->K, pb->N,
                       pb->grid, tb, ib, rbk, 0};
    key_bytes(c, s, sizeof s);
}

/* 64-bit hash of the key: four independent lanes of 8 bytes (multiply-xorshift), folded. */
static uint64_t key_hash(const unsigned char *k, size_t n)
{
    uint64_t h[4] = {0x9e3779b97f4a7c15ull ^ n, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull,
                     0x2545f4914f6cdd1dull};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, k + i + 8 * l, 8);
            h[l] = (h[l] ^ w) * 0xff51afd7ed558ccdull;
            h[l] ^= h[l] >> 32;
        }
    uint64_t r = h[0] ^ (h[1] * 0xc4ceb9fe1a85ec53ull) ^ (h[2] >> 7) ^ (h[3] << 11);
    for (; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, k + i, n - i < 8 ? n - i : 8);
        r = (r ^ w) * 0xff51afd7ed558ccdull;
        r ^= r >> 32;
    }
    r *= 0xc4ceb9fe1a85ec53ull;
    return r ^ (r >> 29);
}

/* ---- lookups --------------------------------------------------------------------------------- */

xs_status xs_moe_auto_cached(xs_moe_cache *c, const xs_moe_problem *pb, const xs_profile *p,
                             const xs_moe_model *mm, const xs_moe_costs *wc,
                             const xs_moe_costs *ic, const xs_moe_local_traces *lt,
                             xs_moe_auto_result *out, int *hit)
{
    if (hit)
        *hit = 0;
    if (lt && ((lt->wave && lt->nwave > 0) || (lt->inter && lt->ninter > 0))) {
        c->st.bypassed++;
        return xs_moe_auto(pb, p, mm, wc, ic, lt, out);
    }
    xs_moe_model mdef;
    if (!mm) {
        xs_moe_model_default(&mdef);
        mm = &mdef;
    }
    c->kn = 0;
    c->oom = 0;
    if (c->o.key == XS_MOE_CACHE_BUCKETED)
        key_bucketed(c, pb);
    else
        key_exact(c, pb);
    key_terms(c, p, mm, wc, ic, c->o.key == XS_MOE_CACHE_EXACT);
    if (c->oom)
        return xs_seterr(XS_ENOMEM, "moe cache: out of host memory for a key");
    const uint64_t h = key_hash(c->kb, c->kn);
    xs_mc_entry *set = &c->e[(size_t)(h % (uint64_t)c->nsets) * XS_MC_WAYS];
    c->clock++;
    for (int w = 0; w < XS_MC_WAYS; w++) {
        xs_mc_entry *x = &set[w];
        if (x->key && x->h == h && x->klen == c->kn && !memcmp(x->key, c->kb, c->kn)) {
            x->used = c->clock;
            memcpy(out, &x->res, sizeof *out);
            c->st.lookups++;
            c->st.hits++;
            if (hit)
                *hit = 1;
            return XS_OK;
        }
    }
    /* a miss: evaluate, and keep a successful result in the set's empty or least recent entry */
    XS_TRY(xs_moe_auto(pb, p, mm, wc, ic, lt, out));
    c->st.lookups++;
    c->st.misses++;
    xs_mc_entry *v = &set[0];
    for (int w = 0; w < XS_MC_WAYS; w++) {
        if (!set[w].key) {
            v = &set[w];
            break;
        }
        if (set[w].used < v->used)
            v = &set[w];
    }
    unsigned char *k = malloc(c->kn);
    if (!k)
        return XS_OK; /* the result stands; it is just not kept */
    memcpy(k, c->kb, c->kn);
    if (v->key) {
        free(v->key);
        c->st.evictions++;
    } else {
        c->st.entries++;
    }
    v->key = k;
    v->klen = c->kn;
    v->h = h;
    v->used = c->clock;
    memcpy(&v->res, out, sizeof *out);
    return XS_OK;
}
