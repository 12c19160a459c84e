/* SPDX-License-Identifier: Apache-2.0 */
/* logfmt to stderr (docs/design.md "Modules"). One fwrite per line so lines
 * from different processes sharing stderr do not interleave; values are
 * quoted when they contain spaces, quotes, '=' or control bytes. Loop thread
 * only. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "clock.h"

static enum log_level min_level = LOG_INFO;
static const char *const names[] = { "debug", "info", "warn", "error" };

void log_set_level(enum log_level lvl)
{
    min_level = lvl;
}

int log_parse_level(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    if (strcmp(s, "warning") == 0)
        return LOG_WARN;
    return -1;
}

bool log_enabled(enum log_level lvl)
{
    return lvl >= min_level;
}

static void put_value(struct buf *b, const char *v)
{
    bool plain = *v != '\0';

    for (const char *p = v; *p && plain; p++)
        if (*p == ' ' || *p == '"' || *p == '=' || (unsigned char)*p < 0x20)
            plain = false;
    if (plain) {
        buf_puts(b, v);
        return;
    }
    buf_append(b, "\"", 1);
    for (const char *p = v; *p; p++) {
        unsigned char c = (unsigned char)*p;

        if (c == '"' || c == '\\')
            buf_printf(b, "\\%c", c);
        else if (c == '\n')
            buf_puts(b, "\\n");
        else if (c < 0x20)
            buf_printf(b, "\\x%02x", c);
        else
            buf_append(b, p, 1);
    }
    buf_append(b, "\"", 1);
}

void log_kv(enum log_level lvl, const char *msg, ...)
{
    struct buf b;
    uint64_t now = clock_wall_ns();
    time_t secs = (time_t)(now / 1000000000ULL);
    struct tm tm;
    char tbuf[40];
    va_list ap;
    const char *k;

    if (lvl < min_level)
        return;
    gmtime_r(&secs, &tm);
    strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
    buf_init(&b, 64 * 1024);
    buf_printf(&b, "ts=%s.%03uZ level=%s msg=", tbuf, (unsigned)(now / 1000000ULL % 1000),
               names[lvl]);
    put_value(&b, msg);
    va_start(ap, msg);
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);

        buf_printf(&b, " %s=", k);
        put_value(&b, v ? v : "");
    }
    va_end(ap);
    buf_append(&b, "\n", 1);
    if (b.data)
        fwrite(b.data, 1, b.len, stderr);
    buf_done(&b);
}

bool log_ratelimit_allow(struct log_ratelimit *rl, uint64_t now_ms, unsigned burst,
                         uint64_t window_ms, unsigned *suppressed_out)
{
    if (now_ms - rl->window_start_ms >= window_ms) {
        rl->window_start_ms = now_ms;
        rl->emitted = 0;
    }
    if (rl->emitted >= burst) {
        rl->suppressed++;
        return false;
    }
    rl->emitted++;
    if (suppressed_out)
        *suppressed_out = rl->suppressed;
    rl->suppressed = 0;
    return true;
}
