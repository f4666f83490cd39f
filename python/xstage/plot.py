# SPDX-License-Identifier: Apache-2.0
"""
plot.py - plot_timeline: the stage backlog over time (top) and each producer's issue windows
(bottom) of one prediction, the figure `xstage predict --plot` draws with gnuplot, with
matplotlib (imported only here, only when called).
"""
import numpy as np

from .model import Prediction, predict

__all__ = ["plot_timeline"]


def _backlog_curve(pred):
    """(t_ns, bytes) of the backlog: samples are taken at acceptances; between two of them the
    stage drains at R, to empty or to where the next acceptance finds it."""
    t, q = pred.backlog_t_ns, pred.backlog_bytes
    rate = pred.profile.drain_bytes_per_ns
    xs, ys = [0.0], [0.0]
    for i in range(len(t)):
        xs.append(t[i])
        ys.append(q[i])
        if i + 1 < len(t):
            empty = t[i] + q[i] / rate
            if empty < t[i + 1]:
                xs += [empty, t[i + 1]]
                ys += [0.0, 0.0]
            else:
                xs.append(t[i + 1])
                ys.append(q[i] - (t[i + 1] - t[i]) * rate)
    return np.asarray(xs), np.asarray(ys)


def plot_timeline(what, profile=None, *, sync=False, path=None, title=None, figsize=(12, 8)):
    """Draw a prediction's timeline and return the matplotlib Figure (saved to `path` when
    given, e.g. "timeline.png"). `what` is a Prediction (re-simulated with windows and backlog
    when it has neither) or a schedule, predicted here on `profile` (with `sync`). Needs
    matplotlib (pip install matplotlib); without it ImportError says so."""
    try:
        from matplotlib.collections import LineCollection
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError("xstage.plot_timeline needs matplotlib (pip install matplotlib)") from e
    if isinstance(what, Prediction):
        pred = what
        if pred.win_start is None or pred.backlog_t_ns is None:
            pred = predict(pred.schedule, pred.profile, sync=pred.sync, programs=pred.programs,
                           windows=True, backlog=True)
    else:
        pred = predict(what, profile, sync=sync, windows=True, backlog=True)

    fig = Figure(figsize=figsize)
    top, bottom = fig.subplots(2, 1, sharex=True)
    x, y = _backlog_curve(pred)
    top.plot(x / 1e3, y / 1048576, lw=1.5, label="stage backlog")
    top.set_ylabel("backlog (MiB)")
    top.grid(True)
    top.legend(loc="upper right")

    ws, we = pred.win_start, pred.win_end
    rows, prods = np.nonzero(~np.isnan(ws) & ~np.isnan(we))
    segs = np.stack([np.column_stack([ws[rows, prods] / 1e3, prods]),
                     np.column_stack([we[rows, prods] / 1e3, prods])], axis=1)
    colours = [f"C{r % 8}" for r in rows]
    bottom.add_collection(LineCollection(segs, colors=colours, linewidths=2))
    bottom.set_ylim(-1, ws.shape[1])
    bottom.set_ylabel("producer")
    bottom.set_xlabel("time (us)")
    bottom.set_title("issue windows (colour = row mod 8)", fontsize=10)
    bottom.grid(True)
    bottom.autoscale_view(scaley=False)
    fig.suptitle(title or "xstage predict (%d rows%s)" % (len(pred), ", sync" if pred.sync
                                                           else ""))
    if path is not None:
        fig.savefig(path)
    return fig
