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

static int col(char **f, int n, const char *name, char **hdr, int nh)
{
    for (int i = 0; i < nh && i < n; i++)
        if (!strcmp(hdr[i], name))
            return i;
    fprintf(stderr, "predict: no column %s\n", name);
    exit(2);
}

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
    char line[8192], hline[8192];
    char *hdr[128], *f[128];
    int nh = 0;
    const int grid_sms = 132;
    printf("seq,heads,causal,peers,fa_us,plan,fused_us,pred_old_us,pred_us,err_pct,pb_us,"
           "pb_pred_us,pb_err_pct,pb_held_us,crit_old,crit_new,peak_mb\n");
    while (fgets(line, sizeof line, in)) {
        if (line[0] == '#')
            continue;
        if (!nh) {
            strcpy(hline, line);
            nh = split_csv(hline, hdr, 128);
            continue;
        }
        const int n = split_csv(line, f, 128);
        const int seq = atoi(f[col(f, n, "seq", hdr, nh)]);
        const int heads = atoi(f[col(f, n, "heads", hdr, nh)]);
        const int causal = atoi(f[col(f, n, "causal", hdr, nh)]);
        const int peers = atoi(f[col(f, n, "peers", hdr, nh)]);
        const double fa = atof(f[col(f, n, "fa_us", hdr, nh)]);
        const double fused = atof(f[col(f, n, "fused_us", hdr, nh)]);
        const double pred_old = atof(f[col(f, n, "pred_us", hdr, nh)]);
        const double pb = atof(f[col(f, n, "pb_us", hdr, nh)]);
        const int split = atoi(f[col(f, n, "split", hdr, nh)]);
        const int order = atoi(f[col(f, n, "order", hdr, nh)]);
        const int crit_old = atoi(f[col(f, n, "criterion_ok", hdr, nh)]);
        const int kv = atoi(f[col(f, n, "kv_split", hdr, nh)]);
        const int cour = atoi(f[col(f, n, "couriers", hdr, nh)]);
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
        /* the KV member's compute replay is not fa's: its cost over the snake replay */
        const double pred = fa + (fs.span_ns - fs.free_ns) / 1e3 +
                            (kv > 0 ? (fs.free_ns - mx * fa * 1e3 / mx) / 1e3 : 0.0);
        const double ppb = fa + (pbs.span_ns - pbs.free_ns) / 1e3;
        const double cap = xs_capacity(&prof, grid);
        (void)cap;
        printf("%d,%d,%d,%d,%.1f,%s,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.2f,%d,%d,%.2f\n", seq,
               heads, causal, peers, fa, plan, fused, pred_old, pred,
               100 * (pred - fused) / fused, pb, ppb, 100 * (ppb - pb) / pb, pbs.held_ns / 1e3,
               crit_old, pbs.held_ns <= prof.chunk_bytes / prof.drain_bytes_per_ns,
               pbs.peak_bytes / 1e6);
        free(dur), free(rb);
    }
    return 0;
}
