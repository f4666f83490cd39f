// SPDX-License-Identifier: Apache-2.0
/*
 * tp_info.c - TP shapes and plans (include/xstage_tp.h): operation and slot-layout names, what a
 * shape derives (xs_tp_info_of), the plan of one rank and its courier settings, the courier
 * walk's accessors, and the fixed pace candidates of the shaped order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_plan.h"

static const char *const tp_op_names[XS_TP_NOPS] = {"gemm_rs", "ag_gemm", "mlp"};

const char *xs_tp_op_name(xs_tp_op op)
{
    return (unsigned)op < XS_TP_NOPS ? tp_op_names[op] : "?";
}

xs_status xs_tp_op_parse(const char *s, xs_tp_op *op)
{
    for (int i = 0; i < XS_TP_NOPS; i++)
        if (s && !strcmp(s, tp_op_names[i])) {
            *op = (xs_tp_op)i;
            return XS_OK;
        }
    return xs_seterr(XS_EINVAL, "unknown tp operation '%s' (gemm_rs, ag_gemm or mlp)",
                     s ? s : "");
}

static size_t tp_align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

xs_status xs_tp_info_of(const xs_tp_shape *s, xs_tp_info *in)
{
    memset(in, 0, sizeof *in);
    if (!s)
        return xs_seterr(XS_EINVAL, "tp: no shape");
    const char *op = xs_tp_op_name(s->op);
    if ((unsigned)s->op >= XS_TP_NOPS)
        return xs_seterr(XS_EINVAL, "tp: operation %d unknown", (int)s->op);
    const int P = s->peers, m = s->m, n = s->n, k = s->k;
    if (P < 1 || P > XS_MAX_RANKS)
        return xs_seterr(XS_EINVAL, "tp %s: peers %d outside 1..%d", op, P, XS_MAX_RANKS);
    if (m < 1 || n < 1 || k < 1 || m > (1 << 24) || n > (1 << 24) || k > (1 << 24))
        return xs_seterr(XS_EINVAL, "tp %s: m=%d n=%d k=%d must be in 1..16M", op, m, n, k);
    if (m % (XS_TP_BM * P))
        return xs_seterr(XS_EINVAL, "tp %s: m=%d is not a multiple of %d x peers %d (every rank "
                         "owns whole 128-row blocks)", op, m, XS_TP_BM, P);
    in->rs_rows = m / P;
    in->tiles_m = m / XS_TP_BM;
    in->rs_gemm = -1;
    switch (s->op) {
    case XS_TP_GEMM_RS:
        if (k % (8 * P))
            return xs_seterr(XS_EINVAL, "tp gemm_rs: k=%d must be a multiple of 8 x peers %d "
                             "(k/P is the GEMM's K, 16-byte loads)", k, P);
        if (n % 8)
            return xs_seterr(XS_EINVAL, "tp gemm_rs: n=%d is not a multiple of 8 (16-byte "
                             "stores and reductions)", n);
        in->ngemm = 1;
        in->gm[0] = m, in->gn[0] = n, in->gk[0] = k / P, in->out_n[0] = n;
        in->rs_gemm = 0;
        in->rs_n = n;
        break;
    case XS_TP_AG_GEMM:
        if (n % (8 * P))
            return xs_seterr(XS_EINVAL, "tp ag_gemm: n=%d must be a multiple of 8 x peers %d "
                             "(n/P output columns, 16-byte stores)", n, P);
        if (k % 8)
            return xs_seterr(XS_EINVAL, "tp ag_gemm: k=%d is not a multiple of 8", k);
        in->ngemm = 1;
        in->gm[0] = m, in->gn[0] = n / P, in->gk[0] = k, in->out_n[0] = n / P;
        in->ag = 1;
        in->ag_k = k;
        break;
    case XS_TP_MLP:
        if (k % (16 * P))
            return xs_seterr(XS_EINVAL, "tp mlp: intermediate k=%d must be a multiple of 16 x "
                             "peers %d (SwiGLU groups of 16 per rank)", k, P);
        if (n % 8)
            return xs_seterr(XS_EINVAL, "tp mlp: hidden n=%d is not a multiple of 8", n);
        in->ngemm = 2;
        in->gm[0] = m, in->gn[0] = 2 * (k / P), in->gk[0] = n, in->out_n[0] = k / P;
        in->swiglu0 = 1;
        in->gm[1] = m, in->gn[1] = n, in->gk[1] = k / P, in->out_n[1] = n;
        in->rs_gemm = 1;
        in->rs_n = n;
        in->ag = 1;
        in->ag_k = n;
        break;
    }
    for (int g = 0; g < in->ngemm; g++) {
        in->tiles_n[g] = (in->gn[g] + XS_TP_BN - 1) / XS_TP_BN;
        in->tiles[g] = in->tiles_m * in->tiles_n[g];
        in->flops += 2.0 * in->gm[g] * (double)in->gn[g] * in->gk[g];
    }
    if (in->ag) {
        in->ag_bytes = (size_t)m * in->ag_k * 2;
        in->shard_bytes = (size_t)in->rs_rows * in->ag_k * 2;
        in->ag_chunks = (int)((in->shard_bytes + XS_TP_CHUNK - 1) / XS_TP_CHUNK);
        in->push_tasks = (P - 1) * in->ag_chunks;
        in->ag_remote_bytes = (double)(P - 1) * in->shard_bytes;
    }
    in->rs_off = tp_align_up(in->ag_bytes, 4096);
    in->window_bytes = in->rs_off;
    in->rs_flag0 = in->ag ? P * in->ag_chunks : 0;
    in->nflags = in->rs_flag0;
    if (in->rs_gemm >= 0) {
        in->slot_bytes = (size_t)in->rs_rows * in->rs_n * 2;
        in->t_own = (in->rs_rows / XS_TP_BM) * in->tiles_n[in->rs_gemm];
        in->reduce_tasks = in->t_own;
        in->window_bytes += (size_t)P * in->slot_bytes;
        in->nflags += P * in->t_own;
        in->rs_remote_bytes = (double)(P - 1) * in->slot_bytes;
    }
    if (in->nflags < 1)
        in->nflags = 1;
    if ((double)in->nflags > 268435455.0)
        return xs_seterr(XS_ERANGE, "tp %s: %d flags per window are too many", op, in->nflags);
    return XS_OK;
}

static const char *const tp_layout_names[2] = {"row", "tile"};

const char *xs_tp_layout_name(xs_tp_layout l)
{
    return (unsigned)l < 2 ? tp_layout_names[l] : "?";
}

xs_status xs_tp_layout_parse(const char *s, xs_tp_layout *l)
{
    for (int i = 0; i < 2; i++)
        if (s && !strcmp(s, tp_layout_names[i])) {
            *l = (xs_tp_layout)i;
            return XS_OK;
        }
    return xs_seterr(XS_EINVAL, "tp: slot layout '%s': expected row or tile", s ? s : "");
}



/* ---- the plan of one rank ---------------------------------------------------------------------- */

