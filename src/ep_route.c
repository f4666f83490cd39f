// SPDX-License-Identifier: Apache-2.0
/*
 * ep_route.c - the EP problem on the host (include/xstage_ep.h): the public configurations, the
 * routing of tokens to experts (balanced or Zipf-skewed, a function of the seed), the
 * expert-sorted rows with their destination slots, and the 128-row blocks the fused kernel's
 * tiles cover. No GPU: cuda/ep/ep_runtime.cu uploads what is built here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xstage_ep.h"

/* ---- configurations ---------------------------------------------------------------------- */

/* Public model configurations (their config.json: hidden_size, moe/expert intermediate size,
 * routed experts, experts per token). The sweep's points (docs/EP.md, "Choosing the sweep"):
 * three token counts a factor 2 apart per configuration (each point a few ms), and the peer
 * count of {2, 4, 8} that brings the middle point's drain time / compute time closest to 0.8
 * (drain and compute comparable: where interleaving matters), or 8, the most remote traffic,
 * where even 8 leaves the point compute-bound (the large-I configurations). */
const xs_moe_config xs_moe_configs[] = {
    {"mixtral-8x7b", 4096, 14336, 8, 2, {512, 1024, 2048}, 8, 1},
    {"qwen2-57b-a14b", 3584, 2560, 64, 8, {512, 1024, 2048}, 8, 1},
    {"qwen1.5-moe-a2.7b", 2048, 1408, 60, 4, {1024, 2048, 4096}, 8, 1},
    {"deepseek-v2-lite", 2048, 1408, 64, 6, {1024, 2048, 4096}, 4, 1},
    {"olmoe-1b-7b", 2048, 1024, 64, 8, {1024, 2048, 4096}, 2, 1},
    {"qwen3-30b-a3b", 2048, 768, 128, 8, {2048, 4096, 8192}, 2, 1},
    {"qwen3-235b-a22b", 4096, 1536, 128, 8, {1024, 2048, 4096}, 8, 1},
    {"deepseek-v3", 7168, 2048, 256, 8, {1024, 2048, 4096}, 8, 1},
    {"mixtral-8x22b", 6144, 16384, 8, 2, {256, 512, 1024}, 8, 0},
    {"dbrx", 6144, 10752, 16, 4, {256, 512, 1024}, 8, 0},
};
const int xs_moe_nconfigs = (int)(sizeof xs_moe_configs / sizeof xs_moe_configs[0]);

const xs_moe_config *xs_moe_config_find(const char *name)
{
    for (int i = 0; i < xs_moe_nconfigs; i++)
        if (!strcmp(xs_moe_configs[i].name, name))
            return &xs_moe_configs[i];
    return NULL;
}

const char *xs_moe_sched_name(xs_moe_sched s)
{
    return s == XS_MOE_WAVE          ? "wave"
           : s == XS_MOE_INTERLEAVED ? "interleaved"
           : s == XS_MOE_ADAPTIVE    ? "adaptive"
                                     : "auto";
}

const char *xs_moe_routing_name(xs_moe_routing r)
{
    return r == XS_ROUTE_ZIPF ? "zipf" : "balanced";
}

static uint64_t xs_sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double xs_u01(uint64_t *s)
{
    return (double)(xs_sm64(s) >> 11) * (1.0 / 9007199254740992.0);
}

xs_status xs_moe_config_check(const xs_moe_config *c)
{
    if (c->hidden < 8 || c->hidden % 8)
        return xs_seterr(XS_EINVAL, "moe %s: hidden size %d must be a positive multiple of 8",
                         c->name, c->hidden);
    if (c->inter < 16 || c->inter % 16)
        return xs_seterr(XS_EINVAL, "moe %s: intermediate size %d must be a positive multiple "
                         "of 16 (SwiGLU gate/up groups)", c->name, c->inter);
    if (c->experts < 1 || c->experts > 4096 || c->topk < 1 || c->topk > c->experts)
        return xs_seterr(XS_EINVAL, "moe %s: want 1 <= topk=%d <= experts=%d <= 4096", c->name,
                         c->topk, c->experts);
    return XS_OK;
}

/* ---- the problem ---------------------------------------------------------------------------- */

