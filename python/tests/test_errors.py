# SPDX-License-Identifier: Apache-2.0
"""
test_errors.py - the core's failures become xstage.Error with the core's one-line message (the
text the tool prints after "xstage: error: "), and bad arguments are refused, never defaulted.
"""
import numpy as np
import pytest

import xstage
from conftest import run_tool


def test_error_carries_status_and_message():
    with pytest.raises(xstage.Error) as e:
        xstage.Schedule.parse("producers,bytes_per_producer,gap_ns\n4,abc,0\n", "mine.csv")
    err = e.value
    assert isinstance(err, Exception)
    assert str(err) == err.message and "mine.csv:2" in err.message
    assert err.status_name == "parse error" and err.status != 0


@pytest.mark.parametrize("text", [
    "producers,bytes_per_producer,gap_ns\n0,4096,0\n",        # no producer
    "producers,bytes_per_producer,gap_ns\n4,-1,0\n",          # negative bytes
    "producers,bytes_per_producer,gap_ns\n4,4096\n",          # a column short
    "producers,bytes_per_producer,gap_ns\n4,4096,-5\n",       # negative gap
    "p,b,g\n4,4096,0\n",                                      # unknown header
    "# only a comment\n",                                     # no rows
])
def test_schedule_errors_are_the_tools(tool, tmp_path, text):
    f = tmp_path / "s.csv"
    f.write_text(text)
    rc, _, err = run_tool(tool, "predict", "--schedule", f, ok=False)
    assert rc != 0 and err.startswith("xstage: error: "), err
    with pytest.raises(xstage.Error) as e:
        xstage.predict(xstage.Schedule.load(f))
    assert str(e.value) == err.strip()[len("xstage: error: "):]


def test_missing_schedule_file():
    with pytest.raises(xstage.Error) as e:
        xstage.Schedule.load("/nonexistent/sched.csv")
    assert e.value.status_name == "i/o error" and "/nonexistent/sched.csv" in str(e.value)


@pytest.mark.parametrize("rows, msg", [
    ([(0, 4096, 0)], "schedule row 0: producers = 0 outside 1..65536"),
    ([(4, 4096, 0), (70000, 4096, 0)], "schedule row 1: producers = 70000 outside 1..65536"),
    ([(4, 0, 0)], "schedule row 0: bytes_per_producer = 0 outside"),
    ([(4, 4096, -1.0)], "schedule row 0: gap_ns = -1 outside"),
    ([(4, 4096, float("nan"))], "schedule row 0: gap_ns = nan outside"),
    ([(4, 4096.5, 0)], "schedule row 0: bytes_per_producer = 4096.5 is not an integer"),
    ([(4, 4096)], "schedule row 0: expected 3 values"),
    ([("a", 4096, 0)], "producers: expected integers"),
])
def test_rows_are_checked_by_the_core(rows, msg):
    with pytest.raises(xstage.Error) as e:
        xstage.Schedule(rows)
    assert msg in str(e.value)


def test_array_and_frame_shapes_are_checked():
    with pytest.raises(xstage.Error, match="shape"):
        xstage.Schedule(np.zeros((3, 2)))
    with pytest.raises(xstage.Error, match="no column gap_ns"):
        xstage.Schedule({"producers": [1], "bytes_per_producer": [1]})
    pd = pytest.importorskip("pandas")
    with pytest.raises(xstage.Error, match="no column bytes_per_producer"):
        xstage.Schedule(pd.DataFrame({"producers": [1], "gap_ns": [0.0]}))


def test_empty_schedule_is_refused():
    with pytest.raises(xstage.Error, match="schedule has no rows"):
        xstage.predict(xstage.Schedule())
    with pytest.raises(xstage.Error, match="no rows"):
        xstage.plan(xstage.Schedule([]))


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError):
        xstage.Profile.load(3.5)
    with pytest.raises(TypeError):
        xstage.predict()
    with pytest.raises(TypeError):
        xstage.Profile().set("R", None)
