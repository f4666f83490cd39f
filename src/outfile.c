// SPDX-License-Identifier: Apache-2.0
/*
 * outfile.c - atomic output files and the output-is-not-an-input check (xstage_outfile.h).
 *
 * The temporary file lives in the destination's directory so that rename(2) replaces the old
 * file in one step on the same file system. Its mode is the old file's, or what fopen would
 * have given a new one (0666 less the umask), since mkstemp creates it 0600.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xstage_outfile.h"

/* dir (without a trailing slash; "." for a bare name) and base of path */
static int split_path(const char *path, char *dir, size_t dn, char *base, size_t bn)
{
    char a[4096], b[4096];
    if (strlen(path) >= sizeof a)
        return -1;
    strcpy(a, path);
    strcpy(b, path);
    int r1 = snprintf(dir, dn, "%s", dirname(a));
    int r2 = snprintf(base, bn, "%s", basename(b));
    return r1 < 0 || (size_t)r1 >= dn || r2 < 0 || (size_t)r2 >= bn ? -1 : 0;
}

/* The real standard output once xs_outfile_claim_stdout moved the report aside; NULL before. */
static FILE *data_out;

static int is_stdout(const FILE *f)
{
    return f && (f == stdout || f == data_out);
}

xs_status xs_outfile_claim_stdout(void)
{
    if (data_out)
        return XS_OK;
    fflush(stdout);
    int fd = dup(STDOUT_FILENO);
    if (fd < 0 || !(data_out = fdopen(fd, "w"))) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return xs_seterr(XS_EIO, "cannot duplicate the standard output: %s", strerror(e));
    }
    if (!freopen("/dev/null", "w", stdout))
        return xs_seterr(XS_EIO, "cannot open /dev/null: %s", strerror(errno));
    return XS_OK;
}

xs_status xs_outfile_open(xs_outfile *o, const char *path)
{
    memset(o, 0, sizeof *o);
    if (!path || !*path)
        return xs_seterr(XS_EINVAL, "an output file needs a name");
    if (strlen(path) >= sizeof o->path)
        return xs_seterr(XS_EINVAL, "%.64s...: output path too long", path);
    if (!strcmp(path, "-")) { /* the standard output: written in place, never closed */
        snprintf(o->path, sizeof o->path, "the standard output");
        o->f = data_out ? data_out : stdout;
        return XS_OK;
    }
#ifdef fopen
    /* the fuzz build's seam (tests/fuzz/fuzz_cli.c) takes every write: no file system */
    snprintf(o->path, sizeof o->path, "%s", path);
    if (!(o->f = fopen(path, "w")))
        return xs_seterr(XS_EIO, "%s: cannot write: %s", path, strerror(errno));
    return XS_OK;
#else
    struct stat st;
    int exists = stat(path, &st) == 0;
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        char real[PATH_MAX];
        if (!realpath(path, real))
            return xs_seterr(XS_EIO, "%s: cannot follow the symbolic link: %s", path,
                             strerror(errno));
        snprintf(o->path, sizeof o->path, "%s", real);
    } else {
        snprintf(o->path, sizeof o->path, "%s", path);
    }
    if (exists && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return xs_seterr(XS_EIO, "%s: is a directory", path);
        /* a device or a pipe: nothing to replace, so written in place */
        if (!(o->f = fopen(o->path, "w")))
            return xs_seterr(XS_EIO, "%s: cannot write: %s", path, strerror(errno));
        return XS_OK;
    }
    char dir[4096], base[1024];
    if (split_path(o->path, dir, sizeof dir, base, sizeof base) ||
        snprintf(o->tmp, sizeof o->tmp, "%s/.%s.xs-XXXXXX", dir, base) >= (int)sizeof o->tmp)
        return xs_seterr(XS_EINVAL, "%.64s...: output path too long", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        int e = errno;
        o->tmp[0] = 0;
        return xs_seterr(XS_EIO, "%s: cannot write a file in %s: %s", path, dir, strerror(e));
    }
    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    if (fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        o->tmp[0] = 0;
        return xs_seterr(XS_EIO, "%s: cannot write: %s", path, strerror(e));
    }
    return XS_OK;
#endif
}

