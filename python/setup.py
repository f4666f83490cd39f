# SPDX-License-Identifier: Apache-2.0
"""
setup.py - what pyproject.toml cannot say: the cffi extension xstage._core, built from the
repository's src/*.c by xstage/_build.py, and the version, read from include/xstage.h (the one
place it is written).
"""
import os
import re

from setuptools import setup


def core_version():
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include", "xstage.h")
    with open(header, encoding="utf-8") as f:
        m = re.search(r'#define\s+XSTAGE_VERSION_STRING\s+"([^"]+)"', f.read())
    return m.group(1) if m else "0.1.0"  # headers from before the version macros: 0.1.0


setup(version=core_version(), cffi_modules=["xstage/_build.py:ffibuilder"])
