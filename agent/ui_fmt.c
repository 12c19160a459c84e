/* SPDX-License-Identifier: Apache-2.0 */
/* How the web UI writes numbers for people: sample values in their unit
 * (nanoseconds as ns, µs, ms, s, min or h; bytes in binary units; counts
 * with thousands separators), shares as percentages, sizes in binary
 * units, durations and ages as people write them ("4 min 12 s ago"), and
 * the stable colour of a function's package. The script of the profile
 * page (agent/assets/flame.js) writes values the same way; the text and
 * JSON views write exact numbers and do not use this.
 *
 * Pure: any thread, on the caller's buffer; nothing is kept.
 * (docs/design.md "Modules") */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/ui.h"
#include "common/buf.h"

enum agent__ui_unit agent__ui_unit_of(const char *unit)
{
    if (!unit)
        return UI_UNIT_COUNT;
    if (strcmp(unit, "nanoseconds") == 0)
        return UI_UNIT_NS;
    if (strcmp(unit, "bytes") == 0)
        return UI_UNIT_BYTES;
    return UI_UNIT_COUNT;
}

/* `v` (>= 0) over `scale` with three significant digits (at least the
 * units): "1.79", "17.9", "179". */
static void three(struct buf *b, double v, const char *unit)
{
    int decimals = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;

    buf_printf(b, "%.*f %s", decimals, v, unit);
}

void agent__ui_fmt_count(struct buf *b, uint64_t v)
{
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%" PRIu64, v);

    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            buf_append(b, ",", 1);
        buf_append(b, digits + i, 1);
    }
}

void agent__ui_fmt_bytes(struct buf *b, uint64_t v)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    double d = (double)v;
    int u = -1;

    if (v < 1024) {
        buf_printf(b, "%" PRIu64 " B", v);
        return;
    }
    while (d >= 1023.5 && u < 5) { /* 1023.9 KiB reads 1.00 MiB */
        d /= 1024;
        u++;
    }
    three(b, d, units[u]);
}

/* Nanoseconds: ns, µs, ms, s, then min and h, three digits. */
static void fmt_ns(struct buf *b, uint64_t v)
{
    double d = (double)v;

    if (v < 1000)
        buf_printf(b, "%" PRIu64 " ns", v);
    else if (d < 999.5e3) /* what would read "1000" reads in the next unit */
        three(b, d / 1e3, "\xc2\xb5s");
    else if (d < 999.5e6)
        three(b, d / 1e6, "ms");
    else if (d < 59.95e9)
        three(b, d / 1e9, "s");
    else if (d < 59.95 * 60e9)
        three(b, d / 60e9, "min");
    else
        three(b, d / 3600e9, "h");
}

void agent__ui_fmt_value(struct buf *b, int64_t v, enum agent__ui_unit u)
{
    uint64_t m = v < 0 ? -(uint64_t)v : (uint64_t)v;

    if (v < 0)
        buf_append(b, "-", 1);
    switch (u) {
    case UI_UNIT_NS:
        fmt_ns(b, m);
        break;
    case UI_UNIT_BYTES:
        agent__ui_fmt_bytes(b, m);
        break;
    default:
        agent__ui_fmt_count(b, m);
        break;
    }
}

void agent__ui_fmt_signed(struct buf *b, int64_t v, enum agent__ui_unit u)
{
    if (v > 0)
        buf_append(b, "+", 1);
    agent__ui_fmt_value(b, v, u);
}

void agent__ui_fmt_pct(struct buf *b, int64_t part, int64_t whole)
{
    double p = whole ? 100.0 * (double)part / (double)whole : 0;

    if (part && whole && p > -0.005 && p < 0.005)
        buf_puts(b, part > 0 ? "<0.01%" : ">-0.01%");
    else
        buf_printf(b, "%.2f%%", p);
}

void agent__ui_fmt_duration(struct buf *b, uint64_t ns)
{
    uint64_t s = ns / 1000000000u;

    if (ns < 1000000u)
        buf_printf(b, "%" PRIu64 " \xc2\xb5s", ns / 1000u);
    else if (ns < 1000000000u)
        buf_printf(b, "%" PRIu64 " ms", ns / 1000000u);
    else if (s < 10)
        buf_printf(b, "%.1f s", (double)(ns / 100000000u) / 10.0);
    else if (s < 60)
        buf_printf(b, "%" PRIu64 " s", s);
    else if (s < 3600)
        buf_printf(b, "%" PRIu64 " min %" PRIu64 " s", s / 60, s % 60);
    else if (s < 86400)
        buf_printf(b, "%" PRIu64 " h %" PRIu64 " min", s / 3600, s % 3600 / 60);
    else
        buf_printf(b, "%" PRIu64 " d %" PRIu64 " h", s / 86400, s % 86400 / 3600);
}

void agent__ui_fmt_ago(struct buf *b, uint64_t then_ns, uint64_t now_ns)
{
    if (!then_ns) {
        buf_puts(b, "never");
    } else if (now_ns <= then_ns) {
        buf_puts(b, "just now");
    } else {
        agent__ui_fmt_duration(b, now_ns - then_ns);
        buf_puts(b, " ago");
    }
}

size_t agent__ui_package(const char *fn)
{
    const char *slash = strrchr(fn, '/');
    const char *from = slash ? slash + 1 : fn;
    const char *dot = strchr(from, '.'), *colons = strstr(from, "::");

    /* Go: the import path up to the first dot after its last slash
     * ("github.com/x/y.(*T).M", "main.main.func1"); C++ and Rust: the
     * first namespace ("std::vector<int>::push_back"); a name with
     * neither is its own package. */
    if (colons && (!dot || colons < dot))
        return (size_t)(colons - fn);
    if (dot)
        return (size_t)(dot - fn);
    return strlen(fn);
}

unsigned agent__ui_package_hue(const char *fn)
{
    size_t n = agent__ui_package(fn);
    uint32_t h = 2166136261u; /* FNV-1a */

    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)fn[i];
        h *= 16777619u;
    }
    return h % 360;
}
