/* SPDX-License-Identifier: Apache-2.0 */
/* The status server's handlers: /metrics, /-/healthy, /-/ready,
 * POST /-/reload (only with --web.enable-lifecycle), /api/v1/targets and
 * /targets (docs/design.md "Modules").
 *
 * Loop thread only: every handler answers synchronously from the modules'
 * state, except POST /-/reload, answered once its load is applied
 * (reload.c), and /api/v1/targets and /metrics, which the server streams part
 * by part (from a scrape_targets_iter, from cursors into the scrape and
 * discovery metrics; freed by the server when the answer ends or its
 * connection closes, always before the scrape manager goes); each module
 * renders its own part of /metrics. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/recent.h"
#include "cluster/cluster.h"
#include "common/buf.h"
#include "common/intern.h"
#include "common/macros.h"
#include "common/promtext.h"
#include "discovery/discovery.h"
#include "forward/forward.h"
#include "httpd/httpd.h"
#include "proflet_version.h"
#include "scrape/scrape.h"

bool agent__ready(const struct agent *a)
{
    return a->started && a->doc && a->disc && disc_manager_ready(a->disc) &&
           cluster_ready(a->cluster);
}

/* The status server's own connections: a client that goes away (closes,
 * resets, times out) must cost its connection and be seen to. */
static void server_metrics(const struct agent *a, struct buf *b)
{
    struct httpd_stats st;
    const char *reasons[HTTPD_CLOSE_N];
    const struct prom_family families[] = {
        PROM_FAMILY_U64("proflet_http_server_connections", "gauge",
                        "Open connections of the status server (this scrape's included).",
                        struct httpd_stats, open),
        PROM_FAMILY_U64("proflet_http_server_connections_accepted_total", "counter",
                        "Connections the status server accepted.", struct httpd_stats, accepted),
        PROM_FAMILY_U64_BY("proflet_http_server_connections_closed_total", "counter",
                           "Connections of the status server closed, by reason: done (by the "
                           "server after its last answer, or at shutdown), client_closed, reset "
                           "(a read or write failed), timeout, evicted (at the connection "
                           "limit), error (TLS, memory).",
                           struct httpd_stats, closed, "reason", reasons),
    };

    if (!a->status)
        return;
    for (int r = 0; r < HTTPD_CLOSE_N; r++)
        reasons[r] = httpd_close_reason_name(r);
    httpd_get_stats(a->status, &st);
    prom_families(b, families, ARRAY_SIZE(families), &st, NULL);
}

/* The agent's own figures, taken when /metrics is written. */
struct figures {
    uint64_t build_info[1]; /* 1, its one series labelled by the version */
    double start_time;
    uint64_t jobs_in_flight, jobs_backlog, jobs_backlog_bytes, jobs_completed, jobs_rejected;
    uint64_t memory_budget, memory_in_flight, jobs_over_budget;
    uint64_t recent_profiles, recent_series, recent_bytes, recent_evicted;
    uint64_t label_strings, label_strings_bytes;
    uint64_t reloads[2];
    uint64_t last_reload_ok;
    double last_reload_time;
};

static const char *const version[] = { PROFLET_VERSION };
static const char *const reload_results[] = { "success", "failure" };

#define U64(name, type, help, field) PROM_FAMILY_U64(name, type, help, struct figures, field)
#define F64(name, help, field) PROM_FAMILY_F64(name, "gauge", help, struct figures, field)

/* Before the loop's lag and the cluster's gauges. */
static const struct prom_family first_families[] = {
    PROM_FAMILY_U64_BY("proflet_build_info", "gauge", "Build information.", struct figures,
                       build_info, "version", version),
    F64("proflet_start_time_seconds", "Start time of the process.", start_time),
};

