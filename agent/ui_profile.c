/* SPDX-License-Identifier: Apache-2.0 */
/* The profile page's text before its graphs (ui_flame.c writes the rest):
 * the target's labels, the newest profile's age and size, the downloads,
 * the range and baseline form (plain GET: times, targets of the same
 * profile type to compare with), and the history of kept profiles, each a
 * link to itself and to a diff of the newest against it. Labels come from
 * targets and are escaped (ui_html.c); the links are written from the
 * parsed query (ui_query.c).
 *
 * Loop thread: it reads the store (recent.c), and keeps nothing; the
 * caller owns the buffer. (docs/design.md "Modules") */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/recent.h"
#include "agent/ui.h"
#include "common/buf.h"
#include "common/duration.h"
#include "common/labels.h"

/* The history rows and the baseline targets a page lists. */
#define HISTORY_ROWS 100
#define BASELINE_TARGETS 200

/* What the head is written for. */
struct page {
    struct agent *a;
    uint64_t key;
    const struct agent__ui_query *q;
    int sides;
};

/* A <select> of times for one end of a range: "" (labelled `none`), the
 * oldest kept (a start), durations ago, and the current value if it is
 * none of those. */
static void time_select(struct buf *b, const char *name, const struct agent__ui_time *t,
                        const char *none, bool start)
{
    static const char *const ago[] = { "1m", "5m", "15m", "30m", "1h", "6h", "24h" };
    char cur[48] = "";
    bool found;

    if (t->kind == UI_TIME_AGO) {
        cur[0] = '-';
        duration_format(t->v, cur + 1, sizeof(cur) - 1);
    } else if (t->kind == UI_TIME_MS) {
        snprintf(cur, sizeof(cur), "%" PRIu64, t->v);
    }
    /* "now" is what an empty end means. */
    found = !cur[0] || (start && strcmp(cur, "0") == 0);
    buf_printf(b, "<select name=\"%s\"><option value=\"\"%s>%s</option>", name,
               !cur[0] ? " selected" : "", none);
    if (start)
        buf_printf(b, "<option value=\"0\"%s>the oldest kept</option>",
                   strcmp(cur, "0") == 0 ? " selected" : "");
    for (size_t i = 0; i < sizeof(ago) / sizeof(ago[0]); i++) {
        bool sel = cur[0] == '-' && strcmp(cur + 1, ago[i]) == 0;

        found = found || sel;
        buf_printf(b, "<option value=\"-%s\"%s>%s ago</option>", ago[i], sel ? " selected" : "",
                   ago[i]);
    }
    if (!found) {
        buf_printf(b, "<option value=\"%s\" selected>", cur);
        if (t->kind == UI_TIME_MS)
            agent__ui_when(b, (int64_t)(t->v * 1000000u));
        else
            buf_printf(b, "%s ago", cur + 1);
        buf_puts(b, "</option>");
    }
    buf_puts(b, "</select>");
}

struct baselines {
    struct buf *b;
    const char *name; /* the page's __name__ */
    uint64_t key, chosen;
    size_t n;
};

static void baseline_option(uint64_t key, const struct recent_profile *newest, void *ud)
{
    struct baselines *bl = ud;
    const char *name = labels_get(newest->labels, "__name__");
    char *text;

    if (key == bl->key || bl->n >= BASELINE_TARGETS ||
        strcmp(name ? name : "", bl->name ? bl->name : "") != 0)
        return;
    bl->n++;
    buf_printf(bl->b, "<option value=\"%016" PRIx64 "\"%s>", key,
               key == bl->chosen ? " selected" : "");
    text = labels_to_string(newest->labels);
    agent__ui_esc_cap(bl->b, text ? text : "?", UI_NAME_TITLE);
    free(text);
    buf_puts(bl->b, "</option>");
}

/* The range and baseline form: plain GET, read without the script. */
static void range_form(struct buf *b, const struct page *fp, const struct recent_profile *newest)
{
    struct baselines bl = { b, labels_get(newest->labels, "__name__"), fp->key,
                            fp->q->has_bkey ? fp->q->bkey : 0, 0 };

    buf_printf(b,
               "<form class=\"range\" method=\"get\" action=\"/profile\"><input type=\"hidden\" "
               "name=\"key\" value=\"%016" PRIx64 "\">",
               fp->key);
    if (fp->q->type[0]) {
        buf_puts(b, "<input type=\"hidden\" name=\"type\" value=\"");
        agent__ui_esc(b, fp->q->type);
        buf_puts(b, "\">");
    }
    if (fp->q->view)
        buf_puts(b, "<input type=\"hidden\" name=\"view\" value=\"flame\">");
    buf_puts(b, "<label>Profiles from ");
    time_select(b, "from", &fp->q->from, "(the newest alone)", true);
    buf_puts(b, " to ");
    time_select(b, "to", &fp->q->to, "now", false);
    buf_puts(b, "</label> <label>compared with <select name=\"bkey\"><option value=\"\">(no "
                "baseline)</option>");
    buf_printf(b, "<option value=\"%016" PRIx64 "\"%s>this target</option>", fp->key,
               fp->q->has_bkey && fp->q->bkey == fp->key ? " selected" : "");
    recent_visit(fp->a->recent, baseline_option, &bl);
    buf_puts(b, "</select></label> <label>baseline from ");
    time_select(b, "bfrom", &fp->q->bfrom, "(the same range)", true);
    buf_puts(b, " to ");
    time_select(b, "bto", &fp->q->bto, "now", false);
    buf_puts(b, "</label> <button>show</button></form>");
}

