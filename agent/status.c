/* The status server's handlers: /metrics, /-/healthy, /-/ready,
 * POST /-/reload, /api/v1/targets and /targets; and configuration reloads
 * (shared with SIGHUP).
 *
 * Loop thread only: every handler answers synchronously from the agent's
 * state. A reload loads and validates the new file completely before
 * anything changes; an invalid file leaves the running config untouched. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "discovery/discovery.h"
#include "forward/forward.h"
#include "proflet_version.h"

bool agent__ready(const struct agent *a)
{
    return a->started && a->acfg && a->disc && disc_manager_ready(a->disc);
}

int agent__reload(struct agent *a, const char *why)
{
    struct agent_cfg *acfg = calloc(1, sizeof(*acfg));
    char err[1024];
    int r;

    if (!acfg)
        return -ENOMEM;
    acfg->refs = 1;
    if (a->config_path)
        r = cfg_load_file(a->config_path, &acfg->cfg, err, sizeof(err));
    else
        r = cfg_load_string(cfg_default_yaml, strlen(cfg_default_yaml), "<default>",
                            &acfg->cfg, err, sizeof(err));
    if (r < 0)
        goto fail;
    /* A dry run never starts an endpoint: no remote-write connection, no
     * directory or spool touched. */
    r = a->targets_mode ? 0 : fwd_apply(a->fwd, acfg->cfg, err, sizeof(err));
    if (r < 0)
        goto fail;
    r = agent__apply_config(a, acfg, err, sizeof(err));
    if (r < 0)
        goto fail;
    r = disc_manager_apply(a->disc, acfg->cfg, err, sizeof(err));
    if (r < 0)
        log_error("discovery could not apply the new config", "err", err);
    agent__cfg_unref(a->acfg);
    a->acfg = acfg;
    labels_done(&a->external);
    for (unsigned i = 0; i < acfg->cfg->n_external_labels; i++)
        labels_set(&a->external, acfg->cfg->external_labels[i].key,
                   acfg->cfg->external_labels[i].value);
    if (!a->log_level_fixed && acfg->cfg->log_level && log_parse_level(acfg->cfg->log_level) >= 0)
        log_set_level((enum log_level)log_parse_level(acfg->cfg->log_level));
    a->reloads_ok++;
    a->last_reload_ok = true;
    a->last_reload_ns = agent__now_ns();
    log_info("configuration reloaded", "trigger", why, "file",
             a->config_path ? a->config_path : "<default>");
    return 0;
fail:
    agent__cfg_unref(acfg);
    a->reloads_failed++;
    a->last_reload_ok = false;
    log_error("configuration reload failed; keeping the running configuration", "trigger", why,
              "err", err);
    return r < 0 ? r : -EINVAL;
}

/* Label values in the exposition format escape \, " and newline. */
static void put_lv(struct buf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            buf_printf(b, "\\%c", *v);
        else if (*v == '\n')
            buf_puts(b, "\\n");
        else
            buf_append(b, v, 1);
    }
}

static void help(struct buf *b, const char *name, const char *type, const char *text)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static void jt(struct buf *b, const char *name, const struct agent_stats *s)
{
    buf_printf(b, "%s{job=\"", name);
    put_lv(b, s->job);
    buf_puts(b, "\",type=\"");
    put_lv(b, s->type);
    buf_puts(b, "\"");
}

