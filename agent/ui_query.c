/* SPDX-License-Identifier: Apache-2.0 */
/* The profile pages' query (/profile, /profile.pb.gz): which target, which
 * time range and which baseline (a diff), which sample type, which
 * function (a sandwich), the table's order, the graph's orientation and
 * the format; every value read with httpd_query_get() into a bounded
 * field and checked, so that a page is made only of values in range; and
 * the same query written back, changed, for the page's links, as a
 * percent-encoded query string that parses to the same values (the fuzz
 * target tests/fuzz/agent checks both).
 *
 * Times are "now", a Prometheus duration before now ("-15m"), or Unix
 * milliseconds; `range=15m` is from=-15m&to=now, `range=all` from=0&to=now,
 * `range=latest` (or none) the newest profile alone.
 *
 * Pure: any thread; nothing is kept. (docs/design.md "HTTP server") */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ui.h"
#include "common/buf.h"
#include "common/duration.h"
#include "httpd/httpd.h"

/* Unix milliseconds up to the year 2255, which int64 nanoseconds hold: a
 * time past that is a typo. */
#define MS_MAX 9000000000000ull

static int fail(char *err, size_t errlen, const char *name, const char *why)
{
    snprintf(err, errlen, "%s: %s", name, why);
    return -EINVAL;
}

/* A time parameter: absent, "now", "-<duration>" or Unix milliseconds. */
static int get_time(const char *query, const char *name, struct agent__ui_time *t, char *err,
                    size_t errlen)
{
    char v[32];
    int rc = httpd_query_get(query, name, v, sizeof(v));
    uint64_t n = 0;

    t->kind = UI_TIME_NONE;
    t->v = 0;
    if (rc == -E2BIG)
        return fail(err, errlen, name, "too long");
    if (rc <= 0 || !v[0])
        return 0;
    if (strcmp(v, "now") == 0) {
        t->kind = UI_TIME_NOW;
        return 0;
    }
    if (v[0] == '-') {
        if (duration_parse(v + 1, &n) < 0 || n == 0)
            return fail(err, errlen, name, "not a duration before now (-15m)");
        t->kind = UI_TIME_AGO;
        t->v = n;
        return 0;
    }
    for (const char *c = v; *c; c++) {
        if (*c < '0' || *c > '9' || n > MS_MAX / 10)
            return fail(err, errlen, name, "not now, -<duration> or Unix milliseconds");
        n = n * 10 + (uint64_t)(*c - '0');
    }
    if (n > MS_MAX)
        return fail(err, errlen, name, "not now, -<duration> or Unix milliseconds");
    t->kind = UI_TIME_MS;
    t->v = n;
    return 0;
}

/* A key: 1 to 16 hex digits. */
static int get_key(const char *query, const char *name, uint64_t *key, bool *has, char *err,
                   size_t errlen)
{
    char v[24];
    int rc = httpd_query_get(query, name, v, sizeof(v));
    uint64_t k = 0;
    size_t n = 0;

    *has = false;
    *key = 0;
    if (rc == -E2BIG)
        return fail(err, errlen, name, "not a key");
    if (rc <= 0 || !v[0])
        return 0;
    for (const char *c = v; *c; c++, n++) {
        int d = *c >= '0' && *c <= '9'   ? *c - '0'
                : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
                : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10
                                         : -1;

        if (d < 0 || n >= 16)
            return fail(err, errlen, name, "not a key");
        k = k << 4 | (uint64_t)d;
    }
    *key = k;
    *has = true;
    return 0;
}

