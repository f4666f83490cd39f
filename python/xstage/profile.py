# SPDX-License-Identifier: Apache-2.0
"""
profile.py - Profile: the calibrated numbers of one path (xs_profile), held in C memory.

The numeric fields are the core's (xs_profile_fields, in file order); the model's symbols are
accepted as aliases: R (drain rate), Q (capacity), r (issue rate), o (issue overhead). Values
go through the core's own NAME=VALUE override (xs_profile_set), so a name or value the tool's
--set refuses is refused here with the same message.
"""
import json

from ._lib import check, cstr, ffi, lib, path_arg

__all__ = ["Profile", "FIELDS", "ALIASES", "as_profile"]


def _fields():
    out, i = [], 0
    while lib.xs_profile_fields[i] != ffi.NULL:
        out.append(ffi.string(lib.xs_profile_fields[i]).decode())
        i += 1
    return tuple(out)


FIELDS = _fields()  # numeric fields, in the core's file order
ALIASES = {
    "R": "drain_bytes_per_ns",  # aggregate drain rate of the stage (bytes/ns)
    "Q": "capacity_bytes",  # shared outstanding capacity (bytes)
    "r": "issue_bytes_per_ns",  # one producer's unconstrained issue rate (bytes/ns)
    "o": "issue_overhead_ns",  # fixed cost of one burst on one producer (ns)
}
_TEXT = ("device", "path", "date", "command", "notes")


def _field(name):
    if not isinstance(name, str):
        raise TypeError("a profile field name is a str, got %s" % type(name).__name__)
    return ALIASES.get(name, name)


class Profile:
    """A calibrated profile. Profile() is the one embedded in the library (H200, PCIe path to
    pinned host memory); Profile.load(path) reads a JSON file written by `xstage calibrate`.

    p.set("R", 40.0) or p.set(capacity_bytes=2 << 20) overrides numeric fields; p["R"],
    p.drain_bytes_per_ns read them; p.to_dict() gives every field.
    """

    __slots__ = ("_p",)

    def __init__(self):
        self._p = ffi.new("xs_profile *")
        lib.xs_profile_default(self._p)

    # ---- construction ----
    @classmethod
    def load(cls, path):
        """Load a JSON profile; xstage.Error names the file, line and field on bad input."""
        p = cls.__new__(cls)
        p._p = ffi.new("xs_profile *")
        check(lib.xs_profile_load(path_arg(path), p._p))
        return p

    @classmethod
    def parse(cls, text, name="<string>"):
        """A profile from JSON text (the file format); name is used in error messages."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        p = cls.__new__(cls)
        p._p = ffi.new("xs_profile *")
        check(lib.xs_profile_parse(data, len(data), name.encode("utf-8"), p._p))
        return p

    @classmethod
    def from_dict(cls, d, name="<dict>"):
        """The inverse of to_dict (through the same parser as a file)."""
        return cls.parse(json.dumps(d), name)

    def copy(self):
        p = Profile.__new__(Profile)
        p._p = ffi.new("xs_profile *", self._p[0])
        return p

    # ---- fields ----
    def set(self, name=None, value=None, **fields):
        """Override numeric fields by name or model symbol: set("R", 40), set(Q=2e6, o=200).
        Returns self. Raises xstage.Error for an unknown name (with the core's suggestion) or a
        value that is not a finite number; plausibility is checked by check() and before every
        prediction."""
        items = list(fields.items())
        if name is not None:
            items.insert(0, (name, value))
        elif value is not None:
            raise TypeError("set(name, value): value given without a name")
        for n, v in items:
            if isinstance(v, bool) or v is None:
                raise TypeError("profile field %s: expected a number, got %r" % (n, v))
            text = v if isinstance(v, str) else repr(float(v))  # repr: reads back exactly
            check(lib.xs_profile_set(self._p, ("%s=%s" % (_field(n), text)).encode("utf-8")))
        return self

    def get(self, name):
        """A numeric field by name or model symbol (float)."""
        f = _field(name)
        if f not in FIELDS:
            raise KeyError("unknown profile field '%s' (fields: %s; symbols: %s)"
                           % (name, ", ".join(FIELDS), ", ".join(ALIASES)))
        return float(getattr(self._p, f))

    def __getitem__(self, name):
        return self.get(name)

    def __setitem__(self, name, value):
        self.set(name, value)

    def __getattr__(self, name):
        # only reached for names that are not attributes of the class: fields and symbols
        if name in FIELDS or name in ALIASES:
            return self.get(name)
        if name in _TEXT:
            return cstr(getattr(self._p, name))
        if name == "provisional":
            return bool(self._p.provisional)
        raise AttributeError("Profile has no attribute '%s'" % name)

    def check(self, name="profile"):
        """The core's plausibility check (positive rates, chunk <= capacity, ...); returns self
        or raises xstage.Error."""
        check(lib.xs_profile_check(self._p, name.encode("utf-8")))
        return self

    def capacity(self, producers):
        """Q(K) in bytes: min(Q, K*cap) plus each producer's queue, reserve and buffer."""
        return float(lib.xs_capacity(self._p, int(producers)))

    def to_dict(self):
        """Every field: the numeric ones (floats, file order), the text ones and provisional."""
        d = {f: float(getattr(self._p, f)) for f in FIELDS}
        for t in _TEXT:
            d[t] = cstr(getattr(self._p, t))
        d["provisional"] = bool(self._p.provisional)
        return d

    def save(self, path):
        """Write the profile as JSON (numbers read back exactly)."""
        check(lib.xs_profile_save(self._p, path_arg(path)))

    def __eq__(self, other):
        return isinstance(other, Profile) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return ("Profile(%s, path %s%s: r=%.4g B/ns, o=%.4g ns, R=%.4g B/ns, Q=%.6g B)"
                % (self.device or "?", self.path, ", provisional" if self.provisional else "",
                   self.r, self.o, self.R, self.Q))


def as_profile(profile):
    """None: the embedded profile; a Profile; or a path to a JSON profile."""
    if profile is None:
        return Profile()
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, dict):
        return Profile.from_dict(profile)
    try:
        return Profile.load(profile)
    except TypeError:
        raise TypeError("profile: expected None, a Profile, a dict or a path, got %s"
                        % type(profile).__name__) from None
