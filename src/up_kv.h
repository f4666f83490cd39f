// SPDX-License-Identifier: Apache-2.0
/*
 * up_kv.h - the KV split's replay, shared by src/up_kv.c (check, prediction) and src/up_progs.c
 * (the KV kernel's per-CTA programs), and the programs' simulation with only what a caller reads
 * (src/up_model.c). Internal to the core (not installed).
 */
#ifndef XSTAGE_UP_KV_H
#define XSTAGE_UP_KV_H

#include "xstage_up.h"

/* Replays the lists: every CTA runs its tasks in order, a last part only once every other part
 * of its tile has ended. With dur (per tile, ns; NULL: untimed) it also times them: tile_end[t]
 * is when tile t is stored (its whole task or last part ends). parts_done and parts_end are
 * [tiles] scratch. Returns the number of tasks that ran (all of them unless a wait can never
 * end; -1 out of memory); *compute_end the last task's end; task_end (optional) each task's
 * end, by its index in the lists. */
int xs_up_kv_replay(int seq, int heads, int causal, int grid, const int *task_off,
                    const xs_attn_kvtask *tasks, const double *dur, double *tile_end,
                    int *parts_done, double *parts_end, double *compute_end, double *task_end);
/* The slots the lists name (parts' slot bases + their parts - 1, at most): the count
 * xs_attn_kv_check wants where the caller did not build the lists. */
int xs_up_kv_named_slots(int grid, const int *task_off, const xs_attn_kvtask *tasks);

/* xs_attn_progs_simulate with only what the caller reads: with free_run 0 no unlimited-stage
 * run (free_ns NAN), with windows 0 no windows (held_ns NAN). span_ns and peak_bytes always. */
xs_status xs_up_progs_simulate(const xs_profile *p, const xs_attn_progs *pg, int free_run,
                               int windows, xs_attn_progsim *out);

#endif /* XSTAGE_UP_KV_H */
