// SPDX-License-Identifier: Apache-2.0
/*
 * up_kv.c - the KV split on the host (docs/UP.md "KV split"): the CTAs' task lists, their check
 * as the kernel will read them, their replay and the split kernel's predicted timing.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "up_kv.h"

/* ---- KV split: task lists, their check and their prediction (host; docs/UP.md "KV split") -- */

int xs_attn_kv_max_tasks(int seq, int heads)
{
    return xs_attn_tiles(seq, heads) * XS_ATTN_KV_MAX_PARTS;
}

/* Parts of a tile of `iters` key blocks at part_kb blocks per part (1: whole). */
static int kv_parts(int iters, int part_kb)
{
    if (part_kb <= 0 || iters <= part_kb)
        return 1;
    const int n = (iters + part_kb - 1) / part_kb;
    return n < XS_ATTN_KV_MAX_PARTS ? n : XS_ATTN_KV_MAX_PARTS;
}

typedef struct {
    int tile, head, qb, part, np; /* part: key blocks of its longest part, np: its parts */
} kv_key;

/* longest parts first (list scheduling's LPT rule), then head by head: tiles of one head read
 * the same keys and values, so that the CTAs running together share them in L2 */
static int kv_longest_first(const void *x, const void *y)
{
    const kv_key *a = (const kv_key *)x, *b = (const kv_key *)y;
    if (a->part != b->part)
        return b->part - a->part;
    return a->head != b->head ? a->head - b->head : a->qb - b->qb;
}

