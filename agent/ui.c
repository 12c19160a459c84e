/* SPDX-License-Identifier: Apache-2.0 */
/* The web UI of the status server: server-rendered HTML that reads without
 * JavaScript (a small script only filters rows), every asset built in.
 *
 *   /, /targets        targets by job and profile type, streamed target by
 *                      target (text table: /targets?format=text)
 *   /service-discovery what discovery found per job: the kept targets'
 *                      discovered and final labels, the dropped ones and why
 *   /forwarding        per endpoint: queue, requests in flight, spool, sent,
 *                      retried and dropped profiles, the last error and when
 *   /config            the configuration as loaded, secrets shown as <secret>;
 *                      version, start, last reload and its warnings
 *   /profile?key=K     the latest profile of a pair as a flame graph and a
 *                      table of the top functions (&type= picks the sample
 *                      type); /profile.pb.gz?key=K downloads it
 *
 * Everything that comes from targets (labels, errors, function names) is
 * escaped. Loop thread, but for the profile page's flame graph, built by a
 * job on the work queue from the page's own copy of the profile; a
 * streamed page holds only an iterator that tolerates changes between
 * parts (scrape.h), or its own state: the profile page its flame graph's
 * tree, charged to the memory budget while it is sent, never its HTML. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/recent.h"
#include "common/clock.h"
#include "common/labels.h"
#include "common/utf8.h"
#include "common/workq.h"
#include "forward/forward.h"
#include "httpd/httpd.h"
#include "pprof/pprof.h"
#include "proflet_version.h"
#include "scrape/scrape.h"

/* The flame graph: at most this many frames, and frames narrower than
 * 1/FLAME_MIN_DIV of the whole are not drawn (their value stays in their
 * parent's width). */
#define FLAME_MAX_NODES 20000
#define FLAME_MIN_DIV 400
#define TOP_FUNCTIONS 30
/* Frames deeper than this are not drawn (their value stays in their
 * parent's width). */
#define FLAME_MAX_DEPTH 128
/* Decoding a profile is a job on the work queue (profile_page); above this
 * raw size the page offers the download only. */
#define FLAME_MAX_RAW (16u << 20)
/* What a flame graph job builds beside the decoded profile, added to the
 * job's cost: per node, at most, its 32 bytes (twice that while the array
 * grows), the build's three indexes (16-byte entries, at most half full)
 * and a pointer to its name: 256 bytes. The names are copies of the
 * profile's strings, within what the decode is admitted for. */
#define FLAME_TREE_MAX ((uint64_t)FLAME_MAX_NODES * 256)
/* The text of a profile page around its graph (head, menu, top table). */
#define TEXT_MAX ((size_t)1 << 20)

static const char page_head[] =
    "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<meta name=\"viewport\" content=\"width=device-width\"><title>%s - proflet</title><style>"
    "body{font:14px system-ui,sans-serif;margin:0;color:#222}"
    "header{background:#2b3a4a;color:#fff;padding:8px 16px}"
    "header a{color:#cde;margin-right:16px;text-decoration:none}"
    "main{padding:8px 16px}table{border-collapse:collapse;width:100%%}"
    "td,th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}.counts td{color:#555;font-size:12px}.up{color:#176f2c}.down{color:#b3261e}.unknown{color:#777}"
    ".l{display:inline-block;background:#eef;border-radius:3px;padding:0 4px;margin:1px;"
    "font-size:12px}.err{color:#b3261e;font-size:12px}.job{background:#e8eef5;font-weight:600}"
    ".fg{font:11px monospace;width:100%%}.fn{overflow:hidden}.fn>span{display:block;"
    "white-space:nowrap;overflow:hidden;background:#f5b26b;border:1px solid #fff;"
    "padding:1px 2px}.fc{display:flex}"
    "</style></head><body><header><b>proflet</b> %s &nbsp; <a href=\"/targets\">Targets</a>"
    "<a href=\"/service-discovery\">Service discovery</a><a href=\"/forwarding\">Forwarding</a><a href=\"/config\">Configuration</a>"
    "<a href=\"/metrics\">Metrics</a><a href=\"/api/v1/targets\">API</a></header><main>";

static const char page_tail[] = "</main></body></html>\n";

/* Rows are hidden by a filter on their text and health (also taken from
 * ?q= and ?health=, so a filtered view can be linked); the page works
 * without it. */
static const char filter_script[] =
    "<script>(function(){var q=document.getElementById('q'),h=document.getElementById('h');"
    "function f(){var t=q.value.toLowerCase(),w=h.value;"
    "document.querySelectorAll('tr.t').forEach(function(r){"
    "var ok=(!t||r.textContent.toLowerCase().indexOf(t)>=0)&&(!w||r.dataset.health==w);"
    "r.style.display=ok?'':'none';});}"
    "var u=new URLSearchParams(location.search);q.value=u.get('q')||'';h.value=u.get('health')||'';"
    "q.addEventListener('input',f);h.addEventListener('change',f);f();})();</script>";