static void xs_moe_route(xs_moe_problem *pb, int *route_e, float *route_w)
{
    uint64_t s = 0x51ed2701ull ^ ((uint64_t)pb->opts.seed << 20);
    int E = pb->E, K = pb->K;
    int *perm = (int *)malloc(sizeof(int) * (size_t)E);
    double *pw = (double *)malloc(sizeof(double) * (size_t)E);
    double *left = (double *)malloc(sizeof(double) * (size_t)E);
    double zs = pb->opts.zipf_s > 0 ? pb->opts.zipf_s : 1.2;
    /* Zipf popularity: the expert of popularity rank j gets 1 / (j + 1)^s; ranks shuffled */
    for (int e = 0; e < E; e++)
        perm[e] = e;
    for (int e = E - 1; e > 0; e--) {
        int j = (int)(xs_sm64(&s) % (uint64_t)(e + 1));
        int t = perm[e];
        perm[e] = perm[j];
        perm[j] = t;
    }
    for (int j = 0; j < E; j++)
        pw[perm[j]] = 1.0 / pow((double)(j + 1), zs);
    for (int t = 0; t < pb->T; t++) {
        double wsum = 0;
        if (pb->opts.routing == XS_ROUTE_BALANCED) {
            /* top-k distinct experts, uniformly: every expert equally likely */
            for (int e = 0; e < E; e++)
                perm[e] = e;
            for (int k = 0; k < K; k++) {
                int j = k + (int)(xs_sm64(&s) % (uint64_t)(E - k));
                int tmp = perm[k];
                perm[k] = perm[j];
                perm[j] = tmp;
                route_e[t * K + k] = perm[k];
            }
        } else {
            /* top-k distinct experts drawn without replacement from the Zipf popularity */
            double total = 0;
            for (int e = 0; e < E; e++) {
                left[e] = pw[e];
                total += pw[e];
            }
            for (int k = 0; k < K; k++) {
                double u = xs_u01(&s) * total;
                int pick = -1;
                for (int e = 0; e < E; e++) {
                    if (left[e] <= 0)
                        continue;
                    pick = e;
                    if (u < left[e])
                        break;
                    u -= left[e];
                }
                route_e[t * K + k] = pick;
                total -= left[pick];
                left[pick] = 0;
            }
        }
        for (int k = 0; k < K; k++) {
            route_w[t * K + k] = (float)(0.2 + 0.8 * xs_u01(&s));
            wsum += route_w[t * K + k];
        }
        for (int k = 0; k < K; k++)
            route_w[t * K + k] = (float)(route_w[t * K + k] / wsum);
    }
    free(perm);
    free(pw);
    free(left);
}

/* Routing, the expert-sorted rows and the row blocks. On failure pb is left for
 * xs_moe_problem_destroy. */
static xs_status xs_moe_problem_init(xs_moe_problem *pb, const xs_moe_config *c,
                                     const xs_moe_opts *o, int grid)
{
    pb->cfg = *c;
    pb->opts = *o;
    pb->T = o->tokens;
    pb->H = c->hidden;
    pb->I = c->inter;
    pb->E = c->experts;
    pb->K = c->topk;
    pb->N = o->peers;
    pb->rows = pb->T * pb->K;
    pb->l1_per_rb = (2 * pb->I + XS_MOE_BN - 1) / XS_MOE_BN;
    pb->l2_per_rb = (pb->H + XS_MOE_BN - 1) / XS_MOE_BN;
    pb->grid = grid;
    int *route_e = (int *)malloc(sizeof(int) * (size_t)pb->rows);
    float *route_w = (float *)malloc(sizeof(float) * (size_t)pb->rows);
    pb->row_token = (int *)malloc(sizeof(int) * (size_t)pb->rows);
    pb->row_k = (int *)malloc(sizeof(int) * (size_t)pb->rows);
    pb->row_rank = (int *)malloc(sizeof(int) * (size_t)pb->rows);
    pb->row_expert = (int *)malloc(sizeof(int) * (size_t)pb->rows);
    pb->row_weight = (float *)malloc(sizeof(float) * (size_t)pb->rows);
    pb->row_off = (long long *)malloc(sizeof(long long) * (size_t)pb->rows);
    pb->expert_off = (int *)calloc((size_t)pb->E + 1, sizeof(int));
    pb->expert_rows = (int *)calloc((size_t)pb->E, sizeof(int));
    pb->rank_used = (size_t *)calloc((size_t)pb->N, sizeof(size_t));
    if (!route_e || !route_w || !pb->row_token || !pb->row_k || !pb->row_rank || !pb->row_expert ||
        !pb->row_weight || !pb->row_off || !pb->expert_off || !pb->expert_rows || !pb->rank_used) {
        free(route_e);
        free(route_w);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for %d rows", pb->rows);
    }
    xs_moe_route(pb, route_e, route_w);

    /* counting sort of (token, k) by expert, stable in token order */
    for (int i = 0; i < pb->rows; i++)
        pb->expert_rows[route_e[i]]++;
    for (int e = 0; e < pb->E; e++)
        pb->expert_off[e + 1] = pb->expert_off[e] + pb->expert_rows[e];
    int *fill = (int *)calloc((size_t)pb->E, sizeof(int));
    if (!fill) {
        free(route_e);
        free(route_w);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    }
    const long long row_bytes = 2LL * pb->H;
    for (int t = 0; t < pb->T; t++)
        for (int k = 0; k < pb->K; k++) {
            int e = route_e[t * pb->K + k];
            int gr = pb->expert_off[e] + fill[e]++;
            pb->row_token[gr] = t;
            pb->row_k[gr] = k;
            pb->row_expert[gr] = e;
            pb->row_weight[gr] = route_w[t * pb->K + k];
            pb->row_rank[gr] = t % pb->N;
            pb->row_off[gr] = ((long long)(t / pb->N) * pb->K + k) * row_bytes;
        }
    free(fill);
    free(route_e);
    free(route_w);
    pb->window_bytes = (size_t)((pb->T + pb->N - 1) / pb->N) * pb->K * row_bytes;
    for (int r = 0; r < pb->N; r++) {
        long long tok = r < pb->T ? (pb->T - r + pb->N - 1) / pb->N : 0;
        pb->rank_used[r] = (size_t)tok * pb->K * row_bytes;
    }

    /* 128-row blocks per expert */
    pb->nrb = 0;
    for (int e = 0; e < pb->E; e++)
        pb->nrb += (pb->expert_rows[e] + XS_MOE_BM - 1) / XS_MOE_BM;
    if (pb->nrb >= (1 << 30))
        return xs_seterr(XS_ERANGE, "moe: %d row blocks", pb->nrb);
    pb->rb = malloc(sizeof(xs_moe_rb) * (size_t)(pb->nrb ? pb->nrb : 1));
    if (!pb->rb)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    int b = 0;
    for (int e = 0; e < pb->E; e++)
        for (int r0 = 0; r0 < pb->expert_rows[e]; r0 += XS_MOE_BM) {
            int nr = pb->expert_rows[e] - r0 < XS_MOE_BM ? pb->expert_rows[e] - r0 : XS_MOE_BM;
            int remote = 0;
            for (int i = 0; i < nr; i++)
                remote += pb->row_rank[pb->expert_off[e] + r0 + i] != 0;
            pb->rb[b++] = (xs_moe_rb){e, pb->expert_off[e] + r0, nr, remote};
        }

    pb->trace_cap = pb->nrb * (pb->l1_per_rb + pb->l2_per_rb);
    return XS_OK;
}