static void hist(struct buf *b, const char *name, const struct agent_stats *s,
                 const struct agent_hist *h)
{
    uint64_t cum = 0;

    for (int i = 0; i <= AGENT_HIST_BUCKETS; i++) {
        cum += h->counts[i];
        if (s)
            jt(b, name, s), buf_puts(b, ",");
        else
            buf_printf(b, "%s{", name);
        if (i < AGENT_HIST_BUCKETS)
            buf_printf(b, "le=\"%g\"} %llu\n", agent_hist_bounds[i], (unsigned long long)cum);
        else
            buf_printf(b, "le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
}

/* The per-(job, type) counters, all plain uint64_t fields of agent_stats. */
static const struct pair_counter {
    const char *name;
    const char *help;
    size_t offset;
} pair_counters[] = {
    {"proflet_scrapes_total", "Scrapes completed, by job and profile type.",
     offsetof(struct agent_stats, scrapes)},
    {"proflet_scrape_body_bytes_total", "Bytes of scraped profile bodies.",
     offsetof(struct agent_stats, body_bytes)},
    {"proflet_scrape_skipped_ticks_total",
     "Ticks skipped because the previous scrape of the pair was still running.",
     offsetof(struct agent_stats, skipped_ticks)},
    {"proflet_profiles_produced_total", "Profiles handed to the forwarder.",
     offsetof(struct agent_stats, profiles_out)},
    {"proflet_delta_baselines_total",
     "First profiles of a pair kept as the delta baseline and not sent.",
     offsetof(struct agent_stats, delta_baselines)},
    {"proflet_delta_resets_total", "Target restarts detected by the delta; that profile is dropped.",
     offsetof(struct agent_stats, delta_resets)},
};

static void metrics(struct agent *a, struct buf *b)
{
    const struct agent_stats *s;
    size_t pos = 0, delta_bytes = 0;
    uint64_t k;
    void *v;

    help(b, "proflet_build_info", "gauge", "Build information.");
    buf_printf(b, "proflet_build_info{version=\"%s\"} 1\n", PROFLET_VERSION);
    help(b, "proflet_start_time_seconds", "gauge", "Start time of the process.");
    buf_printf(b, "proflet_start_time_seconds %.3f\n", (double)a->start_time_ns / 1e9);

    for (size_t i = 0; i < sizeof(pair_counters) / sizeof(pair_counters[0]); i++) {
        const struct pair_counter *c = &pair_counters[i];

        help(b, c->name, "counter", c->help);
        for (s = a->stats; s; s = s->next) {
            jt(b, c->name, s);
            buf_printf(b, "} %llu\n",
                       (unsigned long long)*(const uint64_t *)((const char *)s + c->offset));
        }
    }
    help(b, "proflet_scrape_failures_total", "counter", "Failed scrapes, by reason.");
    for (s = a->stats; s; s = s->next)
        for (int i = 0; i < FAIL_N; i++) {
            jt(b, "proflet_scrape_failures_total", s);
            buf_printf(b, ",reason=\"%s\"} %llu\n", agent_fail_names[i],
                       (unsigned long long)s->failures[i]);
        }
    help(b, "proflet_scrape_duration_seconds", "histogram", "Scrape request duration.");
    for (s = a->stats; s; s = s->next) {
        hist(b, "proflet_scrape_duration_seconds_bucket", s, &s->duration);
        jt(b, "proflet_scrape_duration_seconds_sum", s), buf_printf(b, "} %g\n", s->duration.sum);
        jt(b, "proflet_scrape_duration_seconds_count", s),
            buf_printf(b, "} %llu\n", (unsigned long long)s->duration.count);
    }
    help(b, "proflet_scrape_start_lateness_seconds", "histogram",
         "How late a scrape tick fired after its planned instant.");
    hist(b, "proflet_scrape_start_lateness_seconds_bucket", NULL, &a->lateness);
    buf_printf(b, "proflet_scrape_start_lateness_seconds_sum %g\n", a->lateness.sum);
    buf_printf(b, "proflet_scrape_start_lateness_seconds_count %llu\n",
               (unsigned long long)a->lateness.count);

    while (hashmap_next(&a->pairs, &pos, &k, &v)) {
        const struct scrape_pair *p = v;

        if (p->delta && !p->busy)
            delta_bytes += pprof_delta_mem(p->delta);
    }
    help(b, "proflet_scrape_pairs", "gauge", "Running (target, profile type) pairs.");
    buf_printf(b, "proflet_scrape_pairs %zu\n", a->pairs.n);
    help(b, "proflet_scrape_pairs_created_total", "counter",
         "Pairs started (new targets, or targets whose labels or URL changed).");
    buf_printf(b, "proflet_scrape_pairs_created_total %llu\n", (unsigned long long)a->pairs_created);
    help(b, "proflet_scrape_pairs_removed_total", "counter", "Pairs stopped.");
    buf_printf(b, "proflet_scrape_pairs_removed_total %llu\n", (unsigned long long)a->pairs_removed);
    help(b, "proflet_target_errors_total", "counter", "Targets rejected after relabeling.");
    buf_printf(b, "proflet_target_errors_total %llu\n", (unsigned long long)a->target_errors);
    help(b, "proflet_delta_state_bytes", "gauge", "Memory held by delta state.");
    buf_printf(b, "proflet_delta_state_bytes %zu\n", delta_bytes);
    help(b, "proflet_worker_jobs_in_flight", "gauge", "CPU jobs running in the worker pool.");
    buf_printf(b, "proflet_worker_jobs_in_flight %u\n", a->pool.inflight);
    help(b, "proflet_worker_jobs_backlog", "gauge", "CPU jobs waiting for a worker.");
    buf_printf(b, "proflet_worker_jobs_backlog %u\n", a->pool.backlog_len);
    help(b, "proflet_worker_jobs_completed_total", "counter", "CPU jobs completed.");
    buf_printf(b, "proflet_worker_jobs_completed_total %llu\n",
               (unsigned long long)a->pool.completed);
    help(b, "proflet_worker_jobs_rejected_total", "counter",
         "CPU jobs refused because the backlog was full.");
    buf_printf(b, "proflet_worker_jobs_rejected_total %llu\n",
               (unsigned long long)a->pool.rejected);
    help(b, "proflet_config_reloads_total", "counter", "Configuration reloads by result.");
    buf_printf(b, "proflet_config_reloads_total{result=\"success\"} %llu\n",
               (unsigned long long)a->reloads_ok);
    buf_printf(b, "proflet_config_reloads_total{result=\"failure\"} %llu\n",
               (unsigned long long)a->reloads_failed);
    help(b, "proflet_config_last_reload_successful", "gauge",
         "Whether the last configuration reload succeeded.");
    buf_printf(b, "proflet_config_last_reload_successful %d\n", a->last_reload_ok ? 1 : 0);
    help(b, "proflet_config_last_reload_success_timestamp_seconds", "gauge",
         "Time of the last successful configuration load.");
    buf_printf(b, "proflet_config_last_reload_success_timestamp_seconds %.3f\n",
               (double)a->last_reload_ns / 1e9);
    if (a->disc)
        disc_manager_metrics(a->disc, b);
    if (a->fwd)
        fwd_metrics(a->fwd, b);
}

static bool query_has(const char *q, const char *key, char *val, size_t vlen)
{
    size_t kl = strlen(key);

    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);

        if (n > kl && strncmp(q, key, kl) == 0 && q[kl] == '=') {
            snprintf(val, vlen, "%.*s", (int)(n - kl - 1), q + kl + 1);
            return true;
        }
        if (n == kl && strncmp(q, key, kl) == 0) {
            if (vlen)
                val[0] = '\0';
            return true;
        }
        q = amp ? amp + 1 : NULL;
    }
    return false;
}