/* HTML text or attribute value: markup characters as entities; the runs
 * between them as valid UTF-8, control characters shown (`\x1b`) unless
 * `lines` keeps the text's line breaks and tabs (the configuration). */
static int esc_text(struct buf *b, const char *s, bool lines)
{
    const char *run = s;
    int rc = 0;

    for (; s && *s && rc == 0; s++) {
        const char *ent;

        switch (*s) {
        case '<': ent = "&lt;"; break;
        case '>': ent = "&gt;"; break;
        case '&': ent = "&amp;"; break;
        case '"': ent = "&quot;"; break;
        case '\'': ent = "&#39;"; break;
        default: continue;
        }
        rc = lines ? utf8_append_valid(b, run, (size_t)(s - run))
                   : utf8_append_visible(b, run, (size_t)(s - run));
        if (rc == 0)
            rc = buf_puts(b, ent);
        run = s + 1;
    }
    if (rc == 0 && s)
        rc = lines ? utf8_append_valid(b, run, (size_t)(s - run))
                   : utf8_append_visible(b, run, (size_t)(s - run));
    return rc;
}

static int esc(struct buf *b, const char *s)
{
    return esc_text(b, s, false);
}

static void head(struct buf *b, const char *title)
{
    buf_printf(b, page_head, title, PROFLET_VERSION);
}

/* `meta`: also the "__" labels; else only __name__ of them, when `name`. */
static void labels_html(struct buf *b, const struct labels *ls, bool meta, bool name)
{
    for (size_t i = 0; i < ls->n; i++) {
        if (!meta && strncmp(ls->v[i].name, "__", 2) == 0 &&
            !(name && strcmp(ls->v[i].name, "__name__") == 0))
            continue;
        buf_puts(b, "<span class=\"l\">");
        esc(b, ls->v[i].name);
        buf_puts(b, "=");
        esc(b, ls->v[i].value);
        buf_puts(b, "</span>");
    }
}

static void ago(struct buf *b, uint64_t ns)
{
    uint64_t now = clock_wall_ns();

    if (!ns)
        buf_puts(b, "never");
    else if (now <= ns)
        buf_puts(b, "now");
    else
        buf_printf(b, "%.1fs ago", (double)(now - ns) / 1e9);
}

/* ------------------------------------------------------------- targets */

struct targets_page {
    struct agent *a;
    struct scrape_targets_iter *it;
    struct buf *out;
    size_t chunk;
    char *last_job;
    size_t up, down, unknown; /* of the current job's rows */
    int part; /* 0 head, 1 rows, 2 done */
};

/* The counts of the job whose rows just ended, under them. */
static void job_counts(struct targets_page *pg)
{
    if (!pg->last_job)
        return;
    buf_printf(pg->out, "<tr class=\"counts\"><td colspan=\"6\">%zu up, %zu down, %zu not "
                        "scraped yet</td></tr>", pg->up, pg->down, pg->unknown);
    pg->up = pg->down = pg->unknown = 0;
}

static int target_row(const struct scrape_target_view *v, void *ud)
{
    struct targets_page *pg = ud;
    struct buf *b = pg->out;
    const char *health = scrape_target_health(v);
    uint64_t key = labels_hash(v->labels);

    if (!pg->last_job || strcmp(pg->last_job, v->job) != 0) {
        job_counts(pg);
        free(pg->last_job);
        pg->last_job = strdup(v->job);
        buf_puts(b, "<tr class=\"job\"><td colspan=\"6\">");
        esc(b, v->job);
        buf_puts(b, "</td></tr>");
    }
    pg->up += health[0] == 'u' && health[1] == 'p';
    pg->down += health[0] == 'd';
    pg->unknown += health[0] == 'u' && health[1] == 'n';
    buf_printf(b, "<tr class=\"t\" data-health=\"%s\"><td>", health);
    esc(b, v->profile_type);
    buf_printf(b, "</td><td class=\"%s\">%s</td><td>", health, health);
    ago(b, v->last_scrape_ns);
    buf_printf(b, "</td><td>%.3fs</td><td>", (double)v->last_duration_us / 1e6);
    esc(b, v->url);
    if (v->owner) {
        buf_puts(b, " <span class=\"l\">owner ");
        esc(b, v->owner);
        buf_puts(b, "</span>");
    }
    buf_puts(b, "<br>");
    labels_html(b, v->labels, false, true);
    if (v->last_error) {
        buf_puts(b, "<div class=\"err\">");
        esc(b, v->last_error);
        buf_puts(b, "</div>");
    }
    buf_puts(b, "<details><summary>discovered labels</summary>");
    labels_html(b, v->discovered, true, true);
    buf_puts(b, "</details></td><td>");
    if (recent_get(pg->a->recent, key))
        buf_printf(b, "<a href=\"/profile?key=%016" PRIx64 "\">profile</a>", key);
    buf_puts(b, "</td></tr>");
    return b->len >= pg->chunk;
}

