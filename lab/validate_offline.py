#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Re-predict recorded `xstage validate` rows with a profile, on the CPU, and print the suite
figures as validate does (docs/METRICS.md, "Validation").

    lab/validate_offline.py VALIDATE_ROWS.csv PROFILE.json [--set NAME=VALUE ...] [-v|-vv]

VALIDATE_ROWS.csv is what `xstage validate --rows` wrote on the GPU (one line per schedule row,
measured columns meas_*). Each schedule is rebuilt from its rows, predicted with
`xstage predict --profile PROFILE [--set ...] [--sync]`, and compared with the measured columns:
error of the total (end_ns of the last row), per-row |error| of issue_max_ns. The measured numbers
are never changed; only the prediction is redone, so a profile or model change can be judged on a
recorded run without a GPU. Rows that were looked at to choose a model are in-sample for it: say
so when quoting the figures.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", help="validate rows CSV (xstage validate --rows)")
    ap.add_argument("profile", help="profile JSON to predict with")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="profile override, passed to xstage predict")
    ap.add_argument("--xstage", default=os.environ.get("XSTAGE", "build/xstage"),
                    help="the xstage binary (default build/xstage, or $XSTAGE)")
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="-v: one line per schedule; -vv: and one per row")
    a = ap.parse_args()

    try:
        with open(a.rows) as f:
            recs = list(csv.DictReader(l for l in f if not l.startswith("#")))
    except OSError as e:
        sys.exit(f"validate_offline: {a.rows}: {e.strerror}")
    need = {"schedule", "sync", "producers", "bytes_per_producer", "gap_ns",
            "meas_issue_max_ns", "meas_end_ns"}
    if not recs or not need <= set(recs[0]):
        sys.exit(f"validate_offline: {a.rows}: not a validate rows CSV (columns {sorted(need)})")
    sched = {}
    for r in recs:
        sched.setdefault(r["schedule"], []).append(r)

    etot, allrow = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.csv")
        for name, rr in sched.items():
            with open(path, "w") as f:
                f.write("producers,bytes_per_producer,gap_ns\n")
                for r in rr:
                    f.write(f"{r['producers']},{r['bytes_per_producer']},{r['gap_ns']}\n")
            cmd = [a.xstage, "predict", "--schedule", path, "--csv", "-", "--profile", a.profile]
            for s in a.set:
                cmd += ["--set", s]
            if rr[0]["sync"] == "1":
                cmd.append("--sync")
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"validate_offline: {name}: {p.stderr.strip()}")
            pr = list(csv.DictReader(l for l in p.stdout.splitlines() if not l.startswith("#")))
            if len(pr) != len(rr):
                sys.exit(f"validate_offline: {name}: {len(pr)} predicted rows for {len(rr)}")
            mt, pt = float(rr[-1]["meas_end_ns"]), float(pr[-1]["end_ns"])
            e = 100 * (pt - mt) / mt
            etot.append(e)
            re = [100 * abs(float(q["issue_max_ns"]) - float(m["meas_issue_max_ns"])) /
                  float(m["meas_issue_max_ns"]) for q, m in zip(pr, rr)]
            allrow += re
            if a.verbose:
                print(f"{name:26s} meas {mt / 1e3:10.1f} us  pred {pt / 1e3:10.1f} us  "
                      f"{e:+7.1f}%  row_med {statistics.median(re):6.1f}%")
            if a.verbose > 1:
                for q, m in zip(pr, rr):
                    print(f"    K {m['producers']:>4} B {m['bytes_per_producer']:>8} "
                          f"G {float(m['gap_ns']):9.0f}  issue_max meas "
                          f"{float(m['meas_issue_max_ns']):9.0f} pred "
                          f"{float(q['issue_max_ns']):9.0f}  end meas "
                          f"{float(m['meas_end_ns']):9.0f} pred {float(q['end_ns']):9.0f}")
    ae = [abs(x) for x in etot]
    print(f"totals: median |err| {statistics.median(ae):.1f}%, max {max(ae):.1f}% "
          f"({len(ae)} schedules); per-row issue_max: median |err| "
          f"{statistics.median(allrow):.1f}% ({len(allrow)} rows)")


if __name__ == "__main__":
    main()
