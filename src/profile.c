// SPDX-License-Identifier: Apache-2.0
/*
 * profile.c - calibrated profiles: JSON load/save (jansson), --set overrides, plausibility.
 *
 * A profile is the calibrated numbers of one path (host, local, peer, virtual). The embedded
 * default is an H200 over PCIe to pinned host memory; it goes through the same parser as a file.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xstage.h"
#include "xstage_outfile.h"

/* Embedded default: the calibrated H200 host profile of bench/results/calibrate/ (published form:
 * no producer queue, no reserve; the command and the versions are in it). Regenerate with
 * scripts/embed_profile.py. */
static const char default_profile_json[] =
    "{\n"
    "  \"device\": \"NVIDIA H200\",\n"
    "  \"path\": \"host\",\n"
    "  \"date\": \"2026-11-29\",\n"
    "  \"command\": \"xstage calibrate --target host --out h200_host_profile.json --out-published h200_host_profile_published.json --samples h200_host_samples.csv\",\n"
    "  \"provisional\": false,\n"
    "  \"notes\": \"published form (queue 0, reserve 0) of the calibration; driver 13000, CUDA runtime 13000, 132 SMs; issue residual 13.4% med; event model on fitting data 34.6%\",\n"
    "  \"issue_bytes_per_ns\": 50.6663212271726,\n"
    "  \"issue_overhead_ns\": 218.3278965217549,\n"
    "  \"drain_bytes_per_ns\": 52.821596401232966,\n"
    "  \"capacity_bytes\": 1048576,\n"
    "  \"capacity_bytes_per_producer\": 0,\n"
    "  \"chunk_bytes\": 16384,\n"
    "  \"queue_bytes_per_producer\": 0,\n"
    "  \"reserve_bytes_per_producer\": 0,\n"
    "  \"arbitration_skew\": 0.75,\n"
    "  \"barrier_ns\": 0\n"
    "}\n";

/* The numeric fields, in file and print order: name, required in a profile file, unit. Every
 * list of them below (the table, xs_profile_fields, --set's message) comes from this one. */
#define NUMERIC_FIELDS(X)                                                                     \
    X(issue_bytes_per_ns, 1, "bytes/ns")                                                      \
    X(issue_overhead_ns, 1, "ns")                                                             \
    X(drain_bytes_per_ns, 1, "bytes/ns")                                                      \
    X(capacity_bytes, 1, "bytes")                                                             \
    X(capacity_bytes_per_producer, 1, "bytes")                                                \
    X(chunk_bytes, 1, "bytes")                                                                \
    X(queue_bytes_per_producer, 0, "bytes")                                                   \
    X(reserve_bytes_per_producer, 0, "bytes")                                                 \
    X(arbitration_skew, 0, "")                                                                \
    X(barrier_ns, 0, "ns")                                                                    \
    X(start_ns, 0, "ns")                                                                      \
    X(reserve_release, 0, "")                                                                 \
    X(row_start_ns, 0, "ns")                                                                  \
    X(reserve_shared_fraction, 0, "")                                                         \
    X(buffer_bytes_per_producer, 0, "bytes")                                                  \
    X(drain_under_load_bytes_per_ns, 0, "bytes/ns")                                           \
    X(overflow_capacity_loss, 0, "")                                                          \
    X(overflow_loss_ns, 0, "ns")                                                              \
    X(issue_tail_ns, 0, "ns")

typedef struct {
    const char *name;
    size_t offset;
    int required;
    const char *unit;
} numeric_field;

#define FIELD(n, req, unit) {#n, offsetof(xs_profile, n), req, unit},
static const numeric_field numeric_fields[] = {NUMERIC_FIELDS(FIELD)};
#undef FIELD
#define NNUMERIC (sizeof numeric_fields / sizeof numeric_fields[0])

#define NAME(n, req, unit) #n,
const char *const xs_profile_fields[] = {NUMERIC_FIELDS(NAME) NULL};
#undef NAME

