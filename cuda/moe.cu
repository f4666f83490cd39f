/*
 * moe.cu - the fused MoE workload (cuda/moe.h): routing, the persistent fused kernel
 * (dispatch -> Linear-1 -> SwiGLU -> Linear-2 -> combine) and its task lists (wave,
 * interleaved), the unfused cuBLAS baseline, references, destination-side verification, traces,
 * and the X-Stage model of the combine (prediction, the auto rule, per-tile stalls).
 *
 * One kernel, every schedule: a persistent grid (one 256-thread CTA per SM, 194 KB of shared
 * memory each) takes tasks from a precomputed list through an atomic counter. A task is one
 * 128 x 256 tile of Linear-1 (gate+up of one 128-row block of one expert; its A rows are
 * gathered straight from the tokens: the dispatch) or of Linear-2 (the down projection of a row
 * block; its epilogue scales each row by its routing weight and stores it to the token's source
 * rank through the window table: the combine). A Linear-2 tile waits (bounded) until the
 * per-row-block counter says all Linear-1 tiles of its row block are done. Schedules differ only
 * in the order of the task list.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"
#include "gemm.cuh"

typedef xs_gemm_big xs_moe_cfg; /* 128 x 256 tiles, 8 warps */
/* The deferring kernel (xs_moe_run_opts.defer, docs/EP.md "Run 12"): the same tiles on a 3-stage
 * ring, which leaves room for a staging tile of its own and its rows' destinations, so that a
 * Linear-2 tile the pacer holds back waits there while the CTA computes its next tile. */
typedef xs_gemm_cfg<128, 256, 2, 4, 3> xs_moe_cfg3;
#define XS_MOE_DEFER_STG (xs_moe_cfg3::SMEM_BYTES)                         /* staging tile */
#define XS_MOE_DEFER_DST (XS_MOE_DEFER_STG + xs_moe_cfg3::OUT_BYTES)      /* its rows' pointers */
#define XS_MOE_DEFER_SMEM (XS_MOE_DEFER_DST + xs_moe_cfg3::BM * 8)
static_assert(XS_MOE_DEFER_SMEM <= 227 * 1024, "deferring kernel: shared memory per block");
/* The spilling kernel (xs_moe_run_opts.defer = XS_MOE_DEFER_SPILL, docs/EP.md "Run 13"): the
 * plain 4-stage kernel, where a Linear-2 tile the pacer would hold back writes its remote rows to
 * the staging buffer in device memory (a.cstage: one slot per row and column block) and the CTA
 * computes on; they leave from there at one of its later task boundaries, once the pacer admits
 * them. Its queue of such tiles keeps, per entry, the remote rows' destinations and global row
 * indices after the plain kernel's shared memory. */
#define XS_MOE_SPILL_DST (xs_moe_cfg::SMEM_BYTES)
#define XS_MOE_SPILL_ROW (XS_MOE_SPILL_DST + XS_MOE_SPILL_MAX * xs_moe_cfg::BM * 8)
#define XS_MOE_SPILL_SMEM (XS_MOE_SPILL_ROW + XS_MOE_SPILL_MAX * xs_moe_cfg::BM * 4)
static_assert(XS_MOE_SPILL_SMEM <= 227 * 1024, "spilling kernel: shared memory per block");
#define XS_MOE_BM 128
#define XS_MOE_BN 256
#define XS_MOE_TRACE_WORDS 10 /* u64 per task: 5 clocks, cta/smid, bytes, pacer wait (ns),
                               * order ticket (xs_moe_tile.seq), deferred (1) */
#define XS_MOE_COPY_WORDS 6  /* u64 per courier copy: 3 clocks (wait, ready, end), cta/smid,
                              * bytes, pacer wait (ns) */
#define XS_MOE_COURIER_UNITS 8 /* 16-byte units per courier thread per chunk: a chunk is 32 KB
                                * (256 threads), loaded before it is stored, so one courier keeps
                                * more than R/C in flight even when its loads miss L2 (~1 us) */

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

/* ---- small helpers ------------------------------------------------------------------------- */

static uint64_t xs_sm64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double xs_u01(uint64_t *s) { return (double)(xs_sm64(s) >> 11) * (1.0 / 9007199254740992.0); }

static float xs_bf16_to_f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t xs_f_to_bf16(float f) /* round to nearest even; NaN stays NaN */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* cudaMalloc with a one-line error naming the buffer and its size */
static xs_status xs_dalloc(void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return xs_seterr(XS_ECUDA, "moe: cannot allocate %.1f MB of device memory for %s: %s",
                         (double)bytes / 1e6, what, cudaGetErrorString(e));
    }
    return XS_OK;
}

/* ---- device helpers ----------------------------------------------------------------------- */

/* uniform in [-scale, scale), a function of (seed, index) */
__global__ void xs_moe_fill_kernel(xs_bf16 *x, size_t n, uint32_t seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = xs_mix32((uint32_t)i * 0x9e3779b1u ^ xs_mix32(seed ^ (uint32_t)(i >> 32)));
        x[i] = __float2bfloat16(((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f) * scale);
    }
}

