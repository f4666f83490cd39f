# SPDX-License-Identifier: Apache-2.0
"""
_lib.py - the compiled core (xstage._core) and the one way its failures become exceptions.

Every core call returns an xs_status; `check` turns a failing one into xstage.Error carrying the
core's one-line message (xs_errmsg, thread-local in the core; cffi calls run on the calling
thread, so the message read right after the call is that call's).
"""
import os

from ._core import ffi, lib

__all__ = ["ffi", "lib", "Error", "check", "fail", "cstr", "path_arg"]


class Error(Exception):
    """A failing call of the C core, or an argument refused before the call.

    str(e) and e.message are the core's one-line message (the text `xstage` prints after
    "xstage: error: "); e.status is the xs_status number and e.status_name its name
    ("invalid argument", "parse error", "i/o error", ...).
    """

    def __init__(self, message, status=None):
        if status is None:
            status = lib.XS_EINVAL
        super().__init__(message)
        self.message = message
        self.status = int(status)
        self.status_name = ffi.string(lib.xs_status_name(self.status)).decode("utf-8", "replace")


def check(status):
    """Raise Error with the core's message when status is not XS_OK."""
    if status != lib.XS_OK:
        raise Error(ffi.string(lib.xs_errmsg()).decode("utf-8", "replace"), status)


def fail(message, status=None):
    """Raise Error for an argument the package refuses before calling the core."""
    raise Error(message, status)


def cstr(char_array):
    """A NUL-terminated char[] field as str."""
    return ffi.string(char_array).decode("utf-8", "replace")


def path_arg(path):
    """A path for the core (bytes, as the file system spells it)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError("expected a path (str or os.PathLike), got %s" % type(path).__name__)
    return os.fsencode(path)
