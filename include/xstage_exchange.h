// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_exchange.h - the N-rank transport path over windows: all-pairs exchange with per-source
 * slots, flag signals and a flag-built barrier; plus the transport internals shared by
 * cuda/common/win.cu, nccl.cu and exchange.cu (not needed by kernels or subcommands).
 *
 * Window layout (every target): `bytes` of payload, then at a 128-byte aligned offset the
 * `nflags` user flags (table->flags[r]), then XS_MAX_RANKS barrier flags (XS_WIN_BARRIER(tab,r)):
 * barrier flag s of rank r's window holds the last barrier epoch in which rank s arrived. User
 * code owns the user flags; the barrier flags belong to xs_win_barrier and xs_exchange and are
 * never reset (they only grow), so a fast rank's arrival is never wiped by a slow rank's reset.
 */
#ifndef XSTAGE_EXCHANGE_H
#define XSTAGE_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>
#include "xstage.h"
#include "xstage_win.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Barrier flags of rank r's window (device-usable pointer, XS_MAX_RANKS of them). */
#define XS_WIN_BARRIER(tab, r) ((tab)->flags[(r)] + (tab)->nflags)

/* ---- all-pairs exchange ------------------------------------------------------------------- */

typedef struct {
    size_t bytes_per_pair; /* bytes one source stores into one destination (multiple of 16) */
    uint32_t seed;         /* source s stores the pattern (seed ^ s) */
    uint64_t epoch;        /* flag value of this round; must grow from round to round (flags
                              start at 0 after xs_win_open / xs_win_reset) */
    uint64_t timeout_ns;   /* bound on every device-side wait (0: 10 s) */
    int ctas;              /* producer CTAs of 128 threads (0: one per SM) */
    int skip_send;         /* tests: wait without storing or signalling (a signal never comes) */
} xs_exchange_opts;

typedef struct {
    double ms;          /* stores, signals, flag waits and the barrier (CUDA events) */
    uint64_t bad16;     /* 16-byte units of this process's windows that failed the check */
    uint64_t checked16; /* 16-byte units checked */
    int sources;        /* sources played by this process (1 for peer, N for virtual) */
    int destinations;   /* destinations written (N) */
} xs_exchange_result;

/* One round. Slot s of every destination window is [s * bytes_per_pair, (s+1) * bytes_per_pair)
 * and holds the pattern (seed ^ s, first 16-byte index s * bytes_per_pair / 16). This process
 * plays the sources it owns (peer: its rank; virtual: every virtual rank; local/host: rank 0):
 *   1. poisons the payload of its own windows, then a host barrier (peer runs);
 *   2. producers (CTAs of 128 threads, 16-byte stores) store every owned source's slot of every
 *      destination through the window table; the last producer of a (source, destination) pair
 *      sets user flag `source` of that destination to epoch (release, system scope);
 *   3. one CTA waits (bounded, acquire) for flag s >= epoch for every source s on each own
 *      window, then runs a device-side barrier across ranks on the barrier flags (bounded);
 *   4. verifies every slot of every own window, destination-side.
 * Needs nflags >= nranks and bytes >= nranks * bytes_per_pair. XS_ETIMEOUT names the window and
 * the source (or barrier rank) that did not arrive; XS_EVERIFY when bytes arrived wrong (r->bad16
 * says how many units). r may not be NULL. */
xs_status xs_exchange(xs_winset *w, const xs_exchange_opts *o, xs_exchange_result *r);

/* Largest bytes_per_pair the windows hold (a multiple of 16). */
size_t xs_exchange_max_bytes(const xs_winset *w);

/* Wait from the host, through a one-thread kernel, until user flag `flag` of rank `rank`'s
 * window reaches `value` (acquire, system scope), at most timeout_ns. XS_ETIMEOUT:
 * "flag 3 of rank 0's window stayed at 0 < 1 for 200 ms". */
xs_status xs_win_wait_flag(xs_winset *w, int rank, int flag, uint64_t value, uint64_t timeout_ns);

/* ---- internals shared by win.cu / exchange.cu / nccl.cu / gpu.cu -------------------------- */

/* 1 where rank r's window belongs to this process (it may poison and verify it). */
int xs_win_owns(const xs_winset *w, int r);
/* The next barrier epoch (1, 2, ...); all processes of a run call barriers in the same order. */
uint64_t xs_win_next_barrier_epoch(xs_winset *w);
/* The winset's CUDA stream (cudaStream_t) and its mapped device-status record. */
void *xs_win_stream(xs_winset *w);
/* Poison the payload of the own windows (flags untouched); waits for completion. */
xs_status xs_win_poison(xs_winset *w, unsigned char poison);
/* After a failed wait or a dead peer: close aborts the NCCL communicator instead of the
 * collective teardown, so that this rank cannot hang on a peer that is gone. */
void xs_win_mark_failed(xs_winset *w);
/* Number of SMs of the winset's device. */
int xs_win_sm_count(const xs_winset *w);

/* NCCL (cuda/common/nccl.cu). Loading is lazy; a failed load is not cached, so a corrected
 * XS_NCCL_LIB can be tried again. */
int xs_nccl_loaded_version(void); /* 0 when NCCL is not loaded */
const char *xs_nccl_lib_path(void); /* "" when not loaded */
xs_status xs_nccl_unique_id(unsigned char id[128]);
typedef struct xs_nccl_comm xs_nccl_comm;
/* Communicator of nranks (this process is `rank`, on the current CUDA device), one symmetric
 * window of win_bytes (rounded up to 4096) registered with NCCL_WIN_COLL_SYMMETRIC, zeroed
 * before registration, a device communicator, and peers[p] = LSA pointer to rank p's window
 * (p < nranks); *local = this rank's own ncclMemAlloc pointer. Collective over the ranks. */
xs_status xs_nccl_open(int nranks, int rank, const unsigned char id[128], size_t win_bytes,
                       xs_nccl_comm **out, void **local, void **peers);
/* abort = 1: ncclCommAbort only (no collective step), for teardown after an error. */
void xs_nccl_close(xs_nccl_comm *c, int abort);
/* GPU count for the launcher (cuda/common/gpu.cu). */
xs_status xs_gpu_count(int *n);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_EXCHANGE_H */