__global__ void xs_moe_poison_kernel(uint4 *p, size_t n16)
{
    const uint4 v = make_uint4(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

/* ---- weights -------------------------------------------------------------------------------- */

struct xs_moe_weights {
    xs_moe_config cfg;
    xs_bf16 *w1; /* [E, 2I, H] */
    xs_bf16 *w2; /* [E, H, I] */
};

static xs_status xs_moe_check_config(const xs_moe_config *c)
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

xs_status xs_moe_weights_create(const xs_moe_config *c, uint32_t seed, xs_moe_weights **out)
{
    *out = NULL;
    XS_TRY(xs_moe_check_config(c));
    xs_moe_weights *w = (xs_moe_weights *)calloc(1, sizeof *w);
    if (!w)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    w->cfg = *c;
    size_t n1 = (size_t)c->experts * 2 * c->inter * c->hidden;
    size_t n2 = (size_t)c->experts * c->hidden * c->inter;
    xs_status st = xs_dalloc((void **)&w->w1, n1 * 2, "Linear-1 weights");
    if (st == XS_OK)
        st = xs_dalloc((void **)&w->w2, n2 * 2, "Linear-2 weights");
    if (st != XS_OK) {
        xs_moe_weights_destroy(w);
        return st;
    }
    /* uniform(-a, a) with a = 3 / sqrt(fan_in): unit-variance outputs for unit-variance inputs */
    xs_moe_fill_kernel<<<2048, 256>>>(w->w1, n1, seed * 2654435761u + 1u,
                                      3.0f / sqrtf((float)c->hidden));
    xs_moe_fill_kernel<<<2048, 256>>>(w->w2, n2, seed * 2654435761u + 2u,
                                      3.0f / sqrtf((float)c->inter));
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        xs_moe_weights_destroy(w);
        return xs_seterr(XS_ECUDA, "moe: filling weights: %s", cudaGetErrorString(e));
    }
    *out = w;
    return XS_OK;
}

void xs_moe_weights_destroy(xs_moe_weights *w)
{
    if (!w)
        return;
    cudaFree(w->w1);
    cudaFree(w->w2);
    free(w);
}

/* ---- the problem ---------------------------------------------------------------------------- */

typedef struct {
    int2 *host;      /* [n] {kind << 30 | row block, n-block} */
    int2 *dev;
    int n;
    xs_moe_plan plan;
} xs_moe_tasklist;

struct xs_moe {
    const xs_moe_weights *w;
    xs_moe_config cfg;
    xs_moe_opts opts;
    int T, H, I, E, K, N, rows, nrb, l1_per_rb, l2_per_rb, grid;
    /* host routing, expert-sorted rows */
    int *row_token, *row_k, *row_rank, *row_expert;
    float *row_weight;
    long long *row_off;   /* byte offset of the row's slot in its rank's window */
    int *expert_off, *expert_rows;
    int4 *rb;             /* [nrb] {expert, first row, rows, remote rows (rank != 0)} */
    size_t window_bytes;
    size_t *rank_used;
    int host_only;        /* xs_moe_create_host: no device memory (the model only) */    /* bytes of rank r's window that receive rows */
    /* device */
    xs_bf16 *x, *h;
    int *d_row_token, *d_row_rank;
    float *d_row_weight;
    long long *d_row_off;
    int4 *d_rb;
    unsigned int *d_queue;
    unsigned long long *d_done1;
    xs_devstatus *d_status;
    unsigned long long *d_pace; /* the pacer's reserved-until time (ns, %globaltimer) */
    char **d_rank_base;
    unsigned char *d_rank_host;
    unsigned long long *d_trace, *d_anchors;
    int trace_cap;
    xs_moe_tasklist slots[XS_MOE_SLOTS];
    xs_moe_tasklist sub;  /* the Linear-1 or Linear-2 tasks of a plan (run option only) */
    /* couriers (allocated at the first courier run) */
    char *d_cstage;       /* [rows, H] bf16: remote rows staged by the Linear-2 epilogues */
    unsigned long long *d_ready; /* [nrb * l2_per_rb] 1 = the Linear-2 tile's rows are staged */
    int2 *d_clist, *h_clist;     /* [n2] the Linear-2 tiles (rb, nb) in task-list order */
    /* the couriers' row plan (xs_moe_courier_rows, per run: it holds the table's pointers):
     * per row block its remote rows (rows of host windows) in row order and their
     * destinations, BM each, and their count */
    int *d_crow, *h_crow;        /* [nrb][BM] global row index */
    char **d_cdst, **h_cdst;     /* [nrb][BM] the row's slot in its window (column 0) */
    int *d_ccnt, *h_ccnt;        /* [nrb] */
    unsigned long long *d_ctrace, *h_ctrace; /* [n2][XS_MOE_COPY_WORDS] */
    xs_moe_copy *copies;  /* the last run's copies (decoded) */
    int ncopies;
    void *d_kargs;        /* the fused kernel's arguments (device memory, see the kernel) */
    cudaEvent_t ev[6];
    /* last run's trace */
    unsigned long long *h_trace, *h_anchors;
    xs_moe_tile *tiles;
    int ntiles;
    /* local control windows */
    char *local_win;
    /* unfused / reference workspaces (lazily) */
    xs_bf16 *xs_sorted, *y1, *y2, *stage;
    float *y1f, *y2f, *reff;
    float *ref; /* host [rows, H] */
    int have_ref;
    xs_bf16 *ref_h; /* device [rows, I]: the reference's h (bf16), for xs_moe_verify_h */
    int have_ref_h;
    /* L2 flush scratch */
    void *flush;
    size_t flush_bytes;
    int flush_count;
};

static void xs_moe_route(xs_moe *m, int *route_e, float *route_w)
{
    uint64_t s = 0x51ed2701ull ^ ((uint64_t)m->opts.seed << 20);
    int E = m->E, K = m->K;
    int *perm = (int *)malloc(sizeof(int) * (size_t)E);
    double *pw = (double *)malloc(sizeof(double) * (size_t)E);
    double *left = (double *)malloc(sizeof(double) * (size_t)E);
    double zs = m->opts.zipf_s > 0 ? m->opts.zipf_s : 1.2;
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
    for (int t = 0; t < m->T; t++) {
        double wsum = 0;
        if (m->opts.routing == XS_ROUTE_BALANCED) {
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

/* the entry points that need the GPU refuse a problem made by xs_moe_create_host */
#define XS_MOE_NEED_DEVICE(m)                                                                  \
    do {                                                                                       \
        if ((m)->host_only)                                                                    \
            return xs_seterr(XS_EINVAL, "moe: %s needs a problem made by xs_moe_create "       \
                             "(this one is host-only: the model alone)", __func__);            \
    } while (0)

static xs_status xs_moe_upload(void *dst, const void *src, size_t bytes)
{
    XS_CU(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return XS_OK;
}

/* The host side of a problem: routing, the expert-sorted rows and the row blocks (no device
 * memory). On failure m is left for xs_moe_destroy. */
static xs_status xs_moe_init_host(xs_moe *m, const xs_moe_config *c, const xs_moe_opts *o,
                                  int grid)
{
    m->cfg = *c;
    m->opts = *o;
    m->T = o->tokens;
    m->H = c->hidden;
    m->I = c->inter;
    m->E = c->experts;
    m->K = c->topk;
    m->N = o->peers;
    m->rows = m->T * m->K;
    m->l1_per_rb = (2 * m->I + XS_MOE_BN - 1) / XS_MOE_BN;
    m->l2_per_rb = (m->H + XS_MOE_BN - 1) / XS_MOE_BN;
    m->grid = grid;
    int *route_e = (int *)malloc(sizeof(int) * (size_t)m->rows);
    float *route_w = (float *)malloc(sizeof(float) * (size_t)m->rows);
    m->row_token = (int *)malloc(sizeof(int) * (size_t)m->rows);
    m->row_k = (int *)malloc(sizeof(int) * (size_t)m->rows);
    m->row_rank = (int *)malloc(sizeof(int) * (size_t)m->rows);
    m->row_expert = (int *)malloc(sizeof(int) * (size_t)m->rows);
    m->row_weight = (float *)malloc(sizeof(float) * (size_t)m->rows);
    m->row_off = (long long *)malloc(sizeof(long long) * (size_t)m->rows);
    m->expert_off = (int *)calloc((size_t)m->E + 1, sizeof(int));
    m->expert_rows = (int *)calloc((size_t)m->E, sizeof(int));
    m->rank_used = (size_t *)calloc((size_t)m->N, sizeof(size_t));
    if (!route_e || !route_w || !m->row_token || !m->row_k || !m->row_rank || !m->row_expert ||
        !m->row_weight || !m->row_off || !m->expert_off || !m->expert_rows || !m->rank_used) {
        free(route_e);
        free(route_w);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for %d rows", m->rows);
    }
    xs_moe_route(m, route_e, route_w);

    /* counting sort of (token, k) by expert, stable in token order */
    for (int i = 0; i < m->rows; i++)
        m->expert_rows[route_e[i]]++;
    for (int e = 0; e < m->E; e++)
        m->expert_off[e + 1] = m->expert_off[e] + m->expert_rows[e];
    int *fill = (int *)calloc((size_t)m->E, sizeof(int));
    if (!fill) {
        free(route_e);
        free(route_w);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    }
    const long long row_bytes = 2LL * m->H;
    for (int t = 0; t < m->T; t++)
        for (int k = 0; k < m->K; k++) {
            int e = route_e[t * m->K + k];
            int gr = m->expert_off[e] + fill[e]++;
            m->row_token[gr] = t;
            m->row_k[gr] = k;
            m->row_expert[gr] = e;
            m->row_weight[gr] = route_w[t * m->K + k];
            m->row_rank[gr] = t % m->N;
            m->row_off[gr] = ((long long)(t / m->N) * m->K + k) * row_bytes;
        }
    free(fill);
    free(route_e);
    free(route_w);
    m->window_bytes = (size_t)((m->T + m->N - 1) / m->N) * m->K * row_bytes;
    for (int r = 0; r < m->N; r++) {
        long long tok = r < m->T ? (m->T - r + m->N - 1) / m->N : 0;
        m->rank_used[r] = (size_t)tok * m->K * row_bytes;
    }

    /* 128-row blocks per expert */
    m->nrb = 0;
    for (int e = 0; e < m->E; e++)
        m->nrb += (m->expert_rows[e] + XS_MOE_BM - 1) / XS_MOE_BM;
    if (m->nrb >= (1 << 30))
        return xs_seterr(XS_ERANGE, "moe: %d row blocks", m->nrb);
    m->rb = (int4 *)malloc(sizeof(int4) * (size_t)(m->nrb ? m->nrb : 1));
    if (!m->rb)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    int b = 0;
    for (int e = 0; e < m->E; e++)
        for (int r0 = 0; r0 < m->expert_rows[e]; r0 += XS_MOE_BM) {
            int nr = m->expert_rows[e] - r0 < XS_MOE_BM ? m->expert_rows[e] - r0 : XS_MOE_BM;
            int remote = 0;
            for (int i = 0; i < nr; i++)
                remote += m->row_rank[m->expert_off[e] + r0 + i] != 0;
            m->rb[b++] = make_int4(e, m->expert_off[e] + r0, nr, remote);
        }

    m->trace_cap = m->nrb * (m->l1_per_rb + m->l2_per_rb);
    return XS_OK;
}

static xs_status xs_moe_check_opts(const xs_moe_config *c, const xs_moe_opts *o)
{
    if (o->tokens < 1 || o->tokens > (1 << 24))
        return xs_seterr(XS_EINVAL, "moe: tokens=%d must be in 1..16777216", o->tokens);
    if (o->peers < 1 || o->peers > XS_MAX_RANKS)
        return xs_seterr(XS_EINVAL, "moe: peers=%d must be in 1..%d", o->peers, XS_MAX_RANKS);
    if ((double)o->tokens * c->topk > 2e9)
        return xs_seterr(XS_EINVAL, "moe: %d tokens x top-%d rows exceed 2^31", o->tokens,
                         c->topk);
    return XS_OK;
}

xs_status xs_moe_create_host(const xs_moe_config *c, const xs_moe_opts *o, int grid,
                             xs_moe **out)
{
    *out = NULL;
    XS_TRY(xs_moe_check_config(c));
    XS_TRY(xs_moe_check_opts(c, o));
    if (grid < 1 || grid > 65536)
        return xs_seterr(XS_EINVAL, "moe: grid=%d must be in 1..65536", grid);
    xs_moe *m = (xs_moe *)calloc(1, sizeof *m);
    if (!m)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    m->host_only = 1;
    xs_status st = xs_moe_init_host(m, c, o, grid);
    if (st != XS_OK) {
        xs_moe_destroy(m);
        return st;
    }
    *out = m;
    return XS_OK;
}

xs_status xs_moe_create(const xs_moe_weights *w, const xs_moe_opts *o, xs_moe **out)
{
    *out = NULL;
    if (!w)
        return xs_seterr(XS_EINVAL, "moe: no weights");
    XS_TRY(xs_moe_check_opts(&w->cfg, o));
    int dev = 0, sms = 0;
    XS_CU(cudaGetDevice(&dev));
    XS_CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));

    xs_moe *m = (xs_moe *)calloc(1, sizeof *m);
    if (!m)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory");
    m->w = w;
    *out = m; /* from here on, failures clean up through xs_moe_destroy */
    xs_status st = XS_OK;
#define XS_STEP(call)                                                                          \
    do {                                                                                       \
        st = (call);                                                                           \
        if (st != XS_OK) {                                                                     \
            xs_moe_destroy(m);                                                                 \
            *out = NULL;                                                                       \
            return st;                                                                         \
        }                                                                                      \
    } while (0)
    XS_STEP(xs_moe_init_host(m, &w->cfg, o, sms));

    /* device copies */
    size_t rows = (size_t)m->rows;
    XS_STEP(xs_dalloc((void **)&m->x, (size_t)m->T * m->H * 2, "tokens"));
    XS_STEP(xs_dalloc((void **)&m->h, rows * m->I * 2, "SwiGLU output"));
    XS_STEP(xs_dalloc((void **)&m->d_row_token, rows * 4, "row map"));
    XS_STEP(xs_dalloc((void **)&m->d_row_rank, rows * 4, "row ranks"));
    XS_STEP(xs_dalloc((void **)&m->d_row_weight, rows * 4, "routing weights"));
    XS_STEP(xs_dalloc((void **)&m->d_row_off, rows * 8, "row slots"));
    XS_STEP(xs_dalloc((void **)&m->d_rb, sizeof(int4) * (size_t)(m->nrb + 1), "row blocks"));
    XS_STEP(xs_dalloc((void **)&m->d_queue, 32, "task counters"));
    XS_STEP(xs_dalloc((void **)&m->d_done1, 8 * (size_t)(m->nrb + 1), "row-block counters"));
    XS_STEP(xs_dalloc((void **)&m->d_status, sizeof(xs_devstatus), "device status"));
    XS_STEP(xs_dalloc((void **)&m->d_pace, 16, "combine pacer"));
    XS_STEP(xs_dalloc((void **)&m->d_rank_base, sizeof(char *) * XS_MAX_RANKS, "rank table"));
    XS_STEP(xs_dalloc((void **)&m->d_rank_host, XS_MAX_RANKS, "rank table"));
    XS_STEP(xs_dalloc((void **)&m->d_trace, 8 * XS_MOE_TRACE_WORDS * (size_t)(m->trace_cap + 1),
                      "trace"));
    XS_STEP(xs_dalloc((void **)&m->d_anchors, 8 * 4 * (size_t)m->grid, "time anchors"));
    XS_STEP(xs_moe_upload(m->d_row_token, m->row_token, rows * 4));
    XS_STEP(xs_moe_upload(m->d_row_rank, m->row_rank, rows * 4));
    XS_STEP(xs_moe_upload(m->d_row_weight, m->row_weight, rows * 4));
    XS_STEP(xs_moe_upload(m->d_row_off, m->row_off, rows * 8));
    if (m->nrb)
        XS_STEP(xs_moe_upload(m->d_rb, m->rb, sizeof(int4) * (size_t)m->nrb));
    m->h_trace = (unsigned long long *)malloc(8 * XS_MOE_TRACE_WORDS * (size_t)(m->trace_cap + 1));
    m->h_anchors = (unsigned long long *)malloc(8 * 4 * (size_t)m->grid);
    m->tiles = (xs_moe_tile *)calloc((size_t)m->trace_cap + 1, sizeof(xs_moe_tile));
    if (!m->h_trace || !m->h_anchors || !m->tiles)
        XS_STEP(xs_seterr(XS_ENOMEM, "moe: out of host memory for traces"));
    for (int i = 0; i < 6; i++) {
        cudaError_t e = cudaEventCreate(&m->ev[i]);
        if (e != cudaSuccess)
            XS_STEP(xs_seterr(XS_ECUDA, "moe: cudaEventCreate: %s", cudaGetErrorString(e)));
    }
    xs_moe_fill_kernel<<<1024, 256>>>(m->x, (size_t)m->T * m->H, o->seed * 7919u + 3u, 1.0f);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        XS_STEP(xs_seterr(XS_ECUDA, "moe: filling tokens: %s", cudaGetErrorString(e)));
#undef XS_STEP
    return XS_OK;
}

void xs_moe_destroy(xs_moe *m)
{
    if (!m)
        return;
    free(m->row_token); free(m->row_k); free(m->row_rank); free(m->row_expert);
    free(m->row_weight); free(m->row_off); free(m->expert_off); free(m->expert_rows);
    free(m->rank_used); free(m->rb); free(m->h_trace); free(m->h_anchors); free(m->tiles);
    free(m->ref); free(m->h_clist); free(m->h_ctrace); free(m->copies);
    free(m->h_crow); free(m->h_cdst); free(m->h_ccnt);
    for (int i = 0; i < XS_MOE_SLOTS; i++) {
        free(m->slots[i].host);
        if (m->slots[i].dev)
            cudaFree(m->slots[i].dev);
    }
    free(m->sub.host);
    if (m->sub.dev)
        cudaFree(m->sub.dev);
    for (int i = 0; i < 6; i++)
        if (m->ev[i])
            cudaEventDestroy(m->ev[i]);
    void *dev[] = {m->x, m->h, m->d_row_token, m->d_row_rank, m->d_row_weight, m->d_row_off,
                   m->d_rb, m->d_queue, m->d_done1, m->d_status, m->d_pace, m->d_rank_base,
                   m->d_rank_host, m->d_trace, m->d_anchors, m->local_win, m->xs_sorted, m->y1,
                   m->y2, m->stage, m->y1f, m->y2f, m->reff, m->flush, m->d_kargs, m->ref_h,
                   m->d_cstage, m->d_ready, m->d_clist, m->d_ctrace, m->d_crow, m->d_cdst,
                   m->d_ccnt};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            cudaFree(dev[i]);
    free(m);
}

void xs_moe_get_info(const xs_moe *m, xs_moe_info *f)
{
    memset(f, 0, sizeof *f);
    f->hidden = m->H;
    f->inter = m->I;
    f->experts = m->E;
    f->topk = m->K;
    f->tokens = m->T;
    f->peers = m->N;
    f->rows = m->rows;
    f->row_blocks = m->nrb;
    f->l1_per_rb = m->l1_per_rb;
    f->l2_per_rb = m->l2_per_rb;
    f->l1_tiles = m->nrb * m->l1_per_rb;
    f->l2_tiles = m->nrb * m->l2_per_rb;
    f->min_expert_rows = m->rows;
    for (int e = 0; e < m->E; e++) {
        if (m->expert_rows[e] < f->min_expert_rows)
            f->min_expert_rows = m->expert_rows[e];
        if (m->expert_rows[e] > f->max_expert_rows)
            f->max_expert_rows = m->expert_rows[e];
    }
    f->grid = m->grid;
    f->flops = 2.0 * m->rows * (double)m->H * 3.0 * m->I;
    f->total_bytes = (double)m->rows * 2.0 * m->H;
    long remote = 0;
    for (int i = 0; i < m->rows; i++)
        remote += m->row_rank[i] != 0;
    f->remote_bytes = (double)remote * 2.0 * m->H;
    f->window_bytes = m->window_bytes;
}

/* ---- task lists ------------------------------------------------------------------------------- */

int xs_moe_default_lead_ctas(const xs_moe *m, int ctas)
{
    if (ctas < 1)
        ctas = 1;
    return (ctas + m->l1_per_rb - 1) / m->l1_per_rb + 1;
}

int xs_moe_default_lead(const xs_moe *m) { return xs_moe_default_lead_ctas(m, m->grid); }

int xs_moe_default_wave(const xs_moe *m)
{
    /* experts in the first wave of the default rule (waves grow expert by expert until they
     * hold at least one machine-wide round of Linear-1 tiles) */
    int tiles = 0, e = 0;
    while (e < m->E && tiles < m->grid) {
        tiles += (m->expert_rows[e] + XS_MOE_BM - 1) / XS_MOE_BM * m->l1_per_rb;
        e++;
    }
    return e < 1 ? 1 : e;
}

static int2 xs_task(int kind, int rb, int nb) { return make_int2((kind << 30) | rb, nb); }

static xs_status xs_moe_check_plan(const xs_moe *m, const xs_moe_plan *p)
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
    if (p->couriers < 0 || p->couriers >= m->grid)
        return xs_seterr(XS_EINVAL, "moe: couriers=%d must be in 0..%d (at least one of the %d "
                         "CTAs computes)", p->couriers, m->grid - 1, m->grid);
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
static int xs_moe_lead_at(const xs_moe *m, const xs_moe_plan *p, int b)
{
    if (p->lead_end <= 0 || p->lead_end >= p->lead)
        return p->lead;
    const long long span = (long long)m->nrb - 1 - p->lead_end;
    if (span <= 0 || b >= span)
        return p->lead_end;
    return p->lead_end +
           (int)((2 * (long long)(p->lead - p->lead_end) * (span - b) + span) / (2 * span));
}

/* The task list of a (checked) plan into t[trace_cap]; returns the number of tasks. */
static int xs_moe_build_tasks(const xs_moe *m, const xs_moe_plan *p, int2 *t)
{
    const int n1 = m->nrb * m->l1_per_rb, n2 = m->nrb * m->l2_per_rb;
    const int ctas = m->grid - p->couriers; /* the CTAs that run the list */
    int q = 0;
    if (p->kind == XS_MOE_ADAPTIVE) {
        /* two queues in one list: the Linear-1 tiles [0, n1), the Linear-2 tiles [n1, n1 + n2),
         * each in row-block order; the CTAs choose between their heads */
        for (int b = 0; b < m->nrb; b++)
            for (int nb = 0; nb < m->l1_per_rb; nb++)
                t[q++] = xs_task(1, b, nb);
        for (int b = 0; b < m->nrb; b++)
            for (int nb = 0; nb < m->l2_per_rb; nb++)
                t[q++] = xs_task(2, b, nb);
    } else if (p->kind == XS_MOE_WAVE) {
        /* waves of consecutive experts: all Linear-1 tiles of the wave, then its Linear-2.
         * wave_experts = 0: a wave grows expert by expert until it holds >= one Linear-1 tile
         * per computing CTA (one machine-wide round), so skewed routing gives waves of equal
         * work */
        int b0 = 0, e0 = 0;
        while (e0 < m->E) {
            int e1 = e0, tiles = 0;
            if (p->wave_experts) {
                e1 = e0 + p->wave_experts < m->E ? e0 + p->wave_experts : m->E;
            } else {
                while (e1 < m->E && tiles < ctas) {
                    tiles += (m->expert_rows[e1] + XS_MOE_BM - 1) / XS_MOE_BM * m->l1_per_rb;
                    e1++;
                }
            }
            int b1 = b0;
            while (b1 < m->nrb && m->rb[b1].x < e1)
                b1++;
            for (int b = b0; b < b1; b++)
                for (int nb = 0; nb < m->l1_per_rb; nb++)
                    t[q++] = xs_task(1, b, nb);
            for (int b = b0; b < b1; b++)
                for (int nb = 0; nb < m->l2_per_rb; nb++)
                    t[q++] = xs_task(2, b, nb);
            b0 = b1;
            e0 = e1;
        }
    } else {
        /* proportional merge of the Linear-1 and Linear-2 sequences (row-block order) with the
         * Linear-1 prefix at least `lead` row blocks ahead of every Linear-2 tile placed */
        long long i1 = 0, i2 = 0;
        while (i1 < n1 || i2 < n2) {
            if (i2 < n2) {
                int b = (int)(i2 / m->l2_per_rb);
                long long need_rb = (long long)b + xs_moe_lead_at(m, p, b);
                if (need_rb > m->nrb - 1)
                    need_rb = m->nrb - 1;
                long long need1 = (need_rb + 1) * m->l1_per_rb;
                int ready = i1 >= need1;
                int behind = i1 >= n1 || i2 * (long long)n1 <= i1 * (long long)n2;
                if (ready && behind) {
                    t[q++] = xs_task(2, b, (int)(i2 % m->l2_per_rb));
                    i2++;
                    continue;
                }
            }
            t[q++] = xs_task(1, (int)(i1 / m->l1_per_rb), (int)(i1 % m->l1_per_rb));
            i1++;
        }
    }
    return q;
}

/* a new xs_moe_plan field must be compared here too */
static_assert(sizeof(xs_moe_plan) == 64, "xs_moe_plan changed: update xs_moe_plan_equal");
int xs_moe_plan_equal(const xs_moe_plan *a, const xs_moe_plan *b)
{
    return a->kind == b->kind && a->lead == b->lead && a->wave_experts == b->wave_experts &&
           a->pace_bytes == b->pace_bytes && a->pace_bytes_per_ns == b->pace_bytes_per_ns &&
           a->couriers == b->couriers && a->courier_bytes_per_ns == b->courier_bytes_per_ns &&
           a->admit_ahead_ns == b->admit_ahead_ns && a->spill_depth == b->spill_depth &&
           a->lead_end == b->lead_end;
}

xs_status xs_moe_set_plan(xs_moe *m, int slot, const xs_moe_plan *p)
{
    if (slot < 0 || slot >= XS_MOE_SLOTS)
        return xs_seterr(XS_EINVAL, "moe: plan slot %d out of 0..%d", slot, XS_MOE_SLOTS - 1);
    XS_TRY(xs_moe_check_plan(m, p));
    xs_moe_tasklist *tl = &m->slots[slot];
    const int n = m->nrb * (m->l1_per_rb + m->l2_per_rb);
    if (!tl->host) {
        tl->host = (int2 *)malloc(sizeof(int2) * (size_t)(m->trace_cap + 1));
        if (!tl->host)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory for a task list");
        if (!m->host_only)
            XS_TRY(xs_dalloc((void **)&tl->dev, sizeof(int2) * (size_t)(m->trace_cap + 1),
                             "task list"));
    }
    const int q = xs_moe_build_tasks(m, p, tl->host);
    if (q != n)
        return xs_seterr(XS_EINVAL, "moe: internal: task list of %d tasks, expected %d", q, n);
    tl->n = n;
    tl->plan = *p;
    if (n && !m->host_only)
        XS_CU(cudaMemcpy(tl->dev, tl->host, sizeof(int2) * (size_t)n, cudaMemcpyHostToDevice));
    return XS_OK;
}

/* ---- the fused kernel ------------------------------------------------------------------------ */

typedef struct {
    const xs_bf16 *x;           /* [T, H] */
    const xs_bf16 *w1;          /* [E, 2I, H] */
    const xs_bf16 *w2;          /* [E, H, I] */
    xs_bf16 *h;                 /* [rows, I] */
    const int *row_token;       /* [rows] */
    const float *row_weight;    /* [rows] */
    const int *row_rank;        /* [rows] */
    const long long *row_off;   /* [rows] bytes within the rank's window */
    const int4 *rbs;            /* [nrb] {expert, first row, rows, remote rows} */
    const int2 *tasks;          /* [ntasks] */
    int ntasks;
    unsigned int *queue;        /* next task */
    unsigned long long *seq;    /* order tickets: Linear-1 before its release, Linear-2 after
                                 * its acquire (one counter, so the order is the device's) */
    unsigned long long *done1;  /* [nrb] finished Linear-1 tiles */
    int hidden, inter, l1_per_rb;
    unsigned long long timeout_ns;
    int fault_skip_l1;
    xs_devstatus *status;
    unsigned long long *pace;   /* the pacer's reserved-until time (ns, %globaltimer) */
    double pace_ns_per_byte;    /* > 0: pace the combine (xs_moe_pace) */
    unsigned long long pace_slack_ns; /* backlog the pacer lets a burst start into, as time */
    char *const *rank_base;     /* [N] device-usable window payload pointers */
    const unsigned char *rank_host; /* [N] 1 = the window is host memory (remote over PCIe) */
    unsigned long long *trace;  /* [ntasks][XS_MOE_TRACE_WORDS] */
    unsigned long long *anchors; /* [grid][4]: globaltimer/clock64 pairs at start and end */
    /* couriers (xs_moe_courier); couriers = 0: none, and the fields below are unused */
    int couriers;               /* the last `couriers` CTAs of the grid copy the combine */
    int l2_per_rb;
    char *cstage;               /* [rows, hidden] bf16: remote rows staged by the epilogues */
    unsigned long long *ready;  /* [nrb * l2_per_rb] 1 once a Linear-2 tile's rows are staged */
    const int2 *clist;          /* [nclist] the Linear-2 tiles (rb, nb) in task-list order */
    const int *crow;            /* [nrb][BM] each row block's remote rows (xs_moe_courier_rows) */
    char *const *cdst;          /* [nrb][BM] their destinations (column 0) */
    const int *ccnt;            /* [nrb] how many */
    int nclist;
    double courier_ns_per_byte; /* one courier's pace: couriers / the couriers' total rate */
    unsigned long long *ctrace; /* [nclist][XS_MOE_COPY_WORDS] */
    int bulk_combine;           /* 1: Linear-2 epilogues issue their rows by TMA bulk copies */
    /* adaptive plans (xs_moe_take_adaptive); adaptive = 0: one queue, the list's order */
    int adaptive;
    int n1;                     /* the Linear-1 tiles: tasks [0, n1); Linear-2: [n1, ntasks) */
    unsigned int *queue2;       /* next Linear-2 tile (0-based among them) */
    unsigned long long *admit;  /* the admission clock: reserved-until time (ns, %globaltimer) */
    double admit_ns_per_byte;
    double admit_tile_bytes;    /* what a claim reserves: a Linear-2 tile's mean remote bytes */
    unsigned long long admit_ahead_ns;
    int spill_depth;            /* the spilling kernel: its queue's capacity per CTA */
} xs_moe_kargs;

/* xs_devstatus detail, low 32 bits: a row block (< 2^30, a Linear-2 dependency), or one of */
#define XS_MOE_PACE_DETAIL 0xffffffffu    /* the epilogue's pacer */
#define XS_MOE_CPACE_DETAIL 0xfffffffeu   /* a courier's pacer */
#define XS_MOE_CWAIT_DETAIL 0x80000000u   /* | j: a courier waiting for Linear-2 tile j (clist) */


/* A software link, one word in device memory: the %globaltimer time until which the bytes
 * reserved so far keep the link busy. Reserves need_ns after that backlog and returns 1; with
 * `limit`, only while the backlog ends within slack_ns of now (else 0, nothing reserved). d: the
 * word as the caller last read it (a stale value costs one retry). Every pass returns or lost a
 * race to a reservation that moved the word forward, so it never waits. */
static __device__ int xs_link_reserve(unsigned long long *word, unsigned long long d,
                                      unsigned long long need_ns, int limit,
                                      unsigned long long slack_ns)
{
    for (;;) {
        const unsigned long long now = xs_globaltimer();
        if (limit && d > now + slack_ns)
            return 0;
        const unsigned long long start = d > now ? d : now;
        const unsigned long long prev = atomicCAS(word, d, start + need_ns);
        if (prev == d)
            return 1;
        d = prev; /* another tile reserved first: its bytes go before ours */
    }
}

/* The combine pacer without waiting (thread 0): reserves the link time of `bytes` at the pacer's
 * rate and returns 1 when the backlog is at most pace_slack_ns, else returns 0. */
static __device__ int xs_moe_pace_try(const xs_moe_kargs &a, double bytes)
{
    const unsigned long long need = (unsigned long long)(bytes * a.pace_ns_per_byte) + 1ull;
    return xs_link_reserve(a.pace, *(volatile unsigned long long *)a.pace, need, 1,
                           a.pace_slack_ns);
}

/* The combine pacer (thread 0 of a Linear-2 tile with remote rows, after the epilogue staged the
 * tile and before its stores): a software link (xs_link_reserve) draining at the calibrated rate.
 * The tile waits until the backlog is at most pace_slack_ns, then reserves its own bytes. It
 * depends only on time passing (a reservation never waits for another CTA), so it cannot
 * deadlock; it is bounded by timeout_ns all the same. Returns the ns waited. The reason
 * (docs/EP.md, "The model"): on the PCIe path every SM's main loop stalls while the combine
 * backlog is above ~0.55 MB, so bursts that pile up cost every CTA; held back at their source
 * they cost only their own CTA. */
static __device__ unsigned long long xs_moe_pace(const xs_moe_kargs &a, double bytes)
{
    const unsigned long long t0 = xs_globaltimer();
    while (!xs_moe_pace_try(a, bytes)) {
        if (xs_globaltimer() - t0 > a.timeout_ns) {
            xs_devfail(a.status, XS_DEVERR_TIMEOUT,
                       ((unsigned long long)blockIdx.x << 32) | XS_MOE_PACE_DETAIL);
            break;
        }
        __nanosleep(64);
    }
    return xs_globaltimer() - t0;
}

/* An adaptive plan's next task (thread 0; docs/EP.md, "Adaptive"). *pending is the Linear-2
 * tile this CTA claimed and has not run yet (-1: none).
 * - A pending tile runs as soon as its row block's Linear-1 tiles are done, or once the Linear-1
 *   queue is empty; until then the CTA runs Linear-1 tiles.
 * - Else, when the admission clock (the remote bytes of the Linear-2 tiles claimed so far,
 *   draining at the plan's rate) ends within admit_ahead_ns of now, the CTA claims the next
 *   Linear-2 tile and reserves its bytes on the clock; it runs it at once if its row block is
 *   done, else it becomes pending.
 * - Else the next Linear-1 tile; once those are gone, the next Linear-2 tile.
 * Claims are atomicAdd tickets (a compare-and-swap on the queue head serialised 132 CTAs behind
 * loads that wait for their own stores in flight: 36 us between tasks, run 12 call 3). No CTA waits
 * for a dependency while a Linear-1 tile is left to take, and once none is left every Linear-1
 * tile is held by a running CTA that never waits: no deadlock. Never waits itself; returns a task
 * index, ntasks when none is left. */
static __device__ int xs_moe_take_adaptive(const xs_moe_kargs &a, int *pending)
{
    const unsigned n1 = (unsigned)a.n1, n2 = (unsigned)(a.ntasks - a.n1);
    const unsigned h1 = *(volatile unsigned int *)a.queue;
    const unsigned long long clk0 = *(volatile unsigned long long *)a.admit;
    if (*pending >= 0) {
        const int rbi = (*pending - a.n1) / a.l2_per_rb;
        if (h1 >= n1 || *(volatile unsigned long long *)(a.done1 + rbi) >=
                            (unsigned long long)a.l1_per_rb) {
            const int t = *pending;
            *pending = -1;
            return t;
        }
    } else if (h1 < n1) {
        const unsigned long long now = xs_globaltimer();
        if (clk0 <= now + a.admit_ahead_ns) {
            const unsigned u = atomicAdd(a.queue2, 1u);
            if (u < n2) {
                xs_link_reserve(a.admit, clk0,
                                (unsigned long long)(a.admit_tile_bytes * a.admit_ns_per_byte) +
                                    1ull,
                                0, 0);
                const int rbi = (int)(u / (unsigned)a.l2_per_rb);
                if (*(volatile unsigned long long *)(a.done1 + rbi) >=
                    (unsigned long long)a.l1_per_rb)
                    return (int)(n1 + u);
                *pending = (int)(n1 + u);
            }
        }
    }
    const unsigned u = h1 < n1 ? atomicAdd(a.queue, 1u) : n1;
    if (u < n1)
        return (int)u;
    if (*pending >= 0) { /* the Linear-1 queue ran dry: run the claimed tile */
        const int t = *pending;
        *pending = -1;
        return t;
    }
    const unsigned v = atomicAdd(a.queue2, 1u);
    return v < n2 ? (int)(n1 + v) : a.ntasks;
}

/* A courier's wait for Linear-2 tile j's ready flag (thread 0). Bounded by timeout_ns, and given
 * up as soon as any CTA recorded a failure (that tile may then never be staged). 1 = stop. */
static __device__ __forceinline__ const uint64_t *xs_moe_ready_flag(const xs_moe_kargs &a,
                                                                    int rbi, int nb)
{
    return (const uint64_t *)(a.ready + (size_t)rbi * a.l2_per_rb + nb);
}

static __device__ int xs_moe_courier_wait(const xs_moe_kargs &a, int j, int rbi, int nb)
{
    const uint64_t *flag = xs_moe_ready_flag(a, rbi, nb);
    const unsigned long long t0 = xs_globaltimer();
    while (xs_ld_acquire_gpu(flag) == 0ull) {
        if (*(volatile unsigned int *)&a.status->code != 0)
            return 1;
        if (xs_globaltimer() - t0 > a.timeout_ns) {
            xs_devfail(a.status, XS_DEVERR_TIMEOUT, ((unsigned long long)blockIdx.x << 32) |
                                                        XS_MOE_CWAIT_DETAIL | (unsigned int)j);
            return 1;
        }
        __nanosleep(128);
    }
    return 0;
}

/* A courier's pacer (thread 0): a chunk may start at *next (ns, %globaltimer) at the earliest, and
 * moves *next on by its bytes at the courier's share of the pace, from when it starts: no credit
 * for idle time, so a courier that waited for a tile does not burst. Each courier is a FIFO server
 * at rate / C (xs_moe_courier_drain is the same on the host). A chunk that had to wait starts at
 * *next itself, not at the timer value that ended the wait: %globaltimer can tick coarsely, and
 * the tick's overshoot must not lower the rate. Bounded by timeout_ns. Returns the ns it held the
 * chunk; *stop = 1 after a timeout (recorded in the status). */
static __device__ unsigned long long xs_moe_courier_pace(const xs_moe_kargs &a,
                                                         unsigned long long *next, double bytes,
                                                         int *stop)
{
    const unsigned long long t0 = xs_globaltimer();
    unsigned long long now = t0;
    int waited = 0;
    while (now < *next) {
        if (now - t0 > a.timeout_ns) {
            xs_devfail(a.status, XS_DEVERR_TIMEOUT,
                       ((unsigned long long)blockIdx.x << 32) | XS_MOE_CPACE_DETAIL);
            *stop = 1;
            break;
        }
        waited = 1;
        __nanosleep(64);
        now = xs_globaltimer();
    }
    const unsigned long long start = waited || *next > now ? *next : now;
    const double dt = bytes * a.courier_ns_per_byte; /* < 1e18 ns: a rate far below any plan's */
    *next = start + (dt < 1e18 ? (unsigned long long)dt : 1000000000000000000ull);
    return now - t0;
}

/* A courier's chunk: thread tid's units base + u * THREADS + tid (u < XS_MOE_COURIER_UNITS) of
 * the tile's remote rows (s_row, cpr units each, starting at byte column col): loaded from the
 * staging buffer (.cg: written by another SM during this kernel) into v, their destinations
 * (s_dst: each row's, from shared memory) into d (NULL past the end). The only global loads are
 * the data's: run 8's probe showed an SM's loads waiting behind its own stores in flight, and
 * the destinations used to be two dependent global loads per unit (row_rank, then rank_base). */
static __device__ __forceinline__ void xs_moe_courier_load(const xs_moe_kargs &a,
                                                           const int *s_row, char *const *s_dst,
                                                           int cpr, long long col, int units,
                                                           int base, int tid, uint4 *v, char **d)
{
#pragma unroll
    for (int u = 0; u < XS_MOE_COURIER_UNITS; u++) {
        const int i = base + u * xs_moe_cfg::THREADS + tid;
        d[u] = NULL;
        if (i < units) {
            const int r = i / cpr;
            const long long c16 = 16LL * (i - r * cpr);
            v[u] = __ldcg((const uint4 *)(a.cstage + (long long)s_row[r] * a.hidden * 2 + col +
                                          c16));
            d[u] = s_dst[r] + col + c16;
        }
    }
}

static __device__ __forceinline__ void xs_moe_courier_store(const uint4 *v, char *const *d)
{
#pragma unroll
    for (int u = 0; u < XS_MOE_COURIER_UNITS; u++)
        if (d[u])
            xs_st16v(d[u], v[u]);
}

/* Courier k of C (docs/EP.md, "Couriers"): copies the remote rows of the Linear-2 tiles k, k + C,
 * k + 2C, ... of a.clist (the task list's Linear-2 tiles in position order, roughly the order in
 * which the compute CTAs finish them) from the staging buffer to their windows: the same bytes to
 * the same addresses as the epilogue would have stored (rank_base[rank] + row_off + column),
 * in paced chunks of up to XS_MOE_COURIER_UNITS x 16 bytes per thread.
 *
 * Deadlock freedom: a courier waits only for ready flags raised by compute CTAs; a compute CTA
 * never waits for a courier (the staging buffer has one slot per row and tile, nothing is
 * recycled), so the compute CTAs finish the task list as they would without couriers, and every
 * flag a courier waits for gets raised. That needs the compute CTAs to be running: they are
 * blocks 0..grid-C-1, which the hardware dispatches before the couriers (the last C blocks); were
 * a courier resident in their place, its wait would end in the bounded timeout, not a hang.
 * Signals: the fused combine raises no flag at the destination (the host verifies after the
 * kernel; the kernel's end is the completion signal), so the couriers raise none either; the
 * kernel ends only after the couriers' last stores were issued, so the measured kernel time
 * covers them. smem: the kernel's dynamic shared memory (unused by a courier otherwise). */
static __device__ __noinline__ void xs_moe_courier(const xs_moe_kargs &a, int k,
                                                   unsigned int smid, char *smem)
{
    typedef xs_moe_cfg C;
    enum { U = XS_MOE_COURIER_UNITS };
    char **s_dst = (char **)smem;        /* [BM] the tile's remote rows' destinations */
    int *s_row = (int *)(s_dst + C::BM); /* [BM] the tile's remote rows, in row order */
    const int tid = threadIdx.x, step = a.couriers;
    unsigned long long next = 0;         /* thread 0: the pacer (xs_moe_courier_pace) */
    /* the next tile's plan, loaded one tile ahead (xs_moe_courier_rows: its remote rows, their
     * destinations, their count), and its tile list entry two tiles ahead, so that none of these
     * loads is issued behind the previous tile's stores (run 9: a courier's loads wait behind its
     * own stores in flight, and a tile used to start with six dependent loads) */
    int j = k;
    int2 tk = j < a.nclist ? a.clist[j] : make_int2(0, 0);
    int2 tk_next = j + step < a.nclist ? a.clist[j + step] : make_int2(0, 0);
    int p_cnt = 0, p_row = 0;
    char *p_dst = NULL;
    if (j < a.nclist) {
        p_cnt = a.ccnt[tk.x];
        if (tid < p_cnt) {
            p_row = a.crow[(size_t)tk.x * C::BM + tid];
            p_dst = a.cdst[(size_t)tk.x * C::BM + tid];
        }
    }
    int ready_early = 0; /* thread 0: this tile's ready flag was seen set one tile ahead */
#pragma unroll 1
    for (; j < a.nclist; j += step) {
        const uint64_t c_wait = xs_clock();
        const int rbi = tk.x, nb = tk.y, nrem = p_cnt;
        const int nv = a.hidden - nb * C::BN;
        const int cpr = (nv < C::BN ? nv : C::BN) / 8; /* 16-byte units per row (H % 8 == 0) */
        /* s_row, s_dst: the previous tile's readers passed the barrier at its end */
        if (tid < nrem) {
            s_row[tid] = p_row;
            s_dst[tid] = p_dst;
        }
        int stop = 0;
        if (tid == 0 && nrem > 0 && !ready_early)
            stop = xs_moe_courier_wait(a, j, rbi, nb);
        /* barrier: s_row, s_dst, the decision, and (thread 0's acquire before it) the staged
         * rows */
        if (__syncthreads_or(stop))
            break;
        const uint64_t c_ready = xs_clock();
        unsigned long long gate = 0;
        const int units = nrem * cpr, CH = U * C::THREADS;
        const long long col = (long long)nb * C::BN * 2;
        /* two chunks in flight: the loads of chunk i + 1 leave before the stores of chunk i, so
         * they do not queue behind them (run 8, call 6: load, then store, chunk by chunk, copied
         * 6.6-6.9 B/ns per courier, the loads waiting behind the courier's own stores) */
        uint4 v0[U], v1[U];
        char *d0[U], *d1[U];
        xs_moe_courier_load(a, s_row, s_dst, cpr, col, units, 0, tid, v0, d0);
        /* the next tile's plan and ready flag, and the entry after it: before this tile's
         * stores */
        const int jn = j + step;
        const int2 tk_after = jn + step < a.nclist ? a.clist[jn + step] : make_int2(0, 0);
        if (jn < a.nclist) {
            p_cnt = a.ccnt[tk_next.x];
            if (tid < p_cnt) {
                p_row = a.crow[(size_t)tk_next.x * C::BM + tid];
                p_dst = a.cdst[(size_t)tk_next.x * C::BM + tid];
            }
            if (tid == 0)
                ready_early =
                    xs_ld_acquire_gpu(xs_moe_ready_flag(a, tk_next.x, tk_next.y)) != 0ull;
        }
#pragma unroll 1
        for (int base = 0; base < units; base += 2 * CH) {
            if (base + CH < units)
                xs_moe_courier_load(a, s_row, s_dst, cpr, col, units, base + CH, tid, v1, d1);
            if (tid == 0)
                gate += xs_moe_courier_pace(a, &next, 16.0 * min(units - base, CH), &stop);
            if (__syncthreads_or(stop))
                break;
            xs_moe_courier_store(v0, d0);
            if (base + CH >= units)
                break;
            if (base + 2 * CH < units)
                xs_moe_courier_load(a, s_row, s_dst, cpr, col, units, base + 2 * CH, tid, v0,
                                    d0);
            if (tid == 0)
                gate += xs_moe_courier_pace(a, &next, 16.0 * min(units - base - CH, CH), &stop);
            if (__syncthreads_or(stop))
                break;
            xs_moe_courier_store(v1, d1);
        }
        if (__syncthreads_or(stop)) /* every store of the tile issued, s_row and s_dst free */
            break;
        if (tid == 0 && a.ctrace) {
            unsigned long long *r = a.ctrace + (size_t)j * XS_MOE_COPY_WORDS;
            r[0] = c_wait;
            r[1] = c_ready;
            r[2] = xs_clock();
            r[3] = ((unsigned long long)blockIdx.x << 32) | smid;
            r[4] = (unsigned long long)units * 16ull;
            r[5] = gate;
        }
        tk = tk_next;
        tk_next = tk_after;
    }
}

/* A deferred Linear-2 tile's stores (DEFER; all threads, after a barrier that follows the tile's
 * staging): thread 0 waits for the pacer (bounded), then the rows go out from the staging tile
 * and thread 0 completes the tile's trace: st0, st1 and the wait. */
template <class C>
static __device__ void xs_moe_flush(const xs_moe_kargs &a, const char *stg, char *const *ddst,
                                    int ti, int nrows, int ncols, int nremote)
{
    __shared__ unsigned long long s_gate;
    if (threadIdx.x == 0)
        s_gate = nremote > 0 && a.pace_ns_per_byte > 0.0
                     ? xs_moe_pace(a, (double)nremote * ncols * 2.0)
                     : 0ull;
    __syncthreads();
    const uint64_t c0 = xs_clock();
    xs_gemm_store_rows<C, C::BN>(stg, ddst, nrows, ncols);
    __syncthreads(); /* every store issued; the staging tile and ddst are free again */
    if (threadIdx.x == 0 && a.trace) {
        unsigned long long *r = a.trace + (size_t)ti * XS_MOE_TRACE_WORDS;
        r[3] = c0;
        r[4] = xs_clock();
        r[7] = s_gate;
        r[9] = 1;
    }
}

/* The spilling kernel's queue of held-back Linear-2 tiles (one per CTA, shared memory): entry e
 * is {task index, remote rows, column block, columns}; its rows' destinations and global row
 * indices are xs_moe_spill_dst(smem, e) and xs_moe_spill_row(smem, e). Thread 0 changes it,
 * between barriers. */
struct xs_moe_spillq {
    int4 e[XS_MOE_SPILL_MAX];
    int head, n;
    int cnt;                 /* rows written into the entry being filled */
    int go;                  /* the drain's decision, for every thread */
    unsigned long long gate; /* ns thread 0 waited for the pacer (the drain's last tile) */
};

static __device__ __forceinline__ char **xs_moe_spill_dst(char *smem, int e)
{
    return (char **)(smem + XS_MOE_SPILL_DST) + e * xs_moe_cfg::BM;
}

static __device__ __forceinline__ int *xs_moe_spill_row(char *smem, int e)
{
    return (int *)(smem + XS_MOE_SPILL_ROW) + e * xs_moe_cfg::BM;
}

/* The spilling kernel holds a Linear-2 tile back (all threads, after the barrier that follows
 * its staging, s_sq.cnt zeroed): its remote rows (rem[r] != 0) are redirected to their slots in
 * the staging buffer, and the queue's next entry keeps where they go on. s_sq.head and s_sq.n
 * change only at thread 0 after the barrier here. Not inlined, so that nothing of it is hoisted
 * into the kernel's loop (its main loop must stay the plain kernel's: run 13 call 1). */
static __device__ __noinline__ void xs_moe_spill_tile(const xs_moe_kargs &a, char *smem,
                                                      xs_moe_spillq *q,
                                                      const unsigned char *rem, char **dst,
                                                      int ti, int row0, int nrows, int nb,
                                                      int ncols)
{
    const int tid = threadIdx.x;
    const int e = (q->head + q->n) % XS_MOE_SPILL_MAX;
    if (tid < nrows && rem[tid]) {
        const int k = atomicAdd(&q->cnt, 1);
        xs_moe_spill_dst(smem, e)[k] = dst[tid];
        xs_moe_spill_row(smem, e)[k] = row0 + tid;
        dst[tid] = a.cstage + ((long long)(row0 + tid) * a.hidden +
                               (long long)nb * xs_moe_cfg::BN) * 2;
    }
    __syncthreads(); /* dst and q->cnt */
    if (tid == 0) {
        q->e[e] = make_int4(ti, q->cnt, nb, ncols);
        q->n++;
    }
}

/* A held-back tile's nrem remote rows leave from the staging buffer (all threads, after a
 * barrier that follows any use of the ring; ends with one): 16-byte units of ncols columns from
 * column block nb are copied into the ring by cp.async (L2, where the spill wrote them; no
 * register holds them), then stored from there. Registers matter: a version that loaded them
 * into registers made the kernel's main loop longer (255 registers against 245, 4 % slower on
 * every row, run 13 call 1). */
static __device__ __forceinline__ void xs_moe_spill_store(const xs_moe_kargs &a, char *smem,
                                                          const int *srow, char *const *sdst,
                                                          int nrem, int nb, int ncols)
{
    typedef xs_moe_cfg C;
    static_assert(C::BM * C::BN * 2 <= C::MAIN_BYTES, "a held-back tile fits in the ring");
    const volatile xs_moe_kargs &va = a; /* read here, not hoisted into the kernel's loop */
    const char *const cstage = va.cstage;
    const int cpr = ncols / 8, units = nrem * cpr; /* H % 8 == 0; units * 16 <= the ring */
    const long long col = (long long)nb * C::BN * 2, pitch = (long long)va.hidden * 2;
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem);
#pragma unroll 1
    for (int i = threadIdx.x; i < units; i += C::THREADS) {
        const int r = i / cpr, c16 = 16 * (i - r * cpr);
        xs_cp_async16(s0 + 16u * (uint32_t)i, cstage + srow[r] * pitch + col + c16, 16);
    }
    xs_cp_async_commit();
    xs_cp_async_wait<0>();
    __syncthreads();
#pragma unroll 4
    for (int i = threadIdx.x; i < units; i += C::THREADS) {
        const int r = i / cpr, c16 = 16 * (i - r * cpr);
        xs_st16v(sdst[r] + c16, *(const uint4 *)(smem + 16 * i));
    }
}

/* The spilling kernel's held-back tiles leave, oldest first (all threads, uniformly): while the
 * pacer admits the next one at once (xs_moe_pace_try), or, with `wait` (the CTA's end), every
 * one after a bounded wait (xs_moe_pace). After a recorded failure the end drops them: the run
 * has failed, and its windows are not checked. Thread 0 completes each tile's trace: st0, st1
 * and the wait. */
static __device__ __forceinline__ void xs_moe_spill_drain(const xs_moe_kargs &a, char *smem,
                                                          xs_moe_spillq *q, int wait)
{
    for (;;) {
        if (threadIdx.x == 0) {
            int go = 0;
            unsigned long long w = 0;
            if (q->n > 0) {
                const int4 e = q->e[q->head];
                const double bytes = (double)e.y * e.w * 2.0;
                if (!wait) {
                    go = xs_moe_pace_try(a, bytes);
                } else if (*(volatile unsigned int *)&a.status->code == 0) {
                    w = xs_moe_pace(a, bytes);
                    go = 1;
                }
            }
            q->go = go;
            q->gate = w;
        }
        __syncthreads();
        if (!q->go)
            return;
        const int h = q->head;
        const int4 e = q->e[h];
        const uint64_t c0 = xs_clock();
        xs_moe_spill_store(a, smem, xs_moe_spill_row(smem, h), xs_moe_spill_dst(smem, h), e.y,
                           e.z, e.w);
        __syncthreads(); /* every store issued: the entry is free */
        if (threadIdx.x == 0) {
            if (a.trace) {
                unsigned long long *r = a.trace + (size_t)e.x * XS_MOE_TRACE_WORDS;
                r[3] = c0;
                r[4] = xs_clock();
                r[7] = q->gate;
                r[9] = 1;
            }
            q->head = (h + 1) % XS_MOE_SPILL_MAX;
            q->n--;
        }
    }
}

/* The arguments are read from device memory (xs_moe_run_fused copies them before the launch),
 * not from a by-value kernel parameter. With `a` a by-value (or __grid_constant__) struct,
 * nvcc 13.0 (V13.0.88, NVVM 7.0.1) miscompiles the if/else that fills the GEMM problem below:
 * it turns the two loads of p.a into one load through a phi of parameter addresses, loses the
 * Linear-2 side, and every Linear-2 tile reads its A operand from X instead of h (PTX: no load
 * of the h field but the Linear-1 destinations). Loads from global memory are lowered
 * correctly; test_moe runs Linear-1 and Linear-2 alone to catch any regression (docs/EP.md). */
template <class C, int MODE>
__global__ void __launch_bounds__(C::THREADS, 1)
    xs_moe_kernel_t(const xs_moe_kargs *__restrict__ args)
{
    constexpr bool DEFER = MODE == XS_MOE_DEFER_RING, SPILL = MODE == XS_MOE_DEFER_SPILL;
    const xs_moe_kargs &a = *args;
    extern __shared__ __align__(128) char xs_moe_smem[];
    char *smem = xs_moe_smem;
    __shared__ int s_task, s_abort;
    int pending = -1; /* thread 0, adaptive plans: a claimed Linear-2 tile not run yet */
    /* DEFER: the Linear-2 staging tile of its own and the pointers of a deferred tile's rows;
     * s_def: the deferred tile (its task index, -1: none), its rows, columns and remote rows */
    char *stg = DEFER ? smem + XS_MOE_DEFER_STG : smem;
    char **ddst = (char **)(smem + XS_MOE_DEFER_DST);
    __shared__ int s_def, s_def_rows, s_def_cols, s_def_rem, s_go;
    /* SPILL: the held-back tiles, and which rows of the current tile are remote */
    __shared__ xs_moe_spillq s_sq;
    __shared__ unsigned char s_rem[SPILL ? C::BM : 1];
    const int tid = threadIdx.x;
    if (DEFER && tid == 0)
        s_def = -1; /* seen by all at the loop's first barrier */
    if (SPILL && tid == 0)
        s_sq.head = s_sq.n = 0;
    char **dst = xs_gemm_dst_rows<C>(smem);
    float *scale = xs_gemm_row_scale<C>(smem);
    unsigned long long g0 = 0, k0 = 0;
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    if (tid == 0)
        xs_time_anchor(&g0, &k0, 1ull << 23);
    /* the last a.couriers CTAs are couriers; they take no task */
    const int courier = a.couriers > 0 && (int)blockIdx.x >= (int)gridDim.x - a.couriers;
    if (courier)
        xs_moe_courier(a, (int)blockIdx.x - ((int)gridDim.x - a.couriers), smid, smem);

#pragma unroll 1
    for (; !courier;) {
        if (tid == 0) {
            int t = -1;
            /* stop taking work once any CTA recorded a failure */
            if (*(volatile unsigned int *)&a.status->code == 0)
                t = a.adaptive ? xs_moe_take_adaptive(a, &pending)
                               : (int)atomicAdd(a.queue, 1u);
            s_task = t;
            s_abort = 0;
        }
        __syncthreads();
        const int ti = s_task;
        if (ti < 0 || ti >= a.ntasks)
            break;
        if (SPILL) /* held-back tiles the pacer admits now leave before this task */
            xs_moe_spill_drain(a, smem, &s_sq, 0);
        const uint64_t c_fetch = xs_clock();
        const int2 tk = a.tasks[ti];
        const int kind = (tk.x >> 30) & 3, rbi = tk.x & 0x3fffffff, nb = tk.y;
        const int4 rb = a.rbs[rbi];
        const int expert = rb.x, row0 = rb.y, nrows = rb.z;

        if (kind == 2 && tid == 0 &&
            xs_wait_geq((const uint64_t *)(a.done1 + rbi), (uint64_t)a.l1_per_rb,
                        a.timeout_ns) != XS_WAIT_OK) {
            xs_devfail(a.status, XS_DEVERR_TIMEOUT,
                       ((unsigned long long)blockIdx.x << 32) | (unsigned int)rbi);
            s_abort = 1;
        }
        /* Linear-2: a ticket after the acquire. Every Linear-1 tile of the row block took its
         * ticket before its release, so a correct order gives this one a larger number, whatever
         * the clocks say (xs_moe_tile.seq) */
        unsigned long long ticket = ~0ull;
        if (kind == 2 && tid == 0 && a.trace)
            ticket = atomicAdd(a.seq, 1ull);
        int remote = 0;
        if (tid < C::BM) {
            char *d = NULL;
            float sc = 1.0f;
            if (tid < nrows) {
                const int gr = row0 + tid;
                if (kind == 1) {
                    d = (char *)(a.h + (long long)gr * a.inter + nb * (C::BN / 2));
                } else {
                    const int rank = a.row_rank[gr];
                    d = a.rank_base[rank] + a.row_off[gr] + (long long)nb * C::BN * 2;
                    sc = a.row_weight[gr];
                    remote = a.rank_host[rank];
                    /* couriers: a remote row goes to the staging buffer, they copy it on */
                    if (remote && !SPILL && a.cstage)
                        d = a.cstage + ((long long)gr * a.hidden + (long long)nb * C::BN) * 2;
                }
            }
            dst[tid] = d;
            scale[tid] = sc;
            if (SPILL)
                s_rem[tid] = (unsigned char)remote;
        }
        /* barrier: s_abort, the acquired dependency and the row tables are seen by all */
        const int nremote = __syncthreads_count(remote);
        if (s_abort)
            break;
        const uint64_t c_mma0 = xs_clock();

        xs_gemm_problem p;
        if (kind == 1) {
            p.a = a.x;
            p.a_rows = a.row_token + row0; /* fused dispatch: gather token rows */
            p.lda = a.hidden;
            p.b = a.w1 + (long long)expert * 2 * a.inter * a.hidden;
            p.ldb = a.hidden;
            p.m = nrows;
            p.n = 2 * a.inter;
            p.k = a.hidden;
        } else {
            p.a = a.h + (long long)row0 * a.inter;
            p.a_rows = NULL;
            p.lda = a.inter;
            p.b = a.w2 + (long long)expert * a.hidden * a.inter;
            p.ldb = a.inter;
            p.m = nrows;
            p.n = a.hidden;
            p.k = a.inter;
        }
        float acc[C::MT][C::NT][4];
        xs_gemm_mainloop<C>(p, 0, nb * C::BN, smem, acc);
        const uint64_t c_mma1 = xs_clock();
        int ncols;
        if (kind == 1) {
            const int nv = 2 * a.inter - nb * C::BN;
            ncols = (nv < C::BN ? nv : C::BN) / 2;
            xs_gemm_stage_swiglu<C>(smem, acc, NULL);
        } else {
            const int nv = a.hidden - nb * C::BN;
            ncols = nv < C::BN ? nv : C::BN;
            /* DEFER: the tile the pacer held back last time leaves first, from the staging
             * tile this one is about to use (its wait mostly ran out during this main loop) */
            if (DEFER && s_def >= 0) {
                xs_moe_flush<C>(a, stg, ddst, s_def, s_def_rows, s_def_cols, s_def_rem);
                if (tid == 0)
                    s_def = -1;
            }
            xs_gemm_stage_acc<C>(stg, acc, scale); /* routing weight per row */
        }
        const int bulk = kind == 2 && a.bulk_combine;
        if (bulk)
            xs_bulk_fence_smem(); /* this thread's staging writes, for the TMA's reads */
        unsigned long long gate_ns = 0;
        const int paced = kind == 2 && nremote > 0 && a.pace_ns_per_byte > 0.0;
        if (DEFER) {
            /* a tile the pacer would hold back waits in the staging tile instead */
            if (tid == 0)
                s_go = !paced || xs_moe_pace_try(a, (double)nremote * ncols * 2.0);
        } else if (SPILL) {
            /* a tile the pacer would hold back spills, unless the queue is full: then it waits */
            if (tid == 0) {
                const double bytes = (double)nremote * ncols * 2.0;
                s_go = !paced || xs_moe_pace_try(a, bytes);
                if (!s_go && s_sq.n >= ((const volatile xs_moe_kargs &)a).spill_depth) {
                    gate_ns = xs_moe_pace(a, bytes);
                    s_go = 1;
                }
                s_sq.cnt = 0;
            }
        } else if (paced && tid == 0) {
            gate_ns = xs_moe_pace(a, (double)nremote * ncols * 2.0);
        }
        __syncthreads(); /* the staged tile, and the pacer's permission, for every thread */
        if (SPILL && kind == 2 && !s_go)
            xs_moe_spill_tile(a, smem, &s_sq, s_rem, dst, ti, row0, nrows, nb, ncols);
        const int defer = DEFER && kind == 2 && !s_go;
        if (defer) {
            if (tid < C::BM)
                ddst[tid] = dst[tid];
            if (tid == 0) {
                s_def = ti;
                s_def_rows = nrows;
                s_def_cols = ncols;
                s_def_rem = nremote;
            }
        }
        const uint64_t c_st0 = xs_clock();
        if (defer)
            ; /* stored by the next Linear-2 epilogue of this CTA, or at its end */
        else if (kind == 1)
            xs_gemm_store_rows<C, C::BN / 2>(smem, dst, nrows, ncols);
        else if (bulk)
            xs_gemm_store_rows_bulk<C, C::BN>(smem, dst, nrows, ncols);
        else
            xs_gemm_store_rows<C, C::BN>(stg, dst, nrows, ncols);
        /* every store of the tile issued (accepted by the SM); bulk: every copy has read its
         * row, so the next tile may overwrite the staging tile; DEFER: ddst and s_def set */
        __syncthreads();
        if (tid == 0) {
            const uint64_t c_st1 = xs_clock();
            if (kind == 2 && a.ready) {
                /* the staged rows to the couriers: the barrier above ordered every thread's
                 * stores before this release (cumulative) */
                __threadfence();
                xs_st_release_gpu((uint64_t *)(a.ready + (size_t)rbi * a.l2_per_rb + nb), 1ull);
            }
            if (kind == 1 && !(a.fault_skip_l1 && ti == 0)) {
                if (a.trace)
                    ticket = atomicAdd(a.seq, 1ull); /* before the release (see Linear-2) */
                /* release: the CTA's h stores (ordered by the barrier) before the count */
                __threadfence();
                atomicAdd(a.done1 + rbi, 1ull);
            }
            if (a.trace) {
                unsigned long long *r = a.trace + (size_t)ti * XS_MOE_TRACE_WORDS;
                r[0] = c_fetch;
                r[1] = c_mma0;
                r[2] = c_mma1;
                r[3] = c_st0; /* a deferred tile: st0, st1 and the wait at its flush */
                r[4] = c_st1;
                r[5] = ((unsigned long long)blockIdx.x << 32) | smid;
                r[6] = ((unsigned long long)(nremote * ncols * 2) << 32) |
                       (unsigned int)(nrows * ncols * 2);
                r[7] = gate_ns;
                r[8] = ticket;
                r[9] = 0; /* a deferred tile: 1 at its flush */
            }
        }
    }
    if (DEFER) {
        /* the loop's exits are uniform (s_task, s_abort): every thread is here */
        __syncthreads();
        if (s_def >= 0)
            xs_moe_flush<C>(a, stg, ddst, s_def, s_def_rows, s_def_cols, s_def_rem);
    }
    if (SPILL) {
        __syncthreads(); /* as above */
        xs_moe_spill_drain(a, smem, &s_sq, 1);
    }
    if (a.bulk_combine)
        xs_bulk_wait_done(); /* the writes of this thread's copies, before the CTA ends */
    if (tid == 0 && a.anchors) {
        unsigned long long g1, k1;
        xs_time_anchor(&g1, &k1, 1ull << 23);
        unsigned long long *an = a.anchors + 4 * (size_t)blockIdx.x;
        an[0] = g0;
        an[1] = k0;
        an[2] = g1;
        an[3] = k1;
    }
}

#define xs_moe_kernel xs_moe_kernel_t<xs_moe_cfg, 0>
#define xs_moe_kernel_defer xs_moe_kernel_t<xs_moe_cfg3, XS_MOE_DEFER_RING>
#define xs_moe_kernel_spill xs_moe_kernel_t<xs_moe_cfg, XS_MOE_DEFER_SPILL>

/* ---- windows ------------------------------------------------------------------------------ */

xs_status xs_moe_local_table(xs_moe *m, xs_wintab *tab)
{
    XS_MOE_NEED_DEVICE(m);
    if (!m->local_win)
        XS_TRY(xs_dalloc((void **)&m->local_win, m->window_bytes * (size_t)m->N,
                         "local-control windows"));
    memset(tab, 0, sizeof *tab);
    tab->nranks = m->N;
    tab->rank = 0;
    tab->bytes = m->window_bytes;
    tab->nflags = 0;
    for (int r = 0; r < m->N; r++) {
        tab->data[r] = m->local_win + (size_t)r * m->window_bytes;
        tab->host_mem[r] = 0;
    }
    return XS_OK;
}

static xs_status xs_moe_check_table(const xs_moe *m, const xs_wintab *tab)
{
    if (!tab || tab->nranks < m->N)
        return xs_seterr(XS_EINVAL, "moe: window table has %d ranks, the problem needs %d",
                         tab ? tab->nranks : 0, m->N);
    if (tab->bytes < m->window_bytes)
        return xs_seterr(XS_EINVAL, "moe: windows of %zu bytes, the combine needs %zu",
                         tab->bytes, m->window_bytes);
    for (int r = 0; r < m->N; r++)
        if (!tab->data[r] || ((uintptr_t)tab->data[r] & 15))
            return xs_seterr(XS_EINVAL, "moe: window of rank %d is missing or not 16-byte "
                             "aligned", r);
    return XS_OK;
}

xs_status xs_moe_poison(xs_moe *m, const xs_wintab *tab, cudaStream_t s)
{
    XS_MOE_NEED_DEVICE(m);
    XS_TRY(xs_moe_check_table(m, tab));
    for (int r = 0; r < m->N; r++) {
        xs_moe_poison_kernel<<<264, 256, 0, s>>>((uint4 *)tab->data[r], m->window_bytes / 16);
        XS_CU_LAUNCH();
    }
    /* the couriers' staging buffer too: a copy of a row that was never staged then arrives as
     * NaN, instead of as the previous run's identical bytes */
    if (m->d_cstage) {
        xs_moe_poison_kernel<<<264, 256, 0, s>>>((uint4 *)m->d_cstage,
                                                 (size_t)m->rows * m->H * 2 / 16);
        XS_CU_LAUNCH();
    }
    return XS_OK;
}

xs_status xs_moe_flush_l2(xs_moe *m, cudaStream_t s)
{
    XS_MOE_NEED_DEVICE(m);
    if (!m->flush) {
        int dev = 0, l2 = 0;
        XS_CU(cudaGetDevice(&dev));
        XS_CU(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        m->flush_bytes = (size_t)(l2 > 0 ? l2 : (64 << 20)) * 2;
        XS_TRY(xs_dalloc(&m->flush, m->flush_bytes, "L2 flush buffer"));
    }
    XS_CU(cudaMemsetAsync(m->flush, (m->flush_count++ & 0x7f) + 1, m->flush_bytes, s));
    return XS_OK;
}

static xs_status xs_moe_upload_table(xs_moe *m, const xs_wintab *tab, cudaStream_t s)
{
    /* static: cudaMemcpyAsync from pageable memory copies before returning */
    char *base[XS_MAX_RANKS];
    unsigned char host[XS_MAX_RANKS];
    for (int r = 0; r < XS_MAX_RANKS; r++) {
        base[r] = r < m->N ? tab->data[r] : NULL;
        host[r] = r < m->N ? tab->host_mem[r] : 0;
    }
    XS_CU(cudaMemcpyAsync(m->d_rank_base, base, sizeof base, cudaMemcpyHostToDevice, s));
    XS_CU(cudaMemcpyAsync(m->d_rank_host, host, sizeof host, cudaMemcpyHostToDevice, s));
    XS_CU(cudaStreamSynchronize(s));
    return XS_OK;
}

/* ---- running the fused kernel ----------------------------------------------------------------- */

static void xs_moe_decode_trace(xs_moe *m, const xs_moe_tasklist *tl)
{
    /* clock64 -> ns on the global time base, per CTA: ns = g0 + (clk - k0) * (g1 - g0)/(k1 - k0).
     * Integer differences first: %globaltimer counts ns since the epoch (~2^61), beyond the 53
     * bits a double holds exactly. */
    unsigned long long g_origin = ~0ull;
    for (int c = 0; c < m->grid; c++)
        if (m->h_anchors[4 * (size_t)c] < g_origin)
            g_origin = m->h_anchors[4 * (size_t)c];
    double t_min = INFINITY;
    m->ntiles = tl->n;
    for (int i = 0; i < tl->n; i++) {
        const unsigned long long *r = m->h_trace + (size_t)i * XS_MOE_TRACE_WORDS;
        xs_moe_tile *t = &m->tiles[i];
        int cta = (int)(r[5] >> 32);
        if (cta < 0 || cta >= m->grid) {
            memset(t, 0, sizeof *t);
            t->cta = -1;
            t->seq = -1;
            continue;
        }
        const unsigned long long *an = m->h_anchors + 4 * (size_t)cta;
        double dg = (double)(long long)(an[2] - an[0]), dk = (double)(long long)(an[3] - an[1]);
        double ns_per_clk = dk > 0 ? dg / dk : 0.0;
        double base = (double)(long long)(an[0] - g_origin);
        double v[5];
        for (int j = 0; j < 5; j++)
            v[j] = base + (double)(long long)(r[j] - an[1]) * ns_per_clk;
        t->fetch_ns = v[0];
        t->mma0_ns = v[1];
        t->mma1_ns = v[2];
        t->st0_ns = v[3];
        t->st1_ns = v[4];
        t->kind = (tl->host[i].x >> 30) & 3;
        t->rb = tl->host[i].x & 0x3fffffff;
        t->nb = tl->host[i].y;
        t->cta = cta;
        t->smid = (int)(r[5] & 0xffffffffu);
        t->remote_bytes = (int)(r[6] >> 32);
        t->total_bytes = (int)(r[6] & 0xffffffffu);
        t->gate_ns = (double)r[7];
        t->seq = r[8] == ~0ull ? -1 : (long long)r[8];
        t->deferred = r[9] == 1ull;
        t->id = t->kind == 1 ? t->rb * m->l1_per_rb + t->nb
                             : m->nrb * m->l1_per_rb + t->rb * m->l2_per_rb + t->nb;
        if (v[0] < t_min)
            t_min = v[0];
    }
    for (int i = 0; i < tl->n; i++) {
        xs_moe_tile *t = &m->tiles[i];
        if (t->cta < 0)
            continue;
        t->fetch_ns -= t_min;
        t->mma0_ns -= t_min;
        t->mma1_ns -= t_min;
        t->st0_ns -= t_min;
        t->st1_ns -= t_min;
    }
    /* the couriers' copies, on the same base */
    for (int j = 0; j < m->ncopies; j++) {
        const unsigned long long *r = m->h_ctrace + (size_t)j * XS_MOE_COPY_WORDS;
        xs_moe_copy *c = &m->copies[j];
        memset(c, 0, sizeof *c);
        c->pos = j;
        c->rb = m->h_clist[j].x;
        c->nb = m->h_clist[j].y;
        c->id = m->nrb * m->l1_per_rb + c->rb * m->l2_per_rb + c->nb;
        const int cta = (int)(r[3] >> 32);
        if (cta < 0 || cta >= m->grid) {
            c->cta = -1;
            continue;
        }
        const unsigned long long *an = m->h_anchors + 4 * (size_t)cta;
        const double dg = (double)(long long)(an[2] - an[0]);
        const double dk = (double)(long long)(an[3] - an[1]);
        const double ns_per_clk = dk > 0 ? dg / dk : 0.0;
        const double base = (double)(long long)(an[0] - g_origin) - (isfinite(t_min) ? t_min : 0);
        c->cta = cta;
        c->smid = (int)(r[3] & 0xffffffffu);
        c->wait_ns = base + (double)(long long)(r[0] - an[1]) * ns_per_clk;
        c->ready_ns = base + (double)(long long)(r[1] - an[1]) * ns_per_clk;
        c->end_ns = base + (double)(long long)(r[2] - an[1]) * ns_per_clk;
        c->bytes = (int)r[4];
        c->gate_ns = (double)r[5];
    }
}

/* The tasks of one kind (1 = Linear-1, 2 = Linear-2) of a task list, in its order, into m->sub. */
static xs_status xs_moe_subset(xs_moe *m, const xs_moe_tasklist *from, int kind)
{
    xs_moe_tasklist *t = &m->sub;
    if (!t->host) {
        t->host = (int2 *)malloc(sizeof(int2) * (size_t)(m->trace_cap + 1));
        if (!t->host)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory for a task list");
        XS_TRY(xs_dalloc((void **)&t->dev, sizeof(int2) * (size_t)(m->trace_cap + 1),
                         "task list"));
    }
    int n = 0;
    for (int i = 0; i < from->n; i++)
        if (((from->host[i].x >> 30) & 3) == kind)
            t->host[n++] = from->host[i];
    t->n = n;
    t->plan = from->plan;
    if (n)
        XS_CU(cudaMemcpy(t->dev, t->host, sizeof(int2) * (size_t)n, cudaMemcpyHostToDevice));
    return XS_OK;
}

/* The combine staging buffer, [rows, H] bf16 (couriers, spilling kernel): allocated once per
 * problem, NaN until rows are staged. */
static xs_status xs_moe_cstage_alloc(xs_moe *m, cudaStream_t s)
{
    if (m->d_cstage)
        return XS_OK;
    XS_TRY(xs_dalloc((void **)&m->d_cstage, (size_t)m->rows * m->H * 2, "combine staging buffer"));
    XS_CU(cudaMemsetAsync(m->d_cstage, 0xff, (size_t)m->rows * m->H * 2, s)); /* bf16 NaN */
    return XS_OK;
}

/* A courier run's buffers (allocated once per problem) and its copy list: the Linear-2 tiles of
 * task list tl in position order, uploaded on stream s; ready flags cleared, copy trace poisoned. */
static xs_status xs_moe_courier_setup(xs_moe *m, const xs_moe_tasklist *tl, cudaStream_t s)
{
    const size_t n2 = (size_t)m->nrb * m->l2_per_rb;
    if (n2 >= (1u << 30))
        return xs_seterr(XS_ERANGE, "moe: %zu Linear-2 tiles: too many for the couriers", n2);
    XS_TRY(xs_moe_cstage_alloc(m, s));
    if (!m->d_ready) {
        XS_TRY(xs_dalloc((void **)&m->d_ready, 8 * (n2 + 1), "courier ready flags"));
        XS_TRY(xs_dalloc((void **)&m->d_clist, sizeof(int2) * (n2 + 1), "courier tile list"));
        XS_TRY(xs_dalloc((void **)&m->d_ctrace, 8 * XS_MOE_COPY_WORDS * (n2 + 1),
                         "courier trace"));
    }
    if (!m->h_clist) {
        m->h_clist = (int2 *)malloc(sizeof(int2) * (n2 + 1));
        m->h_ctrace = (unsigned long long *)malloc(8 * XS_MOE_COPY_WORDS * (n2 + 1));
        m->copies = (xs_moe_copy *)calloc(n2 + 1, sizeof(xs_moe_copy));
        if (!m->h_clist || !m->h_ctrace || !m->copies)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory for the courier lists");
    }
    int n = 0;
    for (int i = 0; i < tl->n; i++)
        if (((tl->host[i].x >> 30) & 3) == 2)
            m->h_clist[n++] = make_int2(tl->host[i].x & 0x3fffffff, tl->host[i].y);
    m->ncopies = n;
    /* pageable source: staged before the call returns, ordered before the launch on s */
    if (n)
        XS_CU(cudaMemcpyAsync(m->d_clist, m->h_clist, sizeof(int2) * (size_t)n,
                              cudaMemcpyHostToDevice, s));
    XS_CU(cudaMemsetAsync(m->d_ready, 0, 8 * (n2 + 1), s));
    XS_CU(cudaMemsetAsync(m->d_ctrace, 0xff, 8 * XS_MOE_COPY_WORDS * ((size_t)n + 1), s));
    return XS_OK;
}

/* The couriers' row plan for the window table of this run (docs/EP.md "Couriers"): per row
 * block, its rows whose rank's window is host memory (remote over PCIe), in row order, with
 * each row's slot in that window, uploaded on s. A courier then finds a tile's rows and their
 * destinations in two independent loads it can issue before its previous tile's stores leave
 * (run 9: the loads behind those stores were a third of a courier's time). */
static xs_status xs_moe_courier_rows(xs_moe *m, const xs_wintab *tab, cudaStream_t s)
{
    typedef xs_moe_cfg C;
    const size_t nb = (size_t)m->nrb * C::BM;
    if (!m->d_crow) {
        XS_TRY(xs_dalloc((void **)&m->d_crow, sizeof(int) * (nb + 1), "courier row plan"));
        XS_TRY(xs_dalloc((void **)&m->d_cdst, sizeof(char *) * (nb + 1), "courier row plan"));
        XS_TRY(xs_dalloc((void **)&m->d_ccnt, sizeof(int) * ((size_t)m->nrb + 1),
                         "courier row plan"));
    }
    if (!m->h_crow) {
        m->h_crow = (int *)malloc(sizeof(int) * (nb + 1));
        m->h_cdst = (char **)malloc(sizeof(char *) * (nb + 1));
        m->h_ccnt = (int *)malloc(sizeof(int) * ((size_t)m->nrb + 1));
        if (!m->h_crow || !m->h_cdst || !m->h_ccnt)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory for the courier row plan");
    }
    for (int b = 0; b < m->nrb; b++) {
        const int row0 = m->rb[b].y, nrows = m->rb[b].z;
        int n = 0;
        for (int i = 0; i < nrows && i < C::BM; i++) {
            const int gr = row0 + i, r = m->row_rank[gr];
            if (r < 0 || r >= m->N || !tab->host_mem[r])
                continue;
            m->h_crow[(size_t)b * C::BM + n] = gr;
            m->h_cdst[(size_t)b * C::BM + n] = tab->data[r] + m->row_off[gr];
            n++;
        }
        m->h_ccnt[b] = n;
    }
    /* pageable sources: staged before the calls return, ordered before the launch on s */
    XS_CU(cudaMemcpyAsync(m->d_crow, m->h_crow, sizeof(int) * nb, cudaMemcpyHostToDevice, s));
    XS_CU(cudaMemcpyAsync(m->d_cdst, m->h_cdst, sizeof(char *) * nb, cudaMemcpyHostToDevice, s));
    XS_CU(cudaMemcpyAsync(m->d_ccnt, m->h_ccnt, sizeof(int) * (size_t)m->nrb,
                          cudaMemcpyHostToDevice, s));
    return XS_OK;
}

xs_status xs_moe_run_fused(xs_moe *m, int slot, const xs_wintab *tab, const xs_moe_run_opts *o,
                           cudaStream_t s, float *ms)
{
    XS_MOE_NEED_DEVICE(m);
    typedef xs_moe_cfg C;
    if (slot < 0 || slot >= XS_MOE_SLOTS || !m->slots[slot].host)
        return xs_seterr(XS_EINVAL, "moe: plan slot %d has no task list", slot);
    XS_TRY(xs_moe_check_table(m, tab));
    const xs_moe_tasklist *tl = &m->slots[slot];
    const int only = o ? o->only : 0;
    if (only < 0 || only > 2)
        return xs_seterr(XS_EINVAL, "moe: run option only=%d: 0 (the layer), 1 (Linear-1 tiles) "
                         "or 2 (Linear-2 tiles)", only);
    if (o && o->bulk_combine && tl->plan.couriers > 0)
        return xs_seterr(XS_EINVAL, "moe: bulk combine copies and couriers (plan slot %d, %d "
                         "couriers) are exclusive: the couriers store the combine", slot,
                         tl->plan.couriers);
    int defer = o ? o->defer : XS_MOE_DEFER_PLAN;
    if (defer < XS_MOE_DEFER_PLAN || defer > XS_MOE_DEFER_NONE)
        return xs_seterr(XS_EINVAL, "moe: run option defer=%d: %d (the plan's), %d (3-stage ring), "
                         "%d (spill to device memory) or %d (none)", defer, XS_MOE_DEFER_PLAN,
                         XS_MOE_DEFER_RING, XS_MOE_DEFER_SPILL, XS_MOE_DEFER_NONE);
    if (defer == XS_MOE_DEFER_PLAN)
        defer = tl->plan.spill_depth > 0 ? XS_MOE_DEFER_SPILL : 0;
    else if (defer == XS_MOE_DEFER_NONE)
        defer = 0;
    if (defer && (tl->plan.couriers > 0 || (o && o->bulk_combine)))
        return xs_seterr(XS_EINVAL, "moe: deferred Linear-2 stores are not for %s (plan slot %d)",
                         o && o->bulk_combine ? "bulk combine copies" : "couriers", slot);
    const int spill_depth = o && o->spill_depth       ? o->spill_depth
                            : tl->plan.spill_depth > 0 ? tl->plan.spill_depth
                                                       : XS_MOE_SPILL_DEPTH;
    if (spill_depth < 1 || spill_depth > XS_MOE_SPILL_MAX)
        return xs_seterr(XS_EINVAL, "moe: run option spill_depth=%d: 1..%d held-back tiles per "
                         "CTA", spill_depth, XS_MOE_SPILL_MAX);
    if (only) {
        XS_TRY(xs_moe_subset(m, tl, only));
        tl = &m->sub;
    }
    if (!m->d_kargs)
        XS_TRY(xs_dalloc(&m->d_kargs, sizeof(xs_moe_kargs), "kernel arguments"));
    static int attr_done;
    if (!attr_done) {
        XS_CU(cudaFuncSetAttribute(xs_moe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   C::SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_moe_kernel_defer,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_MOE_DEFER_SMEM));
        XS_CU(cudaFuncSetAttribute(xs_moe_kernel_spill,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_MOE_SPILL_SMEM));
        int per_sm = 0, per_sm_d = 0, per_sm_s = 0;
        XS_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, xs_moe_kernel, C::THREADS,
                                                            C::SMEM_BYTES));
        XS_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_d, xs_moe_kernel_defer,
                                                            C::THREADS, XS_MOE_DEFER_SMEM));
        XS_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_s, xs_moe_kernel_spill,
                                                            C::THREADS, XS_MOE_SPILL_SMEM));
        if (per_sm < 1 || per_sm_d < 1 || per_sm_s < 1)
            return xs_seterr(XS_ECUDA, "moe: the fused kernel (%d threads, %d, %d or %d bytes of "
                             "shared memory) does not fit on an SM", C::THREADS, C::SMEM_BYTES,
                             (int)XS_MOE_DEFER_SMEM, (int)XS_MOE_SPILL_SMEM);
        attr_done = 1;
    }
    XS_TRY(xs_moe_upload_table(m, tab, s));
    XS_CU(cudaMemsetAsync(m->d_queue, 0, 32, s));
    XS_CU(cudaMemsetAsync(m->d_done1, 0, 8 * (size_t)(m->nrb + 1), s));
    if (only == 1) /* a missing h store reads as NaN in xs_moe_verify_h */
        XS_CU(cudaMemsetAsync(m->h, 0xff, (size_t)m->rows * m->I * 2, s));
    if (only == 2) {
        /* every row block's Linear-1 tiles count as done (h is whatever the caller left) */
        unsigned long long *full =
            (unsigned long long *)malloc(8 * (size_t)(m->nrb + 1));
        if (!full)
            return xs_seterr(XS_ENOMEM, "moe: out of host memory");
        for (int b = 0; b <= m->nrb; b++)
            full[b] = (unsigned long long)m->l1_per_rb;
        /* pageable source: the copy is staged before cudaMemcpyAsync returns */
        cudaError_t e = cudaMemcpyAsync(m->d_done1, full, 8 * (size_t)(m->nrb + 1),
                                        cudaMemcpyHostToDevice, s);
        free(full);
        if (e != cudaSuccess)
            return xs_seterr(XS_ECUDA, "moe: presetting the dependency counters: %s",
                             cudaGetErrorString(e));
    }
    XS_CU(cudaMemsetAsync(m->d_status, 0, sizeof(xs_devstatus), s));
    XS_CU(cudaMemsetAsync(m->d_pace, 0, 16, s));
    XS_CU(cudaMemsetAsync(m->d_trace, 0xff, 8 * XS_MOE_TRACE_WORDS * (size_t)(tl->n + 1), s));
    const int couriers = tl->plan.couriers;
    m->ncopies = 0;
    if (couriers > 0) {
        XS_TRY(xs_moe_courier_setup(m, tl, s));
        XS_TRY(xs_moe_courier_rows(m, tab, s));
    }
    if (defer == XS_MOE_DEFER_SPILL)
        XS_TRY(xs_moe_cstage_alloc(m, s));

    xs_moe_kargs a;
    memset(&a, 0, sizeof a);
    a.x = m->x;
    a.w1 = m->w->w1;
    a.w2 = m->w->w2;
    a.h = m->h;
    a.row_token = m->d_row_token;
    a.row_weight = m->d_row_weight;
    a.row_rank = m->d_row_rank;
    a.row_off = m->d_row_off;
    a.rbs = m->d_rb;
    a.tasks = tl->dev;
    a.ntasks = tl->n;
    a.queue = m->d_queue;
    a.seq = (unsigned long long *)m->d_queue + 1; /* bytes 8..15, zeroed with the counter */
    a.done1 = m->d_done1;
    a.hidden = m->H;
    a.inter = m->I;
    a.l1_per_rb = m->l1_per_rb;
    a.timeout_ns = o && o->timeout_ns ? o->timeout_ns : 2000000000ull;
    a.fault_skip_l1 = o ? o->fault_skip_l1 : 0;
    a.status = m->d_status;
    a.pace = m->d_pace;
    if (tl->plan.pace_bytes > 0 && tl->plan.pace_bytes_per_ns > 0) {
        a.pace_ns_per_byte = 1.0 / tl->plan.pace_bytes_per_ns;
        a.pace_slack_ns = (unsigned long long)(tl->plan.pace_bytes / tl->plan.pace_bytes_per_ns);
    }
    a.rank_base = m->d_rank_base;
    a.rank_host = m->d_rank_host;
    a.trace = m->d_trace;
    a.anchors = m->d_anchors;
    a.l2_per_rb = m->l2_per_rb;
    a.bulk_combine = o ? o->bulk_combine : 0;
    if (tl->plan.kind == XS_MOE_ADAPTIVE && !only) { /* a subset runs in its list's order */
        a.adaptive = 1;
        a.n1 = m->nrb * m->l1_per_rb;
        a.queue2 = m->d_queue + 4;   /* bytes 16..19, zeroed with the counter */
        a.admit = m->d_pace + 1;     /* zeroed with the pacer */
        a.admit_ns_per_byte = 1.0 / tl->plan.pace_bytes_per_ns;
        a.admit_ahead_ns = (unsigned long long)tl->plan.admit_ahead_ns;
        xs_moe_info info;
        xs_moe_get_info(m, &info);
        a.admit_tile_bytes = info.l2_tiles ? info.remote_bytes / info.l2_tiles : 0.0;
    }
    if (couriers > 0) {
        a.couriers = couriers;
        a.cstage = m->d_cstage;
        a.ready = m->d_ready;
        a.clist = m->d_clist;
        a.nclist = m->ncopies;
        a.crow = m->d_crow;
        a.cdst = m->d_cdst;
        a.ccnt = m->d_ccnt;
        a.courier_ns_per_byte = couriers / tl->plan.courier_bytes_per_ns;
        a.ctrace = m->d_ctrace;
    }
    if (defer == XS_MOE_DEFER_SPILL) {
        a.cstage = m->d_cstage;
        a.spill_depth = spill_depth;
    }
    /* pageable source: staged before the call returns, ordered before the launch on s */
    XS_CU(cudaMemcpyAsync(m->d_kargs, &a, sizeof a, cudaMemcpyHostToDevice, s));

    XS_CU(cudaEventRecord(m->ev[0], s));
    if (defer == XS_MOE_DEFER_RING)
        xs_moe_kernel_defer<<<m->grid, C::THREADS, XS_MOE_DEFER_SMEM, s>>>(
            (const xs_moe_kargs *)m->d_kargs);
    else if (defer == XS_MOE_DEFER_SPILL)
        xs_moe_kernel_spill<<<m->grid, C::THREADS, XS_MOE_SPILL_SMEM, s>>>(
            (const xs_moe_kargs *)m->d_kargs);
    else
        xs_moe_kernel<<<m->grid, C::THREADS, C::SMEM_BYTES, s>>>(
            (const xs_moe_kargs *)m->d_kargs);
    XS_CU_LAUNCH();
    XS_CU(cudaEventRecord(m->ev[1], s));
    XS_CU(cudaEventSynchronize(m->ev[1]));
    float t = 0;
    XS_CU(cudaEventElapsedTime(&t, m->ev[0], m->ev[1]));
    if (ms)
        *ms = t;
    xs_devstatus st;
    XS_CU(cudaMemcpy(&st, m->d_status, sizeof st, cudaMemcpyDeviceToHost));
    XS_CU(cudaMemcpy(m->h_trace, m->d_trace, 8 * XS_MOE_TRACE_WORDS * (size_t)tl->n,
                     cudaMemcpyDeviceToHost));
    XS_CU(cudaMemcpy(m->h_anchors, m->d_anchors, 8 * 4 * (size_t)m->grid,
                     cudaMemcpyDeviceToHost));
    if (m->ncopies)
        XS_CU(cudaMemcpy(m->h_ctrace, m->d_ctrace, 8 * XS_MOE_COPY_WORDS * (size_t)m->ncopies,
                         cudaMemcpyDeviceToHost));
    const unsigned int low = (unsigned int)(st.detail & 0xffffffffu);
    if (st.code == XS_DEVERR_TIMEOUT && low == XS_MOE_CPACE_DETAIL)
        return xs_seterr(XS_ETIMEOUT, "fused MoE: courier CTA %u waited more than %.0f ms for its "
                         "pacer (%d couriers at %.1f bytes/ns in all)",
                         (unsigned)(st.detail >> 32), (double)a.timeout_ns / 1e6, couriers,
                         tl->plan.courier_bytes_per_ns);
    if (st.code == XS_DEVERR_TIMEOUT && low != XS_MOE_PACE_DETAIL && (low & XS_MOE_CWAIT_DETAIL)) {
        const int j = (int)(low & ~XS_MOE_CWAIT_DETAIL);
        return xs_seterr(XS_ETIMEOUT, "fused MoE: courier CTA %u waited more than %.0f ms for "
                         "Linear-2 tile %d of row block %d (its rows were never staged)",
                         (unsigned)(st.detail >> 32), (double)a.timeout_ns / 1e6,
                         j < m->ncopies ? m->h_clist[j].y : -1,
                         j < m->ncopies ? m->h_clist[j].x : -1);
    }
    if (st.code == XS_DEVERR_TIMEOUT && low == XS_MOE_PACE_DETAIL)
        return xs_seterr(XS_ETIMEOUT, "fused MoE: CTA %u waited more than %.0f ms for the combine "
                         "pacer (pace %.0f bytes at %.1f bytes/ns)", (unsigned)(st.detail >> 32),
                         (double)a.timeout_ns / 1e6, tl->plan.pace_bytes,
                         tl->plan.pace_bytes_per_ns);
    if (st.code == XS_DEVERR_TIMEOUT)
        return xs_seterr(XS_ETIMEOUT, "fused MoE: CTA %u waited more than %.0f ms for the "
                         "Linear-1 tiles of row block %u (dependency never signalled)",
                         (unsigned)(st.detail >> 32), (double)a.timeout_ns / 1e6,
                         (unsigned)(st.detail & 0xffffffffu));
    if (st.code)
        return xs_seterr(XS_ECUDA, "fused MoE: device failure code %u in CTA %u", st.code,
                         st.block);
    /* every task ran exactly once (the trace was poisoned with 0xff before the launch) */
    for (int i = 0; i < tl->n; i++)
        if (m->h_trace[(size_t)i * XS_MOE_TRACE_WORDS + 5] == ~0ull)
            return xs_seterr(XS_EVERIFY, "fused MoE: task %d of %d never ran", i, tl->n);
    /* and every Linear-2 tile's copy by its courier (poisoned the same way) */
    for (int j = 0; j < m->ncopies; j++)
        if (m->h_ctrace[(size_t)j * XS_MOE_COPY_WORDS + 3] == ~0ull)
            return xs_seterr(XS_EVERIFY, "fused MoE: courier %d never copied Linear-2 tile %d of "
                             "row block %d (copy %d of %d)", j % couriers, m->h_clist[j].y,
                             m->h_clist[j].x, j, m->ncopies);
    xs_moe_decode_trace(m, tl);
    return XS_OK;
}

