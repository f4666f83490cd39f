#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""grid_summary.py - merge the slices of one declared grid (issue 33 item 4) and score it.

Reads every <area>_grid_*.csv under the given directories (the CSVs `bench tp|up|ep --grid
declared [--rows A:B]` writes; scripts/gpu_grid.sh names them so), keeps each declared row once
(a row whose status is "not run" gives way to the slice that ran it; a row given twice is an
error), writes the merged rows in grid order with --out, and prints the issue's acceptance lines
over the rows that ran:

  auto_us <= 1.05 x best_other_us and tuned_us <= 1.02 x best_other_us on every row;
  geomean of overlapped_us / auto_us >= 1.10 over rows with comm_over_compute in [0.5, 2];
  auto_us within 10 % of bound_us on at least 80 % of rows;

plus the rows verified and the variants that were fastest. A figure is printed with the rows it
is over; a criterion over no row says so instead of counting as met.

usage: scripts/grid_summary.py tp|up|ep [--out merged.csv] DIR...
"""
import argparse
import csv
import glob
import math
import os
import sys
from collections import Counter

WANT = {"tp": 81, "up": 60, "ep": 192}


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def num(row, key):
    try:
        return float(row[key])
    except (KeyError, ValueError):
        return math.nan


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else math.nan


def main():
    ap = argparse.ArgumentParser(description="merge and score one declared grid's slices")
    ap.add_argument("area", choices=sorted(WANT))
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out", help="write the merged rows here, in grid order")
    a = ap.parse_args()

    files = sorted(f for d in a.dirs for f in glob.glob(os.path.join(d, a.area + "_grid_*.csv")))
    if not files:
        sys.exit(f"grid_summary: no {a.area}_grid_*.csv under {' '.join(a.dirs)}")
    head, rows = None, {}
    for f in files:
        for r in read_rows(f):
            head = head or list(r.keys())
            g = int(r["grid_row"])
            if r["status"].startswith("not run"):
                rows.setdefault(g, r)
                continue
            if g in rows and not rows[g]["status"].startswith("not run"):
                sys.exit(f"grid_summary: {a.area} row {g} given twice ({f})")
            rows[g] = r
    want = WANT[a.area]
    missing = [g for g in range(want) if g not in rows]
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=head)
            w.writeheader()
            for g in sorted(rows):
                w.writerow(rows[g])

    status = Counter(r["status"].split(":")[0] for r in rows.values())
    ran = [r for r in rows.values() if r["status"] == "ok"]
    print(f"{a.area}: {len(rows)} of {want} declared rows in {len(files)} file(s): "
          + ", ".join(f"{k} {v}" for k, v in sorted(status.items()))
          + (f"; missing {missing}" if missing else ""))
    ver = sum(r["verified"] in ("1", "true", "yes") for r in ran)
    print(f"{a.area}: verified {ver} of {len(ran)} rows that ran")
    if not ran:
        return 1

    def share(what, ok, n, target):
        print(f"{a.area}: {what} in {ok} of {n} rows: {'met' if ok == n and n else 'NOT met'}"
              if target is None else
              f"{a.area}: {what} in {ok} of {n} rows ({100.0 * ok / n:.1f} %, target {target}): "
              f"{'met' if ok >= 0.8 * n else 'NOT met'}")

    r_auto = [num(r, "auto_us") / num(r, "best_other_us") for r in ran]
    r_tune = [num(r, "tuned_us") / num(r, "best_other_us") for r in ran]
    share(f"auto_us <= 1.05 x best_other_us (worst {max(r_auto):.3f})",
          sum(x <= 1.05 for x in r_auto), len(ran), None)
    share(f"tuned_us <= 1.02 x best_other_us (worst {max(r_tune):.3f})",
          sum(x <= 1.02 for x in r_tune), len(ran), None)
    band = [r for r in ran if 0.5 <= num(r, "comm_over_compute") <= 2.0]
    if band:
        g = geomean([num(r, "overlapped_us") / num(r, "auto_us") for r in band])
        print(f"{a.area}: overlapped_us/auto_us geomean {g:.3f} over {len(band)} rows with "
              f"comm_over_compute in [0.5, 2] (target 1.10): {'met' if g >= 1.10 else 'NOT met'}")
    else:
        print(f"{a.area}: no row has comm_over_compute in [0.5, 2]: the band criterion holds "
              "in no row")
    share("auto_us within 10 % of bound_us",
          sum(num(r, "auto_us") <= 1.10 * num(r, "bound_us") for r in ran), len(ran), "80 %")
    ob = [num(r, "overlapped_us") / num(r, "auto_us") for r in ran]
    print(f"{a.area}: overlapped_us/auto_us over all rows: geomean {geomean(ob):.3f}, "
          f"min {min(ob):.3f}, max {max(ob):.3f}")
    cc = [num(r, "comm_over_compute") for r in ran]
    print(f"{a.area}: comm_over_compute {min(cc):.2f}-{max(cc):.2f}")
    best = Counter(r["best_other"] for r in ran)
    print(f"{a.area}: fastest variant besides auto and tuned: "
          + ", ".join(f"{k} {v}" for k, v in best.most_common()))
    key = next((k for k in ("auto", "auto_pick") if k in ran[0]), None)
    if key:
        picks = Counter((r[key].split() or ["?"])[0] for r in ran)
        print(f"{a.area}: auto ran " + ", ".join(f"{k} {v}" for k, v in picks.most_common()))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
