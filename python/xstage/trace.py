# SPDX-License-Identifier: Apache-2.0
"""
trace.py - Trace: per-CTA tile traces of a kernel run (format v1, docs/TRACE.md; the core's
xs_trace), their per-producer programs, the model's prediction of them, the comparison of
prediction with measurement, and the Perfetto timeline.

Records are a numpy structured array (TRACE_DTYPE, the layout of xs_trace_record: cta, sm, seq,
flags, bytes, issue_start_ns, issue_end_ns, work_start_ns, work_end_ns); a loaded trace holds
them sorted by (cta, seq) and rebased to the earliest time of the input.
"""
import numpy as np

from ._lib import check, cstr, fail, ffi, lib, path_arg
from .model import Programs
from .profile import as_profile
from .schedule import _ROW_DTYPE, Schedule

__all__ = ["Trace", "TracePrediction", "TRACE_DTYPE", "TRACE_WORK"]

_REC_FIELDS = ("cta", "sm", "seq", "flags", "bytes", "issue_start_ns", "issue_end_ns",
               "work_start_ns", "work_end_ns")
TRACE_DTYPE = np.dtype({
    "names": list(_REC_FIELDS),
    "formats": [np.int32] * 4 + [np.int64] * 5,
    "offsets": [ffi.offsetof("xs_trace_record", f) for f in _REC_FIELDS],
    "itemsize": ffi.sizeof("xs_trace_record"),
})
TRACE_WORK = 1  # flags bit: the record's work span is recorded (XS_TRACE_WORK)

_SUMMARY_FIELDS = ("ntiles", "total_ns", "total_err_pct", "zero_total_err_pct",
                   "issue_err_med_pct", "issue_err_p90_pct", "zero_issue_err_med_pct",
                   "zero_issue_err_p90_pct", "stall_err_med_ns", "stall_err_p90_ns",
                   "zero_stall_err_med_ns", "zero_stall_err_p90_ns", "nstalled",
                   "stalled_err_med_ns", "zero_stalled_err_med_ns", "stalled_ratio")


def _records(data):
    """A contiguous TRACE_DTYPE array from a structured array, a DataFrame or a dict of
    columns (flags may be omitted: set where both work times are >= 0)."""
    if isinstance(data, np.ndarray) and data.dtype == TRACE_DTYPE:
        return np.ascontiguousarray(data)
    if hasattr(data, "columns") and hasattr(data, "to_numpy"):
        cols = {c: data[c].to_numpy() for c in data.columns}
    elif isinstance(data, np.ndarray) and data.dtype.names:
        cols = {c: data[c] for c in data.dtype.names}
    elif isinstance(data, dict):
        cols = dict(data)
    else:
        raise TypeError("trace records: expected a structured array, a DataFrame or a dict of "
                        "columns, got %s" % type(data).__name__)
    need = [f for f in _REC_FIELDS if f != "flags"]
    missing = [f for f in need if f not in cols]
    if missing:
        fail("trace records: no column %s (needs %s)" % (", ".join(missing), ", ".join(need)))
    n = len(np.asarray(cols["cta"]))
    out = np.zeros(n, TRACE_DTYPE)
    for f in need:
        a = np.asarray(cols[f])
        if a.dtype.kind not in "iu" or len(a) != n:
            fail("trace records: column %s must hold %d integers, got %s"
                 % (f, n, a.dtype if len(a) == n else "%d values" % len(a)))
        out[f] = a
    if "flags" in cols:
        out["flags"] = np.asarray(cols["flags"])
    else:
        out["flags"] = ((out["work_start_ns"] >= 0) & (out["work_end_ns"] >= 0)) * TRACE_WORK
    return out