xs_status xs_moe_trace(xs_moe *m, const xs_moe_tile **tiles, int *n)
{
    *tiles = m->tiles;
    *n = m->ntiles;
    return XS_OK;
}

xs_status xs_moe_courier_trace(xs_moe *m, const xs_moe_copy **copies, int *n)
{
    *copies = m->copies;
    *n = m->ncopies;
    return XS_OK;
}

double xs_moe_courier_drain(const double *ready_ns, const double *bytes, int n, int couriers,
                            double bytes_per_ns)
{
    if (couriers < 1 || !(bytes_per_ns > 0))
        return NAN;
    double *busy = (double *)calloc((size_t)couriers, sizeof(double)); /* each one's FIFO end */
    if (!busy)
        return NAN;
    const double ns_per_byte = couriers / bytes_per_ns; /* one courier's share */
    double end = 0;
    for (int j = 0; j < n; j++) {
        if (!(bytes[j] > 0))
            continue; /* no remote row: the courier skips it without waiting */
        double *b = &busy[j % couriers];
        const double start = *b > ready_ns[j] ? *b : ready_ns[j];
        *b = start + bytes[j] * ns_per_byte;
        if (*b > end)
            end = *b;
    }
    free(busy);
    return end;
}

/* ---- the unfused baseline and the GPU reference ------------------------------------------------ */

