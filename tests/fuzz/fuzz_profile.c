/*
 * fuzz_profile.c - libFuzzer target: xs_profile_parse on arbitrary bytes.
 *
 * A profile that parses passes xs_profile_check and survives xs_profile_save and
 * xs_profile_load unchanged (every field exactly; the file is one temporary file per process);
 * one that does not leaves a one-line message naming the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "xstage.h"

static char tmp_dir[] = "/tmp/xs-fuzz-profile-XXXXXX";
static char tmp_path[sizeof tmp_dir + 16];
static FILE *devnull;

static void cleanup(void)
{
    unlink(tmp_path);
    rmdir(tmp_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    FUZZ_CHECK(mkdtemp(tmp_dir) != NULL, "mkdtemp");
    snprintf(tmp_path, sizeof tmp_path, "%s/p.json", tmp_dir);
    atexit(cleanup);
    devnull = fopen("/dev/null", "w");
    FUZZ_CHECK(devnull != NULL, "/dev/null");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    xs_profile p;
    xs_status st = xs_profile_parse((const char *)data, size, "fuzz.json", &p);
    if (st != XS_OK) {
        fuzz_check_error(st, "fuzz.json");
        return 0;
    }
    st = xs_profile_check(&p, "fuzz.json");
    FUZZ_CHECK(st == XS_OK, "parsed but fails the check: %s", xs_errmsg());
    xs_profile_print(&p, devnull);

    st = xs_profile_save(&p, tmp_path);
    FUZZ_CHECK(st == XS_OK, "save: %s", xs_errmsg());
    xs_profile q;
    st = xs_profile_load(tmp_path, &q);
    FUZZ_CHECK(st == XS_OK, "saved profile does not load: %s", xs_errmsg());
    /* every field, numbers bit for bit (the parser zeroes the struct, so the bytes after each
     * string's end match as well) */
    if (memcmp(&p, &q, sizeof p)) {
        fprintf(stderr, "fuzz: the profile changed through save and load; before:\n");
        xs_profile_print(&p, stderr);
        fprintf(stderr, "device '%s', date '%s', command '%s', notes '%s'\nafter:\n", p.device,
                p.date, p.command, p.notes);
        xs_profile_print(&q, stderr);
        fprintf(stderr, "device '%s', date '%s', command '%s', notes '%s'\n", q.device, q.date,
                q.command, q.notes);
        abort();
    }
    return 0;
}
