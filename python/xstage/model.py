# SPDX-License-Identifier: Apache-2.0
"""
model.py - the model's three questions over the C core: criterion (the Burst-Gap closed forms,
xs_bg_eval), predict (the per-producer event simulation, xs_simulate_programs, with per-CTA
programs) and plan (piggyback or reshape, xs_plan_schedule).

predict's columns are those of `xstage predict --csv` (row, producers, bytes_per_producer,
gap_ns, issue_med_ns, issue_max_ns, end_ns) and are the core's doubles, not a re-parse of text.
"""
import math
from dataclasses import asdict, dataclass

import numpy as np

from ._lib import check, fail, ffi, lib
from .profile import as_profile
from .schedule import _ROW_DTYPE, Schedule, as_schedule

__all__ = ["Criterion", "criterion", "Programs", "Prediction", "predict", "Plan", "plan",
           "PREDICT_COLUMNS", "CHUNK_DTYPE"]

PREDICT_COLUMNS = ("row", "producers", "bytes_per_producer", "gap_ns", "issue_med_ns",
                   "issue_max_ns", "end_ns")

# one chunk's way through the model (xs_chunk_trace), in acceptance order
_CHUNK_FIELDS = ("producer", "row", "bytes", "t_queue_ns", "t_buffer_ns", "t_stage_ns",
                 "t_drained_ns")
CHUNK_DTYPE = np.dtype({
    "names": list(_CHUNK_FIELDS),
    "formats": [np.int32, np.int32, np.int64] + [np.float64] * 4,
    "offsets": [ffi.offsetof("xs_chunk_trace", f) for f in _CHUNK_FIELDS],
    "itemsize": ffi.sizeof("xs_chunk_trace"),
})


def _profile_checked(profile):
    p = as_profile(profile)
    p.check()
    return p


# ---- criterion -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Criterion:
    """The Burst-Gap closed forms for K producers x B bytes with G ns of work between bursts
    (docs/MODEL.md; the quantities of `xstage criterion`). Times in ns, sizes in bytes."""
    producers: int                  # K
    bytes_per_producer: float       # B
    volume_bytes: float             # V = K*B
    gap_ns: float                   # G
    capacity_bytes: float           # Q(K)
    t_iss0_ns: float                # o + [B - queue]+/r
    v_over_r_ns: float              # V/R
    t_period_ns: float              # max(T_iss0 + G, V/R)
    t_iss_ns: float                 # max(T_iss0, V/R - G)
    delta_t_iss_ns: float           # [V/R - G - T_iss0]+
    g_star_ns: float                # [V/R - T_iss0]+
    q_peak0_bytes: float            # [V - R*T_iss0]+
    t_iss_iso_ns: float             # isolated burst
    t_iss_last_ns: float            # isolated burst, the producer left last
    injection_bytes_per_ns: float   # V / (T_iss0 + G)
    rate_ok: bool                   # V/(T_iss0+G) <= R
    capacity_ok: bool               # q_peak0 <= Q(K)
    no_backpressure: bool           # both: piggyback
    t_iss_steady_ns: float          # capacity-aware steady state
    t_period_steady_ns: float

    @property
    def verdict(self):
        return "no backpressure (piggyback)" if self.no_backpressure else \
            "backpressure (reshape)"

    def to_dict(self):
        return asdict(self)


