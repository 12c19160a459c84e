/* Runner for tests/harness/test.h. Single-threaded; a failing assertion
 * longjmps back here so the remaining tests still run. */
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>

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

static bool selected(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return true;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return true;
    return false;
}

int test_main(int argc, char **argv)
{
    volatile int passed = 0, failed = 0;

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
    return failed ? 1 : 0;
}
