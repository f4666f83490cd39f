# SPDX-License-Identifier: Apache-2.0
"""
conftest.py - shared fixtures of the package's tests: the repository's paths and the `xstage`
tool the results are compared with.

The tool is $XSTAGE_BIN or <repo>/build/xstage. Without it the comparisons are skipped, except
when XSTAGE_REQUIRE_TOOL is set (CI): then they fail.
"""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.csv"))
CALIBRATED = REPO / "bench" / "results" / "calibrate" / "profile.json"


@pytest.fixture(scope="session")
def tool():
    t = os.environ.get("XSTAGE_BIN") or str(REPO / "build" / "xstage")
    if os.path.isfile(t) and os.access(t, os.X_OK):
        return t
    if os.environ.get("XSTAGE_REQUIRE_TOOL"):
        pytest.fail("XSTAGE_REQUIRE_TOOL is set but %s is not an executable" % t)
    pytest.skip("the xstage tool is not built (make tool) and XSTAGE_BIN is not set")


def run_tool(tool, *args, ok=True):
    """Run the tool; (returncode, stdout, stderr). With ok, a failure fails the test."""
    r = subprocess.run([tool, *map(str, args)], capture_output=True, text=True, timeout=120)
    if ok and r.returncode != 0:
        pytest.fail("%s %s failed (%d): %s" % (tool, " ".join(map(str, args)), r.returncode,
                                                r.stderr.strip()))
    return r.returncode, r.stdout, r.stderr


def tool_csv(tool, *args):
    """A table the tool writes as CSV on stdout, as (header, rows of strings); '#' lines and
    blank lines skipped. Tries `--csv -` (the FILE form) and then the older flag `--csv`."""
    last = None
    for flag in (("--csv", "-"), ("--csv",)):
        rc, out, err = run_tool(tool, *args, *flag, ok=False)
        if rc == 0:
            lines = [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("#")]
            header = lines[0].split(",")
            return header, [ln.split(",") for ln in lines[1:]]
        last = err.strip()
    pytest.fail("%s %s --csv failed: %s" % (tool, " ".join(map(str, args)), last))


def printed_equal(text, value):
    """Whether value, printed as the tool printed text (its digits after the point, its
    significant digits in exponent form; an integer as %d or %.10g), reads exactly as text."""
    t = text.strip()
    if t.lower() in ("nan", "-nan", "inf", "-inf"):
        return repr(float(value)).lower() == t.lower().lstrip("-") or \
            (t.lower().endswith("nan") and value != value)
    if "e" in t.lower():
        mant = t.lower().split("e")[0].lstrip("-").replace(".", "").lstrip("0")
        return float(t) == float("%.*g" % (max(len(mant), 1), value))
    if "." not in t:  # %d, or %g that printed an integer (the gaps: %.10g)
        return float(t) == value or t == "%.10g" % value
    return t == "%.*f" % (len(t.split(".")[1]), value)
