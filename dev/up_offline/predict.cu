/*
 * predict.cu - bench up's model offline (dev/up_offline/README.md): for every row of a recorded
 * `bench up` CSV, the per-CTA programs' predictions of piggyback and of the row's chosen member,
 * next to the measured times. The rows' tile times are not recorded, so each tile takes its
 * key-block iterations x one per-iteration time, scaled so that the snake replay's longest CTA
 * equals the row's fa_us: an approximation for exploring the model, not the bench's prediction.
 *
 *   predict PROFILE.json UP.csv
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cuda/attn.cuh"

/* the columns read, found once in the header */
enum { C_SEQ, C_HEADS, C_CAUSAL, C_PEERS, C_FA, C_FUSED, C_PRED, C_PB, C_SPLIT, C_ORDER, C_CRIT,
       C_KV, C_COUR, NCOL };
static const char *const col_name[NCOL] = {
    "seq", "heads", "causal", "peers", "fa_us", "fused_us", "pred_us",
    "pb_us", "split", "order", "criterion_ok", "kv_split", "couriers"};

static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = strtok(line, ",\n"); p && n < max; p = strtok(NULL, ",\n"))
        f[n++] = p;
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: predict PROFILE.json UP.csv\n");
        return 2;
    }
    xs_profile prof;
    if (xs_profile_load(argv[1], &prof) != XS_OK) {
        fprintf(stderr, "predict: %s\n", xs_errmsg());
        return 1;
    }
    FILE *in = fopen(argv[2], "r");
    if (!in) {
        fprintf(stderr, "predict: cannot open %s\n", argv[2]);
        return 1;
    }
    char line[8192];
    char *f[128];
    int ix[NCOL], nh = 0; /* ix: each column's index; nh: the header's fields (0: not read) */
    const int grid_sms = 132;
    printf("seq,heads,causal,peers,fa_us,plan,fused_us,pred_old_us,pred_us,err_pct,pb_us,"
           "pb_pred_us,pb_err_pct,pb_held_us,crit_old,crit_new,peak_mb\n");
    while (fgets(line, sizeof line, in)) {
        if (line[0] == '#')
            continue;
        const int n = split_csv(line, f, 128);
        if (!nh) {
            nh = n;
            for (int c = 0; c < NCOL; c++) {
                ix[c] = -1;
                for (int i = 0; i < n && ix[c] < 0; i++)
                    if (!strcmp(f[i], col_name[c]))
                        ix[c] = i;
                if (ix[c] < 0) {
                    fprintf(stderr, "predict: no column %s\n", col_name[c]);
                    return 2;
                }
            }
            continue;
        }
        if (n != nh) {
            fprintf(stderr, "predict: a row of %d fields under a header of %d\n", n, nh);
            return 1;
        }
        const int seq = atoi(f[ix[C_SEQ]]), heads = atoi(f[ix[C_HEADS]]);
        const int causal = atoi(f[ix[C_CAUSAL]]), peers = atoi(f[ix[C_PEERS]]);
        const double fa = atof(f[ix[C_FA]]), fused = atof(f[ix[C_FUSED]]);
        const double pred_old = atof(f[ix[C_PRED]]), pb = atof(f[ix[C_PB]]);
        const int split = atoi(f[ix[C_SPLIT]]), order = atoi(f[ix[C_ORDER]]);
        const int crit_old = atoi(f[ix[C_CRIT]]), kv = atoi(f[ix[C_KV]]);
        const int cour = atoi(f[ix[C_COUR]]);
        const int tiles = xs_attn_tiles(seq, heads);
        const int grid = tiles < grid_sms ? tiles : grid_sms;
        const int rpr = seq / peers;
        const int remote = xs_attn_remote_tiles(seq, heads, rpr);
        double *dur = (double *)malloc(tiles * sizeof(double));
        double *rb = (double *)malloc(tiles * sizeof(double));
        for (int t = 0; t < tiles; t++) {
            dur[t] = xs_attn_tile_iters(seq, heads, causal, t);
            const int q0 = xs_attn_tile_row0(seq, heads, t);
            const int q1 = q0 + XS_ATTN_BM < seq ? q0 + XS_ATTN_BM : seq;
            const int lo = q0 > rpr ? q0 : rpr;
            rb[t] = q1 > lo ? (double)(q1 - lo) * XS_ATTN_ROW_BYTES : 0.0;
        }
        double mx = 0;
        for (int b = 0; b < grid; b++) {
            double s = 0;
            for (int k = 0; k < xs_attn_cta_count(tiles, grid, b); k++)
                s += dur[xs_attn_cta_tile(XS_ATTN_ORDER_SNAKE, tiles, 0, grid, b, k)];
            mx = s > mx ? s : mx;
        }
        for (int t = 0; t < tiles; t++)
            dur[t] *= fa * 1e3 / mx;
        xs_attn_progs pg;
        xs_attn_progsim pbs, fs;
        if (xs_attn_progs_plain(seq, heads, causal, XS_ATTN_ORDER_SNAKE, remote, grid, 0, dur, rb,
                                &pg) != XS_OK ||
            xs_attn_progs_simulate(&prof, &pg, &pbs) != XS_OK) {
            fprintf(stderr, "predict: %s\n", xs_errmsg());
            return 1;
        }
        xs_attn_progs_free(&pg);
        xs_status st;
        char plan[32];
        if (kv > 0) {
            const int cap = xs_attn_kv_max_tasks(seq, heads);
            int *off = (int *)malloc((grid + 1) * sizeof(int)), nt, ns;
            int4 *tk = (int4 *)malloc(cap * sizeof(int4));
            st = xs_attn_kv_build(seq, heads, causal, remote, grid, kv, off, tk, cap, &nt, &ns);
            if (st == XS_OK)
                st = xs_attn_progs_kv(seq, heads, causal, grid, off, tk, split, dur, rb, &pg);
            free(off), free(tk);
            snprintf(plan, sizeof plan, "k%ds%d", kv, split);
        } else {
            st = xs_attn_progs_plain(seq, heads, causal, order, remote, grid, split, dur, rb, &pg);
            snprintf(plan, sizeof plan, "%c%d%s", order ? 'e' : 's', split, cour ? "c" : "");
        }
        if (st == XS_OK)
            st = xs_attn_progs_simulate(&prof, &pg, &fs);
        if (st != XS_OK) {
            fprintf(stderr, "predict: %s\n", xs_errmsg());
            return 1;
        }
        xs_attn_progs_free(&pg);
        /* a plain member: fa + its link cost; a KV member's compute replay is not fa's, so its
         * span itself (the snake replay of the scaled times ends at fa_us exactly) */
        const double pred = kv > 0 ? fs.span_ns / 1e3 : fa + (fs.span_ns - fs.free_ns) / 1e3;
        const double ppb = fa + (pbs.span_ns - pbs.free_ns) / 1e3;
        printf("%d,%d,%d,%d,%.1f,%s,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.2f,%d,%d,%.2f\n", seq,
               heads, causal, peers, fa, plan, fused, pred_old, pred,
               100 * (pred - fused) / fused, pb, ppb, 100 * (ppb - pb) / pb, pbs.held_ns / 1e3,
               crit_old, pbs.held_ns <= prof.chunk_bytes / prof.drain_bytes_per_ns,
               pbs.peak_bytes / 1e6);
        free(dur), free(rb);
    }
    return 0;
}
