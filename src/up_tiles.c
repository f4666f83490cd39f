// SPDX-License-Identifier: Apache-2.0
/*
 * up_tiles.c - the attention kernel's tile geometry on the host (query blocks x heads, the
 * snake and early orders, the couriers' walk) and the couriers' prediction (docs/UP.md
 * "Couriers"). The orders themselves are the kernel's XS_HD helpers in include/xstage_up.h.
 */
#include <stdlib.h>
#include <string.h>

#include "xstage_up.h"

/* ---- tile order (must match xs_attn_cta) ------------------------------------------------- */

int xs_attn_tiles(int seq, int heads)
{
    return (seq + XS_ATTN_BM - 1) / XS_ATTN_BM * heads;
}

int xs_attn_remote_tiles(int seq, int heads, int rows_per_rank)
{
    return xs_attn_remote_count(seq, heads, rows_per_rank);
}

int xs_attn_cta_count(int tiles, int grid, int cta)
{
    return xs_attn_count_below(tiles, grid, cta);
}

int xs_attn_cta_tile(int order, int tiles, int remote, int grid, int cta, int k)
{
    return xs_attn_cta_kth(order == XS_ATTN_ORDER_EARLY ? remote : 0, grid, cta, k);
}

int xs_attn_tile_row0(int seq, int heads, int t)
{
    int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
    return (nqb - 1 - t / heads) * XS_ATTN_BM;
}

int xs_attn_tile_iters(int seq, int heads, int causal, int t)
{
    int q0 = xs_attn_tile_row0(seq, heads, t);
    int last = (q0 + XS_ATTN_BM < seq ? q0 + XS_ATTN_BM : seq) - 1;
    return causal ? last / XS_ATTN_BN + 1 : (seq + XS_ATTN_BN - 1) / XS_ATTN_BN;
}

int xs_attn_courier_tiles(int order, int tiles, int remote, int ncompute, int *list)
{
    if (!list || tiles < 1 || remote < 0 || remote > tiles || ncompute < 1 || ncompute > tiles)
        return -1;
    xs_attn_rwalk w;
    xs_attn_rwalk_init(&w, order == XS_ATTN_ORDER_EARLY ? remote : 0, ncompute, remote);
    int n = 0, t;
    while ((t = xs_attn_rwalk_next(&w)) >= 0 && n < remote)
        list[n++] = t;
    return n;
}

/* ---- the couriers' prediction (host; docs/UP.md "Couriers") ------------------------------- */

xs_status xs_attn_courier_predict(int order, int tiles, int remote, int ncompute,
                                             int couriers, const double *dur_ns,
                                             const double *copy_bytes, double rate_bytes_per_ns,
                                             double overhead_ns, xs_attn_courier_pred *out)
{
    if (!out || !dur_ns || tiles < 1 || remote < 0 || remote > tiles || ncompute < 1 ||
        ncompute > tiles || couriers < 0 || (couriers > 0 && !copy_bytes) ||
        (couriers > 0 && !(rate_bytes_per_ns > 0)) || !(overhead_ns >= 0))
        return xs_seterr(XS_EINVAL, "courier prediction: bad arguments (%d tiles, %d remote, %d "
                         "compute CTAs, %d couriers, rate %g B/ns)", tiles, remote, ncompute,
                         couriers, rate_bytes_per_ns);
    memset(out, 0, sizeof *out);
    double *ready = (double *)malloc((size_t)tiles * sizeof(double));
    double *free_at = (double *)calloc((size_t)(couriers > 0 ? couriers : 1), sizeof(double));
    if (!ready || !free_at) {
        free(ready);
        free(free_at);
        return xs_seterr(XS_ENOMEM, "courier prediction: out of memory for %d tiles", tiles);
    }
    /* the compute CTAs: each walks its tiles back to back; a tile is ready at its end */
    for (int b = 0; b < ncompute; b++) {
        const int m = xs_attn_cta_count(tiles, ncompute, b);
        double t_b = 0;
        for (int k = 0; k < m; k++) {
            const int t = xs_attn_cta_tile(order, tiles, remote, ncompute, b, k);
            t_b += dur_ns[t];
            ready[t] = t_b;
        }
        if (t_b > out->compute_end_ns)
            out->compute_end_ns = t_b;
    }
    /* the couriers: the walk's j-th tile to courier j % C, served in order at rate / C */
    if (couriers > 0 && remote > 0) {
        const double rc = rate_bytes_per_ns / couriers;
        xs_attn_rwalk w;
        xs_attn_rwalk_init(&w, order == XS_ATTN_ORDER_EARLY ? remote : 0, ncompute, remote);
        int t;
        for (int j = 0; (t = xs_attn_rwalk_next(&w)) >= 0; j++) {
            double *f = &free_at[j % couriers];
            *f = (*f > ready[t] ? *f : ready[t]) + overhead_ns + copy_bytes[t] / rc;
            if (*f > out->link_end_ns)
                out->link_end_ns = *f;
        }
    }
    out->span_ns = out->compute_end_ns > out->link_end_ns ? out->compute_end_ns
                                                          : out->link_end_ns;
    free(ready);
    free(free_at);
    return XS_OK;
}
