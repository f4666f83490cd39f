# SPDX-License-Identifier: Apache-2.0
"""
test_programs_plot_calibrate.py - per-CTA programs (xs_simulate_programs), the schedule's own
I/O, plot_timeline and calibrate (with stand-in tools: calibration itself needs a GPU).
"""
import os
import stat

import numpy as np
import pytest

import xstage
from xstage import calibration
from conftest import CALIBRATED, EXAMPLES


def test_programs_that_repeat_the_rows_reproduce_them_exactly():
    for path in EXAMPLES:
        s = xstage.Schedule.load(path)
        k = s.max_producers
        b = np.repeat(s.bytes_per_producer[:, None], k, axis=1)
        g = np.repeat(s.gap_ns[:, None], k, axis=1)
        for sync in (False, True):
            a = xstage.predict(s, sync=sync)
            c = xstage.predict(s, sync=sync, programs=xstage.Programs(b, g))
            for col in xstage.PREDICT_COLUMNS:
                assert np.array_equal(a[col], c[col]), (path.name, sync, col)
            assert a.makespan_ns == c.makespan_ns


def test_per_cta_programs():
    # CTA 0 stores a big tile in row 0 and nothing after; CTA 1 computes first, stores later
    b = np.array([[1 << 20, 0], [0, 1 << 20], [0, 4096]])
    g = np.array([[100.0, 5000.0], [0.0, 50.0], [0.0, 0.0]])
    pred = xstage.predict(programs=(b, g), windows=True, chunks=True)
    assert pred.producers.tolist() == [2, 2, 2]                 # every row names both CTAs
    assert pred.bytes_per_producer.tolist() == [1 << 20, 1 << 20, 4096]
    assert np.isnan(pred.win_start[0, 1]) and np.isnan(pred.win_start[1, 0])
    assert not np.isnan(pred.win_start[1, 1])
    assert pred.win_start[1, 1] >= 5000.0                      # after CTA 1's own work
    assert int(pred.chunks["bytes"].sum()) == int(b.sum())
    again = xstage.predict(pred.schedule, programs=xstage.Programs(b, g))
    assert np.array_equal(again.end_ns, pred.end_ns)


@pytest.mark.parametrize("b, g, msg", [
    (np.zeros((2, 2)), np.zeros((2, 3)), "one shape"),
    (np.zeros(4), np.zeros(4), "2-D"),
    (np.full((1, 2), 1.5), np.zeros((1, 2)), "whole numbers"),
    (np.full((1, 2), -1), np.zeros((1, 2)), "out of range"),
    (np.full((1, 2), 10), np.array([[-1.0, 5.0]]), "row 0, producer 0: 10 bytes, gap -1 ns"),
])
def test_bad_programs(b, g, msg):
    with pytest.raises(xstage.Error, match=msg):
        xstage.predict(programs=(b, g))


def test_programs_narrower_than_the_schedule():
    s = xstage.Schedule([(4, 4096, 0)])
    with pytest.raises(xstage.Error, match="programs: 2 producers given for a schedule of 4"):
        xstage.predict(s, programs=(np.ones((1, 2), np.int64), np.zeros((1, 2))))
    with pytest.raises(xstage.Error, match="2 rows for a schedule of 1"):
        xstage.predict(s, programs=(np.ones((2, 4), np.int64), np.zeros((2, 4))))


def test_schedule_save_load_and_frames(tmp_path):
    s = xstage.Schedule([(16, 262144, 20000.25), (132, 8192, 0)])
    f = tmp_path / "s.csv"
    s.save(f, comment="two rows\nfor a test")
    text = f.read_text()
    assert text.startswith("# two rows\n# for a test\n")
    assert xstage.Schedule.load(f) == s
    assert len(s) == 2 and s.max_producers == 132
    assert s.total_bytes == 16 * 262144 + 132 * 8192 and s.total_gap_ns == 20000.25
    pytest.importorskip("pandas")
    df = s.to_pandas()
    assert list(df.columns) == ["producers", "bytes_per_producer", "gap_ns"]
    assert xstage.Schedule(df) == s


def test_plot_timeline(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "t.png"
    fig = xstage.plot_timeline(EXAMPLES[0], path=png, title="drift")
    assert len(fig.axes) == 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pred = xstage.predict(xstage.Schedule([(8, 1 << 20, 1000)] * 3), sync=True)
    fig = xstage.plot_timeline(pred)      # re-simulated with windows and backlog
    top, bottom = fig.axes
    x, y = top.lines[0].get_data()
    assert y.max() == pytest.approx(pred.peak_backlog_bytes / 1048576)
    assert len(bottom.collections[0].get_segments()) == 24       # 8 producers x 3 rows


def fake_tool(tmp_path, body):
    t = tmp_path / "xstage"
    t.write_text("#!/bin/sh\n" + body)
    t.chmod(t.stat().st_mode | stat.S_IXUSR)
    return str(t)


def test_calibrate_loads_what_the_tool_wrote(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "_gpu_present", lambda: True)
    log = tmp_path / "args"
    # a stand-in for `xstage calibrate`: records its arguments, writes the profile to --out
    tool = fake_tool(tmp_path, 'echo "$@" > %s\nwhile [ $# -gt 0 ]; do\n'
                     '  [ "$1" = --out ] && cp %s "$2"\n  shift\ndone\n' % (log, CALIBRATED))
    kept = tmp_path / "kept.json"
    p = xstage.calibrate("local", quick=True, tool=tool, args=["--device", 1], keep=kept)
    assert p == xstage.Profile.load(CALIBRATED)
    args = log.read_text().split()
    assert args[:3] == ["calibrate", "--target", "local"] and args[3] == "--out"
    assert args[5:] == ["--quick", "--device", "1"]
    assert xstage.Profile.load(kept) == p


def test_calibrate_reports_the_tools_error(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "_gpu_present", lambda: True)
    tool = fake_tool(tmp_path, 'echo "xstage: error: calibrate: no CUDA device" >&2\nexit 1\n')
    with pytest.raises(xstage.Error, match="^calibrate: calibrate: no CUDA device$"):
        xstage.calibrate(tool=tool)


def test_calibrate_without_gpu_or_tool(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration, "_gpu_present", lambda: False)
    tool = fake_tool(tmp_path, "exit 0\n")
    with pytest.raises(xstage.Error, match="no NVIDIA GPU") as e:
        xstage.calibrate(tool=tool)
    assert e.value.status_name == "cuda error"
    monkeypatch.setattr(calibration, "_gpu_present", lambda: True)
    with pytest.raises(xstage.Error, match="tool was not found"):
        xstage.calibrate(tool=str(tmp_path / "missing"))
    monkeypatch.delenv("XSTAGE_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(xstage.Error, match="not on PATH"):
        xstage.calibrate()
    assert os.environ["PATH"].endswith("empty")