/* "name, name, ..." for messages */
#define LISTED(n, req, unit) ", " #n
static const char numeric_list[] = NUMERIC_FIELDS(LISTED) "";
#undef LISTED

/* Keys that may appear besides the numeric fields; anything else is a typo. */
static const char *const other_keys[] = {"device", "path", "date", "command", "provisional",
                                         "fit", "notes", NULL};

static double *field_ptr(xs_profile *p, const numeric_field *f)
{
    return (double *)((char *)p + f->offset);
}

static const numeric_field *find_numeric(const char *name)
{
    for (size_t i = 0; i < NNUMERIC; i++)
        if (!strcmp(numeric_fields[i].name, name))
            return &numeric_fields[i];
    return NULL;
}

/* Line of the first occurrence of "key" in the text, for messages; 0 if not found. */
static int key_line(const char *text, size_t len, const char *key)
{
    size_t kl = strlen(key);
    int line = 1;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n')
            line++;
        else if (text[i] == '"' && i + kl + 1 < len && !strncmp(text + i + 1, key, kl) &&
                 text[i + kl + 1] == '"')
            return line;
    }
    return 0;
}

/* Edit distance, to suggest the field a typo meant. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

/* The closest known name to a typo (NULL: none within 3 edits). settable_only = 1 (--set)
 * considers only the numeric fields, which --set can change; 0 (a profile file) also the other
 * keys. */
static const char *suggest(const char *name, int settable_only)
{
    const char *best = NULL;
    int bd = 4;
    for (size_t i = 0; i < NNUMERIC; i++) {
        int dd = edit_distance(name, numeric_fields[i].name);
        if (dd < bd) { bd = dd; best = numeric_fields[i].name; }
    }
    for (size_t i = 0; !settable_only && other_keys[i]; i++) {
        int dd = edit_distance(name, other_keys[i]);
        if (dd < bd) { bd = dd; best = other_keys[i]; }
    }
    return best;
}

/* The model's symbols (docs/MODEL.md, "Profile fields") that --set takes for a field's name;
 * case matters: q is the per-producer cap, Q the shared capacity. */
static const struct { const char *symbol, *field; } symbols[] = {
    {"r", "issue_bytes_per_ns"}, {"o", "issue_overhead_ns"}, {"R", "drain_bytes_per_ns"},
    {"Q", "capacity_bytes"}, {"q", "capacity_bytes_per_producer"}, {"c", "chunk_bytes"},
    {"b", "queue_bytes_per_producer"}};

/* Copy a JSON string (UTF-8) into a fixed field. A string too long for the field is cut at a
 * character boundary: half a character would make the field invalid UTF-8, which jansson
 * refuses to write, so xs_profile_save would silently drop the field. */
static void copy_str(char *dst, size_t cap, const char *src)
{
    src = src ? src : "";
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = 0;
}