xs_status xs_attn_kv_build(int seq, int heads, int causal, int remote, int grid,
                                      int part_kb, int *task_off, xs_attn_kvtask *tasks, int cap,
                                      int *ntasks, int *nslots)
{
    if (seq < 1 || seq > XS_ATTN_MAX_SEQ || heads < 1 || heads > XS_ATTN_MAX_HEADS)
        return xs_seterr(XS_EINVAL, "KV split: seq %d or heads %d out of range", seq, heads);
    const int tiles = xs_attn_tiles(seq, heads);
    if (!task_off || !tasks || !ntasks || !nslots || grid < 1 || grid > tiles || remote < 0 ||
        remote > tiles || part_kb < 0)
        return xs_seterr(XS_EINVAL, "KV split: bad arguments (grid %d for %d tiles, %d remote, "
                         "%d key blocks per part)", grid, tiles, remote, part_kb);
    kv_key *key = (kv_key *)malloc((size_t)tiles * sizeof *key);
    long long *free_kb = (long long *)calloc((size_t)grid, sizeof *free_kb);
    int *cta = (int *)malloc((size_t)tiles * XS_ATTN_KV_MAX_PARTS * sizeof *cta);
    xs_attn_kvtask *seqd =
        (xs_attn_kvtask *)malloc((size_t)tiles * XS_ATTN_KV_MAX_PARTS * sizeof *seqd);
    if (!key || !free_kb || !cta || !seqd) {
        free(key), free(free_kb), free(cta), free(seqd);
        return xs_seterr(XS_ENOMEM, "KV split: out of memory for %d tiles", tiles);
    }
    const int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
    /* the local tiles fill the CTAs up after the remote ones, so their parts are at most a
     * CTA's share of them: whole, a long local tile would land on a CTA whose remote parts
     * already fill it (causal: the local tiles are the short ones, fewer than the CTAs) */
    long long local_kb = 0;
    for (int t = remote; t < tiles; t++)
        local_kb += xs_attn_tile_iters(seq, heads, causal, t);
    const int share = (int)((local_kb + grid - 1) / grid);
    const int local_part = part_kb > 0 && share > 0 && share < part_kb ? share : part_kb;
    for (int t = 0; t < tiles; t++) {
        const int it = xs_attn_tile_iters(seq, heads, causal, t);
        key[t].tile = t, key[t].head = t % heads, key[t].qb = nqb - 1 - t / heads;
        key[t].np = kv_parts(it, t < remote ? part_kb : local_part);
        key[t].part = (it + key[t].np - 1) / key[t].np;
    }
    qsort(key, (size_t)remote, sizeof *key, kv_longest_first);
    qsort(key + remote, (size_t)(tiles - remote), sizeof *key, kv_longest_first);
    /* hand out the tasks in batches - the next tiles of one class (remote or local) and one
     * part count np, at most grid / np of them, which run side by side - tile by tile, a
     * tile's parts in order (its last part after the others); each task to the CTA free first
     * (the lowest index on a tie), a task that stores its tile (whole, or a last part with its
     * merge) counted one key block more: so the stores rotate over the CTAs. Without that the
     * same quarter of the CTAs draws every last part of every batch, and with it every store
     * and merge (docs/UP.md "KV split"): remote stores slow the SM that issues them. */
    int n = 0, slots = 0; /* slots in hand-out order: parts 0 .. n-2 of a tile, consecutive */
    for (int i = 0; i < tiles;) {
        const int np = key[i].np, rem = i < remote;
        const int g = grid / np > 0 ? grid / np : 1;
        int j = i;
        while (j < tiles && j - i < g && key[j].np == np && (j < remote) == rem)
            j++;
        for (int q = i; q < j; q++) {
            const int t = key[q].tile, it = xs_attn_tile_iters(seq, heads, causal, t);
            const int slot = slots;
            if (np > 1)
                slots += np - 1;
            for (int p = 0; p < np; p++) {
                int b = 0;
                for (int c = 1; c < grid; c++)
                    if (free_kb[c] < free_kb[b])
                        b = c;
                const int kb0 = (int)((long long)p * it / np);
                const int kb1 = (int)((long long)(p + 1) * it / np);
                free_kb[b] += kb1 - kb0 + (p == np - 1);
                cta[n] = b;
                seqd[n++] = xs_attn_kvtask_of(t, kb0, kb1,
                                              np > 1 ? XS_ATTN_KV_PART(slot, p, np) : -1);
            }
        }
        i = j;
    }
    xs_status st = XS_OK;
    if (n > cap) {
        st = xs_seterr(XS_EINVAL, "KV split: %d tasks do not fit %d", n, cap);
    } else {
        /* per-CTA lists in hand-out order */
        for (int b = 0; b <= grid; b++)
            task_off[b] = 0;
        for (int i = 0; i < n; i++)
            task_off[cta[i] + 1]++;
        for (int b = 0; b < grid; b++)
            task_off[b + 1] += task_off[b];
        for (int b = 0; b < grid; b++)
            free_kb[b] = task_off[b]; /* reused: the next free entry of CTA b */
        for (int i = 0; i < n; i++)
            tasks[free_kb[cta[i]]++] = seqd[i];
        *ntasks = n, *nslots = slots;
    }
    free(key), free(free_kb), free(cta), free(seqd);
    return st;
}

/* Replays the lists: every CTA runs its tasks in order, a last part only once every other part
 * of its tile has ended. With dur (per tile, ns) it also times them: end[t] is when tile t is
 * stored (its whole task or last part ends). Returns the number of tasks that ran (all of them
 * unless a wait can never end); *compute_end the last task's end; task_end (optional) each
 * task's end, by its index in the lists. */