static int targets_part(struct buf *out, size_t chunk, void *state)
{
    struct targets_page *pg = state;
    int rc;

    pg->out = out;
    pg->chunk = chunk;
    if (pg->part == 0) {
        head(out, "Targets");
        buf_puts(out, "<h2>Targets</h2><p><input id=\"q\" placeholder=\"filter by label or "
                      "text\" size=\"40\"> <select id=\"h\"><option value=\"\">any health"
                      "</option><option>up</option><option>down</option><option>unknown"
                      "</option></select> &nbsp; <a href=\"/targets?format=text\">text</a></p>"
                      "<table><tr><th>type</th><th>health</th><th>last scrape</th>"
                      "<th>duration</th><th>endpoint and labels</th><th></th></tr>");
        pg->part = 1;
        return 1;
    }
    rc = scrape_targets_iter_visit(pg->it, false, target_row, pg);
    if (rc < 0)
        return rc;
    if (rc == 1)
        return 1;
    job_counts(pg);
    buf_puts(out, "</table>");
    buf_puts(out, filter_script);
    buf_puts(out, page_tail);
    return 0;
}

static void targets_free(void *state)
{
    struct targets_page *pg = state;

    scrape_targets_iter_free(pg->it);
    free(pg->last_job);
    free(pg);
}

static void targets_page(struct agent *a, struct httpd_response *resp)
{
    struct targets_page *pg = calloc(1, sizeof(*pg));

    if (!pg || !(pg->it = scrape_targets_iter_new(a->scrape, NULL))) {
        free(pg);
        resp->status = 500;
        buf_puts(&resp->body, "out of memory\n");
        return;
    }
    pg->a = a;
    resp->content_type = "text/html; charset=utf-8";
    resp->stream = targets_part;
    resp->stream_state = pg;
    resp->stream_free = targets_free;
}

/* ---------------------------------------------------- service discovery */

/* The kept targets (one row per target, not per profile type), then the
 * dropped ones with their reason; both by job, streamed. */
struct sd_page {
    struct scrape_targets_iter *kept, *dropped;
    struct buf *out;
    size_t chunk;
    char *last_job;
    uint64_t last_target; /* a target's pairs come together: show it once */
    int part;             /* 0 head, 1 kept, 2 dropped head, 3 dropped, 4 done */
};

static void sd_job(struct sd_page *pg, const char *job)
{
    if (pg->last_job && strcmp(pg->last_job, job) == 0)
        return;
    free(pg->last_job);
    pg->last_job = strdup(job);
    buf_puts(pg->out, "<tr class=\"job\"><td colspan=\"2\">");
    esc(pg->out, job);
    buf_puts(pg->out, "</td></tr>");
}

static int sd_row(const struct scrape_target_view *v, void *ud)
{
    struct sd_page *pg = ud;
    struct buf *b = pg->out;
    uint64_t id = labels_hash(v->discovered);

    if (v->labels && id == pg->last_target)
        return 0;
    pg->last_target = id;
    sd_job(pg, v->job);
    buf_printf(b, "<tr class=\"t\" data-health=\"%s\"><td>", v->labels ? "kept" : "dropped");
    labels_html(b, v->discovered, true, true);
    buf_puts(b, "</td><td>");
    if (v->labels) {
        labels_html(b, v->labels, false, false); /* the target's, not one type's */
    } else {
        buf_puts(b, "<div class=\"err\">");
        esc(b, v->drop_reason ? v->drop_reason : v->error ? v->error : "dropped");
        if (v->drop_reason && v->error) {
            buf_puts(b, ": ");
            esc(b, v->error);
        }
        buf_puts(b, "</div>");
    }
    buf_puts(b, "</td></tr>");
    return b->len >= pg->chunk;
}