def criterion(producers, bytes_per_producer, gap_ns, profile=None):
    """The no-backpressure criterion and the closed forms for steady periodic bursts of
    `producers` x `bytes_per_producer` bytes separated by `gap_ns` of work, on `profile`
    (None: the embedded one). Arguments outside the tool's ranges raise xstage.Error."""
    k, b, g = producers, bytes_per_producer, gap_ns
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not \
            1 <= k <= lib.XS_MAX_PRODUCERS:
        fail("criterion: producers %r: outside 1..%d" % (k, lib.XS_MAX_PRODUCERS))
    if isinstance(b, bool) or not isinstance(b, (int, float, np.integer, np.floating)) or \
            not (b >= 1 and math.isfinite(b)) or b != math.floor(b):
        fail("criterion: bytes_per_producer %r: a burst stores a whole number of bytes, at "
             "least one" % (b,))
    if isinstance(g, bool) or not isinstance(g, (int, float, np.integer, np.floating)) or \
            not (0 <= g <= lib.XS_MAX_GAP_NS):
        fail("criterion: gap_ns %r: outside 0..%g" % (g, lib.XS_MAX_GAP_NS))
    p = _profile_checked(profile)
    o = ffi.new("xs_bg *")
    lib.xs_bg_eval(p._p, int(k), float(b), float(g), o)
    vals = {}
    for f in Criterion.__dataclass_fields__:
        v = getattr(o, f)
        vals[f] = bool(v) if f in ("rate_ok", "capacity_ok", "no_backpressure") else \
            (int(v) if f == "producers" else float(v))
    return Criterion(**vals)


# ---- per-CTA programs ------------------------------------------------------------------------

class Programs:
    """Per-producer (per-CTA) programs (docs/MODEL.md, "Per-producer programs"): producer p's
    row i stores bytes[i, p] bytes (0: it takes no part in the row, only in its work) and then
    works gap_ns[i, p] ns. A kernel whose CTAs run different tiles is one program per CTA,
    padded with (0, 0) rows to a common length. Both arrays are (rows, producers)."""

    __slots__ = ("bytes", "gap_ns")

    def __init__(self, bytes, gap_ns):  # noqa: A002 (the core's name)
        b = np.asarray(bytes)
        g = np.asarray(gap_ns, dtype=np.float64)
        if b.ndim != 2 or g.shape != b.shape:
            fail("programs: bytes and gap_ns must be 2-D arrays of one shape (rows, producers),"
                 " got %s and %s" % (b.shape, g.shape))
        if b.shape[0] < 1 or b.shape[1] < 1:
            fail("programs: no rows or no producers")
        if b.dtype.kind == "f":
            if not (np.isfinite(b) & (b == np.floor(b))).all():
                fail("programs: bytes must be whole numbers")
        elif b.dtype.kind not in "iu" or b.dtype.kind == "b":
            fail("programs: bytes must be integers, got %s" % b.dtype)
        self.bytes = np.ascontiguousarray(b, dtype=np.int64)
        self.gap_ns = np.ascontiguousarray(g)

    @property
    def shape(self):
        return self.bytes.shape

    def schedule(self):
        """The schedule the programs run on when none is given: every row names every producer;
        its bytes_per_producer and gap_ns (not read by the simulation, only reported) are the
        row's largest burst (at least 1) and its longest work."""
        return Schedule({"producers": np.full(self.shape[0], self.shape[1]),
                         "bytes_per_producer": np.maximum(self.bytes.max(axis=1), 1),
                         "gap_ns": self.gap_ns.max(axis=1)})


# ---- predict ---------------------------------------------------------------------------------

class Prediction:
    """predict's result: one entry per schedule row in each column of PREDICT_COLUMNS (numpy
    arrays; p["end_ns"] or p.end_ns), plus makespan_ns (the last producer's end of work, last
    gap included) and peak_backlog_bytes. With windows=True: win_start / win_end, (rows,
    producers) arrays of each producer's issue window (NaN where it took no part). With
    backlog=True: backlog_t_ns / backlog_bytes (the stage backlog just after each sample).
    With chunks=True: chunks, a structured array (CHUNK_DTYPE) in acceptance order."""

    def __init__(self, columns, makespan_ns, peak_backlog_bytes, schedule, profile, sync,
                 programs):
        self._cols = columns
        self.makespan_ns = makespan_ns
        self.peak_backlog_bytes = peak_backlog_bytes
        self.schedule = schedule
        self.profile = profile
        self.sync = sync
        self.programs = programs
        self.win_start = self.win_end = None
        self.backlog_t_ns = self.backlog_bytes = None
        self.chunks = None

    columns = PREDICT_COLUMNS

    def __getitem__(self, name):
        return self._cols[name]

    def __getattr__(self, name):
        cols = self.__dict__.get("_cols", {})
        if name in cols:
            return cols[name]
        raise AttributeError("Prediction has no attribute '%s'" % name)

    def __len__(self):
        return len(self._cols["row"])

    @property
    def total_ns(self):
        """end_ns of the last row (the tool's "total")."""
        return float(self._cols["end_ns"][-1])

    def to_dict(self):
        """{column: numpy array} in PREDICT_COLUMNS order."""
        return {c: self._cols[c] for c in PREDICT_COLUMNS}

    def to_pandas(self):
        """A DataFrame with the columns of `xstage predict --csv` (needs pandas)."""
        import pandas as pd
        return pd.DataFrame(self.to_dict(), columns=list(PREDICT_COLUMNS))

    def __repr__(self):
        return "Prediction(%d rows, total %.1f ns, makespan %.1f ns, peak backlog %.0f B)" % (
            len(self), self.total_ns, self.makespan_ns, self.peak_backlog_bytes)