int xs_up_kv_replay(int seq, int heads, int causal, int grid, const int *task_off,
                    const xs_attn_kvtask *tasks, const double *dur, double *tile_end,
                    int *parts_done, double *parts_end, double *compute_end, double *task_end)
{
    const int tiles = xs_attn_tiles(seq, heads);
    for (int t = 0; t < tiles; t++)
        parts_done[t] = 0, parts_end[t] = 0, tile_end[t] = 0;
    int *pos = (int *)calloc((size_t)grid, sizeof *pos);
    double *clk = (double *)calloc((size_t)grid, sizeof *clk);
    if (!pos || !clk) {
        free(pos), free(clk);
        return -1;
    }
    int ran = 0, progress = 1;
    *compute_end = 0;
    while (progress) {
        progress = 0;
        for (int b = 0; b < grid; b++) {
            for (; task_off[b] + pos[b] < task_off[b + 1]; pos[b]++) {
                const xs_attn_kvtask tk = tasks[task_off[b] + pos[b]];
                const int t = tk.tile;
                const int np = xs_attn_kv_nparts(tk.part), p = xs_attn_kv_partno(tk.part);
                if (np > 1 && p == np - 1 && parts_done[t] < np - 1)
                    break; /* waits for the tile's other parts */
                const int it = xs_attn_tile_iters(seq, heads, causal, t);
                double end = clk[b] + (dur ? dur[t] * (tk.kb1 - tk.kb0) / (it > 0 ? it : 1) : 0.0);
                if (np > 1 && p == np - 1 && parts_end[t] > end)
                    end = parts_end[t];
                clk[b] = end;
                if (task_end)
                    task_end[task_off[b] + pos[b]] = end;
                if (np > 1 && p < np - 1) {
                    parts_done[t]++;
                    if (end > parts_end[t])
                        parts_end[t] = end;
                } else {
                    tile_end[t] = end;
                }
                if (end > *compute_end)
                    *compute_end = end;
                ran++, progress = 1;
            }
        }
    }
    free(pos), free(clk);
    return ran;
}

