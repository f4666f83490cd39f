# SPDX-License-Identifier: Apache-2.0
"""
test_plan_criterion.py - plan and criterion: the decisions and numbers of `xstage plan` and
`xstage criterion`, the closed forms' identities, and out-of-range arguments refused.
"""
import re

import numpy as np
import pytest

import xstage
from conftest import REPO, printed_equal, run_tool, tool_csv

EP_WAVE = REPO / "examples" / "ep_wave.csv"
INTERLEAVED = REPO / "examples" / "ep_interleaved.csv"


def test_plan_reshapes_the_expert_wave():
    pl = xstage.plan(EP_WAVE)
    assert pl.reshaped and not pl.criterion_ok
    assert pl.planned_ns < pl.original_ns and pl.bound_ns <= pl.planned_ns
    assert pl.speedup > 1
    s = xstage.Schedule.load(EP_WAVE)
    # a reshape moves bytes and work around; it neither adds nor drops any
    assert pl.schedule.total_bytes == s.total_bytes
    assert len(pl.schedule) > len(s)
    pred = pl.predict()
    assert isinstance(pred, xstage.Prediction) and len(pred) == len(pl.schedule)


def test_plan_keeps_a_schedule_that_meets_the_criterion():
    s = xstage.Schedule([(132, 4096, 12500)] * 16 + [(64, 8192, 20000)] * 4)
    assert all(xstage.criterion(k, b, g).no_backpressure for k, b, g in s.rows())
    pl = xstage.plan(s)
    assert not pl.reshaped and pl.criterion_ok
    assert pl.schedule == s
    assert pl.planned_ns == pl.original_ns


def test_plan_criterion_ok_is_every_rows_criterion():
    for path in (EP_WAVE, INTERLEAVED):
        rows = xstage.Schedule.load(path).rows()
        assert xstage.plan(path).criterion_ok == \
            all(xstage.criterion(k, b, g).no_backpressure for k, b, g in rows)


@pytest.mark.parametrize("opts", [{}, {"headroom": 0.5, "max_split": 4}, {"allow_move": False},
                                  {"move_cost": 0.25}])
def test_plan_is_the_tools(tool, tmp_path, opts):
    out = tmp_path / "plan.csv"
    args = ["plan", "--schedule", EP_WAVE, "--out", out]
    if "headroom" in opts:
        args += ["--headroom", opts["headroom"], "--max-split", opts["max_split"]]
    if opts.get("allow_move") is False:
        args += ["--no-move"]
    if "move_cost" in opts:
        args += ["--move-cost", opts["move_cost"]]
    _, text, _ = run_tool(tool, *args)
    pl = xstage.plan(EP_WAVE, **opts)
    assert pl.schedule == xstage.Schedule.load(out)        # the same planned rows
    assert "decision:      %s" % pl.how in text
    for name, ns in (("original", pl.original_ns), ("planned", pl.planned_ns),
                     ("bound", pl.bound_ns)):
        m = re.search(r"^%s\s+([0-9.]+)\s+us" % name, text, re.M)
        assert m and m.group(1) == "%.1f" % (ns / 1e3), (name, text)


def test_planned_prediction_is_the_tools(tool):
    header, rows = tool_csv(tool, "plan", "--schedule", EP_WAVE)
    pred = xstage.plan(EP_WAVE).predict()
    assert header == list(xstage.PREDICT_COLUMNS) and len(rows) == len(pred)
    for i, row in enumerate(rows):
        for name, text in zip(header, row):
            assert printed_equal(text, pred[name][i]), (i, name, text, pred[name][i])


@pytest.mark.parametrize("opts, msg", [({"headroom": 0}, "headroom"),
                                       ({"headroom": 1.5}, "headroom"),
                                       ({"max_split": 0}, "max_split"),
                                       ({"max_split": 2.5}, "max_split"),
                                       ({"move_cost": -1}, "move_cost")])
def test_plan_options_out_of_range(opts, msg):
    with pytest.raises(xstage.Error, match=msg):
        xstage.plan(EP_WAVE, **opts)


def test_criterion_identities():
    p = xstage.Profile()
    c = xstage.criterion(132, 32768, 100e3, p)
    assert c.producers == 132 and c.volume_bytes == 132 * 32768
    assert c.v_over_r_ns == pytest.approx(c.volume_bytes / p.R, rel=1e-15)
    assert c.t_iss0_ns == pytest.approx(p.o + 32768 / p.r, rel=1e-15)
    assert c.t_period_ns == max(c.t_iss0_ns + c.gap_ns, c.v_over_r_ns)
    assert c.capacity_bytes == p.capacity(132)
    # the expert wave: the rate holds, the burst does not fit
    assert c.rate_ok and not c.capacity_ok and not c.no_backpressure
    assert c.verdict == "backpressure (reshape)"
    small = xstage.criterion(132, 4096, 12500, p)
    assert small.no_backpressure and small.verdict.startswith("no backpressure")
    assert set(c.to_dict()) >= {"t_iss_steady_ns", "g_star_ns", "q_peak0_bytes"}


@pytest.mark.parametrize("k, b, g", [(132, 32768, 100e3), (16, 262144, 0), (1, 1, 5.5),
                                     (64, 4096, 2000)])
def test_criterion_is_the_tools(tool, k, b, g):
    _, text, _ = run_tool(tool, "criterion", "--producers", k, "--bytes", b, "--gap", g)
    c = xstage.criterion(k, b, g)
    rows = {"Q(K) capacity": ("%.0f", c.capacity_bytes),
            "T_iss0 = o + B/r": ("%.1f", c.t_iss0_ns),
            "V/R": ("%.1f", c.v_over_r_ns),
            "G* = [V/R - T_iss0]+": ("%.1f", c.g_star_ns),
            "q_peak0 = [V - R*T_iss0]+": ("%.0f", c.q_peak0_bytes),
            "T_period = max(T_iss0 + G, V/R)": ("%.1f", c.t_period_ns),
            "T_iss_iso (isolated burst)": ("%.1f", c.t_iss_iso_ns),
            "T_iss steady (capacity-aware)": ("%.1f", c.t_iss_steady_ns),
            "T_period steady (capacity-aware)": ("%.1f", c.t_period_steady_ns)}
    for label, (fmt, v) in rows.items():
        m = re.search(r"^%s\s+(\S+)" % re.escape(label), text, re.M)
        assert m and m.group(1) == fmt % v, (label, m and m.group(1), v)
    assert ("verdict:  no backpressure" in text) == c.no_backpressure


@pytest.mark.parametrize("args, msg", [((0, 4096, 0), "producers"),
                                       ((70000, 4096, 0), "producers"),
                                       ((4, 0, 0), "bytes_per_producer"),
                                       ((4, 10.5, 0), "bytes_per_producer"),
                                       ((4, 4096, -1), "gap_ns"),
                                       ((4, 4096, float("nan")), "gap_ns"),
                                       ((True, 4096, 0), "producers")])
def test_criterion_arguments_out_of_range(args, msg):
    with pytest.raises(xstage.Error, match=msg):
        xstage.criterion(*args)


def test_criterion_checks_the_profile():
    with pytest.raises(xstage.Error, match="issue rate must be > 0"):
        xstage.criterion(4, 4096, 0, xstage.Profile().set("r", 0))


def test_numpy_integers_are_accepted():
    c = xstage.criterion(np.int64(8), np.int32(4096), np.float64(10.0))
    assert c.producers == 8
