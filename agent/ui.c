/* SPDX-License-Identifier: Apache-2.0 */
/* The web UI's list pages, and its routes: server-rendered HTML that reads
 * without JavaScript (a built-in script, agent/assets/filter.js, only
 * filters rows). Numbers are written for people (ui_fmt.c: sizes in binary
 * units, counts with separators, ages), their exact values in the cells'
 * titles; long label sets fold (agent__ui_labels()).
 *
 *   /, /targets        targets by job and profile type, streamed target by
 *                      target (text table: /targets?format=text, status.c)
 *   /service-discovery what discovery found per job: the kept targets'
 *                      discovered and final labels, the dropped ones and why
 *   /forwarding        per endpoint: queue, requests in flight, spool, sent,
 *                      retried and dropped profiles, the last error and when
 *   /config            the configuration as loaded, secrets shown as <secret>;
 *                      version, start, last reload and its warnings
 *   /profile, /profile.pb.gz   a pair's profiles: the newest, a merged range,
 *                      a diff, a sandwich; JSON, collapsed, pprof (ui_flame.c)
 *
 * Everything that comes from targets (labels, URLs, errors) is escaped
 * (ui_html.c). Loop thread only. A streamed page (targets, service
 * discovery) holds only an iterator that tolerates changes between parts
 * (scrape.h) and the name of the job it is in; the server frees it when
 * the answer ends or its connection closes. (docs/design.md "Modules") */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/recent.h"
#include "agent/ui.h"
#include "agent/ui_assets.h"
#include "common/labels.h"
#include "forward/forward.h"
#include "httpd/httpd.h"
#include "proflet_version.h"
#include "scrape/scrape.h"

/* ------------------------------------------------------------- targets */

struct targets_page {
    struct agent *a;
    struct scrape_targets_iter *it;
    struct buf *out;
    size_t chunk;
    char *last_job;
    size_t up, down, unknown; /* of the current job's rows */
    int part;                 /* 0 head, 1 rows, 2 done */
};

