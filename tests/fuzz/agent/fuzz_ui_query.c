/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a raw query string through the profile pages' query
 * parser (agent__ui_query_parse, agent/ui_query.c), and what a page writes
 * back for its links (agent__ui_query_write).
 *
 * Invariants (agent/ui.h): a parse returns 0 or -EINVAL with a message;
 * on success every field is in range (keys as parsed, times of a known
 * kind and bound, text fields terminated inside their arrays without
 * control characters, enums among their values); the written query has no
 * character that HTML or a URL would take as markup, parses to the same
 * query, and its "&amp;" form is the same with each '&' written so; a
 * time resolves between 0 and now when it is before now. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz_invariants.h"
#include "agent/ui.h"
#include "common/buf.h"
#include "common/duration.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t cap)
{
    FUZZ_ASSERT(memchr(s, '\0', cap) != NULL);
    for (; *s; s++)
        FUZZ_ASSERT((unsigned char)*s >= 0x20 && *s != 0x7f);
}

static void check_time(const struct agent__ui_time *t)
{
    int64_t now = 1700000000000000000;

    FUZZ_ASSERT(t->kind == UI_TIME_NONE || t->kind == UI_TIME_NOW || t->kind == UI_TIME_AGO ||
                t->kind == UI_TIME_MS);
    if (t->kind == UI_TIME_AGO) {
        int64_t ns = agent__ui_time_ns(t, now, -1);

        FUZZ_ASSERT(t->v > 0 && t->v <= DURATION_MAX_MS);
        FUZZ_ASSERT(ns >= 0 && ns < now);
    }
    if (t->kind == UI_TIME_MS)
        FUZZ_ASSERT(agent__ui_time_ns(t, now, -1) >= 0);
    if (t->kind == UI_TIME_NOW)
        FUZZ_ASSERT(agent__ui_time_ns(t, now, -1) == now);
    if (t->kind == UI_TIME_NONE)
        FUZZ_ASSERT(agent__ui_time_ns(t, now, -1) == -1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agent__ui_query q, again;
    char err[256], err2[256];
    char *query;
    struct buf plain, html;
    int rc;

    if (size > 4096)
        return 0;
    query = strndup((const char *)data, size);
    err[0] = '\0';
    rc = agent__ui_query_parse(query, &q, err, sizeof(err));
    FUZZ_ASSERT(rc == 0 || rc == -EINVAL);
    if (rc < 0) {
        FUZZ_ASSERT(err[0] != '\0');
        free(query);
        return 0;
    }
    check_text(q.type, sizeof(q.type));
    check_text(q.fn, sizeof(q.fn));
    check_time(&q.from);
    check_time(&q.to);
    check_time(&q.bfrom);
    check_time(&q.bto);
    FUZZ_ASSERT(q.sort == 0 || q.sort == 1);
    FUZZ_ASSERT(q.view == 0 || q.view == 1);
    FUZZ_ASSERT(q.format >= 0 && q.format <= 2);
    FUZZ_ASSERT(q.side == 0 || q.side == 1);
    FUZZ_ASSERT(q.has_key || q.key == 0);
    FUZZ_ASSERT(q.has_bkey || q.bkey == 0);
    FUZZ_ASSERT(agent__ui_query_diff(&q) ==
                (q.has_bkey || q.bfrom.kind != UI_TIME_NONE || q.bto.kind != UI_TIME_NONE));

    buf_init(&plain, 1 << 16);
    buf_init(&html, 1 << 16);
    agent__ui_query_write(&plain, &q, false);
    agent__ui_query_write(&html, &q, true);
    if (plain.data) {
        size_t j = 0;

        FUZZ_ASSERT(strpbrk(plain.data, "<>\"' #\\") == NULL);
        FUZZ_ASSERT(agent__ui_query_parse(plain.data, &again, err2, sizeof(err2)) == 0);
        FUZZ_ASSERT(memcmp(&q, &again, sizeof(q)) == 0);
        for (size_t i = 0; i < plain.len; i++) { /* the same, each & as &amp; */
            FUZZ_ASSERT(j < html.len && html.data[j] == plain.data[i]);
            j += plain.data[i] == '&' ? 5 : 1;
        }
        FUZZ_ASSERT(j == html.len);
    } else {
        FUZZ_ASSERT(html.len == 0);
    }
    buf_done(&plain);
    buf_done(&html);
    free(query);
    return 0;
}