xs_status xs_tp_plan_init(xs_tp_plan *pl, const xs_tp_shape *s, int rank, int grid)
{
    memset(pl, 0, sizeof *pl);
    xs_tp_info in;
    XS_TRY(xs_tp_info_of(s, &in));
    if (rank < 0 || rank >= s->peers)
        return xs_seterr(XS_EINVAL, "tp %s: rank %d outside 0..%d", xs_tp_op_name(s->op), rank,
                         s->peers - 1);
    if (grid < 1 || grid > 1 << 20)
        return xs_seterr(XS_EINVAL, "tp %s: grid %d outside 1..%d", xs_tp_op_name(s->op), grid,
                         1 << 20);
    pl->s = *s;
    pl->in = in;
    pl->grid = grid;
    pl->me = rank;
    pl->P = s->peers;
    pl->cour_rate = XS_TP_COURIER_RATE;
    return XS_OK;
}

void xs_tp_plan_release(xs_tp_plan *pl)
{
    for (int i = 0; i < XS_TP_SLOTS; i++) {
        free(pl->tasks[i]);
        free(pl->walk[i]);
        pl->tasks[i] = NULL;
        pl->walk[i] = NULL;
        pl->ntasks[i] = pl->nwalk[i] = pl->npush[i] = 0;
    }
}

xs_status xs_tp_plan_create(const xs_tp_shape *s, int rank, int grid, xs_tp_plan **out)
{
    *out = NULL;
    xs_tp_plan tmp;
    XS_TRY(xs_tp_plan_init(&tmp, s, rank, grid));
    xs_tp_plan *pl = (xs_tp_plan *)malloc(sizeof *pl);
    if (!pl)
        return xs_seterr(XS_ENOMEM, "tp: out of host memory");
    *pl = tmp;
    *out = pl;
    return XS_OK;
}