/* The counts of the job whose rows just ended, under them. */
static void job_counts(struct targets_page *pg)
{
    if (!pg->last_job)
        return;
    buf_puts(pg->out, "<tr class=\"counts\"><td colspan=\"6\">");
    agent__ui_fmt_count(pg->out, pg->up);
    buf_puts(pg->out, " up, ");
    agent__ui_fmt_count(pg->out, pg->down);
    buf_puts(pg->out, " down, ");
    agent__ui_fmt_count(pg->out, pg->unknown);
    buf_puts(pg->out, " not scraped yet</td></tr>");
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
        agent__ui_esc(b, v->job);
        buf_puts(b, "</td></tr>");
    }
    pg->up += health[0] == 'u' && health[1] == 'p';
    pg->down += health[0] == 'd';
    pg->unknown += health[0] == 'u' && health[1] == 'n';
    buf_printf(b, "<tr class=\"t\" data-health=\"%s\"><td>", health);
    agent__ui_esc(b, v->profile_type);
    buf_printf(b, "</td><td class=\"%s\">%s</td><td>", health, health);
    agent__ui_ago(b, v->last_scrape_ns);
    buf_puts(b, "</td><td>");
    if (v->last_scrape_ns)
        agent__ui_fmt_duration(b, v->last_duration_us * 1000u);
    buf_puts(b, "</td><td>");
    agent__ui_esc(b, v->url);
    if (v->owner) {
        buf_puts(b, " <span class=\"l\">owner ");
        agent__ui_esc(b, v->owner);
        buf_puts(b, "</span>");
    }
    buf_puts(b, "<br>");
    agent__ui_labels(b, v->labels, false, true);
    if (v->last_error) {
        buf_puts(b, "<div class=\"err\">");
        agent__ui_esc(b, v->last_error);
        buf_puts(b, "</div>");
    }
    buf_puts(b, "<details><summary>discovered labels</summary>");
    agent__ui_labels(b, v->discovered, true, true);
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
        agent__ui_head(out, "Targets");
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
    agent__ui_script(out, agent__ui_asset_filter_js, agent__ui_asset_filter_js_len);
    buf_puts(out, UI_PAGE_TAIL);
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
    agent__ui_esc(pg->out, job);
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
    agent__ui_labels(b, v->discovered, true, true);
    buf_puts(b, "</td><td>");
    if (v->labels) {
        agent__ui_labels(b, v->labels, false, false); /* the target's, not one type's */
    } else {
        buf_puts(b, "<div class=\"err\">");
        agent__ui_esc(b, v->drop_reason ? v->drop_reason : v->error ? v->error : "dropped");
        if (v->drop_reason && v->error) {
            buf_puts(b, ": ");
            agent__ui_esc(b, v->error);
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
        agent__ui_head(out, "Service discovery");
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
        agent__ui_script(out, agent__ui_asset_filter_js, agent__ui_asset_filter_js_len);
        buf_puts(out, UI_PAGE_TAIL);
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

/* A count, with its bytes in binary units after it. */
static void count_bytes(struct buf *b, uint64_t n, uint64_t bytes)
{
    buf_printf(b, "<td title=\"%" PRIu64 " profiles, %" PRIu64 " bytes\">", n, bytes);
    agent__ui_fmt_count(b, n);
    buf_puts(b, " (");
    agent__ui_fmt_bytes(b, bytes);
    buf_puts(b, ")</td>");
}

static void count_cell(struct buf *b, uint64_t n)
{
    buf_printf(b, "<td title=\"%" PRIu64 "\">", n);
    agent__ui_fmt_count(b, n);
    buf_puts(b, "</td>");
}

static void endpoint_row(const struct fwd_endpoint_view *e, void *ud)
{
    struct buf *b = ud;

    buf_puts(b, "<tr class=\"t\"><td>");
    agent__ui_esc(b, e->name);
    buf_puts(b, "<br><span class=\"l\">");
    agent__ui_esc(b, e->url);
    buf_puts(b, "</span><br><span class=\"l\">compression ");
    agent__ui_esc(b, e->compression);
    buf_puts(b, " (");
    agent__ui_esc(b, e->encoder);
    buf_puts(b, ")</span></td>");
    count_bytes(b, e->queue_profiles, e->queue_bytes);
    count_cell(b, e->inflight_profiles);
    buf_printf(b, "<td title=\"%" PRIu64 " bytes, %" PRIu64 " profiles\">", e->spool_bytes,
               e->spool_records);
    agent__ui_fmt_bytes(b, e->spool_bytes);
    buf_puts(b, ", ");
    agent__ui_fmt_count(b, e->spool_records);
    buf_puts(b, e->spool_records == 1 ? " profile" : " profiles");
    if (e->spool_oldest_ms) {
        buf_puts(b, ", oldest ");
        agent__ui_ago(b, e->spool_oldest_ms * 1000000ULL);
    }
    buf_puts(b, "</td>");
    count_bytes(b, e->sent_profiles, e->sent_bytes);
    count_cell(b, e->retried_profiles);
    count_cell(b, e->failed_requests);
    count_cell(b, e->dropped_profiles);
    buf_puts(b, "<td>");
    if (e->last_error && e->last_error[0]) {
        buf_puts(b, "<div class=\"err\">");
        agent__ui_esc(b, e->last_error);
        buf_puts(b, "</div>");
        agent__ui_ago(b, e->last_error_ms * 1000000ULL);
    }
    buf_puts(b, "</td></tr>");
}

static void forwarding_page(struct agent *a, struct httpd_response *resp)
{
    struct buf *b = &resp->body;

    resp->content_type = "text/html; charset=utf-8";
    agent__ui_head(b, "Forwarding");
    buf_puts(b, "<h2>Forwarding</h2><table><tr><th>endpoint</th><th>queued</th>"
                "<th>in flight</th><th>spool</th><th>sent</th><th>retried</th>"
                "<th>failed requests</th><th>dropped</th><th>last error</th></tr>");
    fwd_endpoints_visit(a->fwd, endpoint_row, b);
    buf_puts(b, "</table><p>Counters since start; <a href=\"/metrics\">/metrics</a> has them "
                "by reason.</p>");
    buf_puts(b, UI_PAGE_TAIL);
}

/* --------------------------------------------------------------- config */

static void config_page(struct agent *a, struct httpd_response *resp)
{
    struct buf *b = &resp->body;
    const char *w;

    resp->content_type = "text/html; charset=utf-8";
    agent__ui_head(b, "Configuration");
    buf_puts(b, "<h2>Configuration</h2><table><tr><th>version</th><td>" PROFLET_VERSION
                "</td></tr><tr><th>started</th><td>");
    agent__ui_ago(b, a->start_time_ns);
    buf_puts(b, "</td></tr><tr><th>file</th><td>");
    agent__ui_esc(b, a->doc ? conf_doc_name(a->doc) : "");
    buf_printf(b, "</td></tr><tr><th>last reload</th><td>%s, ",
               a->last_reload_ok ? "successful" : "<span class=\"err\">failed</span>");
    agent__ui_ago(b, a->last_reload_ns);
    buf_printf(b, " (%" PRIu64 " successful, %" PRIu64 " failed)</td></tr></table>", a->reloads_ok,
               a->reloads_failed);
    for (size_t i = 0; a->doc && (w = conf_doc_warning(a->doc, i)) != NULL; i++) {
        buf_puts(b, "<p class=\"err\">warning: ");
        agent__ui_esc(b, w);
        buf_puts(b, "</p>");
    }
    buf_puts(b, "<h3>As loaded</h3><p>Defaults filled in; durations in milliseconds and sizes "
                "in bytes, as proflet holds them; secrets are not shown.</p><pre id=\"config\">");
    if (a->doc) {
        struct buf dump;

        buf_init(&dump, 16u << 20);
        agent_config_dump(a->doc, &dump);
        agent__ui_esc_text(b, dump.data ? dump.data : "", true);
        buf_done(&dump);
    }
    buf_puts(b, "</pre>");
    buf_puts(b, UI_PAGE_TAIL);
}

/* -------------------------------------------------------------- routing */

bool agent__ui_handle(struct agent *a, const struct httpd_request *req, struct httpd_response *resp)
{
    char fmt[16];

    if (strcmp(req->path, "/") == 0 ||
        (strcmp(req->path, "/targets") == 0 &&
         !(httpd_query_get(req->query, "format", fmt, sizeof(fmt)) > 0 &&
           strcmp(fmt, "text") == 0))) {
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
        agent__ui_profile_page(a, req, resp, false);
        return true;
    }
    if (strcmp(req->path, "/profile.pb.gz") == 0) {
        agent__ui_profile_page(a, req, resp, true);
        return true;
    }
    return false;
}