xs_status xs_profile_parse(const char *text, size_t len, const char *name, xs_profile *p)
{
    json_error_t err;
    memset(p, 0, sizeof *p);
    if (len == 0)
        return xs_seterr(XS_EPARSE, "%s: empty profile", name);
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return xs_seterr(XS_EPARSE, "%s:%d:%d: invalid JSON: %s", name, err.line, err.column,
                         err.text);
    xs_status st = XS_OK;
    if (!json_is_object(root)) {
        st = xs_seterr(XS_EPARSE, "%s:1: a profile is a JSON object, not %s", name,
                       json_is_array(root) ? "an array" : "a scalar");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        int line = key_line(text, len, key);
        const numeric_field *f = find_numeric(key);
        if (f) {
            if (!json_is_number(val)) {
                st = xs_seterr(XS_EPARSE, "%s:%d: field '%s' must be a number", name, line, key);
                goto out;
            }
            double v = json_number_value(val);
            if (!isfinite(v)) {
                st = xs_seterr(XS_EPARSE, "%s:%d: field '%s' is not finite", name, line, key);
                goto out;
            }
            *field_ptr(p, f) = v;
            continue;
        }
        int known = 0;
        for (size_t i = 0; other_keys[i]; i++)
            known |= !strcmp(other_keys[i], key);
        if (!known) {
            const char *s = suggest(key, 0);
            st = xs_seterr(XS_EPARSE, "%s:%d: unknown field '%s'%s%s%s", name, line, key,
                           s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
            goto out;
        }
        if (!strcmp(key, "provisional")) {
            if (!json_is_boolean(val)) {
                st = xs_seterr(XS_EPARSE, "%s:%d: field 'provisional' must be true or false",
                               name, line);
                goto out;
            }
            p->provisional = json_is_true(val);
        } else if (!strcmp(key, "fit")) {
            /* informational: residuals of the fit */
        } else if (!strcmp(key, "notes")) {
            if (!json_is_string(val)) {
                st = xs_seterr(XS_EPARSE, "%s:%d: field 'notes' must be a string", name, line);
                goto out;
            }
            copy_str(p->notes, sizeof p->notes, json_string_value(val));
        } else {
            if (!json_is_string(val)) {
                st = xs_seterr(XS_EPARSE, "%s:%d: field '%s' must be a string", name, line, key);
                goto out;
            }
            const char *s = json_string_value(val);
            if (!strcmp(key, "device")) copy_str(p->device, sizeof p->device, s);
            else if (!strcmp(key, "path")) copy_str(p->path, sizeof p->path, s);
            else if (!strcmp(key, "date")) copy_str(p->date, sizeof p->date, s);
            else copy_str(p->command, sizeof p->command, s);
        }
    }
    for (size_t i = 0; i < NNUMERIC; i++) {
        if (numeric_fields[i].required && !json_object_get(root, numeric_fields[i].name)) {
            st = xs_seterr(XS_EPARSE, "%s: missing field '%s'", name, numeric_fields[i].name);
            goto out;
        }
    }
    if (!json_object_get(root, "path")) {
        st = xs_seterr(XS_EPARSE, "%s: missing field 'path' (host, local, peer or virtual)", name);
        goto out;
    }
    if (strcmp(p->path, "host") && strcmp(p->path, "local") && strcmp(p->path, "peer") &&
        strcmp(p->path, "virtual")) {
        st = xs_seterr(XS_EPARSE, "%s:%d: field 'path' is '%s'; expected host, local, peer or "
                       "virtual", name, key_line(text, len, "path"), p->path);
        goto out;
    }
    st = xs_profile_check(p, name);
out:
    json_decref(root);
    return st;
}

void xs_profile_default(xs_profile *p)
{
    xs_status st = xs_profile_parse(default_profile_json, sizeof default_profile_json - 1,
                                    "embedded profile", p);
    if (st != XS_OK)
        abort(); /* a broken embedded profile is a build defect; tests catch it first */
}

xs_status xs_profile_load(const char *path, xs_profile *p)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return xs_seterr(XS_EIO, "%s: cannot open profile: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return xs_seterr(XS_ENOMEM, "%s: out of memory", path);
    }
    for (;;) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
        if (len == cap) {
            if (cap >= (64u << 20)) {
                free(buf);
                fclose(f);
                return xs_seterr(XS_ERANGE, "%s: profile larger than 64 MiB", path);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return xs_seterr(XS_ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(buf);
        return xs_seterr(XS_EIO, "%s: read error", path);
    }
    xs_status st = xs_profile_parse(buf, len, path, p);
    free(buf);
    return st;
}

/* Bounds of xs_profile_check beyond sign and finiteness (docs/MODEL.md, "Profile bounds"). */
#define XS_MIN_RATE 1e-3 /* bytes/ns: 1 MB/s */
#define XS_MAX_RATE 1e9  /* bytes/ns: 1 EB/s (the TP model's ideal stage drains at 1e9) */
#define XS_MAX_PRODUCER_CHUNKS (1 << 28)

xs_status xs_profile_check(const xs_profile *p, const char *name)
{
    static const double huge = 1e15;
    for (size_t i = 0; i < NNUMERIC; i++) {
        double v = *field_ptr((xs_profile *)p, &numeric_fields[i]);
        if (!isfinite(v) || fabs(v) > huge)
            return xs_seterr(XS_ERANGE, "%s: %s = %g is not a usable number", name,
                             numeric_fields[i].name, v);
    }
    if (p->issue_bytes_per_ns <= 0)
        return xs_seterr(XS_ERANGE, "%s: issue_bytes_per_ns = %g: an issue rate must be > 0",
                         name, p->issue_bytes_per_ns);
    if (p->drain_bytes_per_ns <= 0)
        return xs_seterr(XS_ERANGE, "%s: drain_bytes_per_ns = %g: a drain rate must be > 0",
                         name, p->drain_bytes_per_ns);
    /* physical bounds (docs/MODEL.md, "Profile bounds"): rates from 1 MB/s to 1 EB/s, so that
     * every time the model derives stays finite; times up to 1 s */
    if (p->issue_bytes_per_ns < XS_MIN_RATE || p->issue_bytes_per_ns > XS_MAX_RATE ||
        p->drain_bytes_per_ns < XS_MIN_RATE || p->drain_bytes_per_ns > XS_MAX_RATE)
        return xs_seterr(XS_ERANGE, "%s: %s = %g bytes/ns is outside %g..%g bytes/ns", name,
                         p->issue_bytes_per_ns < XS_MIN_RATE || p->issue_bytes_per_ns >
                         XS_MAX_RATE ? "issue_bytes_per_ns" : "drain_bytes_per_ns",
                         p->issue_bytes_per_ns < XS_MIN_RATE || p->issue_bytes_per_ns >
                         XS_MAX_RATE ? p->issue_bytes_per_ns : p->drain_bytes_per_ns,
                         XS_MIN_RATE, XS_MAX_RATE);
    if (p->issue_overhead_ns < 0 || p->issue_overhead_ns > 1e9)
        return xs_seterr(XS_ERANGE, "%s: issue_overhead_ns = %g must be within 0..1e9", name,
                         p->issue_overhead_ns);
    if (p->chunk_bytes < 1)
        return xs_seterr(XS_ERANGE, "%s: chunk_bytes = %g must be >= 1", name, p->chunk_bytes);
    if (p->capacity_bytes < p->chunk_bytes)
        return xs_seterr(XS_ERANGE, "%s: capacity_bytes = %g is smaller than one chunk (%g)",
                         name, p->capacity_bytes, p->chunk_bytes);
    if (p->capacity_bytes_per_producer < 0 ||
        (p->capacity_bytes_per_producer > 0 && p->capacity_bytes_per_producer < p->chunk_bytes))
        return xs_seterr(XS_ERANGE, "%s: capacity_bytes_per_producer = %g must be 0 (no cap) or "
                         ">= chunk_bytes (%g)", name, p->capacity_bytes_per_producer,
                         p->chunk_bytes);
    if (p->reserve_bytes_per_producer < 0)
        return xs_seterr(XS_ERANGE, "%s: reserve_bytes_per_producer = %g must be >= 0", name,
                         p->reserve_bytes_per_producer);
    if (p->arbitration_skew < 0 || p->arbitration_skew > 5)
        return xs_seterr(XS_ERANGE, "%s: arbitration_skew = %g must be within 0..5", name,
                         p->arbitration_skew);
    if (p->queue_bytes_per_producer < 0)
        return xs_seterr(XS_ERANGE, "%s: queue_bytes_per_producer = %g must be >= 0", name,
                         p->queue_bytes_per_producer);
    if (p->barrier_ns < 0 || p->barrier_ns > 1e9)
        return xs_seterr(XS_ERANGE, "%s: barrier_ns = %g must be within 0..1e9", name,
                         p->barrier_ns);
    if (p->start_ns < 0 || p->start_ns > 1e9)
        return xs_seterr(XS_ERANGE, "%s: start_ns = %g must be within 0..1e9", name, p->start_ns);
    if (p->reserve_release != 0 && p->reserve_release != 1)
        return xs_seterr(XS_ERANGE, "%s: reserve_release = %g must be 0 (reserve held while the "
                         "producer's bytes are in the stage) or 1 (until it stops offering)",
                         name, p->reserve_release);
    if (p->reserve_shared_fraction < 0 || p->reserve_shared_fraction > 1)
        return xs_seterr(XS_ERANGE, "%s: reserve_shared_fraction = %g must be within 0..1", name,
                         p->reserve_shared_fraction);
    if (p->buffer_bytes_per_producer < 0)
        return xs_seterr(XS_ERANGE, "%s: buffer_bytes_per_producer = %g must be >= 0", name,
                         p->buffer_bytes_per_producer);
    if (!(p->drain_under_load_bytes_per_ns >= 0) || p->drain_under_load_bytes_per_ns > 1e6)
        return xs_seterr(XS_ERANGE, "%s: drain_under_load_bytes_per_ns = %g must be within "
                         "0..1e6 (0: not measured)", name, p->drain_under_load_bytes_per_ns);
    if (!(p->overflow_capacity_loss >= 0) || p->overflow_capacity_loss > 1)
        return xs_seterr(XS_ERANGE, "%s: overflow_capacity_loss = %g must be within 0..1", name,
                         p->overflow_capacity_loss);
    if (!(p->overflow_loss_ns >= 0) || p->overflow_loss_ns > 1e9)
        return xs_seterr(XS_ERANGE, "%s: overflow_loss_ns = %g must be within 0..1e9", name,
                         p->overflow_loss_ns);
    if (!(p->issue_tail_ns >= 0) || p->issue_tail_ns > 1e9)
        return xs_seterr(XS_ERANGE, "%s: issue_tail_ns = %g must be within 0..1e9", name,
                         p->issue_tail_ns);
    if (p->row_start_ns < 0 || p->row_start_ns > 1e9)
        return xs_seterr(XS_ERANGE, "%s: row_start_ns = %g must be within 0..1e9", name,
                         p->row_start_ns);
    /* the producer queue is counted in chunks (an int) by the simulator: at most
     * XS_MAX_PRODUCER_CHUNKS of them (the share of Q and the buffer are capped there) */
    if (p->chunk_bytes > (double)XS_MAX_BYTES_PER_PRODUCER)
        return xs_seterr(XS_ERANGE, "%s: chunk_bytes = %g is over 2^40 bytes", name,
                         p->chunk_bytes);
    if (p->queue_bytes_per_producer / p->chunk_bytes > XS_MAX_PRODUCER_CHUNKS)
        return xs_seterr(XS_ERANGE, "%s: queue_bytes_per_producer = %g is %.3g chunks of %g "
                         "bytes; at most %g chunks", name, p->queue_bytes_per_producer,
                         p->queue_bytes_per_producer / p->chunk_bytes, p->chunk_bytes,
                         (double)XS_MAX_PRODUCER_CHUNKS);
    return XS_OK;
}

xs_status xs_profile_set(xs_profile *p, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return xs_seterr(XS_EINVAL, "--set '%s': expected NAME=VALUE", assignment);
    char name[64];
    size_t nl = (size_t)(eq - assignment);
    if (nl >= sizeof name)
        return xs_seterr(XS_EINVAL, "--set '%s': unknown field name", assignment);
    memcpy(name, assignment, nl);
    name[nl] = 0;
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++)
        if (!strcmp(name, symbols[i].symbol))
            snprintf(name, sizeof name, "%s", symbols[i].field);
    const numeric_field *f = find_numeric(name);
    if (!f) {
        /* a one- or two-letter name is closer to a symbol than to any field: no guess */
        const char *s = strlen(name) > 2 ? suggest(name, 1) : NULL;
        return xs_seterr(XS_EINVAL, "--set: unknown profile field '%s'%s%s%s (settable: %s; "
                         "or the symbols r, o, R, Q, q, c, b)", name, s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "",
                         numeric_list + 2);
    }
    const char *v = eq + 1;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    int none = end == v; /* only white space: strtod read nothing and returned 0 */
    while (end && isspace((unsigned char)*end))
        end++;
    if (none || *end || errno == ERANGE || !isfinite(x))
        return xs_seterr(XS_EINVAL, "--set %s: '%s' is not a finite number", name, v);
    *field_ptr(p, f) = x;
    return XS_OK;
}

xs_status xs_profile_save(const xs_profile *p, const char *path)
{
    json_t *o = json_object();
    if (!o)
        return xs_seterr(XS_ENOMEM, "out of memory");
    json_object_set_new(o, "device", json_string(p->device));
    json_object_set_new(o, "path", json_string(p->path));
    json_object_set_new(o, "date", json_string(p->date));
    json_object_set_new(o, "command", json_string(p->command));
    json_object_set_new(o, "provisional", json_boolean(p->provisional));
    if (p->notes[0])
        json_object_set_new(o, "notes", json_string(p->notes));
    for (size_t i = 0; i < NNUMERIC; i++)
        json_object_set_new(o, numeric_fields[i].name,
                            json_real(*field_ptr((xs_profile *)p, &numeric_fields[i])));
    /* the fewest significant digits (15 to 17) that read every number back as the same double:
     * a saved profile loads exactly as it was, and predicts exactly the same */
    int digits = 15;
    for (size_t i = 0; i < NNUMERIC; i++) {
        double v = *field_ptr((xs_profile *)p, &numeric_fields[i]);
        char text[32];
        for (; digits < 17; digits++) {
            snprintf(text, sizeof text, "%.*g", digits, v);
            if (strtod(text, NULL) == v)
                break;
        }
    }
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(digits));
    json_decref(o);
    if (!text)
        return xs_seterr(XS_ENOMEM, "%s: out of memory for the profile", path);
    xs_status st = xs_outfile_write(path, text, strlen(text)); /* atomic (xstage_outfile.h) */
    free(text);
    return st;
}

