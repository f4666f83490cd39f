# SPDX-License-Identifier: Apache-2.0
"""
xstage - predict and plan the backpressure of device-initiated remote stores (the X-Stage),
over the C core of the xstage repository (in-process; no GPU needed except for calibrate).

    import xstage
    prof = xstage.Profile()                       # the embedded H200 profile
    prof.set("R", 40.0)                           # by field name or model symbol (R, Q, r, o)
    sched = xstage.Schedule.load("examples/ep_wave.csv")
    pred = xstage.predict(sched, prof)            # per-row numpy arrays; .to_pandas()
    xstage.criterion(132, 32768, 100e3, prof).no_backpressure
    xstage.plan(sched, prof).schedule.save("plan.csv")

Core failures raise xstage.Error carrying the core's one-line message.
"""
from ._lib import Error
from .calibration import calibrate
from .model import (CHUNK_DTYPE, PREDICT_COLUMNS, Criterion, Plan, Prediction, Programs,
                    criterion, plan, predict)
from .plot import plot_timeline
from .profile import ALIASES, FIELDS, Profile
from .schedule import SCHEDULE_COLUMNS, Schedule
from .trace import TRACE_DTYPE, TRACE_WORK, Trace, TracePrediction

try:
    from importlib.metadata import PackageNotFoundError, version as _version
    try:
        __version__ = _version("xstage")
    except PackageNotFoundError:  # imported from a source tree, not installed
        __version__ = "unknown"
except ImportError:  # Python < 3.8
    __version__ = "unknown"

__all__ = ["Error", "Profile", "FIELDS", "ALIASES", "Schedule", "SCHEDULE_COLUMNS", "criterion",
           "Criterion", "predict", "Prediction", "PREDICT_COLUMNS", "Programs", "CHUNK_DTYPE",
           "plan", "Plan", "plot_timeline", "calibrate", "Trace", "TracePrediction", "TRACE_DTYPE",
           "TRACE_WORK", "__version__"]