/* Xs[gr] = X[row_token[gr]]: the dispatch as its own pass (16-byte copies) */
__global__ void xs_moe_gather_kernel(const xs_bf16 *x, const int *row_token, xs_bf16 *xs,
                                     int rows, int hidden)
{
    const int per_row = hidden / 8;
    const size_t total = (size_t)rows * per_row;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / per_row), c = (int)(i % per_row);
        ((uint4 *)(xs + (size_t)r * hidden))[c] =
            __ldg((const uint4 *)(x + (size_t)row_token[r] * hidden) + c);
    }
}

/* h = silu(gate) * up from the interleaved Linear-1 output (bf16 or fp32), h in bf16 */
template <typename T>
__global__ void xs_moe_swiglu_kernel(const T *y, xs_bf16 *h, int rows, int inter)
{
    const size_t total = (size_t)rows * inter;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / inter), j = (int)(i % inter);
        const int pg = 32 * (j / 16) + (j % 16);
        const float g = (float)y[(size_t)r * 2 * inter + pg];
        const float u = (float)y[(size_t)r * 2 * inter + pg + 16];
        h[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
    }
}

/* combine preparation: row gr scaled by its routing weight, written to its rank's staging
 * region at the window offset (bf16), or to the fp32 reference in sorted order */
