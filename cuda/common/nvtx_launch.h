// SPDX-License-Identifier: Apache-2.0
/*
 * nvtx_launch.h - an NVTX range around each kernel launch, so that Nsight Systems names the
 * kernels xstage launches by what they do (its NVTX view projects a range onto the GPU work
 * launched inside it).
 *
 * nvtx3 is header-only (the CUDA toolkit's include/nvtx3); it needs -ldl, which the tool links.
 * Without a profiler attached each range costs two calls through a no-op function pointer.
 */
#ifndef XSTAGE_NVTX_LAUNCH_H
#define XSTAGE_NVTX_LAUNCH_H

#include <nvtx3/nvToolsExt.h>

/* XS_NVTX_LAUNCH("name", kernel<<<grid, block, smem, stream>>>(args)): the launch inside a range
 * called name (the kernel's name); a statement, usable as the body of an if. */
#define XS_NVTX_LAUNCH(name, ...)                                                                  \
    do {                                                                                           \
        nvtxRangePushA(name);                                                                      \
        __VA_ARGS__;                                                                               \
        nvtxRangePop();                                                                            \
    } while (0)

#endif /* XSTAGE_NVTX_LAUNCH_H */