static int sd_part(struct buf *out, size_t chunk, void *state)
{
    struct sd_page *pg = state;
    int rc;

    pg->out = out;
    pg->chunk = chunk;
    switch (pg->part) {
    case 0:
        head(out, "Service discovery");
        buf_puts(out, "<h2>Service discovery</h2><p><input id=\"q\" placeholder=\"filter by "
                      "label or text\" size=\"40\"> <select id=\"h\"><option value=\"\">all"
                      "</option><option>kept</option><option>dropped</option></select></p>"
                      "<h3>Kept</h3><table><tr><th>discovered labels</th><th>target labels"
                      "</th></tr>");
        pg->part = 1;
        return 1;
    case 1:
        rc = scrape_targets_iter_visit(pg->kept, false, sd_row, pg);
        if (rc != 0)
            return rc;
        pg->part = 2;
        return 1;
    case 2:
        free(pg->last_job);
        pg->last_job = NULL;
        buf_puts(out, "</table><h3>Dropped</h3><p>The relabel rules' drops are listed up to "
                      "each job's keep-dropped-targets; all are counted in "
                      "<a href=\"/metrics\">proflet_scrape_dropped_targets</a>.</p><table><tr>"
                      "<th>discovered labels</th><th>why</th></tr>");
        pg->part = 3;
        return 1;
    case 3:
        rc = scrape_targets_iter_visit(pg->dropped, true, sd_row, pg);
        if (rc != 0)
            return rc;
        buf_puts(out, "</table>");
        buf_puts(out, filter_script);
        buf_puts(out, page_tail);
        pg->part = 4;
        return 0;
    }
    return 0;
}

static void sd_free(void *state)
{
    struct sd_page *pg = state;

    scrape_targets_iter_free(pg->kept);
    scrape_targets_iter_free(pg->dropped);
    free(pg->last_job);
    free(pg);
}

static void sd_page(struct agent *a, struct httpd_response *resp)
{
    struct sd_page *pg = calloc(1, sizeof(*pg));

    if (!pg || !(pg->kept = scrape_targets_iter_new(a->scrape, NULL)) ||
        !(pg->dropped = scrape_targets_iter_new(a->scrape, NULL))) {
        if (pg)
            scrape_targets_iter_free(pg->kept);
        free(pg);
        resp->status = 500;
        buf_puts(&resp->body, "out of memory\n");
        return;
    }
    resp->content_type = "text/html; charset=utf-8";
    resp->stream = sd_part;
    resp->stream_state = pg;
    resp->stream_free = sd_free;
}

/* ----------------------------------------------------------- forwarding */

static void endpoint_row(const struct fwd_endpoint_view *e, void *ud)
{
    struct buf *b = ud;

    buf_puts(b, "<tr class=\"t\"><td>");
    esc(b, e->name);
    buf_puts(b, "<br><span class=\"l\">");
    esc(b, e->url);
    buf_printf(b, "</span></td><td>%" PRIu64 " (%" PRIu64 " B)</td><td>%" PRIu64 "</td><td>%"
                  PRIu64 " B, %" PRIu64 " profiles", e->queue_profiles, e->queue_bytes,
               e->inflight_profiles, e->spool_bytes, e->spool_records);
    if (e->spool_oldest_ms) {
        buf_puts(b, ", oldest ");
        ago(b, e->spool_oldest_ms * 1000000ULL);
    }
    buf_printf(b, "</td><td>%" PRIu64 " (%" PRIu64 " B)</td><td>%" PRIu64 "</td><td>%" PRIu64
                  "</td><td>%" PRIu64 "</td><td>", e->sent_profiles, e->sent_bytes,
               e->retried_profiles, e->failed_requests, e->dropped_profiles);
    if (e->last_error && e->last_error[0]) {
        buf_puts(b, "<div class=\"err\">");
        esc(b, e->last_error);
        buf_puts(b, "</div>");
        ago(b, e->last_error_ms * 1000000ULL);
    }
    buf_puts(b, "</td></tr>");
}

static void forwarding_page(struct agent *a, struct httpd_response *resp)
{
    struct buf *b = &resp->body;

    resp->content_type = "text/html; charset=utf-8";
    head(b, "Forwarding");
    buf_puts(b, "<h2>Forwarding</h2><table><tr><th>endpoint</th><th>queued</th>"
                "<th>in flight</th><th>spool</th><th>sent</th><th>retried</th>"
                "<th>failed requests</th><th>dropped</th><th>last error</th></tr>");
    fwd_endpoints_visit(a->fwd, endpoint_row, b);
    buf_puts(b, "</table><p>Counters since start; <a href=\"/metrics\">/metrics</a> has them "
                "by reason.</p>");
    buf_puts(b, page_tail);
}

/* --------------------------------------------------------------- config */

