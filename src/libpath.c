// SPDX-License-Identifier: Apache-2.0
/*
 * libpath.c - the run-time search order for NCCL and cuBLAS (libpath.h): the active Python
 * environment's site-packages, then the system loader, then the CUDA toolkit. CPU-only.
 */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libpath.h"

static int add_unique(char (*v)[XS_LIBPATH_MAX], int n, int cap, const char *s)
{
    if (n >= cap || !s || !*s || strlen(s) >= XS_LIBPATH_MAX)
        return n;
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], s))
            return n;
    snprintf(v[n], XS_LIBPATH_MAX, "%s", s);
    return n + 1;
}

/* Existing matches of a glob pattern, appended in glob's (sorted) order. */
static int add_glob(char (*v)[XS_LIBPATH_MAX], int n, int cap, const char *pattern)
{
    glob_t g;
    if (glob(pattern, 0, NULL, &g) == 0)
        for (size_t j = 0; j < g.gl_pathc; j++)
            n = add_unique(v, n, cap, g.gl_pathv[j]);
    globfree(&g);
    return n;
}

/* sys.path of the Python interpreter, asked once per process: entries separated by '\n' in
 * one static buffer (empty when there is no interpreter or XS_PYTHON=0). */
static const char *python_sys_path(void)
{
    static int asked;
    static char buf[16384];
    if (asked)
        return buf;
    asked = 1;
    buf[0] = 0;
    const char *py = getenv("XS_PYTHON");
    if (py && !strcmp(py, "0"))
        return buf;
    if (!py || !*py)
        py = "python3";
    /* the interpreter's name goes through the shell: accept only a plain path */
    for (const char *c = py; *c; c++)
        if (!(*c == '/' || *c == '.' || *c == '-' || *c == '_' || (*c >= '0' && *c <= '9') ||
              (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            return buf;
    char cmd[XS_LIBPATH_MAX + 128];
    snprintf(cmd, sizeof cmd,
             "%s -c 'import sys; print(\"\\n\".join(p for p in sys.path if p))' 2>/dev/null", py);
    FILE *f = popen(cmd, "r");
    if (!f)
        return buf;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = 0;
    if (pclose(f) != 0)
        buf[0] = 0; /* no interpreter (127) or it failed: nothing from it */
    return buf;
}

int xs_python_site_dirs(char (*dirs)[XS_LIBPATH_MAX], int cap)
{
    int n = 0;
    char pat[XS_LIBPATH_MAX];
    const char *roots[] = {getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX")};
    for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++) {
        if (!roots[r] || !*roots[r] || strlen(roots[r]) > XS_LIBPATH_MAX - 64)
            continue;
        snprintf(pat, sizeof pat, "%s/lib/python3*/site-packages", roots[r]);
        n = add_glob(dirs, n, cap, pat);
    }
    const char *p = python_sys_path();
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && len < XS_LIBPATH_MAX && p[0] == '/') {
            char d[XS_LIBPATH_MAX];
            memcpy(d, p, len);
            d[len] = 0;
            n = add_unique(dirs, n, cap, d);
        }
        p = e ? e + 1 : p + len;
    }
    return n;
}

int xs_lib_candidates(const char *const *tails, int ntails, const char *const *names, int nnames,
                      char (*out)[XS_LIBPATH_MAX], int cap)
{
    enum { MAX_DIRS = 64 };
    static char dirs[MAX_DIRS][XS_LIBPATH_MAX];
    int nd = xs_python_site_dirs(dirs, MAX_DIRS), n = 0;
    char pat[2 * XS_LIBPATH_MAX];
    for (int d = 0; d < nd; d++)
        for (int t = 0; t < ntails; t++) {
            if (strlen(dirs[d]) + strlen(tails[t]) + 2 > XS_LIBPATH_MAX)
                continue;
            snprintf(pat, sizeof pat, "%s/%.1000s", dirs[d], tails[t]);
                n = add_glob(out, n, cap, pat);
        }
    for (int i = 0; i < nnames; i++)
        n = add_unique(out, n, cap, names[i]);
    const char *cuda = getenv("CUDA_HOME");
    if (!cuda || !*cuda || strlen(cuda) > XS_LIBPATH_MAX - 128)
        cuda = "/usr/local/cuda";
    for (int i = 0; i < nnames; i++)
        if (!strchr(names[i], '/')) {
            snprintf(pat, sizeof pat, "%s/lib64/%s", cuda, names[i]);
            n = add_unique(out, n, cap, pat);
        }
    return n;
}
