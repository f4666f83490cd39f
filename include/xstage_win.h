// SPDX-License-Identifier: Apache-2.0
/*
 * xstage_win.h - destination windows: one per-destination pointer table for every kernel.
 *
 * A kernel stores through xs_wintab (passed by value). The same kernel then runs against:
 *   local   - one window in this GPU's HBM (the control);
 *   host    - one window in pinned, mapped host memory (the PCIe path);
 *   virtual - N virtual peers on one GPU: rank 0 is the local window, ranks 1..N-1 are windows
 *             in pinned host memory reached over PCIe;
 *   peer    - real peers: NCCL device-API symmetric windows, LSA pointers (one process per GPU).
 * Each window is `bytes` of payload followed by `nflags` 64-bit signal flags. Flags carry
 * release/acquire semantics at system scope (xstage_device.cuh: xs_signal_cta / xs_wait_geq).
 */
#ifndef XSTAGE_WIN_H
#define XSTAGE_WIN_H

#include <stddef.h>
#include <stdint.h>
#include "xstage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XS_MAX_RANKS 64

typedef enum { XS_TARGET_LOCAL, XS_TARGET_HOST, XS_TARGET_VIRTUAL, XS_TARGET_PEER } xs_target;

xs_status xs_target_parse(const char *s, xs_target *t); /* "local", "host", "virtual", "peer" */
const char *xs_target_name(xs_target t);

/* Passed by value to kernels (fits the kernel parameter space). */
typedef struct {
    int nranks;                     /* number of destinations */
    int rank;                       /* this process's rank (the source) */
    size_t bytes;                   /* payload bytes of each window */
    int nflags;                     /* 64-bit flags after each payload */
    char *data[XS_MAX_RANKS];       /* device-usable pointer to rank r's payload */
    uint64_t *flags[XS_MAX_RANKS];  /* device-usable pointer to rank r's flags */
    unsigned char host_mem[XS_MAX_RANKS]; /* 1 where rank r's window is pinned host memory */
} xs_wintab;

typedef struct xs_winset xs_winset; /* opaque: owns allocations, NCCL communicator and windows */

typedef struct {
    xs_target target;
    int virtual_peers;  /* XS_TARGET_VIRTUAL: N >= 1 destinations (1 local + N-1 host) */
    size_t bytes;       /* payload bytes per window */
    int nflags;         /* flags per window (>= 1) */
    int device;         /* CUDA device of this process */
} xs_win_opts;

/* Open the windows of one process. For XS_TARGET_PEER the process must have been started by the
 * launcher (xstage_launch.h), which passes rank, size and the NCCL unique id; with no launcher
 * environment it runs as a one-rank communicator over its own window. Errors: no GPU, NCCL
 * missing or older than 2.28.7, out of device or pinned host memory - one line each. */
xs_status xs_win_open(const xs_win_opts *o, xs_winset **out);
/* The table to pass to kernels (host copy; valid until xs_win_close). */
const xs_wintab *xs_win_table(const xs_winset *w);
xs_target xs_win_target(const xs_winset *w);
/* Fill this process's own receive window(s) with a poison byte and zero its flags. */
xs_status xs_win_reset(xs_winset *w, unsigned char poison);
/* Count 16-byte units in destination `rank`'s payload [off16, off16+n16) (in 16-byte units) that
 * differ from the pattern (seed, first_idx16 ...). Destination-side: host windows are read by
 * the CPU, device windows by a GPU kernel on their own GPU. For peer targets only the own rank's
 * window can be checked (rank == table->rank). */
xs_status xs_win_verify(xs_winset *w, int rank, uint64_t off16, uint64_t n16, uint32_t seed,
                        uint64_t first_idx16, uint64_t *bad);
/* What the host does to destination `rank`'s payload [off16, off16+n16) after verifying it,
 * before the next run stores there again (host windows only; a no-op for device windows).
 * XS_DEST_KEEP leaves the lines the verification read in the CPU's caches (clean);
 * XS_DEST_FLUSH writes them back and evicts them (clflush), as a destination the CPU has not
 * touched since; XS_DEST_DIRTY rewrites them from the CPU (modified lines in its caches), as a
 * freshly cleared buffer. docs/METRICS.md (destination state) says why this is a setting. */
typedef enum { XS_DEST_KEEP = 0, XS_DEST_FLUSH = 1, XS_DEST_DIRTY = 2 } xs_dest_state;
xs_status xs_dest_state_parse(const char *s, xs_dest_state *out);
const char *xs_dest_state_name(xs_dest_state d);
xs_status xs_win_host_state(xs_winset *w, int rank, uint64_t off16, uint64_t n16,
                            xs_dest_state d);
/* Host-side barrier across the processes of a peer run (a no-op for a single process), with a
 * timeout in ms; XS_ETIMEOUT names the ranks that did not arrive when it can. */
xs_status xs_win_barrier(xs_winset *w, int timeout_ms);
void xs_win_close(xs_winset *w);

/* The NCCL version loaded (e.g. 22809), loading NCCL if needed; XS_ENCCL with one line when it
 * is missing or older than 2.28.7. */
xs_status xs_nccl_version(int *version);

#ifdef __cplusplus
}
#endif
#endif /* XSTAGE_WIN_H */