static void config_page(struct agent *a, struct httpd_response *resp)
{
    struct buf *b = &resp->body;
    const char *w;

    resp->content_type = "text/html; charset=utf-8";
    head(b, "Configuration");
    buf_puts(b, "<h2>Configuration</h2><table><tr><th>version</th><td>" PROFLET_VERSION
                "</td></tr><tr><th>started</th><td>");
    ago(b, a->start_time_ns);
    buf_puts(b, "</td></tr><tr><th>file</th><td>");
    esc(b, a->doc ? conf_doc_name(a->doc) : "");
    buf_printf(b, "</td></tr><tr><th>last reload</th><td>%s, ",
               a->last_reload_ok ? "successful" : "<span class=\"err\">failed</span>");
    ago(b, a->last_reload_ns);
    buf_printf(b, " (%" PRIu64 " successful, %" PRIu64 " failed)</td></tr></table>",
               a->reloads_ok, a->reloads_failed);
    for (size_t i = 0; a->doc && (w = conf_doc_warning(a->doc, i)) != NULL; i++) {
        buf_puts(b, "<p class=\"err\">warning: ");
        esc(b, w);
        buf_puts(b, "</p>");
    }
    buf_puts(b, "<h3>As loaded</h3><p>Defaults filled in; durations in milliseconds and sizes "
                "in bytes, as proflet holds them; secrets are not shown.</p><pre id=\"config\">");
    if (a->doc) {
        struct buf dump;

        buf_init(&dump, 16u << 20);
        agent_config_dump(a->doc, &dump);
        esc_text(b, dump.data ? dump.data : "", true);
        buf_done(&dump);
    }
    buf_puts(b, "</pre>");
    buf_puts(b, page_tail);
}

/* ------------------------------------------------------------- profiles */

/* A name is shown on its frame in at most NAME_SHOWN bytes of HTML, and in
 * its tooltip and the top table in at most NAME_TITLE (the tree keeps
 * PPROF_FLAME_NAME_MAX bytes of it): a long name on every one of 20,000
 * frames must not make the page grow with it. */
#define NAME_SHOWN 96
#define NAME_TITLE 256
/* The sample types offered in the page's menu. */
#define TYPES_SHOWN 64

/* The bytes esc() writes for the byte `c`. */
static size_t esc_len(unsigned char c)
{
    return c == '<' || c == '>' ? 4 : c == '&' ? 5 : c == '"' || c == '\'' ? 6 : 1;
}

/* Escapes `s` into at most `cap` bytes of HTML: cut at a character (or
 * entity) boundary and ended with U+2026 when it does not fit whole. */
static void esc_cap(struct buf *b, const char *s, size_t cap)
{
    static const char ell[] = "\xe2\x80\xa6";
    size_t used = 0, i = 0, whole = 0;

    for (size_t j = 0; s && s[j] && whole <= cap; j++)
        whole += esc_len((unsigned char)s[j]);
    if (whole <= cap) {
        esc(b, s);
        return;
    }
    while (s[i]) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 :
                   (c & 0xF8) == 0xF0 ? 4 : 1;
        size_t k = 1;

        while (k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80)
            k++;
        n = k; /* a cut sequence: its bytes as they are */
        if (used + (c < 0x80 ? esc_len(c) : n) + sizeof(ell) - 1 > cap)
            break;
        if (c < 0x80) {
            char one[2] = {s[i], '\0'};

            esc(b, one);
        } else {
            buf_append(b, s + i, n);
        }
        used += c < 0x80 ? esc_len(c) : n;
        i += n;
    }
    buf_puts(b, ell);
}

struct top_fn {
    uint32_t name;
    int64_t flat, cum;
};

static int top_cmp(const void *x, const void *y)
{
    const struct top_fn *a = x, *b = y;

    return a->flat != b->flat ? (a->flat > b->flat ? -1 : 1) : (a->cum > b->cum ? -1 : 1);
}

/* Flat (self) and cumulative value per function; a frame whose function
 * is also an ancestor's is counted once in cum (recursion). */
static void top_table(struct buf *b, const struct pprof_flame *f)
{
    struct top_fn *t = calloc(f->n_names, sizeof(*t));
    size_t shown = 0;

    if (!t)
        return;
    for (size_t i = 0; i < f->n_names; i++)
        t[i].name = (uint32_t)i;
    for (size_t i = 1; i < f->n_nodes; i++) {
        const struct pprof_flame_node *n = &f->nodes[i];
        bool again = false;

        t[n->name].flat += n->self;
        for (uint32_t p = n->parent; p != UINT32_MAX && p != 0 && !again; p = f->nodes[p].parent)
            again = f->nodes[p].name == n->name;
        if (!again)
            t[n->name].cum += n->total;
    }
    qsort(t, f->n_names, sizeof(*t), top_cmp);
    buf_puts(b, "<h3>Top functions</h3><table><tr><th>flat</th><th>flat %</th><th>cum</th>"
                "<th>cum %</th><th>function</th></tr>");
    for (size_t i = 0; i < f->n_names && shown < TOP_FUNCTIONS; i++) {
        int64_t root = f->nodes[0].total;

        if (t[i].name == 0 || (!t[i].flat && !t[i].cum))
            continue;
        buf_printf(b, "<tr class=\"top\"><td>%" PRId64 "</td><td>%.2f%%</td><td>%" PRId64
                      "</td><td>%.2f%%</td><td>", t[i].flat,
                   root ? 100.0 * (double)t[i].flat / (double)root : 0, t[i].cum,
                   root ? 100.0 * (double)t[i].cum / (double)root : 0);
        esc_cap(b, f->names[t[i].name], NAME_TITLE);
        buf_puts(b, "</td></tr>");
        shown++;
    }
    buf_puts(b, "</table>");
    free(t);
}

