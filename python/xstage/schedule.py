# SPDX-License-Identifier: Apache-2.0
"""
schedule.py - Schedule: rows of bursts and gaps (xs_schedule), held in C memory.

Row i: producers 0..producers-1 each store bytes_per_producer bytes, then every producer does
gap_ns of useful work before row i+1 (docs/MODEL.md). Rows come from a CSV file (the core's
parser, as the tool reads it), from rows (tuples or dicts), a numpy array (n x 3, or with named
fields), a dict of columns or a pandas DataFrame (columns by name); every row goes through the
core's own checks (xs_schedule_append), so a value the tool refuses is refused here.
"""
import numpy as np

from ._lib import Error, check, ffi, fail, lib, path_arg

__all__ = ["Schedule", "as_schedule", "SCHEDULE_COLUMNS"]

SCHEDULE_COLUMNS = ("producers", "bytes_per_producer", "gap_ns")

# numpy's view of xs_row (int producers; int64 bytes; double gap_ns), offsets from the compiler
_ROW_DTYPE = np.dtype({
    "names": list(SCHEDULE_COLUMNS),
    "formats": [np.int32, np.int64, np.float64],
    "offsets": [ffi.offsetof("xs_row", c) for c in SCHEDULE_COLUMNS],
    "itemsize": ffi.sizeof("xs_row"),
})
_INT_LIMIT = 1 << 62  # beyond every bound of the core; keeps the int64 conversion exact


def _int_column(name, values):
    a = np.asarray(values)
    if a.dtype.kind == "b" or a.dtype.kind not in "iuf":
        fail("schedule column %s: expected integers, got %s values" % (name, a.dtype))
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.floor(a)) | (np.abs(a) >= _INT_LIMIT)
        if bad.any():
            i = int(np.argmax(bad))
            fail("schedule row %d: %s = %r is not an integer" % (i, name, float(a[i])))
    elif a.size and (a.max() >= _INT_LIMIT or (a.dtype.kind == "i" and a.min() <= -_INT_LIMIT)):
        i = int(np.argmax(a >= _INT_LIMIT)) if a.max() >= _INT_LIMIT else int(np.argmin(a))
        fail("schedule row %d: %s = %d is out of range" % (i, name, int(a[i])))
    return np.ascontiguousarray(a, dtype=np.int64)


def _float_column(name, values):
    a = np.asarray(values)
    if a.dtype.kind == "b" or a.dtype.kind not in "iuf":
        fail("schedule column %s: expected numbers, got %s values" % (name, a.dtype))
    return np.ascontiguousarray(a, dtype=np.float64)


def _columns(data):
    """(producers, bytes, gap) as three 1-D sequences from any accepted form."""
    if hasattr(data, "columns") and hasattr(data, "to_numpy"):  # a pandas DataFrame
        missing = [c for c in SCHEDULE_COLUMNS if c not in data.columns]
        if missing:
            fail("schedule: DataFrame has no column %s (needs %s)"
                 % (", ".join(missing), ", ".join(SCHEDULE_COLUMNS)))
        return tuple(data[c].to_numpy() for c in SCHEDULE_COLUMNS)
    if isinstance(data, dict):
        missing = [c for c in SCHEDULE_COLUMNS if c not in data]
        if missing:
            fail("schedule: no column %s (needs %s)"
                 % (", ".join(missing), ", ".join(SCHEDULE_COLUMNS)))
        return tuple(data[c] for c in SCHEDULE_COLUMNS)
    if isinstance(data, np.ndarray):
        if data.dtype.names:
            missing = [c for c in SCHEDULE_COLUMNS if c not in data.dtype.names]
            if missing:
                fail("schedule: array has no field %s" % ", ".join(missing))
            return tuple(data[c] for c in SCHEDULE_COLUMNS)
        if data.ndim != 2 or data.shape[1] != 3:
            fail("schedule: expected an array of shape (rows, 3) "
                 "(producers, bytes_per_producer, gap_ns), got shape %s" % (data.shape,))
        return data[:, 0], data[:, 1], data[:, 2]
    rows = list(data)
    cols = ([], [], [])
    for i, row in enumerate(rows):
        if isinstance(row, dict):
            try:
                vals = [row[c] for c in SCHEDULE_COLUMNS]
            except KeyError as e:
                fail("schedule row %d: no %s" % (i, e.args[0]))
        else:
            vals = list(row)
            if len(vals) != 3:
                fail("schedule row %d: expected 3 values (producers, bytes_per_producer, "
                     "gap_ns), got %d" % (i, len(vals)))
        for c, v in zip(cols, vals):
            c.append(v)
    if not rows:
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    return cols