/* After them. */
static const struct prom_family families[] = {
    U64("proflet_worker_jobs_in_flight", "gauge", "CPU jobs running in the worker pool.",
        jobs_in_flight),
    U64("proflet_worker_jobs_backlog", "gauge", "CPU jobs waiting for a worker.", jobs_backlog),
    U64("proflet_worker_jobs_backlog_bytes", "gauge",
        "Bytes the waiting jobs hold (compressed profiles); at most limits.memory-budget.",
        jobs_backlog_bytes),
    U64("proflet_worker_jobs_completed_total", "counter", "CPU jobs completed.", jobs_completed),
    U64("proflet_worker_jobs_rejected_total", "counter",
        "CPU jobs refused because the backlog was full, in jobs or in bytes.", jobs_rejected),
    U64("proflet_worker_memory_budget_bytes", "gauge",
        "Peak memory all profile jobs in flight may use together (limits.memory-budget).",
        memory_budget),
    U64("proflet_worker_memory_in_flight_bytes", "gauge",
        "Peak memory the profile jobs running now were admitted with.", memory_in_flight),
    U64("proflet_worker_jobs_over_budget_total", "counter",
        "Profile jobs refused because they alone exceed the memory budget.", jobs_over_budget),
    U64("proflet_ui_recent_profiles", "gauge",
        "Recent profiles kept for the web UI's pages, ranges and diffs "
        "(server.recent-profiles-bytes).",
        recent_profiles),
    U64("proflet_ui_recent_series", "gauge",
        "Targets and profile types with recent profiles kept (each keeps at least its newest "
        "while the cap allows).",
        recent_series),
    U64("proflet_ui_recent_profiles_bytes", "gauge", "Bytes they take.", recent_bytes),
    U64("proflet_ui_recent_profiles_evicted_total", "counter",
        "Kept profiles dropped to stay under the cap.", recent_evicted),
    U64("proflet_label_strings", "gauge",
        "Distinct label names and values held (each stored once, shared by every label set "
        "that holds it).",
        label_strings),
    U64("proflet_label_strings_bytes", "gauge", "Bytes those strings take.", label_strings_bytes),
    PROM_FAMILY_U64_BY("proflet_config_reloads_total", "counter",
                       "Configuration reloads by result.", struct figures, reloads, "result",
                       reload_results),
    U64("proflet_config_last_reload_successful", "gauge",
        "Whether the last configuration reload succeeded.", last_reload_ok),
    F64("proflet_config_last_reload_success_timestamp_seconds",
        "Time of the last successful configuration load.", last_reload_time),
};

#undef U64
#undef F64

static void metrics(struct agent *a, struct buf *b)
{
    struct workq_stats w;
    struct recent_stats rs;
    size_t interned, interned_bytes;
    struct figures f;

    workq_get_stats(a->work, &w);
    intern_stats(&interned, &interned_bytes);
    recent_stats(a->recent, &rs);
    f = (struct figures){
        .build_info = { 1 },
        .start_time = (double)a->start_time_ns / 1e9,
        .jobs_in_flight = w.inflight,
        .jobs_backlog = w.backlog,
        .jobs_backlog_bytes = w.backlog_held,
        .jobs_completed = w.completed,
        .jobs_rejected = w.rejected,
        .memory_budget = w.max_cost,
        .memory_in_flight = w.cost_inflight,
        .jobs_over_budget = w.over_budget,
        .recent_profiles = rs.profiles,
        .recent_series = rs.series,
        .recent_bytes = rs.bytes,
        .recent_evicted = rs.evicted,
        .label_strings = interned,
        .label_strings_bytes = interned_bytes,
        .reloads = { a->reloads_ok, a->reloads_failed },
        .last_reload_ok = a->last_reload_ok,
        .last_reload_time = (double)a->last_reload_ns / 1e9,
    };
    prom_families(b, first_families, ARRAY_SIZE(first_families), &f, NULL);
    looplag_metrics(&a->lag, b);
    if (a->cluster) {
        size_t owned, elsewhere;

        scrape_manager_target_counts(a->scrape, &owned, &elsewhere);
        cluster_metrics(a->cluster, owned, owned + elsewhere, b);
    }
    prom_families(b, families, ARRAY_SIZE(families), &f, NULL);
    server_metrics(a, b);
    if (a->fwd)
        fwd_metrics(a->fwd, b);
}

/* /metrics, streamed: the process's own figures and the modules' small ones
 * in the first part (the loop's lag gauges first of all, so that a reader
 * of the head does not count this answer's cost), then the scrape and
 * discovery series by job, which grow with the jobs (about 6 KB a job, tens
 * of MB for thousands), a part at a time as the connection takes them. */