def _copy(ptr, ctype, n, dtype):
    if n == 0:
        return np.zeros(0, dtype)
    return np.frombuffer(ffi.buffer(ptr, n * ffi.sizeof(ctype)), dtype, count=n).copy()


def predict(schedule=None, profile=None, *, sync=False, programs=None, windows=False,
            backlog=False, max_samples=0, chunks=False):
    """Simulate `schedule` producer by producer on `profile` (None: the embedded one), as
    `xstage predict` does; returns a Prediction (per-row numpy arrays, .to_pandas()).

    schedule: a Schedule, a CSV path or anything Schedule() takes; may be omitted when programs
    are given (Programs.schedule()). sync: a grid barrier between rows. programs: per-producer
    programs (a Programs or a (bytes, gap_ns) pair) in place of the rows' bytes and gaps.
    windows / backlog / chunks: also return each producer's issue windows, the backlog samples
    (at most max_samples, 0: 100000) and every chunk's times."""
    pg_obj = None
    if programs is not None:
        pg_obj = programs if isinstance(programs, Programs) else Programs(*programs)
    if schedule is None:
        if pg_obj is None:
            raise TypeError("predict: a schedule (or programs) is required")
        s = pg_obj.schedule()
    else:
        s = as_schedule(schedule)
    p = as_profile(profile)
    if not isinstance(max_samples, (int, np.integer)) or max_samples < 0:
        fail("predict: max_samples %r must be a whole number >= 0" % (max_samples,))

    opts = ffi.new("xs_sim_opts *")
    opts.sync = 1 if sync else 0
    opts.record_windows = 1 if windows else 0
    opts.record_backlog = 1 if backlog else 0
    opts.max_samples = int(max_samples)
    pg = ffi.NULL
    keep = None
    if pg_obj is not None:
        pg = ffi.new("xs_programs *")
        pg.producers = pg_obj.shape[1]
        keep = (ffi.from_buffer("int64_t[]", pg_obj.bytes),
                ffi.from_buffer("double[]", pg_obj.gap_ns))
        pg.bytes, pg.gap_ns = keep
        if pg_obj.shape[0] != len(s):
            fail("programs: %d rows for a schedule of %d" % (pg_obj.shape[0], len(s)))

    res = ffi.new("xs_result *")
    if chunks:
        cptr = ffi.new("xs_chunk_trace **")
        cn = ffi.new("size_t *")
        check(lib.xs_py_simulate_chunks(p._p, s._s, pg, opts, res, cptr, cn))
    else:
        check(lib.xs_simulate_programs(p._p, s._s, pg, opts, res))
    try:
        n = int(res.nrows)
        rr = _copy(res.rows, "xs_rowres", n, np.dtype([("issue_med_ns", "f8"),
                                                       ("issue_max_ns", "f8"),
                                                       ("end_ns", "f8")]))
        cols = {"row": np.arange(n, dtype=np.int64),
                "producers": s.producers,
                "bytes_per_producer": s.bytes_per_producer,
                "gap_ns": s.gap_ns,
                "issue_med_ns": rr["issue_med_ns"].copy(),
                "issue_max_ns": rr["issue_max_ns"].copy(),
                "end_ns": rr["end_ns"].copy()}
        out = Prediction(cols, float(res.makespan_ns), float(res.peak_backlog_bytes), s,
                         p.copy(), bool(sync), pg_obj)
        if windows:
            np_ = int(res.nproducers)
            out.win_start = _copy(res.win_start, "double", n * np_, np.float64).reshape(n, np_)
            out.win_end = _copy(res.win_end, "double", n * np_, np.float64).reshape(n, np_)
        if backlog:
            smp = _copy(res.backlog, "xs_sample", int(res.nbacklog),
                        np.dtype([("t_ns", "f8"), ("backlog_bytes", "f8")]))
            out.backlog_t_ns = smp["t_ns"].copy()
            out.backlog_bytes = smp["backlog_bytes"].copy()
        if chunks:
            out.chunks = _copy(cptr[0], "xs_chunk_trace", int(cn[0]), CHUNK_DTYPE)
    finally:
        lib.xs_result_free(res)
        if chunks:
            lib.xs_py_free(cptr[0])
    del keep
    return out