void xs_tp_plan_destroy(xs_tp_plan *pl)
{
    if (!pl)
        return;
    xs_tp_plan_release(pl);
    free(pl);
}

xs_status xs_tp_plan_check_couriers(const xs_tp_plan *pl, int couriers)
{
    const char *op = xs_tp_op_name(pl->s.op);
    if (couriers < 0 || couriers > XS_TP_COURIERS_MAX || couriers >= pl->grid)
        return xs_seterr(XS_EINVAL, "tp %s: %d couriers outside 0..%d (and below the grid of %d)",
                         op, couriers, XS_TP_COURIERS_MAX, pl->grid);
    if (couriers > 0 && pl->in.rs_gemm < 0 && !(pl->in.ag && pl->P > 1))
        return xs_seterr(XS_EINVAL, "tp %s: couriers carry reduce-scatter tiles and all-gather "
                         "pushes, and this operation has neither (P = %d)", op, pl->P);
    return XS_OK;
}

xs_status xs_tp_plan_set_couriers(xs_tp_plan *pl, int couriers)
{
    XS_TRY(xs_tp_plan_check_couriers(pl, couriers));
    pl->couriers = couriers;
    return XS_OK;
}

/* *to = bytes_per_ns when it is 0 (what0: "unpaced", "no limit") or in 0.1..1e6 B/ns: below 0.1
 * B/ns a 64 KiB tile would take over 0.6 ms of pacing per courier. */
static xs_status tp_set_courier_bytes_per_ns(double *to, double bytes_per_ns, const char *what,
                                             const char *what0)
{
    if (!(bytes_per_ns == 0 || (bytes_per_ns >= 0.1 && bytes_per_ns <= 1e6)))
        return xs_seterr(XS_EINVAL, "tp: courier %s %.3g B/ns (0 = %s, else 0.1..1e6)", what,
                         bytes_per_ns, what0);
    *to = bytes_per_ns;
    return XS_OK;
}

xs_status xs_tp_plan_set_courier_pace(xs_tp_plan *pl, double bytes_per_ns)
{
    return tp_set_courier_bytes_per_ns(&pl->cour_pace, bytes_per_ns, "pace", "unpaced");
}

xs_status xs_tp_plan_set_courier_rate(xs_tp_plan *pl, double bytes_per_ns)
{
    return tp_set_courier_bytes_per_ns(&pl->cour_rate, bytes_per_ns, "rate", "no limit");
}

int xs_tp_order_couriers(const xs_tp_plan *pl, int slot)
{
    return slot >= 0 && slot < XS_TP_SLOTS && pl->ntasks[slot] ? pl->scour[slot] : 0;
}

int xs_tp_order_walk_pushes(const xs_tp_plan *pl, int slot)
{
    return slot >= 0 && slot < XS_TP_SLOTS && pl->ntasks[slot] ? pl->npush[slot] : 0;
}

int xs_tp_order_walk(const xs_tp_plan *pl, int slot, const int **pos)
{
    if (slot < 0 || slot >= XS_TP_SLOTS || !pl->ntasks[slot]) {
        *pos = NULL;
        return 0;
    }
    *pos = pl->walk[slot];
    return pl->nwalk[slot];
}


/* ---- paces ------------------------------------------------------------------------------------- */

int xs_tp_candidates(double cap_q, xs_tp_pace *out, int max)
{
    const double fin[3] = {0.6, 0.8, 0.95}, bur[2] = {0, 1.5}, cap[2] = {0, cap_q};
    const double ring_fin[3] = {0.3, 0.6, 0.95};
    int n = 0;
    for (int sp = 0; sp < 3; sp++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < (sp ? 1 : 2); c++)
                    if (n < max) {
                        const xs_tp_pace p = {fin[a], bur[b], cap[c], 2, sp, 0, 0};
                        out[n++] = p;
                    }
    for (int a = 0; a < 3 && n < max; a++) {
        const xs_tp_pace p = {ring_fin[a], 0, 0, 2, 1, 1, 0};
        out[n++] = p;
    }
    return n;
}

void xs_tp_pace_front(xs_tp_pace *p)
{
    const xs_tp_pace f = {0.05, 0, 0, 2, 0, 1, 0};
    *p = f;
}