template <typename T>
__global__ void xs_moe_scatter_kernel(const T *y2, const float *w, const int *row_rank,
                                      const long long *row_off, char *stage, size_t win_bytes,
                                      float *ref, int rows, int hidden)
{
    const size_t total = (size_t)rows * hidden;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / hidden), c = (int)(i % hidden);
        const float v = (float)y2[i] * w[r];
        if (ref) {
            ref[i] = v;
        } else {
            xs_bf16 *o = (xs_bf16 *)(stage + (size_t)row_rank[r] * win_bytes + row_off[r]);
            o[c] = __float2bfloat16(v);
        }
    }
}

static xs_status xs_moe_ensure_unfused(xs_moe *m, int reference)
{
    size_t rows = (size_t)m->rows;
    if (!m->xs_sorted)
        XS_TRY(xs_dalloc((void **)&m->xs_sorted, rows * m->H * 2, "dispatched tokens"));
    if (reference) {
        if (!m->y1f)
            XS_TRY(xs_dalloc((void **)&m->y1f, rows * 2 * m->I * 4, "fp32 Linear-1 output"));
        if (!m->y2f)
            XS_TRY(xs_dalloc((void **)&m->y2f, rows * m->H * 4, "fp32 Linear-2 output"));
        if (!m->reff)
            XS_TRY(xs_dalloc((void **)&m->reff, rows * m->H * 4, "reference rows"));
    } else {
        if (!m->y1)
            XS_TRY(xs_dalloc((void **)&m->y1, rows * 2 * m->I * 2, "Linear-1 output"));
        if (!m->y2)
            XS_TRY(xs_dalloc((void **)&m->y2, rows * m->H * 2, "Linear-2 output"));
        if (!m->stage)
            XS_TRY(xs_dalloc((void **)&m->stage, m->window_bytes * (size_t)m->N,
                             "combine staging"));
    }
    return XS_OK;
}

/* the cuBLAS GEMMs of one layer, one call per expert with rows (grouped by hand) */
static xs_status xs_moe_gemms(xs_moe *m, xs_cublas *cb, cudaStream_t s, int layer, int f32)
{
    const int H = m->H, I = m->I;
    for (int e = 0; e < m->E; e++) {
        const int n = m->expert_rows[e], off = m->expert_off[e];
        if (!n)
            continue;
        if (layer == 1) {
            void *c = f32 ? (void *)(m->y1f + (size_t)off * 2 * I) : (void *)(m->y1 + (size_t)off * 2 * I);
            XS_TRY(xs_cublas_gemm_bf16(cb, s, n, 2 * I, H, m->xs_sorted + (size_t)off * H,
                                       m->w->w1 + (size_t)e * 2 * I * H, 1, c, f32));
        } else {
            void *c = f32 ? (void *)(m->y2f + (size_t)off * H) : (void *)(m->y2 + (size_t)off * H);
            XS_TRY(xs_cublas_gemm_bf16(cb, s, n, H, I, m->h + (size_t)off * I,
                                       m->w->w2 + (size_t)e * H * I, 1, c, f32));
        }
    }
    return XS_OK;
}

xs_status xs_moe_run_unfused(xs_moe *m, xs_cublas *cb, const xs_wintab *tab, cudaStream_t s,
                             float *ms, float *gemm_ms)
{
    return xs_moe_run_unfused_with(m, cb, tab, NULL, NULL, s, ms, gemm_ms);
}

xs_status xs_moe_run_unfused_with(xs_moe *m, xs_cublas *cb, const xs_wintab *tab,
                                  xs_moe_combine_fn combine, void *ctx, cudaStream_t s,
                                  float *ms, float *gemm_ms)
{
    XS_MOE_NEED_DEVICE(m);
    XS_TRY(xs_moe_check_table(m, tab));
    XS_TRY(xs_moe_ensure_unfused(m, 0));
    const int blocks = 4 * m->grid;
    XS_CU(cudaEventRecord(m->ev[0], s));
    xs_moe_gather_kernel<<<blocks, 256, 0, s>>>(m->x, m->d_row_token, m->xs_sorted, m->rows, m->H);
    XS_CU_LAUNCH();
    XS_CU(cudaEventRecord(m->ev[2], s));
    XS_TRY(xs_moe_gemms(m, cb, s, 1, 0));
    XS_CU(cudaEventRecord(m->ev[3], s));
    xs_moe_swiglu_kernel<xs_bf16><<<blocks, 256, 0, s>>>(m->y1, m->h, m->rows, m->I);
    XS_CU_LAUNCH();
    XS_CU(cudaEventRecord(m->ev[4], s));
    XS_TRY(xs_moe_gemms(m, cb, s, 2, 0));
    XS_CU(cudaEventRecord(m->ev[5], s));
    xs_moe_scatter_kernel<xs_bf16><<<blocks, 256, 0, s>>>(m->y2, m->d_row_weight, m->d_row_rank,
                                                          m->d_row_off, (char *)m->stage,
                                                          m->window_bytes, (float *)NULL, m->rows,
                                                          m->H);
    XS_CU_LAUNCH();
    if (combine) {
        XS_TRY(combine(ctx, (const char *)m->stage, m->window_bytes, m->rank_used, m->N, s));
    } else {
        for (int r = 0; r < m->N; r++)
            if (m->rank_used[r])
                XS_CU(cudaMemcpyAsync(tab->data[r], (char *)m->stage + (size_t)r * m->window_bytes,
                                      m->rank_used[r], cudaMemcpyDefault, s));
    }
    XS_CU(cudaEventRecord(m->ev[1], s));
    XS_CU(cudaEventSynchronize(m->ev[1]));
    float t = 0, g1 = 0, g2 = 0;
    XS_CU(cudaEventElapsedTime(&t, m->ev[0], m->ev[1]));
    XS_CU(cudaEventElapsedTime(&g1, m->ev[2], m->ev[3]));
    XS_CU(cudaEventElapsedTime(&g2, m->ev[4], m->ev[5]));
    if (ms)
        *ms = t;
    if (gemm_ms)
        *gemm_ms = g1 + g2;
    return XS_OK;
}

/* The reference's h into m->ref_h: from host bf16 bits (hb) or, hb = NULL, from the device h
 * that the reference path just wrote (stream 0). */
static xs_status xs_moe_keep_ref_h(xs_moe *m, const uint16_t *hb)
{
    const size_t bytes = (size_t)m->rows * m->I * 2;
    if (!m->ref_h)
        XS_TRY(xs_dalloc((void **)&m->ref_h, bytes, "reference h"));
    if (hb)
        XS_CU(cudaMemcpy(m->ref_h, hb, bytes, cudaMemcpyHostToDevice));
    else
        XS_CU(cudaMemcpyAsync(m->ref_h, m->h, bytes, cudaMemcpyDeviceToDevice, 0));
    m->have_ref_h = 1;
    return XS_OK;
}

xs_status xs_moe_reference_gpu(xs_moe *m, xs_cublas *cb)
{
    XS_MOE_NEED_DEVICE(m);
    XS_TRY(xs_moe_ensure_unfused(m, 1));
    const int blocks = 4 * m->grid;
    cudaStream_t s = 0;
    xs_moe_gather_kernel<<<blocks, 256, 0, s>>>(m->x, m->d_row_token, m->xs_sorted, m->rows, m->H);
    XS_CU_LAUNCH();
    XS_TRY(xs_moe_gemms(m, cb, s, 1, 1));
    xs_moe_swiglu_kernel<float><<<blocks, 256, 0, s>>>(m->y1f, m->h, m->rows, m->I);
    XS_CU_LAUNCH();
    XS_TRY(xs_moe_keep_ref_h(m, NULL));
    XS_TRY(xs_moe_gemms(m, cb, s, 2, 1));
    xs_moe_scatter_kernel<float><<<blocks, 256, 0, s>>>(m->y2f, m->d_row_weight, m->d_row_rank,
                                                        m->d_row_off, (char *)NULL, 0, m->reff,
                                                        m->rows, m->H);
    XS_CU_LAUNCH();
    XS_CU(cudaDeviceSynchronize());
    if (!m->ref && !(m->ref = (float *)malloc(sizeof(float) * (size_t)m->rows * m->H)))
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for %d reference rows", m->rows);
    XS_CU(cudaMemcpy(m->ref, m->reff, (size_t)m->rows * m->H * 4, cudaMemcpyDeviceToHost));
    /* the fp32 temporaries are large; give them back */
    cudaFree(m->y1f);
    cudaFree(m->y2f);
    cudaFree(m->reff);
    m->y1f = m->y2f = m->reff = NULL;
    m->have_ref = 1;
    return XS_OK;
}

xs_status xs_moe_reference_cpu(xs_moe *m)
{
    XS_MOE_NEED_DEVICE(m);
    const int H = m->H, I = m->I;
    if ((double)m->rows * H * 3.0 * I > 8589934592.0)
        return xs_seterr(XS_EINVAL, "moe: %d rows x H=%d x I=%d is too large for the CPU "
                         "reference; use the GPU reference", m->rows, H, I);
    size_t nx = (size_t)m->T * H, n1 = (size_t)m->E * 2 * I * H, n2 = (size_t)m->E * H * I;
    uint16_t *xb = (uint16_t *)malloc(nx * 2), *w1 = (uint16_t *)malloc(n1 * 2),
             *w2 = (uint16_t *)malloc(n2 * 2);
    double *y1 = (double *)malloc(sizeof(double) * 2 * (size_t)I);
    float *hr = (float *)malloc(sizeof(float) * (size_t)I);
    uint16_t *hb = (uint16_t *)malloc(2 * (size_t)m->rows * I + 2); /* h of every row, bf16 */
    if (!m->ref)
        m->ref = (float *)malloc(sizeof(float) * (size_t)m->rows * H);
    if (!xb || !w1 || !w2 || !y1 || !hr || !hb || !m->ref) {
        free(xb); free(w1); free(w2); free(y1); free(hr); free(hb);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for the CPU reference");
    }
    cudaError_t e = cudaMemcpy(xb, m->x, nx * 2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(w1, m->w->w1, n1 * 2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(w2, m->w->w2, n2 * 2, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(xb); free(w1); free(w2); free(y1); free(hr); free(hb);
        return xs_seterr(XS_ECUDA, "moe: copying inputs for the CPU reference: %s",
                         cudaGetErrorString(e));
    }
    for (int gr = 0; gr < m->rows; gr++) {
        const int ex = m->row_expert[gr];
        const uint16_t *xr = xb + (size_t)m->row_token[gr] * H;
        for (int p = 0; p < 2 * I; p++) {
            const uint16_t *wr = w1 + ((size_t)ex * 2 * I + p) * H;
            double s = 0;
            for (int c = 0; c < H; c++)
                s += (double)xs_bf16_to_f(xr[c]) * (double)xs_bf16_to_f(wr[c]);
            y1[p] = s;
        }
        for (int j = 0; j < I; j++) {
            int pg = 32 * (j / 16) + (j % 16);
            double g = y1[pg], u = y1[pg + 16];
            /* h is bf16 in every path: round it the same way */
            hb[(size_t)gr * I + j] = xs_f_to_bf16((float)(g / (1.0 + exp(-g)) * u));
            hr[j] = xs_bf16_to_f(hb[(size_t)gr * I + j]);
        }
        for (int o = 0; o < H; o++) {
            const uint16_t *wr = w2 + ((size_t)ex * H + o) * I;
            double s = 0;
            for (int j = 0; j < I; j++)
                s += (double)hr[j] * (double)xs_bf16_to_f(wr[j]);
            m->ref[(size_t)gr * H + o] = (float)(s * m->row_weight[gr]);
        }
    }
    free(xb); free(w1); free(w2); free(y1); free(hr);
    xs_status st = xs_moe_keep_ref_h(m, hb);
    free(hb);
    XS_TRY(st);
    m->have_ref = 1;
    return XS_OK;
}

/* ---- verification ------------------------------------------------------------------------------ */

typedef struct {
    const xs_moe *m;
    unsigned char *const *win;
    int r0, r1;
    double se, sr, maxrel;
    long bad, nonfinite;
    long worst;        /* row with the highest score (non-finite values first, then rel) */
    double worst_score;
} xs_vjob;

static void *xs_moe_verify_worker(void *arg)
{
    xs_vjob *j = (xs_vjob *)arg;
    const xs_moe *m = j->m;
    const int H = m->H;
    for (int gr = j->r0; gr < j->r1; gr++) {
        const uint16_t *got = (const uint16_t *)(j->win[m->row_rank[gr]] + m->row_off[gr]);
        const float *ref = m->ref + (size_t)gr * H;
        double se = 0, sr = 0;
        long nf = 0;
        for (int c = 0; c < H; c++) {
            float g = xs_bf16_to_f(got[c]);
            if (!isfinite(g)) {
                nf++;
                continue;
            }
            double d = (double)g - (double)ref[c];
            se += d * d;
            sr += (double)ref[c] * ref[c];
        }
        double rel = sqrt(se / (sr > 1e-30 ? sr : 1e-30));
        if (nf || rel > XS_MOE_TOL_ROW)
            j->bad++;
        if (rel > j->maxrel)
            j->maxrel = rel;
        const double score = nf ? INFINITY : rel;
        if (j->worst < 0 || score > j->worst_score) {
            j->worst = gr;
            j->worst_score = score;
        }
        j->nonfinite += nf;
        j->se += se;
        j->sr += sr;
    }
    return NULL;
}

xs_status xs_moe_verify(xs_moe *m, const xs_wintab *tab, xs_moe_check *out)
{
    XS_MOE_NEED_DEVICE(m);
    memset(out, 0, sizeof *out);
    out->worst_row = -1;
    out->worst_expert = -1;
    if (!m->have_ref)
        return xs_seterr(XS_EINVAL, "moe: verify needs a reference (xs_moe_reference_*)");
    XS_TRY(xs_moe_check_table(m, tab));
    unsigned char *win[XS_MAX_RANKS];
    memset(win, 0, sizeof win);
    xs_status st = XS_OK;
    /* destination side: each rank's window as its owner sees it (host memory read by the CPU
     * through the runtime's copy; device memory copied back) */
    for (int r = 0; r < m->N && st == XS_OK; r++) {
        win[r] = (unsigned char *)malloc(m->rank_used[r] ? m->rank_used[r] : 16);
        if (!win[r]) {
            st = xs_seterr(XS_ENOMEM, "moe: out of host memory for window %d", r);
            break;
        }
        if (m->rank_used[r]) {
            cudaError_t e = cudaMemcpy(win[r], tab->data[r], m->rank_used[r], cudaMemcpyDefault);
            if (e != cudaSuccess)
                st = xs_seterr(XS_ECUDA, "moe: reading window %d: %s", r, cudaGetErrorString(e));
        }
    }
    if (st == XS_OK) {
        enum { NJ = 8 };
        xs_vjob jobs[NJ];
        pthread_t th[NJ];
        int started[NJ] = {0};
        for (int i = 0; i < NJ; i++) {
            memset(&jobs[i], 0, sizeof jobs[i]);
            jobs[i].m = m;
            jobs[i].win = win;
            jobs[i].worst = -1;
            jobs[i].r0 = (int)((long long)m->rows * i / NJ);
            jobs[i].r1 = (int)((long long)m->rows * (i + 1) / NJ);
            started[i] = pthread_create(&th[i], NULL, xs_moe_verify_worker, &jobs[i]) == 0;
            if (!started[i])
                xs_moe_verify_worker(&jobs[i]);
        }
        double se = 0, sr = 0, worst_score = 0;
        out->worst_row = -1;
        for (int i = 0; i < NJ; i++) {
            if (started[i])
                pthread_join(th[i], NULL);
            se += jobs[i].se;
            sr += jobs[i].sr;
            out->bad_rows += jobs[i].bad;
            out->nonfinite += jobs[i].nonfinite;
            if (jobs[i].maxrel > out->max_row_rel)
                out->max_row_rel = jobs[i].maxrel;
            if (jobs[i].worst >= 0 && (out->worst_row < 0 || jobs[i].worst_score > worst_score)) {
                out->worst_row = jobs[i].worst;
                worst_score = jobs[i].worst_score;
            }
        }
        out->worst_expert = out->worst_row >= 0 ? m->row_expert[out->worst_row] : -1;
        out->rows = m->rows;
        out->rel_frob = sqrt(se / (sr > 1e-30 ? sr : 1e-30));
        out->ok = out->bad_rows == 0 && out->nonfinite == 0 && out->rel_frob <= XS_MOE_TOL_FROB;
    }
    for (int r = 0; r < m->N; r++)
        free(win[r]);
    return st;
}

xs_status xs_moe_verify_h(xs_moe *m, int expert, xs_moe_check *out)
{
    XS_MOE_NEED_DEVICE(m);
    memset(out, 0, sizeof *out);
    out->worst_row = -1;
    out->worst_expert = -1;
    if (!m->have_ref_h)
        return xs_seterr(XS_EINVAL, "moe: verify_h needs a reference (xs_moe_reference_*)");
    if (expert >= m->E)
        return xs_seterr(XS_EINVAL, "moe: verify_h: expert %d of %d", expert, m->E);
    const int I = m->I;
    const int r0 = expert < 0 ? 0 : m->expert_off[expert];
    const int r1 = expert < 0 ? m->rows : r0 + m->expert_rows[expert];
    const size_t n = (size_t)(r1 - r0) * I;
    uint16_t *got = (uint16_t *)malloc(2 * n + 2), *want = (uint16_t *)malloc(2 * n + 2);
    if (!got || !want) {
        free(got);
        free(want);
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for %d rows of h", r1 - r0);
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess && n)
        e = cudaMemcpy(got, m->h + (size_t)r0 * I, 2 * n, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && n)
        e = cudaMemcpy(want, m->ref_h + (size_t)r0 * I, 2 * n, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(got);
        free(want);
        return xs_seterr(XS_ECUDA, "moe: reading h: %s", cudaGetErrorString(e));
    }
    double se_all = 0, sr_all = 0, worst_score = 0;
    for (int gr = r0; gr < r1; gr++) {
        const uint16_t *g = got + (size_t)(gr - r0) * I, *w = want + (size_t)(gr - r0) * I;
        double se = 0, sr = 0;
        long nf = 0;
        for (int j = 0; j < I; j++) {
            const float a = xs_bf16_to_f(g[j]), b = xs_bf16_to_f(w[j]);
            if (!isfinite(a)) {
                nf++;
                continue;
            }
            se += ((double)a - b) * ((double)a - b);
            sr += (double)b * b;
        }
        const double rel = sqrt(se / (sr > 1e-30 ? sr : 1e-30));
        out->bad_rows += nf || rel > XS_MOE_TOL_ROW;
        if (rel > out->max_row_rel)
            out->max_row_rel = rel;
        const double score = nf ? INFINITY : rel;
        if (out->worst_row < 0 || score > worst_score) {
            out->worst_row = gr;
            worst_score = score;
        }
        out->nonfinite += nf;
        se_all += se;
        sr_all += sr;
    }
    free(got);
    free(want);
    out->rows = r1 - r0;
    out->worst_expert = out->worst_row >= 0 ? m->row_expert[out->worst_row] : -1;
    out->rel_frob = sqrt(se_all / (sr_all > 1e-30 ? sr_all : 1e-30));
    out->ok = out->bad_rows == 0 && out->nonfinite == 0 && out->rel_frob <= XS_MOE_TOL_FROB;
    return XS_OK;
}

xs_status xs_moe_load_reference_h(xs_moe *m)
{
    XS_MOE_NEED_DEVICE(m);
    if (!m->have_ref_h)
        return xs_seterr(XS_EINVAL, "moe: no reference h (xs_moe_reference_*)");
    XS_CU(cudaMemcpy(m->h, m->ref_h, (size_t)m->rows * m->I * 2, cudaMemcpyDeviceToDevice));
    return XS_OK;
}

/* ---- costs from traces ---------------------------------------------------------------------------- */

void xs_moe_costs_from_trace(const xs_moe_tile *t, int n, xs_moe_costs *c)
{
    memset(c, 0, sizeof *c);
    double *a = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *b = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *d = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    if (!a || !b || !d) {
        free(a); free(b); free(d);
        return;
    }
    int na = 0, nb = 0;
    double t0 = INFINITY, t1 = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (t[i].cta < 0)
            continue;
        if (t[i].kind == 1) {
            a[na] = t[i].st1_ns - t[i].mma0_ns;
            d[na++] = t[i].mma1_ns - t[i].mma0_ns;
        }
        c->wait_ns += t[i].mma0_ns - t[i].fetch_ns;
        if (t[i].fetch_ns < t0)
            t0 = t[i].fetch_ns;
        if (t[i].st1_ns > t1)
            t1 = t[i].st1_ns;
    }
    c->c1_ns = median_of(a, na);
    c->mma1_ns = median_of(d, na);
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].kind == 2) {
            a[nb] = t[i].st0_ns - t[i].mma0_ns;
            b[nb] = t[i].st1_ns - t[i].st0_ns;
            d[nb++] = t[i].mma1_ns - t[i].mma0_ns;
        }
    c->c2_ns = median_of(a, nb);
    c->span2_ns = median_of(b, nb);
    c->mma2_ns = median_of(d, nb);
    /* the streaming rate of the stores: full-size tiles only (a span has a fixed part that a
     * small tile's bytes / span would fold into its rate: run 3's zipf points, with many small
     * row blocks, measured 17-35 B/ns that way against 52 for full tiles) */
    int full = 0;
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].kind == 2 && t[i].total_bytes > full)
            full = t[i].total_bytes;
    nb = 0;
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].kind == 2 && t[i].st1_ns > t[i].st0_ns &&
            t[i].total_bytes >= 0.75 * full)
            b[nb++] = (double)t[i].total_bytes / (t[i].st1_ns - t[i].st0_ns);
    c->local_issue_bytes_per_ns = median_of(b, nb);
    c->kernel_ns = t1 > t0 ? t1 - t0 : 0;
    free(a); free(b); free(d);
}