/* One of `names` (the first is the default when absent). */
static int get_enum(const char *query, const char *name, const char *const *names, size_t n,
                    int *out, char *err, size_t errlen)
{
    char v[16];
    int rc = httpd_query_get(query, name, v, sizeof(v));

    *out = 0;
    if (rc == 0 || (rc == 1 && !v[0]))
        return 0;
    for (size_t i = 0; rc == 1 && i < n; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    return fail(err, errlen, name, "not one of the values the page offers");
}

/* A text parameter into `out` (`len` bytes with its NUL); control
 * characters are refused. */
static int get_text(const char *query, const char *name, char *out, size_t len, char *err,
                    size_t errlen)
{
    int rc = httpd_query_get(query, name, out, len);

    if (rc == -E2BIG) {
        out[0] = '\0';
        return fail(err, errlen, name, "too long");
    }
    if (rc <= 0)
        out[0] = '\0';
    for (const char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            out[0] = '\0';
            return fail(err, errlen, name, "has a control character");
        }
    return 0;
}

static const char *const sorts[] = { "self", "total" };
static const char *const views[] = { "icicle", "flame" };
static const char *const formats[] = { "html", "json", "collapsed" };
static const char *const sides[] = { "", "base" };

int agent__ui_query_parse(const char *query, struct agent__ui_query *q, char *err, size_t errlen)
{
    char range[32];
    int rc, v;

    memset(q, 0, sizeof(*q));
    if (!query)
        query = "";
    if ((rc = get_key(query, "key", &q->key, &q->has_key, err, errlen)) < 0 ||
        (rc = get_key(query, "bkey", &q->bkey, &q->has_bkey, err, errlen)) < 0 ||
        (rc = get_time(query, "from", &q->from, err, errlen)) < 0 ||
        (rc = get_time(query, "to", &q->to, err, errlen)) < 0 ||
        (rc = get_time(query, "bfrom", &q->bfrom, err, errlen)) < 0 ||
        (rc = get_time(query, "bto", &q->bto, err, errlen)) < 0 ||
        (rc = get_text(query, "type", q->type, sizeof(q->type), err, errlen)) < 0 ||
        (rc = get_text(query, "fn", q->fn, sizeof(q->fn), err, errlen)) < 0)
        return rc;
    if ((rc = get_enum(query, "sort", sorts, 2, &v, err, errlen)) < 0)
        return rc;
    q->sort = v;
    if ((rc = get_enum(query, "view", views, 2, &v, err, errlen)) < 0)
        return rc;
    q->view = v;
    if ((rc = get_enum(query, "format", formats, 3, &v, err, errlen)) < 0)
        return rc;
    q->format = v;
    if ((rc = get_enum(query, "side", sides, 2, &v, err, errlen)) < 0)
        return rc;
    q->side = v;
    /* range=15m: from=-15m&to=now, unless they are given. */
    rc = httpd_query_get(query, "range", range, sizeof(range));
    if (rc == -E2BIG)
        return fail(err, errlen, "range", "too long");
    if (rc == 1 && strcmp(range, "all") == 0) {
        if (q->from.kind == UI_TIME_NONE)
            q->from = (struct agent__ui_time){ UI_TIME_MS, 0 };
        if (q->to.kind == UI_TIME_NONE)
            q->to = (struct agent__ui_time){ UI_TIME_NOW, 0 };
    } else if (rc == 1 && range[0] && strcmp(range, "latest") != 0) {
        uint64_t ms;

        if (duration_parse(range, &ms) < 0 || ms == 0)
            return fail(err, errlen, "range", "not a duration (15m)");
        if (q->from.kind == UI_TIME_NONE)
            q->from = (struct agent__ui_time){ UI_TIME_AGO, ms };
        if (q->to.kind == UI_TIME_NONE)
            q->to = (struct agent__ui_time){ UI_TIME_NOW, 0 };
    }
    return 0;
}

int64_t agent__ui_time_ns(const struct agent__ui_time *t, int64_t now_ns, int64_t dflt)
{
    switch (t->kind) {
    case UI_TIME_NOW:
        return now_ns;
    case UI_TIME_AGO:
        return t->v > (uint64_t)now_ns / 1000000u ? 0 : now_ns - (int64_t)(t->v * 1000000u);
    case UI_TIME_MS:
        return (int64_t)(t->v * 1000000u);
    default:
        return dflt;
    }
}

static void sep(struct buf *b, bool *first, bool html)
{
    if (!*first)
        buf_puts(b, html ? "&amp;" : "&");
    *first = false;
}

static void put_time(struct buf *b, bool *first, bool html, const char *name,
                     const struct agent__ui_time *t)
{
    char d[48];

    if (t->kind == UI_TIME_NONE)
        return;
    sep(b, first, html);
    buf_printf(b, "%s=", name);
    if (t->kind == UI_TIME_NOW) {
        buf_puts(b, "now");
    } else if (t->kind == UI_TIME_AGO) {
        duration_format(t->v, d, sizeof(d));
        buf_printf(b, "-%s", d);
    } else {
        buf_printf(b, "%" PRIu64, t->v);
    }
}

void agent__ui_query_write(struct buf *b, const struct agent__ui_query *q, bool html)
{
    bool first = true;

    if (q->has_key) {
        sep(b, &first, html);
        buf_printf(b, "key=%016" PRIx64, q->key);
    }
    put_time(b, &first, html, "from", &q->from);
    put_time(b, &first, html, "to", &q->to);
    if (q->has_bkey) {
        sep(b, &first, html);
        buf_printf(b, "bkey=%016" PRIx64, q->bkey);
    }
    put_time(b, &first, html, "bfrom", &q->bfrom);
    put_time(b, &first, html, "bto", &q->bto);
    if (q->type[0]) {
        sep(b, &first, html);
        buf_puts(b, "type=");
        buf_append_pct(b, q->type, strlen(q->type));
    }
    if (q->fn[0]) {
        sep(b, &first, html);
        buf_puts(b, "fn=");
        buf_append_pct(b, q->fn, strlen(q->fn));
    }
    if (q->sort) {
        sep(b, &first, html);
        buf_printf(b, "sort=%s", sorts[q->sort]);
    }
    if (q->view) {
        sep(b, &first, html);
        buf_printf(b, "view=%s", views[q->view]);
    }
    if (q->format) {
        sep(b, &first, html);
        buf_printf(b, "format=%s", formats[q->format]);
    }
    if (q->side) {
        sep(b, &first, html);
        buf_printf(b, "side=%s", sides[q->side]);
    }
}

bool agent__ui_query_diff(const struct agent__ui_query *q)
{
    return q->has_bkey || q->bfrom.kind != UI_TIME_NONE || q->bto.kind != UI_TIME_NONE;
}

void agent__ui_query_link(struct buf *b, const struct agent__ui_query *q)
{
    buf_puts(b, "<a href=\"/profile?");
    agent__ui_query_write(b, q, true);
    buf_puts(b, "\">");
}
