// SPDX-License-Identifier: Apache-2.0
/*
 * model.c - the Burst-Gap closed forms (docs/MODEL.md).
 *
 * A burst of K producers x B bytes. Each producer issues at r bytes/ns after a fixed overhead o;
 * the stage holds at most Q(K) bytes and drains at R. The published forms assume the stage never
 * runs dry between bursts; the "steady" forms below also hold when it does (Q < R*(G + o)).
 */
#include <math.h>

#include "xstage.h"

static double pos(double x) { return x > 0 ? x : 0; }
static double max2(double a, double b) { return a > b ? a : b; }

/* Bytes of one producer's queue, in whole chunks as the event model holds them. */
static double queue_bytes(const xs_profile *p)
{
    return p->chunk_bytes > 0 ? floor(p->queue_bytes_per_producer / p->chunk_bytes) *
                                    p->chunk_bytes
                              : 0;
}

/* Bytes of one producer's own buffer (tandem queues), in whole chunks. */
static double buffer_bytes(const xs_profile *p)
{
    return p->chunk_bytes > 0 ? floor(p->buffer_bytes_per_producer / p->chunk_bytes) *
                                    p->chunk_bytes
                              : 0;
}

double xs_capacity(const xs_profile *p, int producers)
{
    double q = p->capacity_bytes;
    if (p->capacity_bytes_per_producer > 0) {
        double qk = (double)producers * p->capacity_bytes_per_producer;
        if (qk < q)
            q = qk;
    }
    return q + (double)producers * (queue_bytes(p) + p->reserve_bytes_per_producer +
                                    buffer_bytes(p));
}

void xs_bg_eval(const xs_profile *p, int producers, double bytes, double gap_ns, xs_bg *o)
{
    const double r = p->issue_bytes_per_ns, R = p->drain_bytes_per_ns, oh = p->issue_overhead_ns;
    const double V = (double)producers * bytes, Q = xs_capacity(p, producers);
    const double b_issue = pos(bytes - queue_bytes(p)); /* what must pass the producer's path */
    o->producers = producers;
    o->bytes_per_producer = bytes;
    o->volume_bytes = V;
    o->gap_ns = gap_ns;
    o->capacity_bytes = Q;
    o->t_iss0_ns = oh + b_issue / r;
    o->v_over_r_ns = V / R;
    o->t_period_ns = max2(o->t_iss0_ns + gap_ns, o->v_over_r_ns);
    o->t_iss_ns = max2(o->t_iss0_ns, o->v_over_r_ns - gap_ns);
    o->delta_t_iss_ns = pos(o->v_over_r_ns - gap_ns - o->t_iss0_ns);
    o->g_star_ns = pos(o->v_over_r_ns - o->t_iss0_ns);
    o->q_peak0_bytes = pos(V - R * o->t_iss0_ns);
    o->t_iss_iso_ns = oh + max2(b_issue / r, (V - Q) / R);
    /* A producer's reserve leaves the stage with it once its stores are accepted. Producers that
     * finish together (the fluid view above) keep all K reserves to the end; a producer that is
     * last by a margin (unequal shares, chunk rounds) finishes with only its own. The same holds
     * for the producers' own buffers (tandem queues): the others' have emptied into Q by then. */
    const double q_last =
        Q - (double)(producers - 1) * (p->reserve_bytes_per_producer + buffer_bytes(p));
    o->t_iss_last_ns = oh + max2(b_issue / r, (V - q_last) / R);
    o->injection_bytes_per_ns = V / (o->t_iss0_ns + gap_ns);
    /* a relative slack of 1e-9 keeps exact boundary cases (G = G*) on the safe side */
    o->rate_ok = o->injection_bytes_per_ns <= R * (1 + 1e-9);
    o->capacity_ok = o->q_peak0_bytes <= Q * (1 + 1e-9);
    o->no_backpressure = o->rate_ok && o->capacity_ok;
    /* a producer's own path passes at most r: its queue cannot shorten a period below B/r */
    o->t_iss_steady_ns = max2(max2(o->t_iss0_ns, oh + (V - Q) / R),
                              max2(o->v_over_r_ns, bytes / r) - gap_ns);
    o->t_period_steady_ns = o->t_iss_steady_ns + gap_ns;
}