/* ---- the X-Stage model ---------------------------------------------------------------------------- */

void xs_moe_model_default(xs_moe_model *mm)
{
    mm->block_bytes = XS_MOE_BLOCK_BYTES;
    mm->block_speed = XS_MOE_BLOCK_SPEED;
    mm->pace_bytes = XS_MOE_PACE_BYTES;
    mm->pace_drain_frac = XS_MOE_PACE_DRAIN_FRAC;
    mm->couriers = XS_MOE_COURIERS_AUTO;
    mm->courier_pace_frac = XS_MOE_COURIER_PACE_FRAC;
    mm->courier_copy_bytes_per_ns = XS_MOE_COURIER_COPY_BYTES_PER_NS;
    mm->auto_couriers = 0;
    mm->auto_adaptive = 0;
    mm->auto_spill = 1;
    mm->lead_search = 1;
    mm->paced_lead = mm->paced_lead_end = 0;
}

/* remote and total combine bytes of Linear-2 tile (rb, nb) for the virtual-peer layout */
static void xs_moe_tile_bytes(const xs_moe *m, int rb, int nb, double *remote, double *total)
{
    int nv = m->H - nb * XS_MOE_BN;
    int ncols = nv < XS_MOE_BN ? nv : XS_MOE_BN;
    *total = (double)m->rb[rb].z * ncols * 2.0;
    *remote = m->N > 1 ? (double)m->rb[rb].w * ncols * 2.0 : 0.0;
}

/* One event simulation serves the prediction of a whole run (xs_moe_predict: every CTA takes the
 * next task when free) and the per-tile stall of a measured run (xs_moe_stall_predict: every burst
 * starts when it did). Producers are CTAs. Their combine bursts pass through the X-Stage exactly
 * as in src/sim.c (docs/MODEL.md, "Event model"): a burst pays the overhead o and streams its rows
 * in chunks of c into the producer's queue of b bytes; a chunk is offered when it is complete and
 * its place in the queue is free; the stage is one FIFO server draining at R whose room is Q plus a
 * reserve per producer with bytes in it (and an optional per-producer cap); chunks ready at the
 * same acceptance contend in start-time fair queueing with the producers' arbitration weights; a
 * burst's issue window ends when its last chunk entered the queue. A Linear-2 tile's rows go to
 * rank 0 (HBM) or to the link: its stream carries both, so a chunk takes c / r_tile to issue and
 * brings c * remote / total bytes into the stage. What the kernel adds (xs_moe_model): while the
 * backlog is above block_bytes every CTA's main loop runs at block_speed; a paced plan holds a
 * tile's burst until a software link at pace_drain_frac * R has at most pace_bytes reserved. */

typedef struct {
    double t, t2; /* primary and secondary key */
    int p;
} xs_ev;

typedef struct {
    xs_ev *a;
    int n, cap;
} xs_heap;

static int xs_ev_less(xs_ev x, xs_ev y)
{
    return x.t < y.t || (x.t == y.t && (x.t2 < y.t2 || (x.t2 == y.t2 && x.p < y.p)));
}

static int xs_heap_push(xs_heap *h, xs_ev e)
{
    if (h->n == h->cap) {
        int nc = h->cap ? 2 * h->cap : 64;
        xs_ev *na = (xs_ev *)realloc(h->a, sizeof(xs_ev) * (size_t)nc);
        if (!na)
            return 0;
        h->a = na;
        h->cap = nc;
    }
    int i = h->n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (!xs_ev_less(e, h->a[up]))
            break;
        h->a[i] = h->a[up];
        i = up;
    }
    h->a[i] = e;
    return 1;
}

static xs_ev xs_heap_pop(xs_heap *h)
{
    xs_ev top = h->a[0], last = h->a[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, k = i;
        xs_ev best = last;
        if (l < h->n && xs_ev_less(h->a[l], best)) {
            k = l;
            best = h->a[l];
        }
        if (r < h->n && xs_ev_less(h->a[r], best))
            k = r;
        if (k == i)
            break;
        h->a[i] = h->a[k];
        i = k;
    }
    if (h->n > 0)
        h->a[i] = last;
    return top;
}

typedef struct {
    double t0;       /* start of the burst (before the overhead); NaN until started */
    double tot, rem; /* bytes of the stream; of them through the stage */
    double ns_per_byte; /* issue time of one byte of the stream */
    int64_t first, last; /* producer-global indices of its chunks (set when started) */
    int64_t nch;
    double end;      /* issue window end; NaN until known */
    int next;        /* the producer's next burst (-1: none) */
    int task;        /* the caller's index */
} xs_burst;

enum { XS_P_IDLE, XS_P_DEP, XS_P_COMP, XS_P_GATE, XS_P_BURST, XS_P_LOCAL, XS_P_DONE };

typedef struct {
    /* chunks: the producer's bursts in order; the oldest whose window is open; the one offered */
    int head, tail, settle, ob;
    int64_t assigned, accepted, oidx;
    double orem;             /* stream bytes of ob not yet offered */
    double pend_tot, pend_rem; /* the chunk on offer */
    int offering;            /* 1 while a chunk is offered (in a heap) */
    double ready, a_prev, ftag, weight, d_own;
    int outstanding;
    double *acc;             /* acceptance times of the last q+1 chunks */
    double *ring;            /* departure times of the last ring_m chunks (per-producer cap) */
    int ring_head, ring_n;
    /* program (xs_moe_predict) */
    int state, kind, rb, nb, next_wait;
    int cur;                 /* the task it runs (index in the list) */
    double rem, tot;         /* the Linear-2 tile's bytes */
} xs_mprod;

typedef struct {
    /* profile */
    double r, R, o, Q, rho, c, r_local;
    int q, ring_m;
    /* kernel */
    double X, s;
    /* stage */
    double d_last, vtime, t_now, V;
    int n_out;
    xs_heap fut, el, held, pev, vev;
    xs_mprod *pr;
    int np;
    double *mem;
    xs_burst *b;
    int nb, cap_b;
    /* blocked intervals (stall replay), merged */
    double *blk;
    int nblk, cap_blk;
    int record_blocked, oom;
    void *user;        /* the run (xs_moe_predict) that closed windows are reported to */
} xs_msim;

static void xs_msim_free(xs_msim *g)
{
    free(g->fut.a);
    free(g->el.a);
    free(g->held.a);
    free(g->pev.a);
    free(g->vev.a);
    free(g->pr);
    free(g->mem);
    free(g->b);
    free(g->blk);
    memset(g, 0, sizeof *g);
}

static xs_status xs_msim_init(xs_msim *g, const xs_profile *p, const xs_moe_model *mm, int np,
                              int nbursts, double r_local)
{
    memset(g, 0, sizeof *g);
    XS_TRY(xs_profile_check(p, "profile"));
    g->r = p->issue_bytes_per_ns;
    g->R = p->drain_bytes_per_ns;
    g->o = p->issue_overhead_ns;
    g->Q = p->capacity_bytes;
    /* The tandem buffer (buffer_bytes_per_producer, src/sim.c) is not modelled here: it
     * counts as reserve, which keeps the capacity a producer's bursts see (Q plus its own
     * bytes) where the fit put it. A profile fitted with a buffer and no reserve would
     * otherwise lose grid x buffer bytes (2.1 MB at 16 KiB) in this model. */
    g->rho = (p->reserve_bytes_per_producer > 0 ? p->reserve_bytes_per_producer : 0) +
             (p->buffer_bytes_per_producer > 0 ? p->buffer_bytes_per_producer : 0);
    g->c = p->chunk_bytes >= 1 ? floor(p->chunk_bytes) : 1;
    g->q = (int)floor((p->queue_bytes_per_producer > 0 ? p->queue_bytes_per_producer : 0) / g->c);
    if (p->capacity_bytes_per_producer > 0) {
        double m = floor((p->capacity_bytes_per_producer + g->rho) / g->c);
        g->ring_m = m < 1 ? 1 : m > 1e6 ? 1000000 : (int)m;
    }
    g->r_local = r_local > 0 ? r_local : g->r;
    g->X = mm && mm->block_bytes > 0 ? mm->block_bytes : INFINITY;
    g->s = mm ? (mm->block_speed < 0 ? 0 : mm->block_speed > 1 ? 1 : mm->block_speed) : 1;
    g->np = np;
    g->t_now = 0;
    if (g->q > 4096 || (double)np * (g->q + 1 + g->ring_m) > (double)(1 << 27))
        return xs_seterr(XS_ERANGE, "moe model: %d producers x a queue of %d and a cap of %d "
                         "chunks: too much state (raise chunk_bytes)", np, g->q, g->ring_m);
    g->pr = (xs_mprod *)calloc((size_t)np, sizeof *g->pr);
    g->mem = (double *)calloc((size_t)np * (size_t)(g->q + 1 + g->ring_m) + 1, sizeof(double));
    g->cap_b = nbursts > 0 ? nbursts : 1;
    g->b = (xs_burst *)calloc((size_t)g->cap_b, sizeof *g->b);
    if (!g->pr || !g->mem || !g->b) {
        xs_msim_free(g);
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory for %d producers", np);
    }
    for (int i = 0; i < np; i++) {
        xs_mprod *z = &g->pr[i];
        z->acc = g->mem + (size_t)i * (g->q + 1 + g->ring_m);
        z->ring = g->ring_m ? z->acc + g->q + 1 : NULL;
        z->head = z->tail = z->settle = z->ob = -1;
        z->a_prev = -INFINITY;
        z->weight = xs_arbitration_weight(p, i);
        z->next_wait = -1;
    }
    return XS_OK;
}

/* a new burst of producer p (not started yet); returns its index or -1 when out of memory */
static int xs_msim_burst(xs_msim *g, int p, double tot, double rem, double ns_per_byte, int task)
{
    if (g->nb == g->cap_b) {
        int nc = 2 * g->cap_b;
        xs_burst *nbuf = (xs_burst *)realloc(g->b, sizeof(xs_burst) * (size_t)nc);
        if (!nbuf) {
            g->oom = 1;
            return -1;
        }
        g->b = nbuf;
        g->cap_b = nc;
    }
    const int i = g->nb++;
    xs_burst *u = &g->b[i];
    u->t0 = NAN;
    u->end = NAN;
    u->tot = tot;
    u->rem = rem;
    u->ns_per_byte = ns_per_byte;
    u->nch = (int64_t)ceil(tot / g->c);
    u->next = -1;
    u->task = task;
    xs_mprod *z = &g->pr[p];
    if (z->tail >= 0)
        g->b[z->tail].next = i;
    else
        z->head = i;
    z->tail = i;
    return i;
}

/* the backlog is above X before this time (given no further acceptance) */
static double xs_msim_tres(const xs_msim *g) { return g->d_last - g->X / g->R; }

/* advance the clock (and the main loops' virtual clock V) to t */
static void xs_msim_advance(xs_msim *g, double t)
{
    if (!(t > g->t_now))
        return;
    const double tr = xs_msim_tres(g);
    if (g->t_now < tr) {
        const double seg = (t < tr ? t : tr) - g->t_now;
        g->V += g->s * seg;
        g->t_now += seg;
    }
    g->V += t - g->t_now;
    g->t_now = t;
}

/* the time at which V reaches v (no acceptance in between) */
static double xs_msim_t_of_v(const xs_msim *g, double v)
{
    double dv = v - g->V;
    if (!(dv > 0))
        return g->t_now;
    const double tr = xs_msim_tres(g);
    if (g->t_now < tr) {
        const double gain = g->s * (tr - g->t_now);
        if (dv <= gain)
            return g->t_now + dv / g->s;
        return tr + (dv - gain);
    }
    return g->t_now + dv;
}

/* Offer the next chunk of producer p (the head of its queue), if its burst has started. */
static void xs_msim_offer_next(xs_msim *g, int p)
{
    xs_mprod *z = &g->pr[p];
    if (z->offering)
        return;
    if (!(z->orem > 0)) {
        const int nb = z->ob < 0 ? z->head : g->b[z->ob].next;
        if (nb < 0 || isnan(g->b[nb].t0))
            return; /* no more chunks, or the program has not started that burst */
        z->ob = nb;
        z->orem = g->b[nb].tot;
    }
    const xs_burst *u = &g->b[z->ob];
    z->pend_tot = z->orem < g->c ? z->orem : g->c;
    z->pend_rem = u->tot > 0 ? z->pend_tot * u->rem / u->tot : 0;
    z->orem -= z->pend_tot;
    if (z->orem < 0.5)
        z->orem = 0;
    z->oidx = z->accepted;
    /* in the queue once the burst has started and there is room in it; streamed after the
     * previous chunk */
    double in = u->t0 + g->o;
    if (g->q > 0 && z->oidx - g->q >= 0 && z->acc[(z->oidx - g->q) % (g->q + 1)] > in)
        in = z->acc[(z->oidx - g->q) % (g->q + 1)];
    z->ready = (in > z->a_prev ? in : z->a_prev) + z->pend_tot * u->ns_per_byte;
    z->offering = 1;
    if (!xs_heap_push(&g->fut, (xs_ev){z->ready, 0, p}))
        g->oom = 1;
}

static void xs_msim_window(xs_msim *g, int p, int bi, double end); /* a window closed */

/* Close every window of producer p whose end is known: its last chunk minus the queue has been
 * accepted. */
static void xs_msim_settle(xs_msim *g, int p)
{
    xs_mprod *z = &g->pr[p];
    while (z->settle >= 0) {
        xs_burst *u = &g->b[z->settle];
        if (isnan(u->t0) || !(u->last - g->q < z->accepted))
            return;
        const int64_t need = u->last - g->q;
        double en = u->t0 + g->o;
        if (need >= 0 && z->acc[need % (g->q + 1)] > en)
            en = z->acc[need % (g->q + 1)];
        u->end = en;
        const int bi = z->settle;
        z->settle = u->next;
        xs_msim_window(g, p, bi, en);
    }
}

/* Producer p starts burst bi at time t: its chunks go to the queue. */
static void xs_msim_start(xs_msim *g, int p, int bi, double t)
{
    xs_mprod *z = &g->pr[p];
    xs_burst *u = &g->b[bi];
    u->t0 = t;
    u->first = z->assigned;
    z->assigned += u->nch;
    u->last = z->assigned - 1;
    if (z->settle < 0)
        z->settle = bi;
    xs_msim_offer_next(g, p);
    xs_msim_settle(g, p);
}

/* When the stage next accepts a chunk (INFINITY: no chunk offered). */
static double xs_msim_stage_next(xs_msim *g)
{
    if (!g->el.n && !g->fut.n)
        return INFINITY;
    while (g->rho > 0 && g->held.n && g->held.a[0].t <= g->t_now) {
        xs_ev d = xs_heap_pop(&g->held);
        if (d.t == g->pr[d.p].d_own && g->pr[d.p].outstanding) {
            g->pr[d.p].outstanding = 0;
            g->n_out--;
        }
    }
    const double room = g->Q + g->rho * (g->n_out > 0 ? g->n_out : 1) - g->c;
    const double t_space = g->d_last - room / g->R;
    double t = g->el.n ? g->t_now : g->fut.a[0].t;
    if (t < g->t_now)
        t = g->t_now;
    return t_space > t ? t_space : t;
}

/* Accept the next chunk at t_next (from xs_msim_stage_next, the clock advanced to it). */
static void xs_msim_stage_accept(xs_msim *g, double t_next)
{
    while (g->fut.n && g->fut.a[0].t <= t_next) {
        xs_ev f = xs_heap_pop(&g->fut);
        const xs_mprod *y = &g->pr[f.p];
        const double tag = y->ftag > g->vtime ? y->ftag : g->vtime;
        if (!xs_heap_push(&g->el, (xs_ev){tag, f.t, f.p}))
            g->oom = 1;
    }
    if (!g->el.n)
        return;
    xs_ev e = xs_heap_pop(&g->el);
    xs_mprod *z = &g->pr[e.p];
    if (z->ring && z->ring_n == g->ring_m) {
        const double tc = z->ring[z->ring_head];
        if (tc > t_next) { /* its own cap holds it: retry when its oldest chunk drained */
            if (!xs_heap_push(&g->fut, (xs_ev){tc, 0, e.p}))
                g->oom = 1;
            return;
        }
    }
    double t_acc = t_next > z->ready ? t_next : z->ready;
    if (t_acc < g->t_now)
        t_acc = g->t_now;
    g->vtime = e.t;
    const double c = z->pend_rem;
    z->ftag = e.t + c / z->weight;
    const double t_arr = t_acc - c / g->r;
    g->d_last = (g->d_last > t_arr ? g->d_last : t_arr) + c / g->R;
    if (g->rho > 0) {
        if (!z->outstanding) {
            z->outstanding = 1;
            g->n_out++;
        }
        z->d_own = g->d_last;
        if (!xs_heap_push(&g->held, (xs_ev){g->d_last, 0, e.p}))
            g->oom = 1;
    }
    if (z->ring) {
        if (z->ring_n < g->ring_m) {
            z->ring[(z->ring_head + z->ring_n) % g->ring_m] = g->d_last;
            z->ring_n++;
        } else {
            z->ring[z->ring_head] = g->d_last;
            z->ring_head = (z->ring_head + 1) % g->ring_m;
        }
    }
    if (g->record_blocked) {
        const double until = xs_msim_tres(g);
        if (until > t_acc) {
            if (g->nblk && t_acc <= g->blk[2 * g->nblk - 1]) {
                if (until > g->blk[2 * g->nblk - 1])
                    g->blk[2 * g->nblk - 1] = until;
            } else {
                if (g->nblk == g->cap_blk) {
                    int nc = g->cap_blk ? 2 * g->cap_blk : 256;
                    double *nbk = (double *)realloc(g->blk, sizeof(double) * 2 * (size_t)nc);
                    if (!nbk) {
                        g->oom = 1;
                        nc = 0;
                    } else {
                        g->blk = nbk;
                        g->cap_blk = nc;
                    }
                }
                if (g->nblk < g->cap_blk) {
                    g->blk[2 * g->nblk] = t_acc;
                    g->blk[2 * g->nblk + 1] = until;
                    g->nblk++;
                }
            }
        }
    }
    z->acc[z->oidx % (g->q + 1)] = t_acc;
    z->a_prev = t_acc;
    z->accepted = z->oidx + 1;
    z->offering = 0;
    xs_msim_settle(g, e.p);
    xs_msim_offer_next(g, e.p);
}

/* ---- the whole run (xs_moe_predict) ---- */

typedef struct {
    xs_msim *g;
    const xs_moe *m;
    const int2 *tasks;
    int ntasks;
    const xs_moe_costs *c;
    int link;
    double pace_ns_per_byte, pace_slack_ns, pace_until;
    int q;              /* next task */
    /* adaptive plans (xs_mrun_next_adaptive): the two queues' heads, the admission clock */
    int adaptive, n1, q1, q2;
    int *pending;       /* per producer: a claimed Linear-2 tile not run yet (-1: none) */
    double adm_until, adm_ns_per_byte, adm_ahead_ns, adm_tile_bytes;
    int *dep_cnt, *wait_head;
    double end;
    xs_moe_tile *trace; /* optional [ntasks]: the predicted trace */
    /* the spilling kernel (plan.spill_depth > 0, paced): per producer its held-back tiles (a ring
     * of XS_MOE_SPILL_MAX task indices and remote bytes) and the one being flushed (-1: none) */
    int spill_depth;
    int *sq_head, *sq_n, *sq_task, *flushing;
    double *sq_rem, *fwait0; /* fwait0: when the producer began to wait for a flush */
} xs_mrun;

static void xs_mrun_take(xs_mrun *u, int p);

static void xs_mrun_compute(xs_mrun *u, int p, double cost)
{
    xs_msim *g = u->g;
    g->pr[p].state = XS_P_COMP;
    if (u->trace)
        u->trace[g->pr[p].cur].mma0_ns = g->t_now;
    if (!xs_heap_push(&g->vev, (xs_ev){g->V + cost, 0, p}))
        g->oom = 1;
}

/* The kernel's choice (xs_moe_take_adaptive) for producer p at the model's time: a Linear-1 tile
 * is done at the end of its main loop here (the kernel counts it after its h stores) */