void agent__status_handler(const struct net_http_request *req, struct net_http_response *resp,
                           void *ud)
{
    struct agent *a = ud;
    bool get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;

    if (strcmp(req->path, "/metrics") == 0 && get) {
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        metrics(a, &resp->body);
    } else if (strcmp(req->path, "/-/healthy") == 0 && get) {
        buf_puts(&resp->body, "proflet is healthy.\n");
    } else if (strcmp(req->path, "/-/ready") == 0 && get) {
        if (agent__ready(a)) {
            buf_puts(&resp->body, "proflet is ready.\n");
        } else {
            resp->status = 503;
            buf_puts(&resp->body, "proflet is not ready: discovery has not synced yet.\n");
        }
    } else if (strcmp(req->path, "/-/reload") == 0) {
        if (strcmp(req->method, "POST") != 0 && strcmp(req->method, "PUT") != 0) {
            resp->status = 405;
            buf_puts(&resp->body, "use POST to reload\n");
        } else if (agent__reload(a, "http") < 0) {
            resp->status = 500;
            buf_puts(&resp->body, "reload failed; the running configuration is kept (see log)\n");
        } else {
            buf_puts(&resp->body, "configuration reloaded\n");
        }
    } else if (strcmp(req->path, "/api/v1/targets") == 0 && get) {
        char job[256];
        bool has_job = query_has(req->query, "job", job, sizeof(job));

        resp->content_type = "application/json";
        agent__targets_json(a, has_job ? job : NULL, true, &resp->body);
    } else if (strcmp(req->path, "/targets") == 0 && get) {
        agent__targets_text(a, &resp->body);
    } else if (strcmp(req->path, "/") == 0 && get) {
        buf_printf(&resp->body,
                   "proflet %s\n\n/metrics\n/targets\n/api/v1/targets\n/-/healthy\n/-/ready\n"
                   "POST /-/reload\n",
                   PROFLET_VERSION);
    } else {
        resp->status = 404;
        buf_puts(&resp->body, "not found\n");
    }
}
