#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ep_summary.py - the EP headline figures (docs/METRICS.md) over the rows of one or more
`xstage bench ep --csv` files together (the default sweep and the --long points are two runs).

usage: scripts/ep_summary.py [--rows] FILE.csv [FILE.csv ...]

Prints, over all rows of all files: how many were verified; wave/interleaved and wave/auto
(geomean, median, max, min), with the largest wave/interleaved also at its spread's low end
(wave p10 / interleaved p90); rows with wave/auto below 0.99; auto within 10 % of bound_us on the
rows where the criterion holds as is or reshaped (bench ep's own "auto near bound"). The same
definitions as bench ep's summary lines; a file without rows, or a row without a needed column,
stops it with one line. --rows first prints one line per row: wave/interleaved with its spread
(wave p10 / interleaved p90 .. wave p90 / interleaved p10), wave, interleaved and auto over
bound_us, and drain_us / compute_us.
"""
import csv
import math
import statistics
import sys

NEED = ("config", "routing", "tokens", "peers", "wave_us", "interleaved_us", "auto_us",
        "bound_us", "verified", "criterion_met", "criterion_reshaped", "wave_p10",
        "interleaved_p90", "wave_p90", "interleaved_p10", "drain_us", "compute_us")


def rows_of(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    if not rows:
        sys.exit(f"ep_summary.py: {path}: no rows")
    missing = [c for c in NEED if c not in rows[0]]
    if missing:
        sys.exit(f"ep_summary.py: {path}: no column {missing[0]}")
    return rows


def line(name, xs):
    g = math.exp(sum(math.log(x) for x in xs) / len(xs))
    print(f"{name:<18} geomean {g:.3f}  median {statistics.median(xs):.3f}  "
          f"max {max(xs):.3f}  min {min(xs):.3f}  ({len(xs)} rows)")


def main(argv):
    per_row = len(argv) > 1 and argv[1] == "--rows"
    files = argv[2:] if per_row else argv[1:]
    if not files or files[0] in ("-h", "--help"):
        sys.exit(next(u for u in __doc__.splitlines() if u.startswith("usage:")))
    rows = []
    for p in files:
        rows += [(p, r) for r in rows_of(p)]
    f = lambda r, c: float(r[c])
    if per_row:
        for _, r in rows:
            b = f(r, "bound_us")
            print(f"{r['config']:<18} {r['routing']:<8} T={int(r['tokens']):>6} N={r['peers']}  "
                  f"wave/interleaved {f(r, 'wave_us') / f(r, 'interleaved_us'):.3f} "
                  f"[{f(r, 'wave_p10') / f(r, 'interleaved_p90'):.3f}.."
                  f"{f(r, 'wave_p90') / f(r, 'interleaved_p10'):.3f}]  /bound: wave "
                  f"{f(r, 'wave_us') / b:.3f} interleaved {f(r, 'interleaved_us') / b:.3f} auto "
                  f"{f(r, 'auto_us') / b:.3f}  drain/compute "
                  f"{f(r, 'drain_us') / f(r, 'compute_us'):.2f}")
    wi = [f(r, "wave_us") / f(r, "interleaved_us") for _, r in rows]
    wa = [f(r, "wave_us") / f(r, "auto_us") for _, r in rows]
    ver = sum(r["verified"] == "true" for _, r in rows)
    print(f"rows               {len(rows)} from {len(files)} files, {ver} verified")
    line("wave/interleaved", wi)
    k = max(range(len(rows)), key=lambda i: wi[i])
    r = rows[k][1]
    print(f"largest            {r['config']} {r['routing']} T={r['tokens']} N={r['peers']}: "
          f"{wi[k]:.3f}, wave p10 / interleaved p90 {f(r, 'wave_p10') / f(r, 'interleaved_p90'):.3f}"
          f" ({rows[k][0]})")
    line("wave/auto", wa)
    print(f"wave/auto < 0.99   {sum(x < 0.99 for x in wa)} of {len(wa)} rows")
    near = [f(r, "auto_us") / f(r, "bound_us") for _, r in rows
            if r["criterion_met"] == "1" or r["criterion_reshaped"] == "1"]
    print(f"auto near bound    {sum(x <= 1.10 for x in near)} of {len(near)} rows where the "
          "criterion holds as is or reshaped within 10 % of bound_us")
    return 0 if ver == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
