#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""sdpa_ref.py - reference attention throughput on this GPU: PyTorch's
scaled_dot_product_attention restricted to its flash backend, on the shapes `xstage bench up`
runs (bf16, head dim 128, batch 1, [seq, heads, 128] storage viewed as [1, heads, seq, 128]).

Timing as in the bench: L2 evicted before every repetition, warm-up first, CUDA events around
one call, median and min/max over the repetitions. FLOPs: 4*seq^2*128*heads, halved when causal
(the flash-attention convention, also the bench's). Output: a table on stdout and, with --csv,
seq,heads,head_dim,causal,ref_us,ref_min_us,ref_max_us,ref_tflops,backend.
"""
import argparse
import statistics
import sys


def parse_list(text, name):
    try:
        vals = [int(x[:-1]) * 1024 if x[-1:] in "kK" else int(x) for x in text.split(",") if x]
    except ValueError:
        sys.exit(f"sdpa_ref: error: {name} '{text}': expected a comma-separated list of integers")
    if not vals or min(vals) < 1:
        sys.exit(f"sdpa_ref: error: {name} '{text}': values must be >= 1")
    return vals


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", default="8192,16384,32768,49152,65536")
    ap.add_argument("--heads", default="8,16")
    ap.add_argument("--causal", default="both", choices=["0", "1", "both"])
    ap.add_argument("-n", "--iters", type=int, default=5)
    ap.add_argument("-w", "--warmup", type=int, default=2)
    ap.add_argument("--csv", default=None)
    a = ap.parse_args()
    seqs, heads = parse_list(a.seq, "--seq"), parse_list(a.heads, "--heads")
    causals = [0, 1] if a.causal == "both" else [int(a.causal)]
    if a.iters < 1 or a.warmup < 0:
        sys.exit("sdpa_ref: error: --iters must be >= 1 and --warmup >= 0")

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        sys.exit(f"sdpa_ref: error: PyTorch with torch.nn.attention is needed: {e}")
    if not torch.cuda.is_available():
        sys.exit("sdpa_ref: error: no CUDA GPU visible to PyTorch")

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"# sdpa_ref: {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}"
          f", CUDA {torch.version.cuda}, flash backend (fallback: default)")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)  # > 2x L2
    rows = []
    print(f"{'seq':>6} {'heads':>5} {'c':>2} {'ref_us':>10} {'min':>10} {'max':>10} "
          f"{'TFLOP/s':>8} backend")
    for h in heads:
        for s in seqs:
            for c in causals:
                g = torch.Generator(device=dev).manual_seed(1234 + s + 7 * h + c)
                shape = (1, s, h, 128)
                def rand(lo, hi):
                    x = torch.empty(shape, dtype=torch.bfloat16, device=dev)
                    return x.uniform_(lo, hi, generator=g)

                q, k, v = rand(-2, 2), rand(-2, 2), rand(-1, 1)
                qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # [1, h, s, 128] views

                backend = "flash"

                def call():
                    if backend == "flash":
                        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(c))
                    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(c))

                try:
                    call()
                    torch.cuda.synchronize()
                except RuntimeError as e:
                    print(f"# sdpa_ref: flash backend refused seq {s} heads {h}: {e}; "
                          f"using the default backend", file=sys.stderr)
                    backend = "default"
                times = []
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                for i in range(a.warmup + a.iters):
                    flush.fill_(i & 0xFF)
                    start.record()
                    call()
                    end.record()
                    torch.cuda.synchronize()
                    if i >= a.warmup:
                        times.append(start.elapsed_time(end) * 1e3)
                med = statistics.median(times)
                flops = 4.0 * s * s * 128 * h * (0.5 if c else 1.0)
                tf = flops / (med * 1e-6) / 1e12
                rows.append((s, h, 128, c, med, min(times), max(times), tf, backend))
                print(f"{s:>6} {h:>5} {c:>2} {med:>10.1f} {min(times):>10.1f} "
                      f"{max(times):>10.1f} {tf:>8.1f} {backend}", flush=True)
                del q, k, v, qt, kt, vt
    if a.csv:
        with open(a.csv, "w") as f:
            f.write(f"# sdpa_ref: {props.name}, torch {torch.__version__}, "
                    f"CUDA {torch.version.cuda}\n")
            f.write("seq,heads,head_dim,causal,ref_us,ref_min_us,ref_max_us,ref_tflops,backend\n")
            for r in rows:
                f.write("%d,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%s\n" % r)
    print("# sdpa_ref OK")


if __name__ == "__main__":
    main()
