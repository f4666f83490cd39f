// SPDX-License-Identifier: Apache-2.0
/*
 * ep_overlap.c - the pieces of EP's overlapped unfused pipeline (include/xstage_overlap.h,
 * xs_moe_ovplan): the rows reordered piece-major then by expert, each piece's GEMM groups and
 * its combine copies, from the host problem alone (no GPU). cuda/ep/ep_overlap.cu runs it.
 */
#include <stdlib.h>
#include <string.h>

#include "xstage_overlap.h"

void xs_moe_ovplan_destroy(xs_moe_ovplan *p)
{
    if (!p)
        return;
    free(p->perm);
    free(p->piece_off);
    free(p->grp_off);
    free(p->grp_rows);
    free(p->seg_off);
    free(p->seg_rank);
    free(p->seg_start);
    free(p->seg_bytes);
    free(p);
}

/* Destination order of the ranks: the host windows first, rank 0 (local) last. */
static int ov_rank_at(int j, int N)
{
    return N > 1 ? (j + 1) % N : 0;
}

xs_status xs_moe_ovplan_create(const xs_moe_problem *pb, int chunks, xs_moe_ovplan **out)
{
    *out = NULL;
    const int C = chunks, N = pb->N, E = pb->E, T = pb->T, K = pb->K;
    if (C < 1 || C > XS_MOE_OV_MAX_CHUNKS || C > T)
        return xs_seterr(XS_EINVAL, "ep overlapped: %d chunks for %d tokens (1..%d, at most "
                         "one per token)", C, T, XS_MOE_OV_MAX_CHUNKS);
    xs_moe_ovplan *p = (xs_moe_ovplan *)calloc(1, sizeof *p);
    long long *base = (long long *)calloc((size_t)N, sizeof(long long));
    int *piece_of = (int *)malloc(sizeof(int) * (size_t)(pb->rows ? pb->rows : 1));
    int *fill = (int *)calloc((size_t)C * E, sizeof(int));
    if (p) {
        p->chunks = C, p->rows = pb->rows, p->experts = E;
        p->perm = (int *)malloc(sizeof(int) * (size_t)(pb->rows ? pb->rows : 1));
        p->piece_off = (int *)calloc((size_t)C + 1, sizeof(int));
        p->grp_off = (int *)calloc((size_t)C * E, sizeof(int));
        p->grp_rows = (int *)calloc((size_t)C * E, sizeof(int));
        p->seg_off = (int *)calloc((size_t)C + 1, sizeof(int));
        /* a piece touches at most the ranks its token range spans: C + N - 1 in all */
        p->seg_rank = (int *)malloc(sizeof(int) * (size_t)(C + N));
        p->seg_start = (size_t *)malloc(sizeof(size_t) * (size_t)(C + N));
        p->seg_bytes = (size_t *)malloc(sizeof(size_t) * (size_t)(C + N));
    }
    if (!p || !base || !piece_of || !fill || !p->perm || !p->piece_off || !p->grp_off ||
        !p->grp_rows || !p->seg_off || !p->seg_rank || !p->seg_start || !p->seg_bytes) {
        xs_moe_ovplan_destroy(p);
        free(base), free(piece_of), free(fill);
        return xs_seterr(XS_ENOMEM, "ep overlapped: out of host memory for %d rows", pb->rows);
    }
    /* each rank's first destination ordinal; rank r holds ceil((T - r) / N) tokens */
    long long d = 0;
    for (int j = 0; j < N; j++) {
        const int r = ov_rank_at(j, N);
        base[r] = d;
        d += (T - r + N - 1) / N;
    }
    /* piece i: destination ordinals [lo_i, lo_{i+1}), lo_i = ceil(i T / C) */
    for (int gr = 0; gr < pb->rows; gr++) {
        const int t = pb->row_token[gr];
        const long long o = base[t % N] + t / N;
        const int i = (int)(o * C / T);
        piece_of[gr] = i;
        p->grp_rows[(size_t)i * E + pb->row_expert[gr]]++;
    }
    int at = 0;
    for (int i = 0; i < C; i++) {
        p->piece_off[i] = at;
        for (int e = 0; e < E; e++) {
            p->grp_off[(size_t)i * E + e] = at;
            at += p->grp_rows[(size_t)i * E + e];
        }
    }
    p->piece_off[C] = at;
    for (int gr = 0; gr < pb->rows; gr++) { /* expert-sorted order kept within a group */
        const size_t g = (size_t)piece_of[gr] * E + pb->row_expert[gr];
        p->perm[p->grp_off[g] + fill[g]++] = gr;
    }
    /* copies: piece i's ordinals intersected with each rank's, as slot byte ranges */
    const size_t tok_bytes = (size_t)K * pb->H * 2;
    int ns = 0;
    for (int i = 0; i < C; i++) {
        p->seg_off[i] = ns;
        const long long lo = ((long long)i * T + C - 1) / C, hi = ((long long)(i + 1) * T + C - 1) / C;
        for (int j = 0; j < N; j++) {
            const int r = ov_rank_at(j, N);
            const long long n_r = (T - r + N - 1) / N;
            const long long a = lo > base[r] ? lo : base[r];
            const long long b = hi < base[r] + n_r ? hi : base[r] + n_r;
            if (a >= b)
                continue;
            p->seg_rank[ns] = r;
            p->seg_start[ns] = (size_t)(a - base[r]) * tok_bytes;
            p->seg_bytes[ns] = (size_t)(b - a) * tok_bytes;
            ns++;
        }
    }
    p->seg_off[C] = ns;
    p->nseg = ns;
    free(base), free(piece_of), free(fill);
    *out = p;
    return XS_OK;
}

void xs_moe_ovplan_pieces(const xs_moe_ovplan *p, const xs_moe_problem *pb, xs_ov_ep_piece *out)
{
    const double wb = 3.0 * pb->I * pb->H * 2;
    for (int i = 0; i < p->chunks; i++) {
        xs_ov_ep_piece *q = &out[i];
        memset(q, 0, sizeof *q);
        q->rows_frac = pb->rows ? (double)(p->piece_off[i + 1] - p->piece_off[i]) / pb->rows : 0;
        int groups = 0;
        for (int e = 0; e < p->experts; e++)
            groups += p->grp_rows[(size_t)i * p->experts + e] > 0;
        q->groups = groups;
        q->calls = 2 * groups + 3;
        q->weight_bytes = groups * wb;
        for (int s = p->seg_off[i]; s < p->seg_off[i + 1]; s++) {
            if (p->seg_rank[s] == 0)
                q->local_bytes += (double)p->seg_bytes[s];
            else
                q->remote_bytes += (double)p->seg_bytes[s];
            q->copies++;
        }
    }
}