static int xs_mrun_next_adaptive(xs_mrun *u, int p)
{
    const int n2 = u->ntasks - u->n1, l1 = u->m->l1_per_rb, l2 = u->m->l2_per_rb;
    int *pend = &u->pending[p];
    if (*pend >= 0) {
        if (u->q1 >= u->n1 || u->dep_cnt[(*pend - u->n1) / l2] >= l1) {
            const int t = *pend;
            *pend = -1;
            return t;
        }
    } else if (u->q1 < u->n1) {
        const double now = u->g->t_now;
        if (u->adm_until <= now + u->adm_ahead_ns && u->q2 < n2) {
            const int j = u->q2++;
            u->adm_until = (u->adm_until > now ? u->adm_until : now) +
                           u->adm_tile_bytes * u->adm_ns_per_byte;
            if (u->dep_cnt[j / l2] >= l1)
                return u->n1 + j;
            *pend = u->n1 + j;
        }
    }
    if (u->q1 < u->n1)
        return u->q1++;
    if (*pend >= 0) {
        const int t = *pend;
        *pend = -1;
        return t;
    }
    return u->q2 < n2 ? u->n1 + u->q2++ : u->ntasks;
}

/* The spilling kernel's flush of producer p's oldest held-back tile (xs_moe_spill_drain): its
 * remote bytes leave as a burst once the pacer's backlog allows; with `wait` (the CTA's end) the
 * producer waits for that, else nothing happens while it is closed. 1 = started or waiting. */
static int xs_mrun_flush(xs_mrun *u, int p, int wait)
{
    xs_msim *g = u->g;
    xs_mprod *z = &g->pr[p];
    const int e = p * XS_MOE_SPILL_MAX + u->sq_head[p];
    const double open = u->pace_until - u->pace_slack_ns;
    if (open > g->t_now) {
        if (!wait)
            return 0;
        if (u->flushing[p] < 0)
            u->fwait0[p] = g->t_now;
        u->flushing[p] = u->sq_task[e];
        z->state = XS_P_GATE;
        if (!xs_heap_push(&g->pev, (xs_ev){open, 0, p}))
            g->oom = 1;
        return 1;
    }
    const double rem = u->sq_rem[e];
    u->pace_until = (u->pace_until > g->t_now ? u->pace_until : g->t_now) +
                    rem * u->pace_ns_per_byte;
    if (u->trace) {
        xs_moe_tile *r = &u->trace[u->sq_task[e]];
        r->gate_ns = u->flushing[p] >= 0 ? g->t_now - u->fwait0[p] : 0;
        r->st0_ns = g->t_now;
    }
    u->flushing[p] = u->sq_task[e];
    const int bi = xs_msim_burst(g, p, rem, rem, 1.0 / g->r, -1);
    if (bi < 0)
        return 1;
    z->state = XS_P_BURST;
    xs_msim_start(g, p, bi, g->t_now);
    return 1;
}

static void xs_mrun_take(xs_mrun *u, int p)
{
    xs_msim *g = u->g;
    xs_mprod *z = &g->pr[p];
    /* the spilling kernel: held-back tiles the pacer admits leave before the next task */
    if (u->spill_depth && u->sq_n[p] > 0 && xs_mrun_flush(u, p, 0))
        return;
    const int idx = u->adaptive            ? xs_mrun_next_adaptive(u, p)
                    : u->q < u->ntasks ? u->q++
                                       : u->ntasks;
    if (idx >= u->ntasks) {
        if (u->spill_depth && u->sq_n[p] > 0) { /* the CTA's end: all of them, waiting */
            xs_mrun_flush(u, p, 1);
            return;
        }
        z->state = XS_P_DONE;
        if (g->t_now > u->end)
            u->end = g->t_now;
        return;
    }
    z->cur = idx;
    const int2 tk = u->tasks[idx];
    z->kind = (tk.x >> 30) & 3;
    z->rb = tk.x & 0x3fffffff;
    z->nb = tk.y;
    if (u->trace) {
        xs_moe_tile *r = &u->trace[z->cur];
        memset(r, 0, sizeof *r);
        r->seq = -1;
        r->fetch_ns = g->t_now;
        r->kind = z->kind;
        r->rb = z->rb;
        r->nb = z->nb;
        r->cta = r->smid = p;
        r->id = z->kind == 1 ? z->rb * u->m->l1_per_rb + z->nb
                             : u->m->nrb * u->m->l1_per_rb + z->rb * u->m->l2_per_rb + z->nb;
    }
    if (z->kind == 2 && u->dep_cnt[z->rb] < u->m->l1_per_rb) {
        z->state = XS_P_DEP;
        z->next_wait = u->wait_head[z->rb];
        u->wait_head[z->rb] = p;
        return;
    }
    xs_mrun_compute(u, p, z->kind == 1 ? u->c->c1_ns : u->c->c2_ns);
}

/* a Linear-2 tile's stores: through the pacer and the stage, or local only */
static void xs_mrun_burst(xs_mrun *u, int p)
{
    xs_msim *g = u->g;
    xs_mprod *z = &g->pr[p];
    if (u->trace) {
        xs_moe_tile *r = &u->trace[z->cur];
        r->st0_ns = g->t_now;
        r->gate_ns = g->t_now - r->mma1_ns;
        r->remote_bytes = (int)z->rem;
        r->total_bytes = (int)z->tot;
    }
    if (!(z->rem > 0)) {
        z->state = XS_P_LOCAL;
        if (!xs_heap_push(&g->pev, (xs_ev){g->t_now + z->tot / g->r_local, 0, p}))
            g->oom = 1;
        return;
    }
    if (u->pace_ns_per_byte > 0) {
        const double open = u->pace_until - u->pace_slack_ns;
        if (open > g->t_now && u->spill_depth && u->sq_n[p] < u->spill_depth) {
            /* the spilling kernel: the tile's rows go to device memory, the CTA goes on */
            const int e = p * XS_MOE_SPILL_MAX + (u->sq_head[p] + u->sq_n[p]) % XS_MOE_SPILL_MAX;
            u->sq_task[e] = z->cur;
            u->sq_rem[e] = z->rem;
            u->sq_n[p]++;
            if (u->trace) {
                u->trace[z->cur].deferred = 1;
                u->trace[z->cur].gate_ns = 0;
            }
            z->state = XS_P_LOCAL;
            if (!xs_heap_push(&g->pev, (xs_ev){g->t_now + z->tot / g->r_local, 0, p}))
                g->oom = 1;
            return;
        }
        if (open > g->t_now) {
            z->state = XS_P_GATE;
            if (!xs_heap_push(&g->pev, (xs_ev){open, 0, p}))
                g->oom = 1;
            return;
        }
        u->pace_until = (u->pace_until > g->t_now ? u->pace_until : g->t_now) +
                        z->rem * u->pace_ns_per_byte;
    }
    const double ns_per_byte = (z->rem / g->r + (z->tot - z->rem) / g->r_local) / z->tot;
    const int bi = xs_msim_burst(g, p, z->tot, z->rem, ns_per_byte, -1);
    if (bi < 0)
        return;
    z->state = XS_P_BURST;
    xs_msim_start(g, p, bi, g->t_now);
}

static void xs_msim_window(xs_msim *g, int p, int bi, double end)
{
    (void)bi;
    xs_mrun *u = (xs_mrun *)g->user;
    if (!u || g->pr[p].state != XS_P_BURST)
        return; /* stall replay: the window is read from the burst */
    if (!xs_heap_push(&g->pev, (xs_ev){end, 0, p}))
        g->oom = 1;
}

static void xs_mrun_free(xs_mrun *u)
{
    free(u->dep_cnt);
    free(u->wait_head);
    free(u->pending);
    free(u->sq_head);
    free(u->sq_n);
    free(u->flushing);
    free(u->sq_task);
    free(u->sq_rem);
    free(u->fwait0);
}

/* xs_moe_predict on a task list in host memory (plan: its pacing; spill_depth: the spilling
 * kernel) */
static xs_status xs_moe_predict_tasks(const xs_moe *m, const int2 *tasks, int ntasks,
                                      const xs_moe_plan *plan, const xs_profile *pf,
                                      const xs_moe_model *mm, const xs_moe_costs *c, int link,
                                      xs_moe_tile *trace, double *total_ns)
{
    *total_ns = NAN;
    if (!(c->c1_ns > 0) || !(c->c2_ns > 0))
        return xs_seterr(XS_EINVAL, "moe model: tile costs c1=%g c2=%g ns must be positive",
                         c->c1_ns, c->c2_ns);
    if (plan && plan->kind == XS_MOE_ADAPTIVE &&
        ntasks != m->nrb * (m->l1_per_rb + m->l2_per_rb))
        return xs_seterr(XS_EINVAL, "moe model: an adaptive plan runs the whole list (%d of %d "
                         "tasks)", ntasks, m->nrb * (m->l1_per_rb + m->l2_per_rb));
    xs_moe_model none = {0, 1, 0, 0};
    /* a courier plan: grid - C CTAs compute and stage every row locally; the couriers' link
     * follows from their ends (xs_moe_courier_drain, below) */
    const int couriers = plan ? plan->couriers : 0;
    const int np = m->grid - couriers;
    const int courier_link = link && couriers > 0;
    if (courier_link && !(plan->courier_bytes_per_ns > 0))
        return xs_seterr(XS_EINVAL, "moe model: %d couriers without an issue rate", couriers);
    xs_moe_tile *own_trace = NULL; /* the tiles' ends, when the caller wants no trace */
    if (couriers > 0) {
        link = 0;
        if (!trace && !(trace = own_trace = (xs_moe_tile *)calloc((size_t)ntasks + 1,
                                                                   sizeof *trace)))
            return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    }
    xs_msim g;
    xs_status ist = xs_msim_init(&g, pf, link ? mm : &none, np, m->nrb * m->l2_per_rb + 1,
                                 c->local_issue_bytes_per_ns);
    if (ist != XS_OK) {
        free(own_trace);
        return ist;
    }
    xs_mrun u;
    memset(&u, 0, sizeof u);
    u.g = &g;
    u.m = m;
    u.tasks = tasks;
    u.ntasks = ntasks;
    u.c = c;
    u.link = link;
    u.trace = trace;
    if (link && plan && plan->pace_bytes > 0 && plan->pace_bytes_per_ns > 0) {
        u.pace_ns_per_byte = 1.0 / plan->pace_bytes_per_ns;
        u.pace_slack_ns = plan->pace_bytes / plan->pace_bytes_per_ns;
    }
    if (plan && plan->kind == XS_MOE_ADAPTIVE) {
        /* the choice is the kernel's with or without the link: the same clock, the same
         * problem's remote bytes (the local control admits as the real run does) */
        u.adaptive = 1;
        u.n1 = m->nrb * m->l1_per_rb;
        u.adm_ns_per_byte = 1.0 / plan->pace_bytes_per_ns;
        u.adm_ahead_ns = plan->admit_ahead_ns;
        xs_moe_info info;
        xs_moe_get_info(m, &info);
        u.adm_tile_bytes = info.l2_tiles ? info.remote_bytes / info.l2_tiles : 0.0;
    }
    if (u.pace_ns_per_byte > 0 && plan && plan->spill_depth > 0)
        u.spill_depth = plan->spill_depth < XS_MOE_SPILL_MAX ? plan->spill_depth
                                                             : XS_MOE_SPILL_MAX;
    u.dep_cnt = (int *)calloc((size_t)m->nrb + 1, sizeof(int));
    u.wait_head = (int *)malloc(sizeof(int) * ((size_t)m->nrb + 1));
    u.pending = (int *)malloc(sizeof(int) * ((size_t)np + 1));
    u.sq_head = (int *)calloc((size_t)np + 1, sizeof(int));
    u.sq_n = (int *)calloc((size_t)np + 1, sizeof(int));
    u.flushing = (int *)malloc(sizeof(int) * ((size_t)np + 1));
    u.sq_task = (int *)malloc(sizeof(int) * XS_MOE_SPILL_MAX * ((size_t)np + 1));
    u.sq_rem = (double *)malloc(sizeof(double) * XS_MOE_SPILL_MAX * ((size_t)np + 1));
    u.fwait0 = (double *)calloc((size_t)np + 1, sizeof(double));
    if (!u.dep_cnt || !u.wait_head || !u.pending || !u.sq_head || !u.sq_n || !u.flushing ||
        !u.sq_task || !u.sq_rem || !u.fwait0) {
        xs_mrun_free(&u);
        free(own_trace);
        xs_msim_free(&g);
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    }
    for (int b = 0; b <= m->nrb; b++)
        u.wait_head[b] = -1;
    for (int p = 0; p <= np; p++)
        u.pending[p] = u.flushing[p] = -1;
    g.user = &u;
    for (int p = 0; p < np; p++)
        xs_mrun_take(&u, p);
    /* every event is a chunk accepted (or retried under a cap), a task's step or a pacer gate:
     * a bound far above that count turns a model bug into an error instead of a hang */
    const double max_events = 16.0 * ((double)m->rows * m->H * 2.0 / g.c + 8.0 * ntasks) + 1e6;
    double events = 0;
    int stalled = 0;
    while (!g.oom) {
        if (++events > max_events) {
            stalled = 1;
            break;
        }
        const double ts = xs_msim_stage_next(&g);
        const double tp = g.pev.n ? g.pev.a[0].t : INFINITY;
        const double tv = g.vev.n ? xs_msim_t_of_v(&g, g.vev.a[0].t) : INFINITY;
        if (ts == INFINITY && tp == INFINITY && tv == INFINITY)
            break;
        if (tv <= tp && tv <= ts) {
            xs_msim_advance(&g, tv);
            xs_ev e = xs_heap_pop(&g.vev);
            if (g.V < e.t)
                g.V = e.t; /* rounding */
            xs_mprod *z = &g.pr[e.p];
            if (u.trace) {
                xs_moe_tile *r = &u.trace[z->cur];
                r->mma1_ns = g.t_now;
                if (z->kind == 1)
                    r->st0_ns = r->st1_ns = g.t_now;
            }
            if (z->kind == 1) {
                if (++u.dep_cnt[z->rb] == m->l1_per_rb) {
                    for (int w = u.wait_head[z->rb]; w >= 0;) {
                        const int nw = g.pr[w].next_wait;
                        xs_mrun_compute(&u, w, c->c2_ns);
                        w = nw;
                    }
                    u.wait_head[z->rb] = -1;
                }
                xs_mrun_take(&u, e.p);
            } else {
                double rem, tot;
                xs_moe_tile_bytes(m, z->rb, z->nb, &rem, &tot);
                z->rem = link ? rem : 0;
                z->tot = tot;
                xs_mrun_burst(&u, e.p);
            }
        } else if (tp <= ts) {
            xs_msim_advance(&g, tp);
            xs_ev e = xs_heap_pop(&g.pev);
            xs_mprod *z = &g.pr[e.p];
            if (z->state == XS_P_GATE && u.spill_depth && u.flushing[e.p] >= 0) {
                xs_mrun_flush(&u, e.p, 1);
            } else if (z->state == XS_P_GATE) {
                xs_mrun_burst(&u, e.p);
            } else if (u.spill_depth && u.flushing[e.p] >= 0) {
                /* a held-back tile's flush ended: its entry is free */
                if (u.trace)
                    u.trace[u.flushing[e.p]].st1_ns = g.t_now;
                u.flushing[e.p] = -1;
                u.sq_head[e.p] = (u.sq_head[e.p] + 1) % XS_MOE_SPILL_MAX;
                u.sq_n[e.p]--;
                xs_mrun_take(&u, e.p);
            } else {
                if (u.trace && !u.trace[z->cur].deferred)
                    u.trace[z->cur].st1_ns = g.t_now;
                xs_mrun_take(&u, e.p);
            }
        } else {
            xs_msim_advance(&g, ts);
            xs_msim_stage_accept(&g, ts);
        }
    }
    int stuck = 0;
    for (int p = 0; p < np; p++)
        stuck += g.pr[p].state != XS_P_DONE;
    const int oom = g.oom;
    double end = u.end > g.d_last ? u.end : g.d_last;
    xs_mrun_free(&u);
    xs_msim_free(&g);
    if (couriers > 0 && !oom && !stalled && !stuck) {
        /* a Linear-2 tile's rows are ready for the couriers when its staging stores end; in the
         * trace it hands them its remote bytes, as the kernel's trace says */
        double *ready = (double *)malloc(sizeof(double) * (size_t)(ntasks + 1));
        double *rb = (double *)malloc(sizeof(double) * (size_t)(ntasks + 1));
        int n2 = 0;
        for (int i = 0; ready && rb && i < ntasks; i++) {
            if (trace[i].kind != 2)
                continue;
            double rem, tot;
            xs_moe_tile_bytes(m, trace[i].rb, trace[i].nb, &rem, &tot);
            trace[i].remote_bytes = (int)rem;
            ready[n2] = trace[i].st1_ns;
            rb[n2++] = rem;
        }
        if (courier_link && ready && rb) {
            const double drained = xs_moe_courier_drain(ready, rb, n2, couriers,
                                                        plan->courier_bytes_per_ns);
            if (drained > end)
                end = drained;
        }
        const int lost = !ready || !rb;
        free(ready);
        free(rb);
        free(own_trace);
        if (lost)
            return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    } else {
        free(own_trace);
    }
    if (oom)
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    if (stalled)
        return xs_seterr(XS_ERANGE, "moe model: no end after %.0f events (%d tasks): a bug in "
                         "the event model", max_events, ntasks);
    if (stuck)
        return xs_seterr(XS_ERANGE, "moe model: %d CTAs did not finish (a Linear-2 tile before "
                         "its row block's Linear-1 tiles?)", stuck);
    *total_ns = end;
    return XS_OK;
}

xs_status xs_moe_predict(xs_moe *m, int slot, const xs_profile *pf, const xs_moe_model *mm,
                         const xs_moe_costs *c, int link, double *total_ns)
{
    return xs_moe_predict_trace(m, slot, pf, mm, c, link, NULL, total_ns);
}

xs_status xs_moe_predict_trace(xs_moe *m, int slot, const xs_profile *pf,
                               const xs_moe_model *mm, const xs_moe_costs *c, int link,
                               xs_moe_tile *tiles, double *total_ns)
{
    *total_ns = NAN;
    if (slot < 0 || slot >= XS_MOE_SLOTS || !m->slots[slot].host)
        return xs_seterr(XS_EINVAL, "moe: plan slot %d has no task list", slot);
    const xs_moe_tasklist *tl = &m->slots[slot];
    return xs_moe_predict_tasks(m, tl->host, tl->n, &tl->plan, pf, mm, c, link, tiles,
                                total_ns);
}

double xs_moe_tile_t0(const xs_profile *p, double remote_bytes, double total_bytes,
                      double local_bytes_per_ns)
{
    const double rl = local_bytes_per_ns > 0 ? local_bytes_per_ns : p->issue_bytes_per_ns;
    if (!(remote_bytes > 0))
        return total_bytes / rl;
    const double b = p->queue_bytes_per_producer > 0 ? p->queue_bytes_per_producer : 0;
    const double stream = remote_bytes / p->issue_bytes_per_ns + (total_bytes - remote_bytes) / rl;
    return p->issue_overhead_ns + (total_bytes > b ? (total_bytes - b) / total_bytes : 0) * stream;
}

/* ---- per-tile stalls of a measured run (xs_moe_stall_predict) ---- */

typedef struct {
    int cta, i;
    double st0;
} xs_bkey;

static int cmp_burst_start(const void *x, const void *y)
{
    const xs_bkey *a = (const xs_bkey *)x, *b = (const xs_bkey *)y;
    if (a->cta != b->cta)
        return a->cta < b->cta ? -1 : 1;
    if (a->st0 != b->st0)
        return a->st0 < b->st0 ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* blocked time within [a, b] from merged intervals blk[2k], blk[2k+1] (sorted, disjoint) and the
 * prefix sums of their lengths (pre[k]: intervals 0..k-1): two binary searches, O(log n). The
 * intervals that meet (a, b) are lo..last; the first and the last are clipped, the ones between
 * are whole. (Run 4's version walked them and could loop forever once a main loop spanned more
 * than nine intervals and ended inside one: the bench's host side hung.) */
static double xs_blocked_within(const double *blk, const double *pre, int n, double a, double b)
{
    if (!(b > a) || n == 0)
        return 0;
    int lo = 0, hi = n; /* first interval ending after a */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (blk[2 * mid + 1] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    int end = n, l2 = lo; /* first interval (from lo) starting at or after b */
    while (l2 < end) {
        const int mid = l2 + (end - l2) / 2;
        if (blk[2 * mid] < b)
            l2 = mid + 1;
        else
            end = mid;
    }
    const int last = l2 - 1;
    if (last < lo)
        return 0;
    double s = 0;
    const int ends[2] = {lo, last};
    for (int j = 0; j < (last > lo ? 2 : 1); j++) {
        const int k = ends[j];
        const double x0 = blk[2 * k] > a ? blk[2 * k] : a;
        const double x1 = blk[2 * k + 1] < b ? blk[2 * k + 1] : b;
        if (x1 > x0)
            s += x1 - x0;
    }
    if (last > lo + 1)
        s += pre[last] - pre[lo + 1];
    return s;
}

xs_status xs_moe_stall_predict(const xs_moe_tile *t, int n, const xs_profile *pf,
                               const xs_moe_model *mm, double local_bytes_per_ns,
                               const double *ref, int nref, xs_moe_stall *out,
                               double *pred_span, double *pred_mma)
{
    memset(out, 0, sizeof *out);
    out->meas_stall_med_ns = out->pred_stall_med_ns = out->abs_err_med_ns = NAN;
    out->abs_err_p90_ns = out->mma_meas_med_ns = out->mma_pred_med_ns = NAN;
    out->mma_abs_err_med_ns = out->mma_abs_err_p90_ns = NAN;
    for (int i = 0; i < n; i++) {
        if (pred_span)
            pred_span[i] = NAN;
        if (pred_mma)
            pred_mma[i] = NAN;
    }
    int np = 1, nb = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].cta + 1 > np)
            np = t[i].cta + 1;
        nb += t[i].cta >= 0 && t[i].kind == 2 && t[i].remote_bytes > 0;
    }
    xs_msim g;
    XS_TRY(xs_msim_init(&g, pf, mm, np, nb + 1, local_bytes_per_ns));
    g.record_blocked = 1;
    int *order = (int *)malloc(sizeof(int) * (size_t)(nb + 1));
    xs_bkey *keys = (xs_bkey *)malloc(sizeof(xs_bkey) * (size_t)(nb + 1));
    int *bof = (int *)malloc(sizeof(int) * (size_t)(nb + 1)); /* burst -> task */
    double *e1 = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *e2 = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *e3 = (double *)malloc(sizeof(double) * (size_t)(n + 1));
    double *pre = NULL;
    if (!order || !keys || !bof || !e1 || !e2 || !e3) {
        free(order); free(keys); free(bof); free(e1); free(e2); free(e3);
        xs_msim_free(&g);
        return xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (t[i].cta >= 0 && t[i].kind == 2 && t[i].remote_bytes > 0)
            keys[k++] = (xs_bkey){t[i].cta, i, t[i].st0_ns};
    qsort(keys, (size_t)nb, sizeof *keys, cmp_burst_start);
    for (int j = 0; j < nb; j++)
        order[j] = keys[j].i;
    free(keys);
    /* the bursts, per CTA in the order they started; each starts at its measured first store */
    for (int j = 0; j < nb; j++) {
        const xs_moe_tile *u = &t[order[j]];
        const double rem = u->remote_bytes, tot = u->total_bytes > rem ? u->total_bytes : rem;
        const double npb = (rem / g.r + (tot - rem) / g.r_local) / tot;
        bof[j] = xs_msim_burst(&g, u->cta, tot, rem, npb, order[j]);
        if (!xs_heap_push(&g.pev, (xs_ev){u->st0_ns, 0, j}))
            g.oom = 1;
    }
    double chunks = 0;
    for (int j = 0; j < g.nb; j++)
        chunks += (double)g.b[j].nch;
    const double max_events = 16.0 * (chunks + nb) + 1e6; /* as in xs_moe_predict_tasks */
    double events = 0;
    int stalled = 0;
    while (!g.oom) {
        if (++events > max_events) {
            stalled = 1;
            break;
        }
        const double ts = xs_msim_stage_next(&g);
        const double tp = g.pev.n ? g.pev.a[0].t : INFINITY;
        if (ts == INFINITY && tp == INFINITY)
            break;
        if (tp <= ts) {
            xs_msim_advance(&g, tp);
            xs_ev e = xs_heap_pop(&g.pev);
            xs_msim_start(&g, t[order[e.p]].cta, bof[e.p], e.t);
        } else {
            xs_msim_advance(&g, ts);
            xs_msim_stage_accept(&g, ts);
        }
    }
    xs_status st = XS_OK;
    if (g.oom)
        st = xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    else if (stalled)
        st = xs_seterr(XS_ERANGE, "moe model: the stall replay found no end after %.0f events "
                       "(%d bursts): a bug in the event model", max_events, nb);
    /* issue side */
    int ne = 0;
    for (int j = 0; j < nb && st == XS_OK; j++) {
        const xs_burst *b = &g.b[bof[j]];
        const xs_moe_tile *u = &t[order[j]];
        if (isnan(b->end)) {
            st = xs_seterr(XS_ERANGE, "moe model: the burst of task %d never completed",
                           order[j]);
            break;
        }
        const double t0 = xs_moe_tile_t0(pf, u->remote_bytes, u->total_bytes, local_bytes_per_ns);
        const double pred = b->end - b->t0, meas = u->st1_ns - u->st0_ns;
        if (pred_span)
            pred_span[order[j]] = pred;
        e1[ne] = meas - t0;
        e2[ne] = pred - t0;
        e3[ne] = fabs(pred - meas);
        ne++;
    }
    if (st == XS_OK && ne) {
        out->tiles = ne;
        out->meas_stall_med_ns = median_of(e1, ne);
        out->pred_stall_med_ns = median_of(e2, ne);
        out->abs_err_med_ns = median_of(e3, ne); /* sorted now */
        out->abs_err_p90_ns = e3[(int)(0.9 * (ne - 1))];
    }
    /* MMA side: blocked time within every tile's measured main loop */
    if (st == XS_OK) {
        pre = (double *)malloc(sizeof(double) * (size_t)(g.nblk + 1));
        if (!pre)
            st = xs_seterr(XS_ENOMEM, "moe model: out of host memory");
    }
    if (st == XS_OK) {
        pre[0] = 0;
        for (int i = 0; i < g.nblk; i++)
            pre[i + 1] = pre[i] + (g.blk[2 * i + 1] - g.blk[2 * i]);
        out->blocked_ns = pre[g.nblk];
        const double lost = 1.0 - g.s;
        int nm = 0;
        for (int i = 0; i < n; i++) {
            if (t[i].cta < 0)
                continue;
            const double pm =
                lost * xs_blocked_within(g.blk, pre, g.nblk, t[i].mma0_ns, t[i].mma1_ns);
            if (pred_mma)
                pred_mma[i] = pm;
            if (!ref || t[i].id < 0 || t[i].id >= nref || !isfinite(ref[t[i].id]))
                continue;
            const double mm_meas = (t[i].mma1_ns - t[i].mma0_ns) - ref[t[i].id];
            e1[nm] = mm_meas;
            e2[nm] = pm;
            e3[nm] = fabs(pm - mm_meas);
            nm++;
        }
        if (nm) {
            out->mma_tiles = nm;
            out->mma_meas_med_ns = median_of(e1, nm);
            out->mma_pred_med_ns = median_of(e2, nm);
            out->mma_abs_err_med_ns = median_of(e3, nm);
            out->mma_abs_err_p90_ns = e3[(int)(0.9 * (nm - 1))];
        }
    }
    free(order); free(bof); free(e1); free(e2); free(e3); free(pre);
    xs_msim_free(&g);
    return st;
}

/* ---- the auto rule ---- */

/* The ready times (ns, list order) and remote bytes of the Linear-2 tiles of a local-control trace
 * (or the model's), times x scale; returns their number. */
static int xs_moe_ready_of(const xs_moe *m, const xs_moe_tile *t, int n, double scale,
                           double *ready, double *bytes)
{
    int n2 = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].kind != 2 || t[i].cta < 0 || t[i].rb < 0 || t[i].rb >= m->nrb)
            continue;
        double rem, tot;
        xs_moe_tile_bytes(m, t[i].rb, t[i].nb, &rem, &tot);
        ready[n2] = t[i].st1_ns * scale;
        bytes[n2++] = rem;
    }
    return n2;
}

