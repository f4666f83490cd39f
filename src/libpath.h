// SPDX-License-Identifier: Apache-2.0
/*
 * libpath.h - where the CUDA side looks for the libraries it loads at run time (NCCL, cuBLAS).
 *
 * One order for both (docs/INSTALL.md, "Run-time libraries"): the library's own variable
 * (XS_NCCL_LIB, XS_CUBLAS_LIB; the caller handles it), then the active Python environment's
 * nvidia-* pip packages, then the system loader (LD_LIBRARY_PATH, ld.so.cache), then the CUDA
 * toolkit's lib64 ($CUDA_HOME, default /usr/local/cuda). No site-specific paths.
 *
 * CPU-only C (tests/test_launch.c tests it with fake environments); the CUDA files call it.
 */
#ifndef XS_LIBPATH_H
#define XS_LIBPATH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XS_LIBPATH_MAX 1024 /* bytes of one candidate path, NUL included */

/* Site-packages directories of the active Python environment, in order, without duplicates:
 *   1. $VIRTUAL_ENV/lib/python3.*\/site-packages (a venv that is activated),
 *   2. $CONDA_PREFIX/lib/python3.*\/site-packages (an active conda environment),
 *   3. every directory of `python3`'s sys.path (PATH's python3, asked once per process and
 *      remembered; it covers PYTHONPATH, the user's site-packages and the system's
 *      dist-packages). XS_PYTHON names another interpreter; XS_PYTHON=0 skips this step.
 * Writes up to cap entries into dirs (each XS_LIBPATH_MAX bytes); returns how many. */
int xs_python_site_dirs(char (*dirs)[XS_LIBPATH_MAX], int cap);

/* Candidate files for a library, in search order: for each site directory (above) and each
 * tail (a glob relative to site-packages, e.g. "nvidia/nccl/lib/libnccl.so.2"), the existing
 * matches; then each of `names` as given (bare sonames: the system loader's search); then
 * $CUDA_HOME/lib64/<name> (default /usr/local/cuda) for each bare name. Duplicates are dropped.
 * Returns the number written to out (at most cap). */
int xs_lib_candidates(const char *const *tails, int ntails, const char *const *names, int nnames,
                      char (*out)[XS_LIBPATH_MAX], int cap);

#ifdef __cplusplus
}
#endif
#endif /* XS_LIBPATH_H */