/* The kept profiles, newest first, each a link to itself and to a diff
 * of the newest against it. */
static void history(struct buf *b, const struct page *fp, const struct recent_profile *newest)
{
    size_t n = recent_count(fp->a->recent, fp->key), row = 0;
    const struct recent_profile *oldest = newest;

    while (recent_older(oldest))
        oldest = recent_older(oldest);
    buf_puts(b, "<details class=\"history\"><summary>History: ");
    agent__ui_fmt_count(b, n);
    buf_puts(b, n == 1 ? " profile kept" : " profiles kept");
    if (n > 1) {
        buf_puts(b, ", the oldest taken ");
        agent__ui_ago(b, (uint64_t)oldest->end_ns);
    }
    buf_puts(b, " (server.recent-profiles-bytes)</summary><table><tr><th>taken</th><th>size</th>"
                "<th></th></tr>");
    for (const struct recent_profile *p = newest; p && row < HISTORY_ROWS;
         p = recent_older(p), row++) {
        struct agent__ui_query q = { .key = fp->key, .has_key = true };
        uint64_t ms = (uint64_t)(p->end_ns / 1000000);

        buf_puts(b, "<tr><td>");
        agent__ui_ago(b, (uint64_t)p->end_ns);
        buf_puts(b, " <span class=\"when\">");
        agent__ui_when(b, p->end_ns);
        buf_puts(b, "</span></td><td>");
        agent__ui_fmt_bytes(b, p->len);
        buf_puts(b, "</td><td>");
        q.from = (struct agent__ui_time){ UI_TIME_MS, ms };
        q.to = (struct agent__ui_time){ UI_TIME_MS, ms };
        agent__ui_query_link(b, &q);
        buf_puts(b, "this one</a>");
        if (p != newest) {
            q.from = q.to = (struct agent__ui_time){ UI_TIME_NONE, 0 };
            q.bfrom = (struct agent__ui_time){ UI_TIME_MS, ms };
            q.bto = (struct agent__ui_time){ UI_TIME_MS, ms };
            buf_puts(b, " \xc2\xb7 ");
            agent__ui_query_link(b, &q);
            buf_puts(b, "the newest against this one</a>");
        }
        buf_puts(b, "</td></tr>");
    }
    if (n > row) {
        buf_puts(b, "<tr><td colspan=\"3\">and ");
        agent__ui_fmt_count(b, n - row);
        buf_puts(b, " older</td></tr>");
    }
    buf_puts(b, "</table></details>");
}

void agent__ui_profile_head(struct buf *b, struct agent *a, uint64_t key,
                            const struct agent__ui_query *pq, const struct recent_profile *newest)
{
    struct agent__ui_query q = *pq;
    struct page pg = { a, key, pq, agent__ui_query_diff(pq) ? 2 : 1 };
    const struct page *fp = &pg;

    agent__ui_head(b, "Profile");
    buf_puts(b, fp->sides > 1 ? "<h2>Profile diff</h2>" : "<h2>Profile</h2><div class=\"labels\">");
    if (fp->sides > 1)
        buf_puts(b, "<div class=\"labels\">");
    agent__ui_labels(b, newest->labels, false, true);
    buf_puts(b, "</div><p class=\"meta\">Newest taken ");
    agent__ui_ago(b, (uint64_t)newest->end_ns);
    buf_puts(b, ", ");
    agent__ui_fmt_bytes(b, newest->len);
    buf_puts(b, ". Download: <a href=\"/profile.pb.gz?");
    q.format = 0;
    agent__ui_query_write(b, &q, true);
    buf_puts(b, "\">pprof</a> \xc2\xb7 ");
    q.format = 2;
    agent__ui_query_link(b, &q);
    buf_puts(b, "collapsed stacks</a> \xc2\xb7 ");
    q.format = 1;
    agent__ui_query_link(b, &q);
    buf_puts(b, "JSON</a></p>");
    range_form(b, fp, newest);
    history(b, fp, newest);
    if (fp->sides > 1 && fp->q->has_bkey && fp->q->bkey != fp->key) {
        const struct recent_profile *bp = recent_get(fp->a->recent, fp->q->bkey);

        if (bp) {
            buf_puts(b, "<p class=\"labels\">Baseline: ");
            agent__ui_labels(b, bp->labels, false, true);
            buf_puts(b, "</p>");
        }
    }
}