class Trace:
    """A validated v1 trace: Trace.load(path), Trace.parse(text), Trace.from_records(array).
    Every violation of the format raises xstage.Error naming the input and the line (or the
    record)."""

    __slots__ = ("_t",)

    def __init__(self):
        self._t = ffi.gc(ffi.new("xs_trace *"), lib.xs_trace_free)

    @classmethod
    def load(cls, path):
        t = cls()
        check(lib.xs_trace_load(path_arg(path), t._t))
        return t

    @classmethod
    def parse(cls, text, name="<string>"):
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        t = cls()
        check(lib.xs_trace_parse(data, len(data), name.encode("utf-8"), t._t))
        return t

    @classmethod
    def from_records(cls, records, name="records"):
        """A trace from records in memory (a recorder's own), with the loader's checks."""
        r = _records(records)
        t = cls()
        check(lib.xs_trace_build(ffi.from_buffer("xs_trace_record[]", r), len(r),
                                 name.encode("utf-8"), t._t))
        return t

    def save(self, path, meta=None):
        """Write the (rebased) records as a v1 trace with dropped=0; meta: {key: value} lines."""
        items = [("%s=%s" % (k, v)).encode("utf-8") for k, v in (meta or {}).items()]
        keep = [ffi.new("char[]", s) for s in items]
        m = ffi.new("const char *[]", keep + [ffi.NULL])
        check(lib.xs_trace_write(path_arg(path), self._t.recs, self._t.n, 0, m))

    # ---- contents ----
    def __len__(self):
        return int(self._t.n)

    @property
    def records(self):
        """A copy of the records (TRACE_DTYPE), sorted by (cta, seq), times rebased."""
        n = len(self)
        if n == 0:
            return np.zeros(0, TRACE_DTYPE)
        return np.frombuffer(ffi.buffer(self._t.recs, n * TRACE_DTYPE.itemsize), TRACE_DTYPE,
                             count=n).copy()

    ncta = property(lambda self: int(self._t.ncta))
    origin_ns = property(lambda self: int(self._t.origin_ns))
    end_ns = property(lambda self: int(self._t.end_ns), doc="the measured total (ns)")
    nwork = property(lambda self: int(self._t.nwork))
    capacity = property(lambda self: int(self._t.capacity))
    producers = property(lambda self: int(self._t.producers))
    device = property(lambda self: cstr(self._t.device))
    target = property(lambda self: cstr(self._t.target))
    kernel = property(lambda self: cstr(self._t.kernel))
    total_bytes = property(lambda self: int(lib.xs_trace_bytes(self._t)))

    def to_pandas(self):
        import pandas as pd
        return pd.DataFrame(self.records)

    # ---- the model ----
    def programs(self):
        """(Schedule, Programs): the per-producer programs the trace implies (producer c is CTA
        c; row 0 works until the CTA's first issue; row j + 1 is tile j and the measured time to
        the next tile), as xstage.predict takes them."""
        pr = ffi.new("xs_trace_progs *")
        check(lib.xs_trace_programs(self._t, pr))
        try:
            n, k = int(pr.sched.nrows), int(pr.pg.producers)
            rows = np.frombuffer(ffi.buffer(pr.sched.rows, n * _ROW_DTYPE.itemsize), _ROW_DTYPE,
                                 count=n)
            sched = Schedule(rows)
            b = np.frombuffer(ffi.buffer(pr.bytes, n * k * 8), np.int64).reshape(n, k).copy()
            g = np.frombuffer(ffi.buffer(pr.gap_ns, n * k * 8), np.float64).reshape(n, k).copy()
        finally:
            lib.xs_trace_programs_free(pr)
        return sched, Programs(b, g)

    def predict(self, profile=None):
        """The model's issue window of every record (and the zero-stall predictor's), on
        `profile` with its start_ns and row_start_ns set to 0, free-running."""
        p = as_profile(profile)
        pr = ffi.new("xs_trace_prediction *")
        check(lib.xs_trace_predict(p._p, self._t, pr))
        try:
            n = len(self)
            t = np.frombuffer(ffi.buffer(pr.tiles, n * ffi.sizeof("xs_trace_pred")),
                              np.dtype([("start_ns", "f8"), ("end_ns", "f8"),
                                        ("zero_start_ns", "f8"), ("zero_end_ns", "f8")]),
                              count=n).copy() if n else None
            out = TracePrediction(self, p.copy(), t, float(pr.end_ns), float(pr.zero_end_ns),
                                  float(pr.peak_backlog_bytes))
        finally:
            lib.xs_trace_prediction_free(pr)
        return out

    def compare(self, profile=None, prediction=None):
        """Measured against predicted (docs/METRICS.md, "Trace comparison"): a dict of the
        summary's numbers (errors in % and ns; ntiles, nstalled counts)."""
        pred = prediction if prediction is not None else self.predict(profile)
        cpred = pred._c()
        s = ffi.new("xs_trace_summary *")
        check(lib.xs_trace_compare(pred.profile._p, self._t, cpred, s))
        return {f: (int(getattr(s, f)) if f in ("ntiles", "nstalled") else
                    float(getattr(s, f))) for f in _SUMMARY_FIELDS}

    def timeline(self, path, prediction=None, profile=None, title=None):
        """Write the Chrome trace-event JSON timeline (opens in Perfetto): the measured issue
        windows and, with a prediction (or a profile to predict on), the predicted ones."""
        if prediction is None and profile is not None:
            prediction = self.predict(profile)
        ps = pe = ffi.NULL
        prof = ffi.NULL
        if prediction is not None:
            st = np.ascontiguousarray(prediction.start_ns)
            en = np.ascontiguousarray(prediction.end_ns)
            ps, pe = ffi.from_buffer("double[]", st), ffi.from_buffer("double[]", en)
            prof = prediction.profile._p
        check(lib.xs_timeline_write(path_arg(path), self._t, ps, pe, prof,
                                    (title or "xstage trace").encode("utf-8")))

    def __repr__(self):
        return "Trace(%d records, %d CTAs, %d bytes, %.1f us measured%s)" % (
            len(self), self.ncta, self.total_bytes, self.end_ns / 1e3,
            ", " + self.kernel if self.kernel else "")


