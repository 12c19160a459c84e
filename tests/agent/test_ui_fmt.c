/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the web UI's number formats (agent/ui_fmt.c): values in
 * their unit at each unit's edges (what would read "1000" reads in the
 * next unit), counts with separators, binary sizes, percentages, durations
 * and ages as people write them, and the package and colour of function
 * names (stable, the same for two functions of one package). The page
 * script's copy of the value format is checked against these strings in a
 * browser (tests/integration/test_ui_flame.py). */
#include <stdlib.h>
#include <string.h>

#include "agent/ui.h"
#include "common/buf.h"
#include "test.h"

static char out[256];

static const char *value(int64_t v, const char *unit)
{
    struct buf b;

    buf_init(&b, sizeof(out) - 1);
    agent__ui_fmt_value(&b, v, agent__ui_unit_of(unit));
    snprintf(out, sizeof(out), "%s", b.data ? b.data : "");
    buf_done(&b);
    return out;
}

/* The text `call` writes into B. */
static struct buf B;
#define FMT(call) (buf_reset(&B), (call), B.data ? (const char *)B.data : "")

TEST(nanoseconds)
{
    ASSERT_STR_EQ(value(0, "nanoseconds"), "0 ns");
    ASSERT_STR_EQ(value(999, "nanoseconds"), "999 ns");
    ASSERT_STR_EQ(value(1000, "nanoseconds"), "1.00 \xc2\xb5s");
    ASSERT_STR_EQ(value(12345, "nanoseconds"), "12.3 \xc2\xb5s");
    ASSERT_STR_EQ(value(999499, "nanoseconds"), "999 \xc2\xb5s");
    ASSERT_STR_EQ(value(999500, "nanoseconds"), "1.00 ms");
    ASSERT_STR_EQ(value(10000000, "nanoseconds"), "10.0 ms");
    ASSERT_STR_EQ(value(1790000000, "nanoseconds"), "1.79 s");
    ASSERT_STR_EQ(value(59940000000, "nanoseconds"), "59.9 s");
    ASSERT_STR_EQ(value(59950000000, "nanoseconds"), "1.00 min");
    ASSERT_STR_EQ(value(150000000000, "nanoseconds"), "2.50 min");
    ASSERT_STR_EQ(value(4320000000000, "nanoseconds"), "1.20 h");
    ASSERT_STR_EQ(value(-1790000000, "nanoseconds"), "-1.79 s");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_signed(&B, 2000, UI_UNIT_NS)), "+2.00 \xc2\xb5s");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_signed(&B, 0, UI_UNIT_NS)), "0 ns");
}

TEST(bytes_and_counts)
{
    ASSERT_STR_EQ(value(1023, "bytes"), "1023 B");
    ASSERT_STR_EQ(value(1024, "bytes"), "1.00 KiB");
    ASSERT_STR_EQ(value(51299, "bytes"), "50.1 KiB");
    ASSERT_STR_EQ(value(1048063, "bytes"), "1023 KiB");
    ASSERT_STR_EQ(value(1048064, "bytes"), "1.00 MiB");
    ASSERT_STR_EQ(value(3489660928, "bytes"), "3.25 GiB");
    ASSERT_STR_EQ(value(INT64_MAX, "bytes"), "8.00 EiB");
    ASSERT_STR_EQ(value(0, "count"), "0");
    ASSERT_STR_EQ(value(999, "count"), "999");
    ASSERT_STR_EQ(value(1000, "count"), "1,000");
    ASSERT_STR_EQ(value(1234567, "objects"), "1,234,567");
    ASSERT_STR_EQ(value(-1234567, "count"), "-1,234,567");
    ASSERT_STR_EQ(value(INT64_MIN, "count"), "-9,223,372,036,854,775,808");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_count(&B, 18446744073709551615u)),
                  "18,446,744,073,709,551,615");
    ASSERT_EQ(agent__ui_unit_of(NULL), UI_UNIT_COUNT);
}

TEST(percentages)
{
    ASSERT_STR_EQ(FMT(agent__ui_fmt_pct(&B, 1, 3)), "33.33%");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_pct(&B, 5, 5)), "100.00%");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_pct(&B, 1, 1000000)), "<0.01%");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_pct(&B, -1, 1000000)), ">-0.01%");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_pct(&B, 0, 7)), "0.00%");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_pct(&B, 3, 0)), "0.00%");
}

TEST(durations_and_ages)
{
    const uint64_t s = 1000000000u;

    ASSERT_STR_EQ(FMT(agent__ui_fmt_duration(&B, 850000)), "850 \xc2\xb5s");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_duration(&B, 123456789)), "123 ms");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_duration(&B, 3290000000u)), "3.2 s");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_duration(&B, 42 * s)), "42 s");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_duration(&B, 252 * s)), "4 min 12 s");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_duration(&B, 7500 * s)), "2 h 5 min");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_duration(&B, (3 * 86400 + 4 * 3600 + 59) * s)), "3 d 4 h");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_ago(&B, 100 * s, 352 * s)), "4 min 12 s ago");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_ago(&B, 0, 352 * s)), "never");
    ASSERT_STR_EQ(FMT(agent__ui_fmt_ago(&B, 400 * s, 352 * s)), "just now");
}

static const char *package(const char *fn)
{
    snprintf(out, sizeof(out), "%.*s", (int)agent__ui_package(fn), fn);
    return out;
}

TEST(packages_and_their_colours)
{
    ASSERT_STR_EQ(package("main.burnCPU"), "main");
    ASSERT_STR_EQ(package("main.main.func1"), "main");
    ASSERT_STR_EQ(package("runtime.(*mheap).alloc"), "runtime");
    ASSERT_STR_EQ(package("github.com/x/y.v2/z.(*T).M"), "github.com/x/y.v2/z");
    ASSERT_STR_EQ(package("net/http.(*conn).serve"), "net/http");
    ASSERT_STR_EQ(package("std::vector<int>::push_back"), "std");
    ASSERT_STR_EQ(package("core::ptr::drop_in_place<a.b>"), "core");
    ASSERT_STR_EQ(package("malloc"), "malloc");
    ASSERT_STR_EQ(package(""), "");
    ASSERT_EQ(agent__ui_package_hue("main.a"), agent__ui_package_hue("main.b.func2"));
    ASSERT_EQ(agent__ui_package_hue("net/http.Get"), agent__ui_package_hue("net/http.(*T).x"));
    ASSERT_NE(agent__ui_package_hue("main.a"), agent__ui_package_hue("runtime.a"));
    ASSERT_LT(agent__ui_package_hue("anything.at.all"), 360);
    /* FNV-1a 32 of "main" is 0xea90e208: the same hue in every run */
    ASSERT_EQ(agent__ui_package_hue("main.x"), 0xea90e208u % 360);
}

int main(int argc, char **argv)
{
    int rc;

    buf_init(&B, 1024);
    rc = test_main(argc, argv);
    buf_done(&B);
    return rc;
}