xs_status xs_attn_kv_check(int seq, int heads, int causal, int grid,
                                      const int *task_off, const xs_attn_kvtask *tasks, int nslots)
{
    if (seq < 1 || seq > XS_ATTN_MAX_SEQ || heads < 1 || heads > XS_ATTN_MAX_HEADS || grid < 1 ||
        !task_off || !tasks || nslots < 0)
        return xs_seterr(XS_EINVAL, "KV split lists: bad arguments (seq %d, heads %d, grid %d)",
                         seq, heads, grid);
    const int tiles = xs_attn_tiles(seq, heads);
    if (task_off[0] != 0)
        return xs_seterr(XS_EINVAL, "KV split lists: CTA 0's list starts at %d, not 0",
                         task_off[0]);
    for (int b = 0; b < grid; b++)
        if (task_off[b + 1] < task_off[b])
            return xs_seterr(XS_EINVAL, "KV split lists: CTA %d's list ends before it starts", b);
    const int n = task_off[grid];
    int *next_kb = (int *)malloc((size_t)tiles * sizeof(int)); /* key blocks covered so far */
    int *code = (int *)malloc((size_t)tiles * sizeof(int));    /* the tile's slot base and n */
    unsigned char *slot_used = (unsigned char *)calloc((size_t)nslots + 1, 1);
    double *te = (double *)malloc((size_t)tiles * sizeof(double));
    double *pe = (double *)malloc((size_t)tiles * sizeof(double));
    int *pd = (int *)malloc((size_t)tiles * sizeof(int));
    xs_status st = XS_OK;
    if (!next_kb || !code || !slot_used || !te || !pe || !pd) {
        st = xs_seterr(XS_ENOMEM, "KV split lists: out of memory for %d tiles", tiles);
        goto out;
    }
    for (int t = 0; t < tiles; t++)
        next_kb[t] = 0, code[t] = INT_MIN;
    /* coverage: in list order per tile the parts must come 0, 1, ..., n-1; they may sit on
     * different CTAs, so collect them per tile by part index first */
    {
        int *seen = (int *)calloc((size_t)tiles * XS_ATTN_KV_MAX_PARTS, sizeof(int));
        xs_attn_kvtask *part_of =
            (xs_attn_kvtask *)malloc((size_t)tiles * XS_ATTN_KV_MAX_PARTS * sizeof *part_of);
        if (!seen || !part_of) {
            free(seen), free(part_of);
            st = xs_seterr(XS_ENOMEM, "KV split lists: out of memory for %d tiles", tiles);
            goto out;
        }
        for (int i = 0; i < n && st == XS_OK; i++) {
            const xs_attn_kvtask tk = tasks[i];
            if (tk.tile < 0 || tk.tile >= tiles) {
                st = xs_seterr(XS_EINVAL, "KV split lists: task %d names tile %d of %d", i, tk.tile,
                               tiles);
                break;
            }
            const int it = xs_attn_tile_iters(seq, heads, causal, tk.tile);
            if (tk.kb0 < 0 || tk.kb1 > it || tk.kb0 >= tk.kb1) {
                st = xs_seterr(XS_EINVAL, "KV split lists: task %d (tile %d) has key blocks "
                               "[%d, %d) of %d", i, tk.tile, tk.kb0, tk.kb1, it);
                break;
            }
            const int np = xs_attn_kv_nparts(tk.part), p = xs_attn_kv_partno(tk.part);
            const int slot = xs_attn_kv_slot(tk.part);
            if (tk.part < -1 || (tk.part >= 0 && (np < 2 || np > XS_ATTN_KV_MAX_PARTS || p >= np ||
                                             slot + np - 1 > nslots))) {
                st = xs_seterr(XS_EINVAL, "KV split lists: task %d (tile %d) has part code %d "
                               "(slot %d, part %d of %d; %d slots)", i, tk.tile, tk.part, slot,
                               p, np,
                               nslots);
                break;
            }
            const int c = tk.part < 0 ? -1 : (slot << 4) | np;
            if (code[tk.tile] != INT_MIN && code[tk.tile] != c) {
                st = xs_seterr(XS_EINVAL, "KV split lists: tile %d's tasks disagree on its parts "
                               "or slots", tk.tile);
                break;
            }
            code[tk.tile] = c;
            if (seen[tk.tile * XS_ATTN_KV_MAX_PARTS + p]++) {
                st = xs_seterr(XS_EINVAL, "KV split lists: tile %d's part %d comes twice", tk.tile,
                               p);
                break;
            }
            part_of[tk.tile * XS_ATTN_KV_MAX_PARTS + p] = tk;
        }
        for (int t = 0; t < tiles && st == XS_OK; t++) {
            if (code[t] == INT_MIN) {
                st = xs_seterr(XS_EINVAL, "KV split lists: tile %d is in no list", t);
                break;
            }
            const int np = code[t] < 0 ? 1 : code[t] & 15;
            const int it = xs_attn_tile_iters(seq, heads, causal, t);
            for (int p = 0; p < np && st == XS_OK; p++) {
                if (!seen[t * XS_ATTN_KV_MAX_PARTS + p]) {
                    st = xs_seterr(XS_EINVAL, "KV split lists: tile %d's part %d of %d is in no "
                                   "list", t, p, np);
                    break;
                }
                const xs_attn_kvtask tk = part_of[t * XS_ATTN_KV_MAX_PARTS + p];
                if (tk.kb0 != next_kb[t]) {
                    st = xs_seterr(XS_EINVAL, "KV split lists: tile %d's part %d starts at key "
                                   "block %d, not %d", t, p, tk.kb0, next_kb[t]);
                    break;
                }
                next_kb[t] = tk.kb1;
            }
            if (st == XS_OK && next_kb[t] != it)
                st = xs_seterr(XS_EINVAL, "KV split lists: tile %d's parts cover key blocks "
                               "[0, %d) of %d", t, next_kb[t], it);
            if (st == XS_OK && np > 1) {
                const int slot = code[t] >> 4;
                for (int q = slot; q < slot + np - 1 && st == XS_OK; q++)
                    if (slot_used[q]++)
                        st = xs_seterr(XS_EINVAL, "KV split lists: slot %d is used by two "
                                       "tiles (the second is tile %d)", q, t);
            }
        }
        free(seen), free(part_of);
    }
    if (st == XS_OK) {
        double end = 0;
        const int ran = xs_up_kv_replay(seq, heads, causal, grid, task_off, tasks, NULL, te, pd,
                                        pe, &end, NULL);
        if (ran < 0)
            st = xs_seterr(XS_ENOMEM, "KV split lists: out of memory replaying %d CTAs", grid);
        else if (ran < n)
            st = xs_seterr(XS_EINVAL, "KV split lists: deadlock: %d of %d tasks can run (a last "
                           "part waits for a part queued behind a wait)", ran, n);
    }
out:
    free(next_kb), free(code), free(slot_used), free(te), free(pe), free(pd);
    return st;
}