/* The profile page. Decoding a profile and building its flame graph take
 * tens of milliseconds for a large one: that is a job on the work queue
 * (admitted by the memory budget, as a delta is), never loop work. The
 * page streams: its head at once, then, once the job is done, the flame
 * graph written frame by frame from the tree as the client reads it (the
 * stream is parked meanwhile), then the top table. The page never holds
 * its HTML: only the tree (charged to the budget until the graph is sent
 * or the connection closes) and the short text around it. The page owns a
 * copy of the profile until the job ends, since the store may drop it
 * while the job runs; the connection and the job each hold a reference. */
struct walk_frame {
    uint32_t node, next; /* the frame, and its next child to look at */
    int64_t rest;        /* its width not drawn by children */
    bool started, open;  /* its own div is written; its children's div is */
};

struct flame_page {
    struct agent *a;
    uint8_t *data; /* the profile, until the job is done */
    size_t len;
    struct pprof_limits lim;
    uint64_t cost;
    char type[128]; /* "" for the profile's default */
    char keytxt[32];
    struct buf html; /* loop side: text to send; `sent` of it is sent */
    size_t sent;
    /* Job side, then the loop's once the job is done. */
    struct pprof_flame *f; /* the tree, while the graph is being sent */
    struct buf pre;        /* before the graph, or the whole rest on error */
    struct buf post;       /* the top table after it */
    uint64_t charged;      /* of the budget, for f, pre and post */
    struct walk_frame stack[FLAME_MAX_DEPTH + 1];
    size_t sp;
    int refs;
    bool started, done, closed;
};

static void flame_release(struct flame_page *fp)
{
    pprof_flame_free(fp->f);
    fp->f = NULL;
    if (fp->charged)
        workq_uncharge(fp->a->work, fp->charged);
    fp->charged = 0;
}

static void flame_page_unref(struct flame_page *fp)
{
    if (--fp->refs > 0)
        return;
    flame_release(fp);
    free(fp->data);
    buf_done(&fp->html);
    buf_done(&fp->pre);
    buf_done(&fp->post);
    free(fp);
}

/* Pool thread: touches only the page's own fields. */
static void flame_work(void *arg)
{
    struct flame_page *fp = arg;
    struct pprof_flame *f = NULL;
    struct buf *b = &fp->pre;
    char err[256];

    if (pprof_flame_build(fp->data, fp->len, &fp->lim, fp->type[0] ? fp->type : NULL,
                          FLAME_MAX_NODES, &f, err, sizeof(err)) < 0) {
        buf_puts(b, "<p class=\"err\">Cannot draw this profile: ");
        esc(b, err);
        buf_puts(b, "</p>");
        buf_puts(b, page_tail);
        return;
    }
    buf_puts(b, "<form>Sample type: <input type=\"hidden\" name=\"key\" value=\"");
    esc(b, fp->keytxt);
    buf_puts(b, "\"><select name=\"type\" onchange=\"this.form.submit()\">");
    for (size_t i = 0; i < f->n_types; i++) {
        if (i >= TYPES_SHOWN && (int)i != f->sample_type)
            continue;
        buf_printf(b, "<option%s>", (int)i == f->sample_type ? " selected" : "");
        esc_cap(b, f->types[i], NAME_TITLE);
        buf_puts(b, "</option>");
    }
    buf_puts(b, "</select> <noscript><button>show</button></noscript></form>");
    if (f->truncated)
        buf_printf(b, "<p>Only the first %d frames are drawn.</p>", FLAME_MAX_NODES);
    buf_printf(b, "<h3>Flame graph (%" PRId64 " ", f->nodes[0].total);
    esc_cap(b, f->types[f->sample_type], NAME_TITLE);
    buf_puts(b, ")</h3><div class=\"fg\">");
    buf_puts(&fp->post, "</div>");
    top_table(&fp->post, f);
    buf_puts(&fp->post, page_tail);
    fp->f = f;
}

