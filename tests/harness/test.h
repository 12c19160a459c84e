/* SPDX-License-Identifier: Apache-2.0 */
/** A minimal unit-test harness in the spirit of libuv's task.h.
 *
 *   TEST(name) { ASSERT_EQ(1 + 1, 2); }
 *   int main(int argc, char **argv) { return test_main(argc, argv); }
 *
 * Tests register themselves through a constructor; `test_main` runs them all
 * (or those named on the command line) and exits non-zero on any failure.
 * Assertions print both operands and abort the current test. */
#ifndef PROFLET_TEST_H
#define PROFLET_TEST_H

#include <inttypes.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);

void test__register(const char *name, test_fn fn);
void test__fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
int test_main(int argc, char **argv);
/** Path of a data file: $TEST_DATA_DIR/name, or tests/data/name. Static buffer. */
const char *test_data_path(const char *name);
/** Fails the test unless `promtool check metrics` (the oracle for the
 * exposition format) accepts the `len` bytes of `text`. */
#define ASSERT_PROMTOOL_METRICS(text, len) test__promtool_metrics(__FILE__, __LINE__, (text), (len))
void test__promtool_metrics(const char *file, int line, const char *text, size_t len);

#define TEST(name)                                                 \
    static void test_##name(void);                                 \
    __attribute__((constructor)) static void test_reg_##name(void) \
    {                                                              \
        test__register(#name, test_##name);                        \
    }                                                              \
    static void test_##name(void)

#define ASSERT(cond)                                                       \
    do {                                                                   \
        if (!(cond))                                                       \
            test__fail(__FILE__, __LINE__, "assertion failed: %s", #cond); \
    } while (0)

#define ASSERT_TRUE(c) ASSERT(c)
#define ASSERT_FALSE(c) ASSERT(!(c))

#define ASSERT_INT_OP(a, op, b)                                                            \
    do {                                                                                   \
        long long a_ = (long long)(a), b_ = (long long)(b);                                \
        if (!(a_ op b_))                                                                   \
            test__fail(__FILE__, __LINE__, "%s %s %s: %lld vs %lld", #a, #op, #b, a_, b_); \
    } while (0)

#define ASSERT_EQ(a, b) ASSERT_INT_OP(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_INT_OP(a, !=, b)
#define ASSERT_LT(a, b) ASSERT_INT_OP(a, <, b)
#define ASSERT_LE(a, b) ASSERT_INT_OP(a, <=, b)
#define ASSERT_GT(a, b) ASSERT_INT_OP(a, >, b)
#define ASSERT_GE(a, b) ASSERT_INT_OP(a, >=, b)

#define ASSERT_U64_EQ(a, b)                                                                      \
    do {                                                                                         \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                         \
        if (a_ != b_)                                                                            \
            test__fail(__FILE__, __LINE__, "%s == %s: %" PRIu64 " vs %" PRIu64, #a, #b, a_, b_); \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                      \
    do {                                                                         \
        const char *a_ = (a), *b_ = (b);                                         \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                   \
            test__fail(__FILE__, __LINE__, "%s == %s: \"%s\" vs \"%s\"", #a, #b, \
                       a_ ? a_ : "(null)", b_ ? b_ : "(null)");                  \
    } while (0)

#define ASSERT_NULL(p) ASSERT((p) == NULL)
#define ASSERT_NOT_NULL(p) ASSERT((p) != NULL)

#endif