# ---- plan ------------------------------------------------------------------------------------

class Plan:
    """plan's result: reshaped (False: piggyback, kept as is), criterion_ok (every row of the
    original meets the criterion), original_ns / planned_ns (predicted makespans), bound_ns (a
    lower bound), how (one line: what the planner did), schedule (the planned Schedule)."""

    def __init__(self, reshaped, criterion_ok, original_ns, planned_ns, bound_ns, how,
                 schedule, profile):
        self.reshaped = reshaped
        self.criterion_ok = criterion_ok
        self.original_ns = original_ns
        self.planned_ns = planned_ns
        self.bound_ns = bound_ns
        self.how = how
        self.schedule = schedule
        self.profile = profile

    @property
    def speedup(self):
        return self.original_ns / self.planned_ns

    def predict(self, **kw):
        """The planned schedule's prediction on the same profile (`xstage plan --csv`)."""
        return predict(self.schedule, self.profile, **kw)

    def __repr__(self):
        return "Plan(%s, %.1f us -> %.1f us: %s)" % (
            "reshaped" if self.reshaped else "piggyback", self.original_ns / 1e3,
            self.planned_ns / 1e3, self.how)


def plan(schedule, profile=None, *, move_cost=0.0, headroom=0.9, max_split=64,
         allow_move=True):
    """Piggyback or reshape `schedule` on `profile`, as `xstage plan` does: split bursts to fit
    `headroom` x Q(K) (at most `max_split` pieces each) and, when allow_move, move work earlier
    at `move_cost` extra work per ns moved. Ranges are the tool's (move_cost 0..100, headroom
    0.01..1, max_split 1..4096); outside them xstage.Error."""
    def number(name, v, lo, hi):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not (lo <= v <= hi):
            fail("plan: %s %r: outside %g..%g" % (name, v, lo, hi))
        return v
    s = as_schedule(schedule)
    p = as_profile(profile)
    o = ffi.new("xs_plan_opts *")
    lib.xs_plan_opts_default(o)
    o.move_cost = float(number("move_cost", move_cost, 0, 100))
    o.headroom = float(number("headroom", headroom, 0.01, 1))
    ms = number("max_split", max_split, 1, 4096)
    if ms != int(ms):
        fail("plan: max_split %r: a whole number" % (max_split,))
    o.max_split = int(ms)
    o.allow_move = 1 if allow_move else 0
    if len(s) == 0:
        fail("plan: schedule has no rows")
    pl = ffi.new("xs_plan *")
    check(lib.xs_plan_schedule(p._p, s._s, o, pl))
    try:
        n = int(pl.planned.nrows)
        rows = np.frombuffer(ffi.buffer(pl.planned.rows, n * ffi.sizeof("xs_row")),
                             _ROW_DTYPE, count=n)
        planned = Schedule(rows)
        out = Plan(bool(pl.reshaped), bool(pl.criterion_ok), float(pl.original_ns),
                   float(pl.planned_ns), float(pl.bound_ns),
                   ffi.string(pl.how).decode("utf-8", "replace"), planned, p.copy())
    finally:
        lib.xs_plan_free(pl)
    return out
