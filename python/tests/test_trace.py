# SPDX-License-Identifier: Apache-2.0
"""
test_trace.py - Trace over the core's v1 trace format (include/xstage_trace.h): load, build from
records, refusals as xstage.Error, the implied per-CTA programs, the prediction (the same
numbers as `xstage predict --trace --csv`), the comparison and the timeline.
"""
import json

import numpy as np
import pytest

import xstage
from conftest import REPO, printed_equal, tool_csv

SAMPLE = REPO / "tests" / "data" / "trace_sim132.csv"


@pytest.fixture(scope="module")
def trace():
    return xstage.Trace.load(SAMPLE)


def test_load(trace):
    r = trace.records
    assert r.dtype == xstage.TRACE_DTYPE and len(r) == len(trace) > 0
    assert trace.ncta == 132 and trace.producers == 132 and trace.target == "host"
    assert np.all(np.diff(r["cta"].astype(np.int64) * 10**6 + r["seq"]) > 0)  # by (cta, seq)
    assert min(r["issue_start_ns"].min(), r["work_start_ns"][r["work_start_ns"] >= 0].min()) == 0
    assert trace.end_ns == r["issue_end_ns"].max()
    assert trace.total_bytes == int(r["bytes"].sum())


def test_records_roundtrip(trace, tmp_path):
    again = xstage.Trace.from_records(trace.records)
    assert np.array_equal(again.records, trace.records)
    f = tmp_path / "t.csv"
    trace.save(f, meta={"kernel": "copy", "target": "host"})
    back = xstage.Trace.load(f)
    assert np.array_equal(back.records, trace.records) and back.kernel == "copy"
    pytest.importorskip("pandas")
    df = trace.to_pandas().drop(columns=["flags"])
    assert np.array_equal(xstage.Trace.from_records(df).records, trace.records)


HEAD = "# xstage-trace v1\n# dropped=%d\ncta,sm,seq,bytes,issue_start_ns,issue_end_ns," \
       "work_start_ns,work_end_ns\n"


@pytest.mark.parametrize("text, msg", [
    (HEAD % 3 + "0,1,0,64,10,20,-1,-1\n", "3 records dropped"),
    ("# xstage-trace v2\n" + (HEAD % 0).split("\n", 1)[1], "unsupported trace version"),
    (HEAD % 0 + "0,1,0,64,30,20,-1,-1\n", "mine.csv:4"),
    (HEAD % 0 + "0,1,0,64,10,20,-1,-1\n0,1,1,64,15,30,-1,-1\n", "mine.csv"),
])
def test_bad_traces_are_refused(text, msg):
    with pytest.raises(xstage.Error, match=msg):
        xstage.Trace.parse(text, "mine.csv")


def test_bad_records_are_refused():
    with pytest.raises(xstage.Error, match="no column sm, seq, bytes"):
        xstage.Trace.from_records({"cta": [0]})
    with pytest.raises(xstage.Error):
        xstage.Trace.from_records({"cta": [0], "sm": [0], "seq": [0], "bytes": [64],
                                   "issue_start_ns": [20], "issue_end_ns": [10],
                                   "work_start_ns": [-1], "work_end_ns": [-1]})


def test_programs_and_prediction_agree(trace):
    sched, pg = trace.programs()
    assert pg.shape == (len(sched), trace.ncta)
    assert int(pg.bytes.sum()) == trace.total_bytes
    assert np.all(pg.bytes[0] == 0)                    # row 0: work until the first issue
    pred = trace.predict()
    assert len(pred.start_ns) == len(trace) and np.all(pred.end_ns >= pred.start_ns)
    assert pred.end_ns_total == pred.end_ns.max()
    # the same programs through predict, on the profile Trace.predict uses
    prof = xstage.Profile().set(start_ns=0, row_start_ns=0)
    p = xstage.predict(sched, prof, programs=pg, windows=True)
    assert p.peak_backlog_bytes == pred.peak_backlog_bytes
    assert np.nanmax(p.win_end) == pred.end_ns_total


def test_prediction_is_the_tools(tool, trace):
    header, rows = tool_csv(tool, "predict", "--trace", SAMPLE)
    pred = trace.predict()
    r = trace.records
    col = {n: i for i, n in enumerate(header)}
    assert len(rows) == len(trace)
    for i, row in enumerate(rows):
        assert (int(row[col["cta"]]), int(row[col["seq"]])) == (r["cta"][i], r["seq"][i])
        for name, v in (("pred_start_ns", pred.start_ns[i]), ("pred_end_ns", pred.end_ns[i]),
                        ("zero_start_ns", pred.zero_start_ns[i]),
                        ("zero_end_ns", pred.zero_end_ns[i])):
            assert printed_equal(row[col[name]], v), (i, name, row[col[name]], v)


def test_compare_and_timeline(trace, tmp_path):
    s = trace.compare()
    assert 0 < s["ntiles"] <= len(trace) and s["total_ns"] == trace.end_ns
    pred = trace.predict()
    assert s["total_err_pct"] == pytest.approx(
        100 * (pred.end_ns_total - trace.end_ns) / trace.end_ns)
    assert trace.compare(prediction=pred) == s
    f = tmp_path / "t.json"
    trace.timeline(f, prediction=pred, title="sample")
    data = json.loads(f.read_text())
    assert len(data["traceEvents"]) > len(trace)
