/*
 * attn.cu - launchers of the attention forward kernel (cuda/attn.cuh) and its helpers: the fp32
 * reference on sampled rows, random inputs, destination poisoning, byte comparison and flag
 * read-back. Every launcher validates its input, returns an xs_status and never exits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn.cuh"
#include "xstage_cuda.h"

/* ---- tile order (must match xs_attn_cta) ------------------------------------------------- */

extern "C" int xs_attn_tiles(int seq, int heads)
{
    return (seq + XS_ATTN_BM - 1) / XS_ATTN_BM * heads;
}

extern "C" int xs_attn_remote_tiles(int seq, int heads, int rows_per_rank)
{
    return xs_attn_remote_count(seq, heads, rows_per_rank);
}

extern "C" int xs_attn_cta_count(int tiles, int grid, int cta)
{
    return xs_attn_count_below(tiles, grid, cta);
}

extern "C" int xs_attn_cta_tile(int order, int tiles, int remote, int grid, int cta, int k)
{
    return xs_attn_cta_kth(order == XS_ATTN_ORDER_EARLY ? remote : 0, grid, cta, k);
}

extern "C" int xs_attn_tile_row0(int seq, int heads, int t)
{
    int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
    return (nqb - 1 - t / heads) * XS_ATTN_BM;
}

extern "C" int xs_attn_tile_iters(int seq, int heads, int causal, int t)
{
    int q0 = xs_attn_tile_row0(seq, heads, t);
    int last = (q0 + XS_ATTN_BM < seq ? q0 + XS_ATTN_BM : seq) - 1;
    return causal ? last / XS_ATTN_BN + 1 : (seq + XS_ATTN_BN - 1) / XS_ATTN_BN;
}

extern "C" int xs_attn_courier_tiles(int order, int tiles, int remote, int ncompute, int *list)
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

