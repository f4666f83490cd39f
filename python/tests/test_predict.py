# SPDX-License-Identifier: Apache-2.0
"""
test_predict.py - predict gives the results of `xstage predict --csv` on every examples/ schedule:
the same columns, and every value the same at the tool's printed precision (the C core's doubles
printed the tool's way), free-running and synchronised, on the embedded and a calibrated
(extended) profile and with an override; and the same doubles whatever form the schedule
came in.
"""
import os

import numpy as np
import pytest

import xstage
from conftest import CALIBRATED, EXAMPLES, printed_equal, tool_csv

PROFILES = {"embedded": None, "calibrated": CALIBRATED}


def test_examples_exist():
    assert len(EXAMPLES) >= 5, EXAMPLES


def compare(header, rows, pred):
    assert header == list(xstage.PREDICT_COLUMNS)
    assert list(pred.columns) == header
    assert len(rows) == len(pred)
    for i, row in enumerate(rows):
        assert len(row) == len(header)
        for name, text in zip(header, row):
            v = pred[name][i]
            assert printed_equal(text, v), "row %d, %s: tool %s, python %r" % (i, name, text, v)


@pytest.mark.parametrize("sync", [False, True], ids=["free", "sync"])
@pytest.mark.parametrize("prof", sorted(PROFILES))
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_predict_matches_tool(tool, path, prof, sync):
    args = ["predict", "--schedule", path] + (["--sync"] if sync else [])
    if PROFILES[prof] is not None:
        args += ["--profile", PROFILES[prof]]
    header, rows = tool_csv(tool, *args)
    pred = xstage.predict(xstage.Schedule.load(path), PROFILES[prof], sync=sync)
    compare(header, rows, pred)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_predict_with_overrides_matches_tool(tool, path):
    header, rows = tool_csv(tool, "predict", "--schedule", path, "--set",
                            "drain_bytes_per_ns=30.5", "--set", "capacity_bytes=524288")
    p = xstage.Profile().set("R", 30.5).set(Q=524288)
    compare(header, rows, xstage.predict(path, p))


def same_prediction(a, b):
    for c in xstage.PREDICT_COLUMNS:
        assert np.array_equal(a[c], b[c]), c
    assert a.makespan_ns == b.makespan_ns
    assert a.peak_backlog_bytes == b.peak_backlog_bytes


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_schedule_forms_give_identical_doubles(path):
    s = xstage.Schedule.load(path)
    ref = xstage.predict(s)
    same_prediction(ref, xstage.predict(str(path)))
    same_prediction(ref, xstage.predict(xstage.Schedule(s.rows())))
    same_prediction(ref, xstage.predict(xstage.Schedule(s.to_numpy())))
    same_prediction(ref, xstage.predict(xstage.Schedule(s.to_numpy(structured=True))))
    same_prediction(ref, xstage.predict(xstage.Schedule(
        [dict(producers=a, bytes_per_producer=b, gap_ns=g) for a, b, g in s.rows()])))
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(path, comment="#")
    same_prediction(ref, xstage.predict(xstage.Schedule(df)))


def test_prediction_to_pandas():
    pytest.importorskip("pandas")
    pred = xstage.predict(EXAMPLES[0])
    df = pred.to_pandas()
    assert list(df.columns) == list(xstage.PREDICT_COLUMNS)
    assert len(df) == len(pred)
    assert np.array_equal(df["end_ns"].to_numpy(), pred.end_ns)


def test_prediction_columns_are_consistent():
    s = xstage.Schedule([(16, 262144, 20000), (132, 8192, 5000), (64, 65536, 0)])
    pred = xstage.predict(s)
    assert np.array_equal(pred.row, [0, 1, 2])
    assert np.array_equal(pred.producers, [16, 132, 64])
    assert np.array_equal(pred.bytes_per_producer, [262144, 8192, 65536])
    assert np.all(pred.issue_med_ns <= pred.issue_max_ns)
    assert np.all(np.diff(pred.end_ns) > 0)
    assert pred.total_ns == pred.end_ns[-1]
    assert pred.makespan_ns >= pred.total_ns
    # every byte but the last Q(K) has drained by the end of issue
    prof = xstage.Profile()
    assert pred.makespan_ns >= (s.total_bytes - prof.capacity(132)) / prof.R


def test_windows_and_backlog():
    s = xstage.Schedule([(4, 1 << 20, 1000), (2, 65536, 0)])
    pred = xstage.predict(s, windows=True, backlog=True)
    assert pred.win_start.shape == (2, 4) and pred.win_end.shape == (2, 4)
    assert np.isnan(pred.win_start[1, 2:]).all()          # producers 2, 3 idle in row 1
    assert (pred.win_end[0] >= pred.win_start[0]).all()
    assert np.isclose(pred.win_end[0].max(), pred.end_ns[0])
    assert len(pred.backlog_t_ns) > 0 and np.all(np.diff(pred.backlog_t_ns) >= 0)
    assert pred.backlog_bytes.max() == pytest.approx(pred.peak_backlog_bytes)
    plain = xstage.predict(s)
    same_prediction(plain, pred)                           # recording changes nothing
    assert plain.win_start is None and plain.backlog_t_ns is None


def test_chunk_traces():
    s = xstage.Schedule([(3, 100000, 500), (2, 40000, 0)])
    pred = xstage.predict(s, chunks=True)
    c = pred.chunks
    assert c.dtype == xstage.CHUNK_DTYPE
    assert int(c["bytes"].sum()) == s.total_bytes
    assert np.all(np.diff(c["t_stage_ns"]) >= 0)           # acceptance order
    assert np.all(c["t_queue_ns"] <= c["t_stage_ns"])
    assert np.all(np.diff(c["t_drained_ns"]) >= 0)         # the drain head only advances
    assert set(zip(c["row"], c["producer"])) == {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)}
    same_prediction(xstage.predict(s), pred)


@pytest.mark.parametrize("case", range(4))
def test_random_schedules_match_tool(tool, tmp_path, case):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    s = xstage.Schedule({"producers": rng.integers(1, 133, n),
                         "bytes_per_producer": rng.integers(1, 1 << 18, n),
                         "gap_ns": np.round(rng.uniform(0, 50e3, n), 3)})
    f = tmp_path / "random.csv"
    s.save(f)
    sync = bool(case % 2)
    prof = xstage.Profile.load(CALIBRATED) if case >= 2 else xstage.Profile()
    args = ["predict", "--schedule", f] + (["--sync"] if sync else [])
    if case >= 2:
        args += ["--profile", CALIBRATED]
    header, rows = tool_csv(tool, *args)
    assert xstage.Schedule.load(f) == s, "seed %d" % seed
    try:
        compare(header, rows, xstage.predict(s, prof, sync=sync))
    except AssertionError as e:
        raise AssertionError("seed %d: %s" % (seed, e)) from None