struct metrics_stream {
    struct agent *a;
    unsigned phase;
    struct scrape_metrics_cursor sc;
    struct disc_metrics_cursor dc;
};

static int metrics_part(struct buf *out, size_t chunk, void *state)
{
    struct metrics_stream *st = state;
    struct agent *a = st->a;

    if (st->phase == 0) {
        metrics(a, out);
        st->phase = 1;
        if (out->len >= chunk)
            return 1;
    }
    if (st->phase == 1) {
        if (a->scrape && scrape_manager_metrics_next(a->scrape, &st->sc, out, chunk) > 0)
            return 1;
        st->phase = 2;
    }
    /* Discovery closes first at shutdown: its series end with it. */
    if (a->disc && disc_manager_metrics_next(a->disc, &st->dc, out, chunk) > 0)
        return 1;
    return 0;
}

static int targets_part(struct buf *out, size_t chunk, void *state)
{
    return scrape_targets_iter_next(state, out, chunk);
}

static void targets_free(void *state)
{
    scrape_targets_iter_free(state);
}

void agent__status_handler(const struct httpd_request *req, struct httpd_response *resp, void *ud)
{
    struct agent *a = ud;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;

    if (strcmp(req->path, "/metrics") == 0 && get) {
        struct metrics_stream *st = calloc(1, sizeof(*st));

        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        if (st) {
            st->a = a;
            resp->stream_state = st;
            resp->stream = metrics_part;
            resp->stream_free = free;
        } else {
            resp->status = 500;
            buf_puts(&resp->body, "out of memory\n");
        }
    } else if (strcmp(req->path, "/-/healthy") == 0 && get) {
        buf_puts(&resp->body, "proflet is healthy.\n");
    } else if (strcmp(req->path, "/-/ready") == 0 && get) {
        if (agent__ready(a)) {
            buf_puts(&resp->body, "proflet is ready.\n");
        } else {
            resp->status = 503;
            buf_puts(&resp->body,
                     a->disc && disc_manager_ready(a->disc)
                         ? "proflet is not ready: the cluster's peers are not known yet.\n"
                         : "proflet is not ready: discovery has not synced yet.\n");
        }
    } else if (strcmp(req->path, "/-/reload") == 0) {
        if (strcmp(req->method, "POST") != 0 && strcmp(req->method, "PUT") != 0) {
            resp->status = 405;
            buf_puts(&resp->body, "use POST to reload\n");
        } else if (!a->enable_lifecycle) {
            /* As Prometheus: reloading over HTTP is opt-in; SIGHUP works. */
            resp->status = 403;
            buf_puts(&resp->body, "Lifecycle API is not enabled (start proflet with "
                                  "--web.enable-lifecycle, or send SIGHUP).\n");
        } else {
            /* Loaded off the loop; answered once applied (reload.c). */
            struct agent__reload_wait *w;

            if (agent__reload_wait(a, &w) < 0) {
                resp->status = a->stopping ? 503 : 500;
                buf_puts(&resp->body, "reload could not start (see log)\n");
            } else {
                resp->later = w;
                resp->later_free = agent__reload_wait_free;
            }
        }
    } else if (strcmp(req->path, "/api/v1/targets") == 0 && get) {
        char job[1024];
        int has_job = httpd_query_get(req->query, "job", job, sizeof(job));

        if (has_job < 0) {
            resp->status = 400;
            buf_puts(&resp->body, "bad job parameter\n");
            return;
        }
        resp->content_type = "application/json";
        /* Streamed target by target: 10k targets are tens of MB. */
        resp->stream_state = scrape_targets_iter_new(a->scrape, has_job ? job : NULL);
        if (resp->stream_state) {
            resp->stream = targets_part;
            resp->stream_free = targets_free;
        } else {
            resp->status = 500;
            buf_puts(&resp->body, "out of memory\n");
        }
    } else if (get && agent__ui_handle(a, req, resp)) {
        /* a page of the web UI */
    } else if (strcmp(req->path, "/targets") == 0 && get) {
        scrape_manager_targets_text(a->scrape, &resp->body); /* ?format=text */
    } else {
        resp->status = 404;
        buf_puts(&resp->body, "not found\n");
    }
}
