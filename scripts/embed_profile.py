#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Embed a calibrated profile (JSON) as the library's default: rewrites the string literal
default_profile_json in src/profile.c. Usage: scripts/embed_profile.py PROFILE.json [RESULTS_DIR]"""
import json
import sys

ORDER = ["device", "path", "date", "command", "provisional", "notes", "issue_bytes_per_ns",
         "issue_overhead_ns", "drain_bytes_per_ns", "capacity_bytes",
         "capacity_bytes_per_producer", "chunk_bytes", "queue_bytes_per_producer",
         "reserve_bytes_per_producer", "arbitration_skew", "barrier_ns"]


def main():
    prof = json.load(open(sys.argv[1]))
    where = sys.argv[2] if len(sys.argv) > 2 else "bench/results/calibrate/"
    items = []
    for k in ORDER:
        if k not in prof:
            continue
        v = prof[k]
        if isinstance(v, bool):
            text = "true" if v else "false"
        elif isinstance(v, str):
            text = json.dumps(v)
        else:
            text = repr(float(v)) if not float(v).is_integer() else str(int(v))
        items.append(f'  "{k}": {text}')
    js = "{\n" + ",\n".join(items) + "\n}\n"
    lines = ['    "' + ln.replace("\\", "\\\\").replace('"', '\\"') + '\\n"'
             for ln in js.split("\n")[:-1]]
    literal = ("/* Embedded default: the calibrated H200 host profile of " + where +
               " (published form:\n * no producer queue, no reserve; the command and the "
               "versions are in it). Regenerate with\n * scripts/embed_profile.py. */\n"
               "static const char default_profile_json[] =\n" + "\n".join(lines) + ";\n")
    src = open("src/profile.c").read()
    start = src.find("/* Embedded default:")
    decl = src.find("static const char default_profile_json[] =\n", start)
    end = -1
    if start >= 0 and decl > start:
        # the literal is one quoted string per line; it ends at the first line ending in ";
        pos = decl + len("static const char default_profile_json[] =\n")
        while pos < len(src):
            nl = src.find("\n", pos)
            line = src[pos:nl]
            if not line.startswith('    "'):
                break
            pos = nl + 1
            if line.endswith('";'):
                end = pos
                break
    if end < 0:
        sys.exit("embed_profile: the default_profile_json literal was not found in src/profile.c")
    new = src[:start] + literal + src[end:]
    open("src/profile.c", "w").write(new)


if __name__ == "__main__":
    main()