static void flame_after(void *arg, int status)
{
    struct flame_page *fp = arg;

    free(fp->data);
    fp->data = NULL;
    if (status != 0) {
        buf_reset(&fp->pre);
        buf_puts(&fp->pre, "<p class=\"err\">Cannot draw this profile now: proflet is "
                           "shutting down.</p>");
        buf_puts(&fp->pre, page_tail);
    } else if (fp->f && !fp->closed) {
        uint64_t held = fp->f->bytes + fp->pre.len + fp->post.len;

        if (workq_charge(fp->a->work, held) < 0) {
            pprof_flame_free(fp->f);
            fp->f = NULL;
            buf_reset(&fp->pre);
            buf_puts(&fp->pre, "<p class=\"err\">Too many profile pages are being sent at "
                               "once (they may hold half of limits.memory-budget): try "
                               "again in a moment.</p>");
            buf_puts(&fp->pre, page_tail);
        } else {
            fp->charged = held;
            fp->stack[0] = (struct walk_frame){0};
            fp->sp = 1;
        }
    }
    if (!fp->closed && buf_append(&fp->html, fp->pre.data ? fp->pre.data : "", fp->pre.len) < 0) {
        flame_release(fp);
        buf_puts(&fp->html, page_tail); /* a short page rather than none */
    }
    buf_done(&fp->pre);
    fp->done = true;
    httpd_resume(fp->a->status, fp);
    flame_page_unref(fp);
}

static bool drawn(const struct pprof_flame *f, uint32_t c)
{
    return f->nodes[c].total > 0 && f->nodes[c].total >= f->nodes[0].total / FLAME_MIN_DIV;
}

/* Writes frames, depth first, until `out` reaches `chunk`: 1 if frames are
 * left, 0 once the whole graph is written. A frame's children are drawn
 * inside it, and what they leave of its width (its own value and the
 * undrawn children's) is kept by an empty box. */
static int flame_walk(struct flame_page *fp, struct buf *out, size_t chunk)
{
    const struct pprof_flame *f = fp->f;
    int64_t root = f->nodes[0].total;

    while (fp->sp > 0) {
        struct walk_frame *w = &fp->stack[fp->sp - 1];
        const struct pprof_flame_node *n = &f->nodes[w->node];
        uint32_t c;

        if (out->len >= chunk)
            return 1;
        if (!w->started) {
            buf_printf(out, "<div class=\"fn\" style=\"flex:%" PRId64 " 0 0\" title=\"", n->total);
            esc_cap(out, f->names[n->name], NAME_TITLE);
            buf_printf(out, ": %" PRId64 " (%.2f%%)\"><span>", n->total,
                       root ? 100.0 * (double)n->total / (double)root : 0);
            esc_cap(out, f->names[n->name], NAME_SHOWN);
            buf_puts(out, "</span>");
            w->started = true;
            w->next = fp->sp - 1 < FLAME_MAX_DEPTH ? n->first_child : UINT32_MAX;
            w->rest = n->total;
        }
        for (c = w->next; c != UINT32_MAX && !drawn(f, c); c = f->nodes[c].next_sibling)
            ;
        if (c != UINT32_MAX) {
            w->next = f->nodes[c].next_sibling;
            if (!w->open)
                buf_puts(out, "<div class=\"fc\">");
            w->open = true;
            w->rest = (int64_t)((uint64_t)w->rest - (uint64_t)f->nodes[c].total);
            fp->stack[fp->sp++] = (struct walk_frame){.node = c};
            continue;
        }
        if (w->open) {
            if (w->rest > 0)
                buf_printf(out, "<div style=\"flex:%" PRId64 " 0 0\"></div>", w->rest);
            buf_puts(out, "</div>");
        }
        buf_puts(out, "</div>");
        fp->sp--;
    }
    return 0;
}

static int flame_part(struct buf *out, size_t chunk, void *state)
{
    struct flame_page *fp = state;
    int rc;

    if (!fp->started) {
        fp->started = true;
        fp->refs++;
        rc = workq_submit_cost(fp->a->work, 0, fp->cost, flame_work, flame_after, fp);
        if (rc < 0) {
            fp->refs--;
            free(fp->data);
            fp->data = NULL;
            buf_puts(&fp->html, rc == -E2BIG ? "<p class=\"err\">This profile is too large to "
                                               "draw within limits.memory-budget: download it.</p>"
                                             : "<p class=\"err\">Cannot draw this profile now "
                                               "(out of memory).</p>");
            buf_puts(&fp->html, page_tail);
            fp->done = true;
        }
    }
    for (;;) {
        size_t n = fp->html.len - fp->sent;

        if (n > chunk - (out->len < chunk ? out->len : chunk))
            n = chunk - (out->len < chunk ? out->len : chunk);
        if (n && buf_append(out, fp->html.data + fp->sent, n) < 0)
            return -ENOMEM;
        fp->sent += n;
        if (fp->sent < fp->html.len)
            return 1;
        buf_reset(&fp->html);
        fp->sent = 0;
        if (!fp->done)
            return HTTPD_STREAM_PARKED;
        if (!fp->f)
            return 0;
        if (flame_walk(fp, out, chunk))
            return 1;
        flame_release(fp);
        if (buf_append(&fp->html, fp->post.data ? fp->post.data : "", fp->post.len) < 0)
            return -ENOMEM;
        buf_done(&fp->post);
    }
}

