# SPDX-License-Identifier: Apache-2.0
"""
test_profile.py - Profile: the embedded default, load / parse / save, set by field name and by
model symbol (R, Q, r, o), to_dict, and the core's refusals as xstage.Error.
"""
import json
import math

import pytest

import xstage
from conftest import CALIBRATED, REPO, run_tool


def test_default_is_the_embedded_h200_profile():
    p = xstage.Profile()
    d = p.to_dict()
    assert d["device"] == "NVIDIA H200" and d["path"] == "host" and not d["provisional"]
    assert list(d)[:len(xstage.FIELDS)] == list(xstage.FIELDS)
    assert 50 < p.R < 56 and p.Q == 1048576
    p.check()


def test_every_core_field_is_readable():
    # the core's field list (xs_profile_fields) against the package's declarations
    p = xstage.Profile.load(CALIBRATED)
    with open(CALIBRATED) as f:
        data = json.load(f)
    for name in xstage.FIELDS:
        assert isinstance(p.get(name), float)
        if name in data:
            assert p.get(name) == data[name], name  # exactly the file's number
    assert "drain_bytes_per_ns" in xstage.FIELDS and "overflow_loss_ns" in xstage.FIELDS


def test_aliases_name_the_model_symbols():
    assert xstage.ALIASES == {"R": "drain_bytes_per_ns", "Q": "capacity_bytes",
                              "r": "issue_bytes_per_ns", "o": "issue_overhead_ns"}
    p = xstage.Profile()
    for sym, field in xstage.ALIASES.items():
        assert p[sym] == p[field] == getattr(p, sym) == getattr(p, field)


def test_set_by_name_and_by_symbol():
    p = xstage.Profile()
    assert p.set("R", 40.25) is p
    assert p.drain_bytes_per_ns == 40.25
    p.set(Q=2 << 20, r=30, o=100.5)
    assert p.capacity_bytes == 2 << 20 and p.issue_bytes_per_ns == 30
    assert p.issue_overhead_ns == 100.5
    p.set("chunk_bytes", 8192)
    p["queue_bytes_per_producer"] = 1024
    assert p["chunk_bytes"] == 8192 and p.queue_bytes_per_producer == 1024
    x = 52.821596401232966 * (1 + 2 ** -50)  # an arbitrary double reads back exactly
    assert p.set("R", x).R == x
    p.check()


def test_set_changes_the_prediction_like_the_tools_set(tool):
    path = REPO / "examples" / "ep_wave.csv"
    p = xstage.Profile().set("o", 400)
    _, out, _ = run_tool(tool, "predict", "--schedule", path, "--set", "issue_overhead_ns=400")
    last = [ln for ln in out.splitlines() if ln.startswith("# total")][0]
    assert "%.1f ns" % xstage.predict(path, p).total_ns in last
    assert xstage.predict(path, p).total_ns != xstage.predict(path).total_ns


def test_unknown_field_is_refused_with_a_suggestion():
    p = xstage.Profile()
    with pytest.raises(xstage.Error) as e:
        p.set("drain_byte_per_ns", 1)
    assert "unknown profile field 'drain_byte_per_ns'" in str(e.value)
    assert "did you mean 'drain_bytes_per_ns'" in str(e.value)
    assert e.value.status_name == "invalid argument"
    with pytest.raises(KeyError):
        p.get("nope")
    with pytest.raises(AttributeError):
        p.nope


@pytest.mark.parametrize("bad", [math.inf, math.nan, "12abc", ""])
def test_non_finite_values_are_refused(bad):
    with pytest.raises(xstage.Error, match="not a finite number"):
        xstage.Profile().set("R", bad)


def test_implausible_profile_fails_check_and_predict():
    p = xstage.Profile().set("R", -1)
    with pytest.raises(xstage.Error, match="drain rate must be > 0"):
        p.check()
    with pytest.raises(xstage.Error, match="drain rate must be > 0"):
        xstage.predict([(4, 4096, 0)], p)
    with pytest.raises(xstage.Error, match="smaller than one chunk"):
        xstage.Profile().set(Q=100).check()


def test_load_save_roundtrip(tmp_path):
    p = xstage.Profile.load(CALIBRATED).set("R", 41.123456789012345)
    f = tmp_path / "p.json"
    p.save(f)
    q = xstage.Profile.load(f)
    assert q == p and q.to_dict() == p.to_dict()
    assert xstage.Profile.from_dict(p.to_dict()) == p
    c = p.copy().set("Q", 12345678)
    assert c.Q == 12345678 and p.Q != c.Q


def test_load_errors_carry_the_cores_message(tmp_path):
    with pytest.raises(xstage.Error) as e:
        xstage.Profile.load(tmp_path / "missing.json")
    assert e.value.status_name == "i/o error" and "missing.json" in e.value.message
    bad = tmp_path / "bad.json"
    bad.write_text('{"device": "x",\n  "drain_bytes_per_ns": }\n')
    with pytest.raises(xstage.Error) as e:
        xstage.Profile.load(bad)
    assert e.value.status_name == "parse error" and "bad.json:2" in str(e.value)
    with pytest.raises(xstage.Error, match="issue_bytes_per_ns"):
        xstage.Profile.parse('{"device": "x"}', "mine")


def test_load_error_is_the_tools_message(tool, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"device": "x", "path": "host"}\n')
    rc, _, err = run_tool(tool, "profile", "check", bad, ok=False)
    assert rc != 0 and err.startswith("xstage: error: ")
    with pytest.raises(xstage.Error) as e:
        xstage.Profile.load(bad)
    assert str(e.value) == err.strip()[len("xstage: error: "):]