static xs_status xs_moe_check_opts(const xs_moe_config *c, const xs_moe_opts *o)
{
    if (o->tokens < 1 || o->tokens > (1 << 24))
        return xs_seterr(XS_EINVAL, "moe: tokens=%d must be in 1..16777216", o->tokens);
    if (o->peers < 1 || o->peers > XS_MOE_MAX_PEERS)
        return xs_seterr(XS_EINVAL, "moe: peers=%d must be in 1..%d", o->peers,
                         XS_MOE_MAX_PEERS);
    if ((double)o->tokens * c->topk > 2e9)
        return xs_seterr(XS_EINVAL, "moe: %d tokens x top-%d rows exceed 2^31", o->tokens,
                         c->topk);
    return XS_OK;
}

xs_status xs_moe_problem_create(const xs_moe_config *c, const xs_moe_opts *o, int grid,
                                xs_moe_problem **out)
{
    *out = NULL;
    XS_TRY(xs_moe_config_check(c));
    XS_TRY(xs_moe_check_opts(c, o));
    if (grid < 1 || grid > 65536)
        return xs_seterr(XS_EINVAL, "moe: grid=%d must be in 1..65536", grid);
    xs_moe_problem *pb = calloc(1, sizeof *pb);
    if (!pb)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    xs_status st = xs_moe_problem_init(pb, c, o, grid);
    if (st != XS_OK) {
        xs_moe_problem_destroy(pb);
        return st;
    }
    *out = pb;
    return XS_OK;
}

void xs_moe_problem_destroy(xs_moe_problem *pb)
{
    if (!pb)
        return;
    free(pb->row_token);
    free(pb->row_k);
    free(pb->row_rank);
    free(pb->row_expert);
    free(pb->row_weight);
    free(pb->row_off);
    free(pb->expert_off);
    free(pb->expert_rows);
    free(pb->rank_used);
    free(pb->rb);
    for (int i = 0; i < XS_MOE_SLOTS; i++)
        free(pb->slots[i].tasks);
    free(pb);
}

void xs_moe_problem_info(const xs_moe_problem *pb, xs_moe_info *f)
{
    memset(f, 0, sizeof *f);
    f->hidden = pb->H;
    f->inter = pb->I;
    f->experts = pb->E;
    f->topk = pb->K;
    f->tokens = pb->T;
    f->peers = pb->N;
    f->rows = pb->rows;
    f->row_blocks = pb->nrb;
    f->l1_per_rb = pb->l1_per_rb;
    f->l2_per_rb = pb->l2_per_rb;
    f->l1_tiles = pb->nrb * pb->l1_per_rb;
    f->l2_tiles = pb->nrb * pb->l2_per_rb;
    f->min_expert_rows = pb->rows;
    for (int e = 0; e < pb->E; e++) {
        if (pb->expert_rows[e] < f->min_expert_rows)
            f->min_expert_rows = pb->expert_rows[e];
        if (pb->expert_rows[e] > f->max_expert_rows)
            f->max_expert_rows = pb->expert_rows[e];
    }
    f->grid = pb->grid;
    f->flops = 2.0 * pb->rows * (double)pb->H * 3.0 * pb->I;
    f->total_bytes = (double)pb->rows * 2.0 * pb->H;
    long remote = 0;
    for (int i = 0; i < pb->rows; i++)
        remote += pb->row_rank[i] != 0;
    f->remote_bytes = (double)remote * 2.0 * pb->H;
    f->window_bytes = pb->window_bytes;
}