class Schedule:
    """A burst-gap schedule. Schedule(rows) takes a sequence of (producers, bytes_per_producer,
    gap_ns) tuples or dicts, an (n, 3) or structured numpy array, a dict of columns or a pandas
    DataFrame; Schedule.load(path) reads the tool's CSV format."""

    __slots__ = ("_s", "__weakref__")

    def __init__(self, rows=None):
        self._s = _new()
        if rows is None:
            return
        if isinstance(rows, Schedule):
            rows = rows.to_numpy(structured=True)
        p, b, g = _columns(rows)
        p = _int_column("producers", p)
        b = _int_column("bytes_per_producer", b)
        g = _float_column("gap_ns", g)
        if not (len(p) == len(b) == len(g)):
            fail("schedule: columns of different lengths (%d, %d, %d)" % (len(p), len(b), len(g)))
        bad = ffi.new("size_t *")
        st = lib.xs_py_schedule_fill(self._s, len(p), ffi.from_buffer("int64_t[]", p),
                                     ffi.from_buffer("int64_t[]", b),
                                     ffi.from_buffer("double[]", g), bad)
        if st != lib.XS_OK:
            msg = ffi.string(lib.xs_errmsg()).decode("utf-8", "replace")
            raise Error("schedule row %d: %s" % (bad[0], msg), st)

    @classmethod
    def load(cls, path):
        """Read a schedule CSV (producers,bytes_per_producer,gap_ns; '#' comments; K/M/G
        suffixes) through the core's parser; xstage.Error names the file and line."""
        s = cls()
        check(lib.xs_schedule_load(path_arg(path), s._s))
        return s

    @classmethod
    def parse(cls, text, name="<string>"):
        """The same from CSV text; name is used in error messages."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        s = cls()
        check(lib.xs_schedule_parse(data, len(data), name.encode("utf-8"), s._s))
        return s

    def save(self, path, comment=None):
        """Write the schedule as CSV, each line of comment as a '#' line first."""
        c = comment.encode("utf-8") if comment is not None else ffi.NULL
        check(lib.xs_schedule_save(self._s, path_arg(path), c))

    # ---- contents ----
    def __len__(self):
        return int(self._s.nrows)

    def _rows(self):
        n = int(self._s.nrows)
        if n == 0:
            return np.zeros(0, _ROW_DTYPE)
        buf = ffi.buffer(self._s.rows, n * _ROW_DTYPE.itemsize)
        return np.frombuffer(buf, _ROW_DTYPE, count=n)

    def to_numpy(self, structured=False):
        """The rows as a copy: a structured array (fields producers, bytes_per_producer,
        gap_ns) or, by default, an (n, 3) float64 array in that column order."""
        r = self._rows()
        if structured:
            return np.array(r.astype([(c, r.dtype[c]) for c in SCHEDULE_COLUMNS]))
        return np.column_stack([r[c].astype(np.float64) for c in SCHEDULE_COLUMNS]) \
            if len(r) else np.zeros((0, 3))

    @property
    def producers(self):
        return self._rows()["producers"].astype(np.int64)

    @property
    def bytes_per_producer(self):
        return self._rows()["bytes_per_producer"].copy()

    @property
    def gap_ns(self):
        return self._rows()["gap_ns"].copy()

    @property
    def max_producers(self):
        return int(lib.xs_schedule_max_producers(self._s))

    @property
    def total_bytes(self):
        """Sum over rows of producers * bytes_per_producer."""
        return float(lib.xs_schedule_bytes(self._s))

    @property
    def total_gap_ns(self):
        """Sum of the gaps (the useful work)."""
        return float(lib.xs_schedule_gap_ns(self._s))

    def rows(self):
        """[(producers, bytes_per_producer, gap_ns), ...] as Python numbers."""
        r = self._rows()
        return [(int(a), int(b), float(c)) for a, b, c in
                zip(r["producers"], r["bytes_per_producer"], r["gap_ns"])]

    def to_pandas(self):
        import pandas as pd
        return pd.DataFrame({"producers": self.producers,
                             "bytes_per_producer": self.bytes_per_producer,
                             "gap_ns": self.gap_ns})

    def __eq__(self, other):
        return isinstance(other, Schedule) and self.rows() == other.rows()

    def __repr__(self):
        return "Schedule(%d rows, %.6g bytes, %.6g ns of work)" % (
            len(self), self.total_bytes, self.total_gap_ns)


def _new():
    return ffi.gc(ffi.new("xs_schedule *"), lib.xs_schedule_free)


def as_schedule(schedule):
    """A Schedule; a path (str or os.PathLike) to a CSV; or anything Schedule() takes."""
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, (str, bytes)) or hasattr(schedule, "__fspath__"):
        return Schedule.load(schedule)
    return Schedule(schedule)