/* The slots the lists name (parts' slot bases + their parts - 1, at most): the count
 * xs_attn_kv_check wants where the caller did not build the lists. */
int xs_up_kv_named_slots(int grid, const int *task_off, const xs_attn_kvtask *tasks)
{
    int ns = 0;
    for (int i = 0; i < task_off[grid]; i++)
        if (tasks[i].part >= 0) {
            const int e = xs_attn_kv_slot(tasks[i].part) + xs_attn_kv_nparts(tasks[i].part) - 1;
            ns = e > ns ? e : ns;
        }
    return ns;
}

typedef struct {
    double t, bytes;
} kv_arrival;

static int kv_arrival_cmp(const void *x, const void *y)
{
    const kv_arrival *a = (const kv_arrival *)x, *b = (const kv_arrival *)y;
    return a->t < b->t ? -1 : a->t > b->t;
}

xs_status xs_attn_kv_predict(int seq, int heads, int causal, int grid,
                                        const int *task_off, const xs_attn_kvtask *tasks,
                                        const double *dur_ns, const double *remote_bytes,
                                        double drain_bytes_per_ns, double headroom_bytes,
                                        xs_attn_courier_pred *out)
{
    if (!out || !dur_ns || !remote_bytes || !(drain_bytes_per_ns > 0) || !(headroom_bytes >= 0))
        return xs_seterr(XS_EINVAL, "KV split prediction: bad arguments (drain %g B/ns, "
                         "headroom %g B)", drain_bytes_per_ns, headroom_bytes);
    if (!task_off || grid < 1 || task_off[0] != 0)
        return xs_seterr(XS_EINVAL, "KV split prediction: no task lists");
    XS_TRY(xs_attn_kv_check(seq, heads, causal, grid, task_off, tasks,
                            xs_up_kv_named_slots(grid, task_off, tasks)));
    const int tiles = xs_attn_tiles(seq, heads);
    double *te = (double *)malloc((size_t)tiles * sizeof(double));
    double *pe = (double *)malloc((size_t)tiles * sizeof(double));
    int *pd = (int *)malloc((size_t)tiles * sizeof(int));
    kv_arrival *arr = (kv_arrival *)malloc((size_t)tiles * sizeof *arr);
    if (!te || !pe || !pd || !arr) {
        free(te), free(pe), free(pd), free(arr);
        return xs_seterr(XS_ENOMEM, "KV split prediction: out of memory for %d tiles", tiles);
    }
    memset(out, 0, sizeof *out);
    xs_up_kv_replay(seq, heads, causal, grid, task_off, tasks, dur_ns, te, pd, pe,
                    &out->compute_end_ns, NULL);
    int na = 0;
    for (int t = 0; t < tiles; t++)
        if (remote_bytes[t] > 0)
            arr[na].t = te[t], arr[na++].bytes = remote_bytes[t];
    qsort(arr, (size_t)na, sizeof *arr, kv_arrival_cmp);
    double link = 0; /* the link drains the tiles in the order they are stored */
    for (int i = 0; i < na; i++)
        link = (link > arr[i].t ? link : arr[i].t) + arr[i].bytes / drain_bytes_per_ns;
    out->link_end_ns = link;
    const double seen = link - headroom_bytes / drain_bytes_per_ns;
    out->span_ns = out->compute_end_ns > seen ? out->compute_end_ns : seen;
    free(te), free(pe), free(pd), free(arr);
    return XS_OK;
}