extern "C" xs_status xs_attn_courier_predict(int order, int tiles, int remote, int ncompute,
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

/* ---- KV split: task lists, their check and their prediction (host; docs/UP.md "KV split") -- */

extern "C" int xs_attn_kv_max_tasks(int seq, int heads)
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

extern "C" xs_status xs_attn_kv_build(int seq, int heads, int causal, int remote, int grid,
                                      int part_kb, int *task_off, int4 *tasks, int cap,
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
    int4 *seqd = (int4 *)malloc((size_t)tiles * XS_ATTN_KV_MAX_PARTS * sizeof *seqd);
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
     * merge) counted one key block more: so the stores rotate over the CTAs. Without that
     * (run 10, call 2) the same quarter of the CTAs drew every last part of every batch, and
     * with it every store and merge: remote stores slow the SM that issues them. */
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
                seqd[n++] = make_int4(t, kb0, kb1, np > 1 ? XS_ATTN_KV_PART(slot, p, np) : -1);
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
static int kv_replay(int seq, int heads, int causal, int grid, const int *task_off,
                     const int4 *tasks, const double *dur, double *tile_end, int *parts_done,
                     double *parts_end, double *compute_end, double *task_end = NULL)
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
                const int4 tk = tasks[task_off[b] + pos[b]];
                const int t = tk.x;
                const int np = xs_attn_kv_nparts(tk.w), p = xs_attn_kv_partno(tk.w);
                if (np > 1 && p == np - 1 && parts_done[t] < np - 1)
                    break; /* waits for the tile's other parts */
                const int it = xs_attn_tile_iters(seq, heads, causal, t);
                double end = clk[b] + (dur ? dur[t] * (tk.z - tk.y) / (it > 0 ? it : 1) : 0.0);
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

extern "C" xs_status xs_attn_kv_check(int seq, int heads, int causal, int grid,
                                      const int *task_off, const int4 *tasks, int nslots)
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
        int4 *part_of = (int4 *)malloc((size_t)tiles * XS_ATTN_KV_MAX_PARTS * sizeof(int4));
        if (!seen || !part_of) {
            free(seen), free(part_of);
            st = xs_seterr(XS_ENOMEM, "KV split lists: out of memory for %d tiles", tiles);
            goto out;
        }
        for (int i = 0; i < n && st == XS_OK; i++) {
            const int4 tk = tasks[i];
            if (tk.x < 0 || tk.x >= tiles) {
                st = xs_seterr(XS_EINVAL, "KV split lists: task %d names tile %d of %d", i, tk.x,
                               tiles);
                break;
            }
            const int it = xs_attn_tile_iters(seq, heads, causal, tk.x);
            if (tk.y < 0 || tk.z > it || tk.y >= tk.z) {
                st = xs_seterr(XS_EINVAL, "KV split lists: task %d (tile %d) has key blocks "
                               "[%d, %d) of %d", i, tk.x, tk.y, tk.z, it);
                break;
            }
            const int np = xs_attn_kv_nparts(tk.w), p = xs_attn_kv_partno(tk.w);
            const int slot = xs_attn_kv_slot(tk.w);
            if (tk.w < -1 || (tk.w >= 0 && (np < 2 || np > XS_ATTN_KV_MAX_PARTS || p >= np ||
                                             slot + np - 1 > nslots))) {
                st = xs_seterr(XS_EINVAL, "KV split lists: task %d (tile %d) has part code %d "
                               "(slot %d, part %d of %d; %d slots)", i, tk.x, tk.w, slot, p, np,
                               nslots);
                break;
            }
            const int c = tk.w < 0 ? -1 : (slot << 4) | np;
            if (code[tk.x] != INT_MIN && code[tk.x] != c) {
                st = xs_seterr(XS_EINVAL, "KV split lists: tile %d's tasks disagree on its parts "
                               "or slots", tk.x);
                break;
            }
            code[tk.x] = c;
            if (seen[tk.x * XS_ATTN_KV_MAX_PARTS + p]++) {
                st = xs_seterr(XS_EINVAL, "KV split lists: tile %d's part %d comes twice", tk.x,
                               p);
                break;
            }
            part_of[tk.x * XS_ATTN_KV_MAX_PARTS + p] = tk;
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
                const int4 tk = part_of[t * XS_ATTN_KV_MAX_PARTS + p];
                if (tk.y != next_kb[t]) {
                    st = xs_seterr(XS_EINVAL, "KV split lists: tile %d's part %d starts at key "
                                   "block %d, not %d", t, p, tk.y, next_kb[t]);
                    break;
                }
                next_kb[t] = tk.z;
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
        const int ran = kv_replay(seq, heads, causal, grid, task_off, tasks, NULL, te, pd, pe,
                                  &end);
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
static int kv_named_slots(int grid, const int *task_off, const int4 *tasks)
{
    int ns = 0;
    for (int i = 0; i < task_off[grid]; i++)
        if (tasks[i].w >= 0) {
            const int e = xs_attn_kv_slot(tasks[i].w) + xs_attn_kv_nparts(tasks[i].w) - 1;
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

extern "C" xs_status xs_attn_kv_predict(int seq, int heads, int causal, int grid,
                                        const int *task_off, const int4 *tasks,
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
                            kv_named_slots(grid, task_off, tasks)));
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
    kv_replay(seq, heads, causal, grid, task_off, tasks, dur_ns, te, pd, pe, &out->compute_end_ns);
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

/* ---- per-CTA programs (docs/UP.md "Per-CTA programs") ---------------------------------------- */

/* One step of a CTA: its time (from the previous step's end to its own), its key-block
 * iterations (where the previous step's slices go) and the bytes it stores after itself. */
typedef struct {
    double ns;
    int iters;
    double bytes;
} prog_step;

extern "C" void xs_attn_progs_free(xs_attn_progs *p)
{
    if (!p)
        return;
    free(p->bytes), free(p->gap_ns);
    memset(p, 0, sizeof *p);
}

/* Emit CTA b's rows from its m steps (rows[] NULL: count them). Bytes round to 16 cumulatively,
 * so that a step's slices add up to its bytes. */
static int prog_rows(const prog_step *st, int m, int split, int64_t *bytes, double *gap, int grid,
                     int b)
{
    int n = 0;
#define PROG_ROW(b_, g_)                                                                      \
    do {                                                                                      \
        if (bytes)                                                                            \
            bytes[(size_t)n * grid + b] = (b_), gap[(size_t)n * grid + b] = (g_);             \
        n++;                                                                                  \
    } while (0)
    if (m < 1)
        return 0;
    PROG_ROW(0, st[0].ns);
    for (int i = 0; i < m; i++) {
        const double B = st[i].bytes;
        if (i + 1 == m) {
            PROG_ROW((int64_t)llround(B / 16.0) * 16, 0.0);
            break;
        }
        const prog_step *nx = &st[i + 1];
        if (split == 0 || B <= 0) {
            PROG_ROW((int64_t)llround(B / 16.0) * 16, nx->ns);
            continue;
        }
        const int nk = nx->iters > 0 ? nx->iters : 1;
        const double t_it = nx->ns / nk;
        int jg = -1, sent = 0, ng = 0; /* the open group: its iteration, slices before, slices */
        for (int j = 0; j <= nk; j++) {
            const int due = j < nk ? xs_attn_slices_due(split, nk, j) : split;
            if (j == nk || due > sent + ng) {
                if (jg >= 0) {
                    const int64_t b0 = (int64_t)llround(B * sent / split / 16.0) * 16;
                    const int64_t b1 = (int64_t)llround(B * (sent + ng) / split / 16.0) * 16;
                    PROG_ROW(b1 - b0, t_it * (j - jg));
                }
                if (j < nk)
                    sent += ng, ng = due - sent, jg = j;
            }
        }
    }
#undef PROG_ROW
    return n;
}

/* Programs from every CTA's steps (steps [soff[b], soff[b + 1]) of CTA b). */
static xs_status progs_from_steps(int grid, const int *soff, const prog_step *st, int split,
                                  xs_attn_progs *out)
{
    memset(out, 0, sizeof *out);
    int rows = 1;
    for (int b = 0; b < grid; b++) {
        const int n = prog_rows(st + soff[b], soff[b + 1] - soff[b], split, NULL, NULL, grid, b);
        rows = n > rows ? n : rows;
    }
    out->grid = grid, out->nrows = rows;
    out->bytes = (int64_t *)calloc((size_t)rows * grid, sizeof(int64_t));
    out->gap_ns = (double *)calloc((size_t)rows * grid, sizeof(double));
    if (!out->bytes || !out->gap_ns) {
        xs_attn_progs_free(out);
        return xs_seterr(XS_ENOMEM, "per-CTA programs: out of memory for %d rows x %d CTAs", rows,
                         grid);
    }
    for (int b = 0; b < grid; b++)
        prog_rows(st + soff[b], soff[b + 1] - soff[b], split, out->bytes, out->gap_ns, grid, b);
    return XS_OK;
}

extern "C" xs_status xs_attn_progs_plain(int seq, int heads, int causal, int order, int remote,
                                         int grid, int split, const double *dur_ns,
                                         const double *remote_bytes, xs_attn_progs *out)
{
    const int tiles = seq >= 1 && heads >= 1 ? xs_attn_tiles(seq, heads) : 0;
    if (!out || !dur_ns || !remote_bytes || tiles < 1 || grid < 1 || grid > tiles ||
        remote < 0 || remote > tiles || split < 0 || split > 256 ||
        (order != XS_ATTN_ORDER_SNAKE && order != XS_ATTN_ORDER_EARLY))
        return xs_seterr(XS_EINVAL, "per-CTA programs: bad arguments (seq %d, heads %d, grid %d, "
                         "split %d, order %d)", seq, heads, grid, split, order);
    int *soff = (int *)malloc((size_t)(grid + 1) * sizeof(int));
    prog_step *st = (prog_step *)malloc((size_t)tiles * sizeof *st);
    if (!soff || !st) {
        free(soff), free(st);
        return xs_seterr(XS_ENOMEM, "per-CTA programs: out of memory for %d tiles", tiles);
    }
    for (int t = 0; t < tiles; t++)
        if (!(remote_bytes[t] >= 0) || !(dur_ns[t] < INFINITY)) {
            free(soff), free(st);
            return xs_seterr(XS_EINVAL, "per-CTA programs: tile %d: %g remote bytes, %g ns", t,
                             remote_bytes[t], dur_ns[t]);
        }
    int n = 0;
    for (int b = 0; b < grid; b++) {
        soff[b] = n;
        const int m = xs_attn_cta_count(tiles, grid, b);
        for (int k = 0; k < m; k++, n++) {
            const int t = xs_attn_cta_tile(order, tiles, remote, grid, b, k);
            st[n].ns = dur_ns[t] > 0 ? dur_ns[t] : 0;
            st[n].iters = xs_attn_tile_iters(seq, heads, causal, t);
            st[n].bytes = remote_bytes[t];
        }
    }
    soff[grid] = n;
    const xs_status s = progs_from_steps(grid, soff, st, split, out);
    free(soff), free(st);
    return s;
}

extern "C" xs_status xs_attn_progs_kv(int seq, int heads, int causal, int grid,
                                      const int *task_off, const int4 *tasks, int split,
                                      const double *dur_ns, const double *remote_bytes,
                                      xs_attn_progs *out)
{
    if (!out || !dur_ns || !remote_bytes || !task_off || !tasks || grid < 1 || split < 0 ||
        split > 256 || task_off[0] != 0)
        return xs_seterr(XS_EINVAL, "per-CTA programs: bad KV arguments (grid %d, split %d)",
                         grid, split);
    XS_TRY(xs_attn_kv_check(seq, heads, causal, grid, task_off, tasks,
                            kv_named_slots(grid, task_off, tasks)));
    const int tiles = xs_attn_tiles(seq, heads), nt = task_off[grid];
    double *te = (double *)malloc((size_t)tiles * sizeof(double));
    double *pe = (double *)malloc((size_t)tiles * sizeof(double));
    int *pd = (int *)malloc((size_t)tiles * sizeof(int));
    double *tend = (double *)malloc((size_t)(nt > 0 ? nt : 1) * sizeof(double));
    prog_step *st = (prog_step *)malloc((size_t)(nt > 0 ? nt : 1) * sizeof *st);
    xs_status s = XS_OK;
    double end = 0;
    if (!te || !pe || !pd || !tend || !st)
        s = xs_seterr(XS_ENOMEM, "per-CTA programs: out of memory for %d tasks", nt);
    else if (kv_replay(seq, heads, causal, grid, task_off, tasks, dur_ns, te, pd, pe, &end,
                       tend) < nt)
        s = xs_seterr(XS_EINVAL, "per-CTA programs: the KV lists do not run to the end");
    if (s == XS_OK) {
        for (int b = 0; b < grid; b++)
            for (int i = task_off[b]; i < task_off[b + 1]; i++) {
                const int4 tk = tasks[i];
                const double prev = i > task_off[b] ? tend[i - 1] : 0.0;
                st[i].ns = tend[i] > prev ? tend[i] - prev : 0.0;
                st[i].iters = tk.z - tk.y;
                st[i].bytes = xs_attn_kv_stores(tk.w) ? remote_bytes[tk.x] : 0.0;
            }
        s = progs_from_steps(grid, task_off, st, split, out);
    }
    free(te), free(pe), free(pd), free(tend), free(st);
    return s;
}

extern "C" xs_status xs_attn_progs_simulate(const xs_profile *p, const xs_attn_progs *pg,
                                            xs_attn_progsim *out)
{
    if (!p || !pg || !out || pg->grid < 1 || pg->nrows < 1 || !pg->bytes || !pg->gap_ns)
        return xs_seterr(XS_EINVAL, "per-CTA programs: nothing to simulate");
    memset(out, 0, sizeof *out);
    xs_schedule s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < pg->nrows; i++)
        XS_TRY(xs_schedule_append(&s, pg->grid, 16, 0.0)); /* the widths; the programs say the rest */
    /* the CTAs' own store queues and buffers let a burst's last bytes issue while the stage is
     * full (the replay kernel's stamps see that); this kernel's next step loads its keys and
     * values from global memory, and an SM's loads wait behind its own held-back stores (run 8's
     * probe, docs/MODEL.md: 100-250x slower), so its work resumes only once they are in the
     * shared stage: no queue, no buffer */
    xs_profile real = *p, ideal;
    real.start_ns = 0, real.row_start_ns = 0;
    real.queue_bytes_per_producer = 0, real.buffer_bytes_per_producer = 0;
    ideal = real;
    ideal.drain_bytes_per_ns = 1e9;
    ideal.capacity_bytes = 1e15;
    ideal.capacity_bytes_per_producer = 0;
    const xs_programs prog = {pg->grid, pg->bytes, pg->gap_ns};
    xs_sim_opts so;
    memset(&so, 0, sizeof so);
    so.record_windows = 1;
    xs_result a, f;
    xs_status st = xs_simulate_programs(&real, &s, &prog, &so, &a);
    if (st == XS_OK) {
        st = xs_simulate_programs(&ideal, &s, &prog, &so, &f);
        if (st == XS_OK) {
            out->span_ns = a.makespan_ns, out->free_ns = f.makespan_ns;
            out->peak_bytes = a.peak_backlog_bytes;
            const size_t n = (size_t)pg->nrows * pg->grid;
            for (size_t k = 0; k < n; k++)
                if (!isnan(a.win_end[k]) && !isnan(f.win_end[k])) {
                    const double d = (a.win_end[k] - a.win_start[k]) -
                                     (f.win_end[k] - f.win_start[k]);
                    if (d > out->held_ns)
                        out->held_ns = d;
                }
            xs_result_free(&f);
        }
        xs_result_free(&a);
    }
    xs_schedule_free(&s);
    return st;
}

/* ---- the forward kernel ------------------------------------------------------------------ */

template <bool CAUSAL>
__global__ void __launch_bounds__(XS_ATTN_THREADS, 1)
    xs_attn_kernel(const __grid_constant__ xs_attn_args a, const __grid_constant__ xs_wintab tab)
{
    extern __shared__ __align__(1024) unsigned char xs_attn_smem[];
    xs_attn_cta<CAUSAL>(a, tab, xs_attn_smem);
}

/* couriers > 0: its own kernel, so that the kernel above (couriers = 0) stays as it was. */
template <bool CAUSAL>
__global__ void __launch_bounds__(XS_ATTN_THREADS, 1)
    xs_attn_courier_kernel(const __grid_constant__ xs_attn_args a,
                           const __grid_constant__ xs_wintab tab)
{
    extern __shared__ __align__(1024) unsigned char xs_attn_smem[];
    if ((int)blockIdx.x >= (int)gridDim.x - a.couriers)
        xs_attn_courier(a, tab, xs_attn_smem);
    else
        xs_attn_cta<CAUSAL, true>(a, tab, xs_attn_smem);
}

/* tasks != NULL: the KV-split kernel, its own instantiation (the kernels above unchanged). */
template <bool CAUSAL>
__global__ void __launch_bounds__(XS_ATTN_THREADS, 1)
    xs_attn_kv_kernel(const __grid_constant__ xs_attn_args a, const __grid_constant__ xs_wintab tab)
{
    extern __shared__ __align__(1024) unsigned char xs_attn_smem[];
    xs_attn_cta<CAUSAL, false, true>(a, tab, xs_attn_smem);
}

extern "C" xs_status xs_attn_validate(const xs_attn_args *a, const xs_wintab *tab, int grid)
{
    if (!a)
        return xs_seterr(XS_EINVAL, "attention: no arguments");
    if (a->seq < 1 || a->seq > XS_ATTN_MAX_SEQ)
        return xs_seterr(XS_EINVAL, "attention: seq %d outside 1..%d", a->seq, XS_ATTN_MAX_SEQ);
    if (a->heads < 1 || a->heads > XS_ATTN_MAX_HEADS)
        return xs_seterr(XS_EINVAL, "attention: heads %d outside 1..%d", a->heads,
                         XS_ATTN_MAX_HEADS);
    if (!a->q || !a->k || !a->v)
        return xs_seterr(XS_EINVAL, "attention: q, k or v is NULL");
    if (((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v) & 15)
        return xs_seterr(XS_EINVAL, "attention: q, k and v must be 16-byte aligned");
    if (!(a->scale >= 0.f) || isinf(a->scale))
        return xs_seterr(XS_EINVAL, "attention: softmax scale %g must be finite and >= 0 "
                         "(0 = 1/sqrt(128))", (double)a->scale);
    if (a->split < 0 || a->split > XS_ATTN_MAX_SPLIT)
        return xs_seterr(XS_EINVAL, "attention: split %d outside 0..%d", a->split,
                         XS_ATTN_MAX_SPLIT);
    if (a->order != XS_ATTN_ORDER_SNAKE && a->order != XS_ATTN_ORDER_EARLY)
        return xs_seterr(XS_EINVAL, "attention: order %d is neither snake (0) nor early (1)",
                         a->order);
    int tiles = xs_attn_tiles(a->seq, a->heads);
    if (a->couriers < 0 || a->couriers > XS_ATTN_MAX_COURIERS)
        return xs_seterr(XS_EINVAL, "attention: couriers %d outside 0..%d", a->couriers,
                         XS_ATTN_MAX_COURIERS);
    if (a->couriers > 0) {
        const int C = a->couriers;
        if (a->out != XS_ATTN_OUT_WINDOWS || a->split != 0 || a->signal == 0)
            return xs_seterr(XS_EINVAL, "attention: couriers need windows output, split 0 and a "
                             "nonzero signal (the ready flags carry it)");
        if (!a->sync || ((uintptr_t)a->sync & 7))
            return xs_seterr(XS_EINVAL, "attention: couriers need a sync buffer of tiles + grid "
                             "flags (8-byte aligned device memory)");
        if (!a->o || ((uintptr_t)a->o & 15))
            return xs_seterr(XS_EINVAL, "attention: couriers need a 16-byte aligned staging "
                             "buffer o");
        if (!(a->pace_bytes_per_ns == 0.f ||
              (a->pace_bytes_per_ns >= XS_ATTN_MIN_PACE * C && !isinf(a->pace_bytes_per_ns))))
            return xs_seterr(XS_EINVAL, "attention: courier pace %g B/ns: 0 (unpaced) or %g..inf "
                             "(%g per courier)", (double)a->pace_bytes_per_ns,
                             XS_ATTN_MIN_PACE * C, XS_ATTN_MIN_PACE);
        if (grid - C < 1 || grid - C > tiles)
            return xs_seterr(XS_EINVAL, "attention: grid %d with %d couriers leaves %d compute "
                             "CTAs, outside 1..%d (the tiles of seq %d x %d heads)", grid, C,
                             grid - C, tiles, a->seq, a->heads);
    } else if (a->tasks) {
        if (a->signal == 0)
            return xs_seterr(XS_EINVAL, "attention: KV-split task lists need a nonzero signal "
                             "(the partials' flags carry it)");
        if (!a->task_off || !a->part || !a->part_flag || ((uintptr_t)a->part & 15) ||
            ((uintptr_t)a->part_flag & 7))
            return xs_seterr(XS_EINVAL, "attention: KV-split task lists need task offsets, a "
                             "16-byte aligned partial buffer and 8-byte aligned flags");
        if (grid < 1 || grid > tiles)
            return xs_seterr(XS_EINVAL, "attention: grid %d outside 1..%d (the tiles of seq %d x "
                             "%d heads)", grid, tiles, a->seq, a->heads);
    } else if (grid < 1 || grid > tiles) {
        return xs_seterr(XS_EINVAL, "attention: grid %d outside 1..%d (the tiles of seq %d x "
                         "%d heads)", grid, tiles, a->seq, a->heads);
    }
    if (a->out == XS_ATTN_OUT_LOCAL) {
        if (!a->o || ((uintptr_t)a->o & 15))
            return xs_seterr(XS_EINVAL, "attention: local output is NULL or not 16-byte "
                             "aligned");
        return XS_OK;
    }
    if (a->out != XS_ATTN_OUT_WINDOWS)
        return xs_seterr(XS_EINVAL, "attention: output mode %d is neither local nor windows",
                         a->out);
    if (!tab || tab->nranks < 1 || tab->nranks > XS_MAX_RANKS)
        return xs_seterr(XS_EINVAL, "attention: windows output needs a window table with 1..%d "
                         "ranks", XS_MAX_RANKS);
    if (a->rows_per_rank < 1 || (long long)a->rows_per_rank * tab->nranks < a->seq)
        return xs_seterr(XS_EINVAL, "attention: %d ranks x %d rows per rank do not cover seq "
                         "%d", tab->nranks, a->rows_per_rank, a->seq);
    const int dh = a->dst_heads > 0 ? a->dst_heads : a->heads;
    if (a->dst_heads < 0 || a->dst_head0 < 0 || a->dst_head0 + a->heads > dh)
        return xs_seterr(XS_EINVAL, "attention: heads %d..%d do not fit %d heads per "
                         "destination row", a->dst_head0, a->dst_head0 + a->heads - 1, dh);
    size_t need = (size_t)a->rows_per_rank * dh * XS_ATTN_ROW_BYTES;
    if (need > tab->bytes)
        return xs_seterr(XS_EINVAL, "attention: a rank's rows need %zu bytes, its window holds "
                         "%zu", need, tab->bytes);
    for (int r = 0; r < tab->nranks; r++) {
        if (!tab->data[r] || ((uintptr_t)tab->data[r] & 15))
            return xs_seterr(XS_EINVAL, "attention: window of rank %d is NULL or not 16-byte "
                             "aligned", r);
        if (a->signal && (tab->nflags < grid || !tab->flags[r]))
            return xs_seterr(XS_EINVAL, "attention: signalling %d CTAs needs %d flags per "
                             "window; rank %d has %d", grid, grid, r,
                             tab->flags[r] ? tab->nflags : 0);
    }
    return XS_OK;
}

extern "C" xs_status xs_attn_fwd(const xs_attn_args *a, const xs_wintab *tab, int grid,
                                 cudaStream_t s)
{
    XS_TRY(xs_attn_validate(a, tab, grid));
    /* once per device: 128 KB of dynamic shared memory needs the opt-in. Done outside any
     * timed window by the first (warm-up) launch. */
    static unsigned char attr_done[XS_MAX_RANKS];
    static int resident[XS_MAX_RANKS]; /* courier kernel CTAs the device holds at once */
    int dev = 0;
    XS_CU(cudaGetDevice(&dev));
    if (dev < 0 || dev >= XS_MAX_RANKS || !attr_done[dev]) {
        XS_CU(cudaFuncSetAttribute(xs_attn_kernel<false>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_kernel<true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_courier_kernel<false>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_courier_kernel<true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_kv_kernel<false>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        XS_CU(cudaFuncSetAttribute(xs_attn_kv_kernel<true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   XS_ATTN_SMEM_BYTES));
        int per_sm = 0, sms = 0;
        XS_CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, xs_attn_courier_kernel<true>, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES));
        XS_CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        if (dev >= 0 && dev < XS_MAX_RANKS) {
            resident[dev] = per_sm * sms;
            attr_done[dev] = 1;
        }
    }
    if (a->couriers > 0 || a->tasks) {
        /* couriers and last parts wait on other CTAs: all of them must run at once (a CTA that
         * waited for an SM would leave the waits to their timeout) */
        const int can = dev >= 0 && dev < XS_MAX_RANKS ? resident[dev] : 0;
        if (grid > can)
            return xs_seterr(XS_EINVAL, "attention: %s need all %d CTAs resident at once; "
                             "device %d holds %d", a->tasks ? "KV-split lists" : "couriers",
                             grid, dev, can);
    }
    xs_wintab none;
    if (!tab) {
        memset(&none, 0, sizeof none);
        tab = &none;
    }
    if (a->tasks && a->causal)
        xs_attn_kv_kernel<true><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    else if (a->tasks)
        xs_attn_kv_kernel<false><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    else if (a->couriers > 0 && a->causal)
        xs_attn_courier_kernel<true><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    else if (a->couriers > 0)
        xs_attn_courier_kernel<false><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    else if (a->causal)
        xs_attn_kernel<true><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    else
        xs_attn_kernel<false><<<grid, XS_ATTN_THREADS, XS_ATTN_SMEM_BYTES, s>>>(*a, *tab);
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_compare_parts_kernel(const unsigned short *win, const unsigned short *ref,
                                             size_t n, int row0, int seq, int heads,
                                             const unsigned char *split, float atol, float rtol,
                                             unsigned long long *bad)
{
    const int nqb = (seq + XS_ATTN_BM - 1) / XS_ATTN_BM;
    unsigned long long nbad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t rh = i / XS_ATTN_D; /* row * heads + head */
        const int row = row0 + (int)(rh / (size_t)heads), h = (int)(rh % (size_t)heads);
        const int tile = (nqb - 1 - row / XS_ATTN_BM) * heads + h;
        const unsigned short x = win[i], y = ref[i];
        if (row >= seq || !split[tile]) {
            nbad += x != y;
        } else {
            const float fx = __uint_as_float((unsigned)x << 16);
            const float fy = __uint_as_float((unsigned)y << 16);
            nbad += !(fabsf(fx - fy) <= atol + rtol * fabsf(fy)); /* NaN fails */
        }
    }
    for (int o = 16; o > 0; o >>= 1)
        nbad += __shfl_xor_sync(0xffffffffu, nbad, o);
    if ((threadIdx.x & 31) == 0 && nbad)
        atomicAdd(bad, nbad);
}

extern "C" xs_status xs_attn_compare_parts(const void *win, const void *ref, int row0, int rows,
                                           int seq, int heads, const unsigned char *split,
                                           float atol, float rtol, unsigned long long *bad,
                                           cudaStream_t s)
{
    if (!win || !ref || !split || !bad || (((uintptr_t)win | (uintptr_t)ref) & 1) || row0 < 0 ||
        rows < 0 || heads < 1 || row0 + rows > seq || !(atol >= 0.f) || !(rtol >= 0.f))
        return xs_seterr(XS_EINVAL, "compare by tile: bad arguments (rows %d..%d of %d, %d heads, "
                         "tolerance %g + %g|ref|)", row0, row0 + rows, seq, heads, (double)atol,
                         (double)rtol);
    const size_t n = (size_t)rows * heads * XS_ATTN_D;
    if (n == 0)
        return XS_OK;
    size_t blocks = (n + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    xs_attn_compare_parts_kernel<<<(unsigned)blocks, 256, 0, s>>>(
        (const unsigned short *)win, (const unsigned short *)ref, n, row0, seq, heads, split,
        atol, rtol, bad);
    XS_CU_LAUNCH();
    return XS_OK;
}

/* ---- fp32 reference on sampled rows -------------------------------------------------------- */

#define XS_REF_THREADS 128 /* one thread per output dimension; 4 warps share the keys */

/* q . k_j over 128 dims: each lane takes 4 dims, then a butterfly leaves the sum in every lane. */
static __device__ float xs_ref_dot(const float *qs, const __nv_bfloat16 *krow, int lane)
{
    const __nv_bfloat162 *k2 = reinterpret_cast<const __nv_bfloat162 *>(krow + 4 * lane);
    float2 a = __bfloat1622float2(k2[0]), b = __bfloat1622float2(k2[1]);
    float d = qs[4 * lane] * a.x + qs[4 * lane + 1] * a.y + qs[4 * lane + 2] * b.x +
              qs[4 * lane + 3] * b.y;
    for (int o = 16; o > 0; o >>= 1)
        d += __shfl_xor_sync(0xffffffffu, d, o);
    return d;
}

__global__ void __launch_bounds__(XS_REF_THREADS)
    xs_attn_ref_kernel(const __nv_bfloat16 *q, const __nv_bfloat16 *k, const __nv_bfloat16 *v,
                       const __nv_bfloat16 *o, int seq, int heads, int causal, float scale,
                       const int *rows, float *ref, float *got)
{
    __shared__ float qs[XS_ATTN_D];
    __shared__ float ps[XS_REF_THREADS];
    __shared__ float red[XS_REF_THREADS / 32];
    const int i = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nw = XS_REF_THREADS / 32;
    const int s = rows[2 * i], h = rows[2 * i + 1];
    const size_t hs = (size_t)heads * XS_ATTN_D; /* elements between consecutive rows */
    qs[tid] = __bfloat162float(q[(size_t)s * hs + (size_t)h * XS_ATTN_D + tid]) * scale;
    __syncthreads();
    const int nk = causal ? s + 1 : seq;
    const __nv_bfloat16 *kh = k + (size_t)h * XS_ATTN_D, *vh = v + (size_t)h * XS_ATTN_D;

    /* pass 1: the row maximum */
    float mx = -INFINITY;
    for (int j = warp; j < nk; j += nw)
        mx = fmaxf(mx, xs_ref_dot(qs, kh + (size_t)j * hs, lane));
    if (lane == 0)
        red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (int w = 1; w < nw; w++)
        mx = fmaxf(mx, red[w]);

    /* pass 2: probabilities of 128 keys at a time, then thread tid sums dimension tid */
    float acc = 0.f, l = 0.f;
    for (int c0 = 0; c0 < nk; c0 += XS_REF_THREADS) {
        for (int jj = warp; jj < XS_REF_THREADS; jj += nw) {
            int j = c0 + jj;
            float p = 0.f;
            if (j < nk)
                p = expf(xs_ref_dot(qs, kh + (size_t)j * hs, lane) - mx);
            if (lane == 0)
                ps[jj] = p;
        }
        __syncthreads();
        int cnt = nk - c0 < XS_REF_THREADS ? nk - c0 : XS_REF_THREADS;
#pragma unroll 8 /* independent loads in flight; the sums stay in order */
        for (int jj = 0; jj < cnt; jj++) {
            float p = ps[jj];
            acc += p * __bfloat162float(vh[(size_t)(c0 + jj) * hs + tid]);
            l += p;
        }
        __syncthreads();
    }
    ref[(size_t)i * XS_ATTN_D + tid] = acc / l;
    got[(size_t)i * XS_ATTN_D + tid] =
        __bfloat162float(o[(size_t)s * hs + (size_t)h * XS_ATTN_D + tid]);
}

extern "C" xs_status xs_attn_ref_rows(const void *q, const void *k, const void *v, const void *o,
                                      int seq, int heads, int causal, float scale,
                                      const int *rows, int n, float *ref, float *got,
                                      cudaStream_t s)
{
    if (!q || !k || !v || !o || !rows || !ref || !got || seq < 1 || heads < 1 || n < 0)
        return xs_seterr(XS_EINVAL, "attention reference: bad arguments (seq %d, heads %d, "
                         "%d samples)", seq, heads, n);
    if (n == 0)
        return XS_OK;
    if (!(scale > 0.f))
        scale = 0.08838834764831845f;
    xs_attn_ref_kernel<<<n, XS_REF_THREADS, 0, s>>>(
        (const __nv_bfloat16 *)q, (const __nv_bfloat16 *)k, (const __nv_bfloat16 *)v,
        (const __nv_bfloat16 *)o, seq, heads, causal, scale, rows, ref, got);
    XS_CU_LAUNCH();
    return XS_OK;
}

/* ---- inputs, poison, comparison, flags ----------------------------------------------------- */

__global__ void xs_attn_fill_random_kernel(__nv_bfloat16 *p, size_t n, uint32_t seed, float lo,
                                           float span)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = xs_pattern_word(seed, i >> 2, (uint32_t)(i & 3));
        float u = (float)(x >> 8) * (1.0f / 16777216.0f); /* [0, 1) */
        p[i] = __float2bfloat16_rn(lo + span * u);
    }
}

extern "C" xs_status xs_attn_fill_random(void *p, size_t n, uint32_t seed, float lo, float hi,
                                         cudaStream_t s)
{
    if (!p || !(hi > lo))
        return xs_seterr(XS_EINVAL, "random fill: NULL buffer or empty range [%g, %g)",
                         (double)lo, (double)hi);
    if (n == 0)
        return XS_OK;
    size_t blocks = (n + 255) / 256;
    if (blocks > 65536)
        blocks = 65536;
    xs_attn_fill_random_kernel<<<(unsigned)blocks, 256, 0, s>>>((__nv_bfloat16 *)p, n, seed, lo,
                                                                hi - lo);
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_fill_word_kernel(uint4 *p, size_t n16, uint32_t w)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_uint4(w, w, w, w);
}

extern "C" xs_status xs_attn_fill_word(void *p, size_t bytes, uint32_t word, cudaStream_t s)
{
    if (!p || (bytes & 15) || ((uintptr_t)p & 15))
        return xs_seterr(XS_EINVAL, "fill: NULL, unaligned, or %zu bytes not a multiple of 16",
                         bytes);
    if (bytes == 0)
        return XS_OK;
    size_t n16 = bytes / 16, blocks = (n16 + 255) / 256;
    if (blocks > 8192)
        blocks = 8192;
    xs_attn_fill_word_kernel<<<(unsigned)blocks, 256, 0, s>>>((uint4 *)p, n16, word);
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_compare_kernel(const uint4 *a, const uint4 *b, size_t n16,
                                       unsigned long long *bad)
{
    unsigned long long nbad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 x = a[i], y = b[i];
        nbad += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
    }
    for (int o = 16; o > 0; o >>= 1)
        nbad += __shfl_xor_sync(0xffffffffu, nbad, o);
    if ((threadIdx.x & 31) == 0 && nbad)
        atomicAdd(bad, nbad);
}

extern "C" xs_status xs_attn_compare(const void *a, const void *b, size_t bytes,
                                     unsigned long long *bad, cudaStream_t s)
{
    if (!a || !b || !bad || (bytes & 15) || (((uintptr_t)a | (uintptr_t)b) & 15))
        return xs_seterr(XS_EINVAL, "compare: NULL, unaligned, or %zu bytes not a multiple of "
                         "16", bytes);
    if (bytes == 0)
        return XS_OK;
    size_t n16 = bytes / 16, blocks = (n16 + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    xs_attn_compare_kernel<<<(unsigned)blocks, 256, 0, s>>>((const uint4 *)a, (const uint4 *)b,
                                                            n16, bad);
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_nonfinite_kernel(const unsigned short *p, size_t n,
                                         unsigned long long *count)
{
    unsigned long long c = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        c += (p[i] & 0x7f80u) == 0x7f80u; /* exponent all ones: Inf or NaN */
    for (int o = 16; o > 0; o >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c)
        atomicAdd(count, c);
}

extern "C" xs_status xs_attn_count_nonfinite(const void *p, size_t n, unsigned long long *count,
                                             cudaStream_t s)
{
    if (!p || !count)
        return xs_seterr(XS_EINVAL, "count non-finite: NULL buffer or counter");
    if (n == 0)
        return XS_OK;
    size_t blocks = (n + 255) / 256;
    if (blocks > 4096)
        blocks = 4096;
    xs_attn_nonfinite_kernel<<<(unsigned)blocks, 256, 0, s>>>((const unsigned short *)p, n,
                                                              count);
    XS_CU_LAUNCH();
    return XS_OK;
}

__global__ void xs_attn_flags_kernel(const __grid_constant__ xs_wintab tab, int n,
                                     uint64_t value, unsigned long long *bad)
{
    const uint64_t *f = tab.flags[blockIdx.x];
    unsigned long long c = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        c += xs_ld_acquire_sys(f + i) != value;
    for (int o = 16; o > 0; o >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c)
        atomicAdd(bad, c);
}

extern "C" xs_status xs_attn_flags_check(const xs_wintab *tab, int n, uint64_t value,
                                         unsigned long long *bad, cudaStream_t s)
{
    if (!tab || !bad || tab->nranks < 1 || tab->nranks > XS_MAX_RANKS || n < 1 ||
        n > tab->nflags)
        return xs_seterr(XS_EINVAL, "flags check: no table or counter, or %d flags of %d", n,
                         tab ? tab->nflags : 0);
    for (int r = 0; r < tab->nranks; r++)
        if (!tab->flags[r])
            return xs_seterr(XS_EINVAL, "flags check: rank %d has no flag pointer", r);
    xs_attn_flags_kernel<<<tab->nranks, 256, 0, s>>>(*tab, n, value, bad);
    XS_CU_LAUNCH();
    return XS_OK;
}