static void flame_page_free(void *state)
{
    struct flame_page *fp = state;

    fp->closed = true; /* a job still running keeps its reference */
    flame_page_unref(fp);
}

static void profile_page(struct agent *a, const struct httpd_request *req,
                         struct httpd_response *resp, bool download)
{
    const struct agent_config *c = agent_config(a->doc);
    const struct recent_profile *p;
    struct flame_page *fp;
    struct buf *b = &resp->body;
    char keytxt[32];
    size_t raw;
    uint64_t key;

    if (httpd_query_get(req->query, "key", keytxt, sizeof(keytxt)) <= 0 ||
        (key = strtoull(keytxt, NULL, 16), !(p = recent_get(a->recent, key)))) {
        resp->status = 404;
        resp->content_type = "text/html; charset=utf-8";
        head(b, "Profile");
        buf_puts(b, "<p>No recent profile of this target is kept: none was delivered yet, or "
                    "it left the store (server.recent-profiles-bytes).</p>");
        buf_puts(b, page_tail);
        return;
    }
    if (download) {
        resp->content_type = "application/octet-stream";
        buf_append(b, p->data, p->len);
        return;
    }
    resp->content_type = "text/html; charset=utf-8";
    fp = calloc(1, sizeof(*fp));
    if (!fp || !(fp->data = malloc(p->len ? p->len : 1))) {
        free(fp);
        resp->status = 503;
        buf_puts(b, "out of memory\n");
        return;
    }
    fp->a = a;
    fp->refs = 1; /* the connection's */
    memcpy(fp->data, p->data, p->len);
    fp->len = p->len;
    fp->lim = c->limits.pprof;
    if (fp->lim.max_decompressed > FLAME_MAX_RAW)
        fp->lim.max_decompressed = FLAME_MAX_RAW;
    if (pprof_job_cost(fp->data, fp->len, fp->lim.max_decompressed, true, &raw, &fp->cost) < 0)
        fp->cost = 0; /* the build refuses it, with the reason, in the job */
    if (httpd_query_get(req->query, "type", fp->type, sizeof(fp->type)) <= 0)
        fp->type[0] = '\0';
    fp->cost += FLAME_TREE_MAX;
    snprintf(fp->keytxt, sizeof(fp->keytxt), "%s", keytxt);
    buf_init(&fp->html, TEXT_MAX);
    buf_init(&fp->pre, TEXT_MAX);
    buf_init(&fp->post, TEXT_MAX);
    head(&fp->html, "Profile");
    buf_puts(&fp->html, "<h2>Latest profile</h2><p>");
    esc(&fp->html, p->labels);
    buf_puts(&fp->html, "<br>delivered ");
    ago(&fp->html, (uint64_t)p->end_ns);
    buf_printf(&fp->html, ", %zu bytes &nbsp; <a href=\"/profile.pb.gz?key=%016" PRIx64
                          "\">download</a></p>", p->len, key);
    resp->stream = flame_part;
    resp->stream_state = fp;
    resp->stream_free = flame_page_free;
}

/* -------------------------------------------------------------- routing */

bool agent__ui_handle(struct agent *a, const struct httpd_request *req,
                      struct httpd_response *resp)
{
    char fmt[16];

    if (strcmp(req->path, "/") == 0 ||
        (strcmp(req->path, "/targets") == 0 &&
         !(httpd_query_get(req->query, "format", fmt, sizeof(fmt)) > 0 && strcmp(fmt, "text") == 0))) {
        targets_page(a, resp);
        return true;
    }
    if (strcmp(req->path, "/forwarding") == 0) {
        forwarding_page(a, resp);
        return true;
    }
    if (strcmp(req->path, "/config") == 0) {
        config_page(a, resp);
        return true;
    }
    if (strcmp(req->path, "/service-discovery") == 0) {
        sd_page(a, resp);
        return true;
    }
    if (strcmp(req->path, "/profile") == 0) {
        profile_page(a, req, resp, false);
        return true;
    }
    if (strcmp(req->path, "/profile.pb.gz") == 0) {
        profile_page(a, req, resp, true);
        return true;
    }
    return false;
}