void xs_profile_print(const xs_profile *p, FILE *f)
{
    fprintf(f, "# profile: %s, path %s, %s%s\n", p->device[0] ? p->device : "?", p->path,
            p->date[0] ? p->date : "undated", p->provisional ? " (provisional)" : "");
    if (p->command[0])
        fprintf(f, "# produced by: %s\n", p->command);
    fprintf(f, "%-30s %14s  %s\n", "field", "value", "unit");
    for (size_t i = 0; i < NNUMERIC; i++)
        fprintf(f, "%-30s %14.6g  %s\n", numeric_fields[i].name,
                *field_ptr((xs_profile *)p, &numeric_fields[i]), numeric_fields[i].unit);
}

int xs_store_tail_diverges(double bytes)
{
    if (!(bytes > 0) || bytes > (double)XS_MAX_BYTES_PER_PRODUCER)
        return 0;
    const int64_t n16 = (int64_t)(bytes / 16), step = 128;
    if (n16 <= 3 * step)
        return 0;
    const int64_t m = (n16 - 3 * step) % (4 * step);
    return m > 0 && m < step;
}

double xs_store_tail_ns(const xs_profile *p, double bytes)
{
    return p->issue_tail_ns > 0 && xs_store_tail_diverges(bytes) ? p->issue_tail_ns : 0;
}