xs_status xs_moe_auto(xs_moe *m, const xs_profile *p, const xs_moe_model *mm,
                      const xs_moe_costs *wc, const xs_moe_costs *ic,
                      const xs_moe_local_traces *lt, xs_moe_auto_result *out)
{
    memset(out, 0, sizeof *out);
    out->paced_ns = NAN;
    out->courier_ns = out->courier_compute_ns = out->courier_link_ns = NAN;
    out->adaptive_ns = out->spill_ns = out->paced_plain_ns = NAN;
    XS_TRY(xs_profile_check(p, "profile"));
    xs_moe_model mdef;
    if (!mm) {
        xs_moe_model_default(&mdef);
        mm = &mdef;
    }
    if (mm->paced_lead < 0 || mm->paced_lead_end < 0 ||
        (mm->paced_lead_end > 0 && mm->paced_lead_end >= mm->paced_lead))
        return xs_seterr(XS_EINVAL, "moe: auto's forced paced lead %d tapering to %d: a lead >= 1 "
                         "and a taper end in 1..lead-1 (or 0, 0: the rule)", mm->paced_lead,
                         mm->paced_lead_end);
    const int ntask = m->nrb * (m->l1_per_rb + m->l2_per_rb);
    xs_moe_costs inter = *wc;
    if (ic && ic->c1_ns > 0 && ic->c2_ns > 0) {
        inter = *ic;
    } else {
        inter.c1_ns *= 1.03; /* no measurement of the interleaved order: assume 3 % locality loss */
        inter.c2_ns *= 1.03;
        inter.kernel_ns = 0;
    }
    /* the criterion on the wave order's Linear-2 bursts: K producers, the mean remote bytes of
     * a Linear-2 tile, the compute of the next Linear-2 tile as the gap */
    double rem_sum = 0;
    int n2 = 0;
    for (int b = 0; b < m->nrb; b++)
        for (int nb = 0; nb < m->l2_per_rb; nb++) {
            double rem, tot;
            xs_moe_tile_bytes(m, b, nb, &rem, &tot);
            rem_sum += rem;
            n2++;
        }
    const double mean_rem = n2 ? rem_sum / n2 : 0;
    const int k = m->grid < n2 ? m->grid : (n2 ? n2 : 1);
    xs_bg bg;
    xs_bg_eval(p, k, mean_rem, wc->c2_ns, &bg);
    /* rate: every CTA injects one tile burst per (T_iss0 + G). capacity: in a persistent grid the
     * CTAs' Linear-2 epilogues are staggered, so about K * T_iss0 / (T_iss0 + G) of them burst at
     * once (at least one) - the synchronised form would fail for every 64 KB tile burst */
    double keff = k * bg.t_iss0_ns / (bg.t_iss0_ns + wc->c2_ns);
    if (keff < 1)
        keff = 1;
    const int cap_ok = keff * mean_rem - p->drain_bytes_per_ns * bg.t_iss0_ns <= xs_capacity(p, k);
    out->criterion_ok = mean_rem <= 0 || (bg.rate_ok && cap_ok);
    /* reshaping: the same bursts spread evenly over the part of the kernel where any order can
     * have them: from the earliest possible first combine store (one Linear-1 tile, then one
     * Linear-2 tile of its row block: c1 + c2 of the local control) to the end of the local
     * control's kernel. Run 5 counted the fill as room for bursts (the whole kernel), so rows with
     * drain ~ compute passed the rate part although fill + drain exceeds the kernel. */
    const double kern = wc->kernel_ns > 0 && (inter.kernel_ns <= 0 || wc->kernel_ns <
                        inter.kernel_ns) ? wc->kernel_ns : inter.kernel_ns;
    out->fill_ns = wc->c1_ns + wc->c2_ns;
    {
        const double per_cta = n2 ? (double)n2 / m->grid : 0;
        const double room = kern - out->fill_ns;
        double gs = per_cta > 0 && room > 0 ? room / per_cta - bg.t_iss0_ns : wc->c2_ns;
        if (gs < 0)
            gs = 0;
        xs_bg bs;
        xs_bg_eval(p, k, mean_rem, gs, &bs);
        double ks = k * bs.t_iss0_ns / (bs.t_iss0_ns + gs);
        if (ks < 1)
            ks = 1;
        out->reshape_ok = mean_rem <= 0 ||
                          (bs.rate_ok && ks * mean_rem - p->drain_bytes_per_ns * bs.t_iss0_ns <=
                                             xs_capacity(p, k));
    }

    /* the model's times with and without the link; each order scaled by its local control */
    int2 *tasks = (int2 *)malloc(sizeof(int2) * (size_t)(ntask + 1));
    if (!tasks)
        return xs_seterr(XS_ENOMEM, "moe: out of host memory for a task list");
    xs_status st = XS_OK;
#define XS_AUTO_SIM(plan_, costs_, link_, out_)                                                  \
    do {                                                                                       \
        if (st == XS_OK) {                                                                     \
            const int n_ = xs_moe_build_tasks(m, &(plan_), tasks);                            \
            st = xs_moe_predict_tasks(m, tasks, n_, &(plan_), p, mm, costs_, link_, NULL,      \
                                      out_);                                                   \
        }                                                                                      \
    } while (0)
    double w_link = NAN, w_loc = NAN;
    xs_moe_plan wave = {XS_MOE_WAVE, 0, 0, 0, 0};
    XS_AUTO_SIM(wave, wc, 1, &w_link);
    XS_AUTO_SIM(wave, wc, 0, &w_loc);
    const double fw = wc->kernel_ns > 0 && w_loc > 0 ? wc->kernel_ns / w_loc : 1.0;
    out->wave_ns = w_link * fw;
    const int d0 = xs_moe_default_lead(m);
    double fi = 1.0, i_loc = NAN;
    {
        xs_moe_plan ip = {XS_MOE_INTERLEAVED, d0, 0, 0, 0};
        XS_AUTO_SIM(ip, &inter, 0, &i_loc);
        if (inter.kernel_ns > 0 && i_loc > 0)
            fi = inter.kernel_ns / i_loc;
    }
    const int leads[3] = {d0, 2 * d0, d0 / 2 > 1 ? d0 / 2 : 1};
    double best = INFINITY;
    int best_lead = d0;
    for (int i = 0; i < 3; i++) {
        if (i && leads[i] == leads[0])
            continue;
        xs_moe_plan ip = {XS_MOE_INTERLEAVED, leads[i], 0, 0, 0};
        double t = NAN;
        XS_AUTO_SIM(ip, &inter, 1, &t);
        if (t * fi < best) {
            best = t * fi;
            best_lead = leads[i];
        }
    }
    out->inter_ns = best;
    const double rp = mm->pace_drain_frac > 0 ? mm->pace_drain_frac * p->drain_bytes_per_ns : 0;
    /* pacing is a reshaping action: only where the wave order's bursts fail the criterion (where it
     * holds, piggyback: the stores leave as they come) */
    xs_moe_plan paced_plan = {XS_MOE_INTERLEAVED, best_lead, 0, mm->pace_bytes, rp};
    if (mm->pace_bytes > 0 && rp > 0 && mean_rem > 0 && !out->criterion_ok) {
        xs_moe_plan pp = paced_plan;
        double t = NAN;
        if (mm->paced_lead > 0) {
            pp.lead = mm->paced_lead;
            pp.lead_end = mm->paced_lead_end;
        }
        XS_AUTO_SIM(pp, &inter, 1, &t);
        out->paced_ns = t * fi;
        if (mm->lead_search && mm->paced_lead <= 0) {
            /* the lead the unpaced order likes best need not be the paced order's: a paced
             * link has room in the middle of the kernel, and the last `lead` row blocks'
             * Linear-2 tiles, which follow the last Linear-1 tile, meet the pacer together
             * (docs/EP.md, "Run 21"). Leads D/2..2D; around D also tapers to 1/2, 2/3 and 3/4
             * of the lead where Linear-1 ends */
            out->paced_plain_ns = out->paced_ns;
            xs_moe_plan best_pp = pp;
            double best_t = out->paced_ns;
            const int cand[6] = {3 * d0 / 4, d0, 5 * d0 / 4, d0 / 2, 3 * d0 / 2, 2 * d0};
            for (int i = 0; i < 6; i++) {
                const int L = cand[i] > 1 ? cand[i] : 1;
                const int ends[4] = {0, L / 2, 2 * L / 3, 3 * L / 4};
                for (int j = 0; j < (i < 3 ? 4 : 1); j++) {
                    if ((j && (ends[j] < 1 || ends[j] >= L || ends[j] == ends[j - 1])) ||
                        (!j && L == pp.lead))
                        continue;
                    xs_moe_plan q = pp;
                    q.lead = L;
                    q.lead_end = ends[j];
                    double tq = NAN;
                    XS_AUTO_SIM(q, &inter, 1, &tq);
                    if (tq * fi < best_t) {
                        best_t = tq * fi;
                        best_pp = q;
                    }
                }
            }
            /* a 1 % margin against the model's own error, as for pacing */
            if (best_t <= 0.99 * out->paced_ns) {
                pp = best_pp;
                out->paced_ns = best_t;
            }
        }
        paced_plan = pp;
        /* the same on the spilling kernel: held-back tiles do not hold their CTAs */
        pp.spill_depth = XS_MOE_SPILL_DEPTH;
        t = NAN;
        XS_AUTO_SIM(pp, &inter, 1, &t);
        out->spill_ns = t * fi;
    }
    /* adaptive: the CTAs choose Linear-2 tiles at the link's pace (xs_moe_take_adaptive); its
     * compute is taken to be the interleaved order's (scaled by that control) */
    if (mm->pace_bytes > 0 && rp > 0 && mean_rem > 0) {
        xs_moe_plan ap = {XS_MOE_ADAPTIVE, 0, 0, mm->pace_bytes, rp, 0, 0,
                          inter.c2_ns + mm->pace_bytes / rp};
        double t = NAN;
        XS_AUTO_SIM(ap, &inter, 1, &t);
        out->adaptive = ap;
        out->adaptive_ns = t * fi;
    }
    /* couriers: in the order whose local control is faster (the model's local times where
     * none was measured), ready times from that control's per-tile stamps (or the model's
     * local trace of it, scaled to the control's kernel time) */
    int ncand = 0, cand[2];
    if (mm->couriers == XS_MOE_COURIERS_AUTO) {
        cand[ncand++] = 4;
        cand[ncand++] = 8;
    } else if (mm->couriers > 0) {
        cand[ncand++] = mm->couriers;
    }
    const double rc = mm->courier_pace_frac > 0 ? mm->courier_pace_frac * p->drain_bytes_per_ns
                                                : 0;
    int c_inter = 0;
    double c_kern = NAN;
    double *c_ready = NULL, *c_bytes = NULL, *c_scaled = NULL;
    int c_n = 0;
    if (st == XS_OK && ncand && rc > 0 && mean_rem > 0) {
        const double kw = wc->kernel_ns > 0 ? wc->kernel_ns : w_loc;
        const double ki = inter.kernel_ns > 0 ? inter.kernel_ns : i_loc * fi;
        c_inter = ki < kw;
        c_kern = c_inter ? ki : kw;
        const xs_moe_tile *tr = lt ? (c_inter ? lt->inter : lt->wave) : NULL;
        int ntr = lt ? (c_inter ? lt->ninter : lt->nwave) : 0;
        xs_moe_tile *own = NULL;
        double scale = 1.0;
        if (!tr || ntr <= 0) {
            /* the model's local trace of the order, scaled to the measured kernel time */
            own = (xs_moe_tile *)calloc((size_t)ntask + 1, sizeof *own);
            if (!own) {
                st = xs_seterr(XS_ENOMEM, "moe: out of host memory for a trace");
            } else {
                xs_moe_plan op = {c_inter ? XS_MOE_INTERLEAVED : XS_MOE_WAVE, c_inter ? d0 : 0,
                                  0, 0, 0};
                double t_loc = NAN;
                const int n_ = xs_moe_build_tasks(m, &op, tasks);
                st = xs_moe_predict_tasks(m, tasks, n_, &op, p, mm, c_inter ? &inter : wc, 0,
                                          own, &t_loc);
                scale = t_loc > 0 ? c_kern / t_loc : 1.0;
            }
            tr = own;
            ntr = ntask;
        }
        c_ready = (double *)malloc(sizeof(double) * (size_t)(ntr + 1));
        c_bytes = (double *)malloc(sizeof(double) * (size_t)(ntr + 1));
        c_scaled = (double *)malloc(sizeof(double) * (size_t)(ntr + 1));
        if (st == XS_OK && (!c_ready || !c_bytes || !c_scaled))
            st = xs_seterr(XS_ENOMEM, "moe: out of host memory for ready times");
        if (st == XS_OK)
            c_n = xs_moe_ready_of(m, tr, ntr, scale, c_ready, c_bytes);
        free(own);
        for (int i = 0; st == XS_OK && i < ncand; i++) {
            const int C = cand[i];
            if (C < 1 || C >= m->grid)
                continue;
            const double sc = (double)m->grid / (m->grid - C);
            for (int j = 0; j < c_n; j++)
                c_scaled[j] = c_ready[j] * sc;
            const double comp = c_kern * sc;
            /* the couriers drain at their pace, or at what C of them copy (measured) */
            const double rcc = mm->courier_copy_bytes_per_ns > 0 &&
                                       C * mm->courier_copy_bytes_per_ns < rc
                                   ? C * mm->courier_copy_bytes_per_ns
                                   : rc;
            const double link = xs_moe_courier_drain(c_scaled, c_bytes, c_n, C, rcc);
            const double t = link > comp ? link : comp;
            if (!isnan(out->courier_ns) && !(t < out->courier_ns))
                continue; /* the best candidate so far stays */
            xs_moe_plan cp = {c_inter ? XS_MOE_INTERLEAVED : XS_MOE_WAVE,
                              c_inter ? xs_moe_default_lead_ctas(m, m->grid - C) : 0, 0, 0, 0,
                              C, rc};
            out->courier = cp;
            out->courier_ns = t;
            out->courier_compute_ns = comp;
            out->courier_link_ns = link;
        }
    }
    free(c_ready);
    free(c_bytes);
    free(c_scaled);
#undef XS_AUTO_SIM
    free(tasks);
    XS_TRY(st);
    out->plan = wave;
    out->auto_ns = out->wave_ns;
    /* drain-bound (remote bytes / R >= 0.9 x the local control's kernel): pace unless predicted
     * more than 5 % slower. Run 5 measured the model's bias there (docs/EP.md, "Run 5"): unpaced
     * interleaved 3-14 % slower than predicted on all 8 such rows, paced within -5..+4 % (5 rows);
     * the unpaced ones ended at 1.24-1.35 x the drain where drain > compute, the paced ones at
     * 1.09-1.14 x. Elsewhere pace unless predicted more than 1 % slower: in the 12 host-path
     * sweeps of runs 5-12 every row that auto paced (28-40 a sweep) ran faster than unpaced
     * interleaved (auto / interleaved <= 0.994), and the one row that it did not pace in run 12
     * (qwen3-30b-a3b balanced T=2048: pacing predicted 0.6 % faster, under the old 1 % rule) ended
     * at 1.19 x bound_us, the sweep's worst. */
    const double drain_ns = rem_sum / p->drain_bytes_per_ns;
    out->drain_bound = kern > 0 && drain_ns >= 0.9 * kern;
    const int paced = out->paced_ns < out->inter_ns * (out->drain_bound ? 1.05 : 1.01);
    const double alt = paced ? out->paced_ns : out->inter_ns;
    const char *crit = mean_rem <= 0       ? "no remote combine bytes"
                       : out->criterion_ok ? "criterion met"
                       : out->reshape_ok   ? "criterion fails, reshaping meets it"
                                           : "criterion fails even reshaped";
    if (alt <= out->wave_ns * 0.98) {
        out->plan.kind = XS_MOE_INTERLEAVED;
        out->plan.lead = best_lead;
        if (paced)
            out->plan = paced_plan; /* its lead (and taper) may differ: the lead search */
        out->auto_ns = alt;
        /* spilling: where auto paces, if predicted >= 1 % faster (and allowed) */
        const int spill = paced && mm->auto_spill && out->spill_ns <= 0.99 * out->paced_ns;
        if (spill) {
            out->plan.spill_depth = XS_MOE_SPILL_DEPTH;
            out->auto_ns = out->spill_ns;
        }
        char taper[48] = "";
        if (out->plan.lead_end > 0)
            snprintf(taper, sizeof taper, " tapering to %d", out->plan.lead_end);
        snprintf(out->how, sizeof out->how, "%s (%.1f B/ns vs R %.1f): interleaved D=%d%s%s "
                 "predicted %.1f us vs wave %.1f us (unpaced %.1f us)", crit,
                 bg.injection_bytes_per_ns, p->drain_bytes_per_ns, out->plan.lead, taper,
                 !paced                                     ? ""
                 : out->paced_ns < out->inter_ns * 0.99     ? " paced"
                 : out->drain_bound                         ? " paced (drain-bound)"
                                                            : " paced (within 1 %)",
                 alt / 1e3, out->wave_ns / 1e3, out->inter_ns / 1e3);
        if (paced && !isnan(out->paced_plain_ns) &&
            (out->plan.lead != best_lead || out->plan.lead_end > 0)) {
            const size_t k = strlen(out->how);
            snprintf(out->how + k, sizeof out->how - k, "; paced at D=%d without taper "
                     "predicted %.1f us", best_lead, out->paced_plain_ns / 1e3);
        }
        if (paced) {
            const size_t k = strlen(out->how);
            snprintf(out->how + k, sizeof out->how - k, "; spilling predicted %.1f us%s",
                     out->spill_ns / 1e3,
                     spill                                      ? ": chosen"
                     : out->spill_ns <= 0.99 * out->paced_ns     ? ": not chosen (--no-auto-spill)"
                                                                : ": not chosen (< 1 % gain)");
        }
    } else if (mean_rem <= 0) {
        /* N = 1 (or no row for ranks 1..N-1): every combine store goes to this GPU's memory */
        snprintf(out->how, sizeof out->how, "piggyback: no remote combine bytes (N=%d: every "
                 "row is stored locally), nothing reaches the X-Stage; keep wave", m->N);
    } else {
        snprintf(out->how, sizeof out->how, "keep wave: %s (%.1f B/ns vs R %.1f); interleaved "
                 "predicted %.1f us vs wave %.1f us (< 2 %% gain)", crit,
                 bg.injection_bytes_per_ns, p->drain_bytes_per_ns, alt / 1e3,
                 out->wave_ns / 1e3);
    }
    if (out->adaptive.kind == XS_MOE_ADAPTIVE) {
        const int better = out->adaptive_ns <= 0.98 * out->auto_ns;
        const int take = better && mm->auto_adaptive;
        const size_t k = strlen(out->how);
        snprintf(out->how + k, sizeof out->how - k, "; adaptive (lookahead %.1f us) predicted "
                 "%.1f us%s", out->adaptive.admit_ahead_ns / 1e3, out->adaptive_ns / 1e3,
                 take ? ": chosen" : better ? ": not chosen (--auto-adaptive off)"
                                            : ": not chosen (< 2 % gain)");
        if (take) {
            out->plan = out->adaptive;
            out->auto_ns = out->adaptive_ns;
        }
    }
    /* couriers replace that decision only if predicted >= 2 % faster than it (the margin an
     * order change needs): the prediction has no measured bias yet */
    if (out->courier.couriers > 0) {
        const int better = out->courier_ns <= 0.98 * out->auto_ns;
        const int take = better && mm->auto_couriers;
        const size_t k = strlen(out->how);
        snprintf(out->how + k, sizeof out->how - k, "; couriers C=%d %s at %.2f R predicted "
                 "%.1f us (compute %.1f, link %.1f)%s", out->courier.couriers,
                 xs_moe_sched_name(out->courier.kind), rc / p->drain_bytes_per_ns,
                 out->courier_ns / 1e3, out->courier_compute_ns / 1e3,
                 out->courier_link_ns / 1e3,
                 take ? ": chosen" : better ? ": not chosen (--auto-couriers off)"
                                            : ": not chosen (< 2 % gain)");
        if (take) {
            out->plan = out->courier;
            out->auto_ns = out->courier_ns;
        }
    }
    return XS_OK;
}