class TracePrediction:
    """Trace.predict's result: per record (the trace's order) start_ns / end_ns (the model's
    issue window) and zero_start_ns / zero_end_ns (every tile in its unstalled time); the totals
    end_ns_total and zero_end_ns_total; peak_backlog_bytes."""

    def __init__(self, trace, profile, tiles, end_ns, zero_end_ns, peak):
        self.trace = trace
        self.profile = profile
        self._tiles = tiles
        self.end_ns_total = end_ns
        self.zero_end_ns_total = zero_end_ns
        self.peak_backlog_bytes = peak

    def _col(self, f):
        return np.zeros(0) if self._tiles is None else self._tiles[f].copy()

    start_ns = property(lambda self: self._col("start_ns"))
    end_ns = property(lambda self: self._col("end_ns"))
    zero_start_ns = property(lambda self: self._col("zero_start_ns"))
    zero_end_ns = property(lambda self: self._col("zero_end_ns"))

    def _c(self):
        """The core's view of this prediction (borrowing this object's arrays)."""
        c = ffi.new("xs_trace_prediction *")
        self._keep = np.ascontiguousarray(self._tiles) if self._tiles is not None else None
        c.tiles = ffi.cast("xs_trace_pred *", ffi.from_buffer("char[]", self._keep)) \
            if self._keep is not None else ffi.NULL
        c.end_ns, c.zero_end_ns = self.end_ns_total, self.zero_end_ns_total
        c.peak_backlog_bytes = self.peak_backlog_bytes
        return c

    def to_pandas(self):
        import pandas as pd
        df = pd.DataFrame(self.trace.records)
        for f in ("start_ns", "end_ns", "zero_start_ns", "zero_end_ns"):
            df["pred_" + f] = self._col(f)
        return df