xs_status xs_outfile_commit(xs_outfile *o)
{
    if (!o->f)
        return XS_OK;
    int err = 0;
    if (is_stdout(o->f)) {
        FILE *f = o->f;
        o->f = NULL;
        if (fflush(f) != 0 || ferror(f))
            return xs_seterr(XS_EIO, "cannot write the standard output: %s",
                             strerror(errno ? errno : EIO));
        return XS_OK;
    }
    if (fflush(o->f) != 0)
        err = errno ? errno : EIO;
    else if (ferror(o->f))
        err = EIO;
    /* device files (/dev/null) and some file systems cannot sync; that is no write error */
    else if (o->tmp[0] && fsync(fileno(o->f)) != 0 && errno != EINVAL && errno != EROFS &&
             errno != ENOTSUP)
        err = errno;
    errno = 0;
    if (fclose(o->f) != 0 && !err)
        err = errno ? errno : EIO;
    o->f = NULL;
    if (!err && o->tmp[0] && rename(o->tmp, o->path) != 0)
        err = errno;
    if (err) {
        if (o->tmp[0])
            unlink(o->tmp);
        o->tmp[0] = 0;
        return xs_seterr(XS_EIO, "%s: write error: %s", o->path, strerror(err));
    }
    o->tmp[0] = 0;
    return XS_OK;
}

void xs_outfile_discard(xs_outfile *o)
{
    if (is_stdout(o->f))
        fflush(o->f);
    else if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->tmp[0])
        unlink(o->tmp);
    o->tmp[0] = 0;
}

xs_status xs_outfile_write(const char *path, const void *data, size_t n)
{
    xs_outfile o;
    XS_TRY(xs_outfile_open(&o, path));
    if (n && fwrite(data, 1, n, o.f) != n) {
        int e = errno;
        xs_outfile_discard(&o);
        return xs_seterr(XS_EIO, "%s: write error: %s", path, strerror(e ? e : EIO));
    }
    return xs_outfile_commit(&o);
}

/* What names a file for the comparison: an existing file by device and inode; one that does not
 * exist yet by its directory's device and inode and its base name. kind: 0 none (skip), 1 an
 * existing regular file, 2 an existing other file (device, pipe), 3 a file still to create. */
typedef struct {
    int kind;
    dev_t dev;
    ino_t ino;
    char base[1024];
} file_id;

static file_id identify(const char *path)
{
    file_id id = {0};
    struct stat st;
    if (!path || !strcmp(path, "-"))
        return id;
    if (stat(path, &st) == 0) {
        id.kind = S_ISREG(st.st_mode) ? 1 : 2;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        return id;
    }
    char dir[4096];
    if (errno != ENOENT || split_path(path, dir, sizeof dir, id.base, sizeof id.base) ||
        stat(dir, &st) != 0)
        return id;
    id.kind = 3;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return id;
}

static int same(const file_id *a, const file_id *b)
{
    return a->kind == b->kind && a->dev == b->dev && a->ino == b->ino &&
           (a->kind != 3 || !strcmp(a->base, b->base));
}

xs_status xs_files_distinct(const xs_file_arg *out, int nout, const xs_file_arg *in, int nin)
{
    for (int i = 0; i < nout; i++) {
        /* "-" is the standard output (or, as an input, the standard input): no file */
        if (out[i].path && !strcmp(out[i].path, "-")) {
            for (int j = 0; j < i; j++)
                if (out[j].path && !strcmp(out[j].path, "-"))
                    return xs_seterr(XS_EINVAL, "%s - and %s - both name the standard output; "
                                     "give one of them a file", out[j].opt, out[i].opt);
            continue;
        }
        file_id o = identify(out[i].path);
        if (o.kind == 0 || o.kind == 2)
            continue;
        for (int j = 0; j < nin; j++) {
            file_id x = identify(in[j].path);
            if (o.kind == 1 && same(&o, &x))
                return xs_seterr(XS_EINVAL, "%s %s is the same file as %s %s; refusing to "
                                 "overwrite an input", out[i].opt, out[i].path, in[j].opt,
                                 in[j].path);
        }
        for (int j = 0; j < i; j++) {
            file_id x = identify(out[j].path);
            if (same(&o, &x))
                return xs_seterr(XS_EINVAL, "%s %s and %s %s are the same file; give each "
                                 "output its own name", out[j].opt, out[j].path, out[i].opt,
                                 out[i].path);
        }
    }
    return XS_OK;
}
