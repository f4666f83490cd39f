# SPDX-License-Identifier: Apache-2.0
"""
calibration.py - xstage.calibrate: run `xstage calibrate` on this machine's GPU and load the
profile it fits. Calibration runs kernels, so it is the one place the package starts the tool
(a subprocess); everything else is the C core in-process.
"""
import glob
import os
import shutil
import subprocess
import tempfile

from ._lib import Error, lib
from .profile import Profile

__all__ = ["calibrate", "find_tool"]


def find_tool(tool=None):
    """The `xstage` executable: `tool`, else $XSTAGE_BIN, else `xstage` on PATH; None if none."""
    for cand in (tool, os.environ.get("XSTAGE_BIN")):
        if cand:
            return cand if os.access(cand, os.X_OK) and os.path.isfile(cand) else None
    return shutil.which("xstage")


def _gpu_present():
    """An NVIDIA GPU device node, or nvidia-smi listing one."""
    if glob.glob("/dev/nvidia[0-9]*"):
        return True
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and "GPU" in r.stdout


def calibrate(target="host", *, quick=False, tool=None, args=(), timeout=None, keep=None):
    """Calibrate the X-Stage of one path on this machine's GPU (`xstage calibrate --target
    TARGET --out FILE`, plus --quick and any further `args`) and return the fitted Profile.

    tool: the xstage executable (default: $XSTAGE_BIN, then PATH); it must be the CUDA build.
    timeout: seconds for the whole run (None: no bound). keep: a path to copy the profile JSON
    to. Raises xstage.Error when there is no tool, no GPU, or the tool fails (its message)."""
    exe = find_tool(tool)
    if exe is None:
        raise Error("calibrate: the xstage tool was not found (%s); build it with CUDA (make) "
                    "and pass tool=... or set XSTAGE_BIN"
                    % ("'%s' is not an executable file" % (tool or os.environ["XSTAGE_BIN"])
                       if tool or os.environ.get("XSTAGE_BIN") else "not on PATH"),
                    lib.XS_EUNSUPPORTED)
    if not _gpu_present():
        raise Error("calibrate: no NVIDIA GPU on this machine (no /dev/nvidia*, nvidia-smi "
                    "lists none); calibrate where the kernels run and Profile.load the file",
                    lib.XS_ECUDA)
    with tempfile.TemporaryDirectory(prefix="xstage-calibrate-") as tmp:
        out = os.path.join(tmp, "profile.json")
        cmd = [exe, "calibrate", "--target", str(target), "--out", out]
        if quick:
            cmd.append("--quick")
        cmd += [str(a) for a in args]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Error("calibrate: `%s` did not finish within %g s" % (" ".join(cmd), timeout),
                        lib.XS_ETIMEOUT) from None
        except OSError as e:
            raise Error("calibrate: cannot run %s: %s" % (exe, e), lib.XS_EIO) from None
        if r.returncode != 0:
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            err = [ln for ln in lines if ln.startswith("xstage: error: ")]
            msg = err[-1][len("xstage: error: "):] if err else \
                (lines[-1] if lines else "exit status %d" % r.returncode)
            raise Error("calibrate: %s" % msg, lib.XS_ECUDA)
        if not os.path.isfile(out):
            raise Error("calibrate: the tool succeeded but wrote no profile (%s)" % out,
                        lib.XS_EIO)
        prof = Profile.load(out)
        if keep is not None:
            shutil.copyfile(out, keep)
        return prof
