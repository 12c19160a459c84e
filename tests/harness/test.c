/* SPDX-License-Identifier: Apache-2.0 */
/* Runner for tests/harness/test.h. Single-threaded; a failing assertion
 * longjmps back here so the remaining tests still run. */
#include "test.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_TESTS 1024

static struct {
    const char *name;
    test_fn fn;
} tests[MAX_TESTS];
static int n_tests;
static jmp_buf fail_jmp;

void test__register(const char *name, test_fn fn)
{
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "too many tests\n");
        abort();
    }
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    n_tests++;
}

void test__fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    longjmp(fail_jmp, 1);
}

const char *test_data_path(const char *name)
{
    static char path[4096];
    const char *dir = getenv("TEST_DATA_DIR");

    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "tests/data", name);
    return path;
}

void test__promtool_metrics(const char *file, int line, const char *text, size_t len)
{
    char path[] = "/tmp/proflet-metrics-XXXXXX", cmd[256];
    int fd = mkstemp(path), rc;
    bool written;

    if (fd < 0)
        test__fail(file, line, "mkstemp: %s", strerror(errno));
    written = write(fd, text, len) == (ssize_t)len;
    close(fd);
    snprintf(cmd, sizeof(cmd), "/usr/bin/promtool check metrics < %s", path);
    rc = written ? system(cmd) : -1;
    unlink(path);
    if (!written)
        test__fail(file, line, "could not write %zu bytes of metrics to %s", len, path);
    if (rc != 0)
        test__fail(file, line, "promtool check metrics refused the text (status %d)", rc);
}

static bool selected(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return true;
    return false;
}

/* A name on the command line that selects nothing is a failure: a renamed
 * test must not turn a meson test that names it into a silent pass. */
static int unknown_names(int argc, char **argv)
{
    int unknown = 0;

    for (int i = 1; i < argc; i++) {
        bool found = false;

        for (int t = 0; t < n_tests && !found; t++)
            found = strcmp(argv[i], tests[t].name) == 0;
        if (!found) {
            printf("FAIL no test is named %s\n", argv[i]);
            unknown++;
        }
    }
    return unknown;
}

int test_main(int argc, char **argv)
{
    volatile int passed = 0, failed = unknown_names(argc, argv);

    for (volatile int i = 0; i < n_tests; i++) {
        if (!selected(argc, argv, tests[i].name))
            continue;
        if (setjmp(fail_jmp) == 0) {
            tests[i].fn();
            printf("ok   %s\n", tests[i].name);
            passed++;
        } else {
            printf("FAIL %s\n", tests[i].name);
            failed++;
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed || passed == 0 ? 1 : 0;
}
