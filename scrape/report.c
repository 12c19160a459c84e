/* What the scrape manager reports: the targets as `proflet targets`
 * prints them (promtool's shape), /api/v1/targets (Prometheus' API shape),
 * the text table of /targets, and the scrape metrics. Loop thread only;
 * everything is read from the manager's state. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "common/macros.h"
#include "scrape/internal.h"

void scrape_manager_print(const struct scrape_manager *m, const char *job, bool show_dropped,
                          struct buf *out)
{
    bool first = true;

    buf_puts(out, "[");
    for (const struct scrape_job *j = m->jobs; j; j = j->next) {
        size_t pos = 0;
        uint64_t k;
        void *v;

        if (job && strcmp(job, j->name) != 0)
            continue;
        while (hashmap_next(&j->sources, &pos, &k, &v)) {
            const struct source_entry *e = v;

            for (size_t i = 0; e->results && i < e->n; i++) {
                if (e->results[i].dropped && !show_dropped)
                    continue;
                buf_puts(out, first ? "\n  " : ",\n  ");
                first = false;
                target_result_json(&e->results[i], show_dropped, out);
            }
        }
    }
    buf_puts(out, first ? "]\n" : "\n]\n");
}


static json_object *labels_json(const struct labels *ls)
{
    json_object *o = json_object_new_object();

    for (size_t i = 0; i < ls->n; i++)
        json_object_object_add(o, ls->v[i].name,
                               json_object_new_string_len(ls->v[i].value, (int)ls->v[i].value_len));
    return o;
}

static void ns_to_rfc3339(uint64_t ns, char *out, size_t len)
{
    time_t s = (time_t)(ns / 1000000000ULL);
    struct tm tm;
    char base[32];

    if (!ns) {
        snprintf(out, len, "0001-01-01T00:00:00Z");
        return;
    }
    gmtime_r(&s, &tm);
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, len, "%s.%03uZ", base, (unsigned)((ns / 1000000ULL) % 1000));
}

/* /api/v1/targets, shaped like Prometheus' API: one active target per
 * (target, profile type) with its last scrape; dropped targets listed
 * with their discovered labels. */
void scrape_manager_targets_json(const struct scrape_manager *m, const char *only_job,
                                 struct buf *out)
{
    json_object *root = json_object_new_object(), *data = json_object_new_object();
    json_object *active = json_object_new_array(), *dropped = json_object_new_array();
    json_object *counts = json_object_new_object();

    for (const struct scrape_job *job = m->jobs; job; job = job->next) {
        size_t pos = 0, listed_dropped = 0;
        uint64_t k;
        void *v;

        if (only_job && strcmp(only_job, job->name) != 0)
            continue;
        /* Prometheus' droppedTargetCounts: every dropped target counts,
         * whether or not its labels were kept. */
        json_object_object_add(counts, job->name, json_object_new_int64((int64_t)job->dropped));
        while (hashmap_next(&job->sources, &pos, &k, &v)) {
            struct source_entry *e = v;

            for (size_t i = 0; e->results && i < e->n; i++) {
                struct target_result *r = &e->results[i];
                struct labels disc = LABELS_INIT;

                if ((r->dropped || r->elsewhere) && job->sc->keep_dropped_targets &&
                    ++listed_dropped > job->sc->keep_dropped_targets)
                    continue; /* counted in droppedTargetCounts / the cluster metrics only */
                target_discovered(job->sc, &e->discovered->t[i], &disc);
                if (r->dropped || r->elsewhere || (r->error && !r->n_pairs)) {
                    json_object *t = json_object_new_object();

                    json_object_object_add(t, "discoveredLabels", labels_json(&disc));
                    json_object_object_add(t, "scrapePool", json_object_new_string(job->name));
                    if (r->error)
                        json_object_object_add(t, "error", json_object_new_string(r->error));
                    if (r->elsewhere) {
                        char why[300];

                        snprintf(why, sizeof(why), "owned by %s",
                                 r->owner ? r->owner : "no live peer yet");
                        json_object_object_add(t, "dropReason", json_object_new_string(why));
                        json_object_object_add(t, "owner", json_object_new_string(
                                                               r->owner ? r->owner : ""));
                    }
                    json_object_array_add(dropped, t);
                    labels_done(&disc);
                    continue;
                }
                for (size_t q = 0; q < r->n_pairs; q++) {
                    const struct scrape_pair *p = hashmap_get(&m->pairs, r->pairs[q].key);
                    json_object *t;
                    char ts[64];

                    if (!p)
                        continue;
                    t = json_object_new_object();
                    json_object_object_add(t, "discoveredLabels", labels_json(&disc));
                    json_object_object_add(t, "labels", labels_json(&p->tp.labels));
                    json_object_object_add(t, "scrapePool", json_object_new_string(job->name));
                    json_object_object_add(t, "scrapeUrl", json_object_new_string(p->tp.url));
                    if (r->owner)
                        json_object_object_add(t, "owner", json_object_new_string(r->owner));
                    json_object_object_add(t, "profileType",
                                           json_object_new_string(p->tp.profile->name));
                    json_object_object_add(t, "lastError",
                                           json_object_new_string(p->last_error ? p->last_error
                                                                                : ""));
                    ns_to_rfc3339(p->last_scrape_ns, ts, sizeof(ts));
                    json_object_object_add(t, "lastScrape", json_object_new_string(ts));
                    json_object_object_add(t, "lastScrapeDuration",
                                           json_object_new_double((double)p->last_duration_us /
                                                                  1e6));
                    json_object_object_add(
                        t, "health",
                        json_object_new_string(!p->last_scrape_ns ? "unknown"
                                               : p->last_error    ? "down"
                                                                  : "up"));
                    json_object_object_add(t, "scrapeInterval",
                                           json_object_new_int64((int64_t)p->tp.interval_ms));
                    json_object_array_add(active, t);
                }
                labels_done(&disc);
            }
        }
    }
    json_object_object_add(root, "status", json_object_new_string("success"));
    json_object_object_add(data, "activeTargets", active);
    json_object_object_add(data, "droppedTargetCounts", counts);
    json_object_object_add(data, "droppedTargets", dropped);
    json_object_object_add(root, "data", data);
    buf_puts(out, json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
    buf_puts(out, "\n");
    json_object_put(root);
}

/* /targets: the same for people. */
void scrape_manager_targets_text(const struct scrape_manager *m, struct buf *out)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    buf_printf(out, "%-20s %-12s %-6s %-24s %-10s %s\n", "JOB", "TYPE", "HEALTH",
               "LAST SCRAPE", "DURATION", "URL / ERROR");
    while (hashmap_next(&m->pairs, &pos, &k, &v)) {
        const struct scrape_pair *p = v;
        char ts[64];

        ns_to_rfc3339(p->last_scrape_ns, ts, sizeof(ts));
        buf_printf(out, "%-20s %-12s %-6s %-24s %-10.3f %s%s%s\n", p->job->name,
                   p->tp.profile->name,
                   !p->last_scrape_ns ? "?" : p->last_error ? "down" : "up", ts,
                   (double)p->last_duration_us / 1e6, p->tp.url, p->last_error ? "  " : "",
                   p->last_error ? p->last_error : "");
    }
}

/* The per-(job, type) counters, all plain uint64_t fields of scrape_stats. */
static const struct stats_counter {
    const char *name;
    const char *help;
    size_t offset;
} stats_counters[] = {
    {"proflet_scrapes_total", "Scrapes completed, by job and profile type.",
     offsetof(struct scrape_stats, scrapes)},
    {"proflet_scrape_body_bytes_total", "Bytes of scraped profile bodies.",
     offsetof(struct scrape_stats, body_bytes)},
    {"proflet_scrape_skipped_ticks_total",
     "Ticks skipped because the previous scrape of the pair was still running.",
     offsetof(struct scrape_stats, skipped_ticks)},
    {"proflet_profiles_produced_total", "Profiles handed to the forwarder.",
     offsetof(struct scrape_stats, profiles_out)},
    {"proflet_delta_baselines_total",
     "First profiles of a pair kept as the delta baseline and not sent.",
     offsetof(struct scrape_stats, delta_baselines)},
    {"proflet_delta_resets_total", "Target restarts detected by the delta; that profile is dropped.",
     offsetof(struct scrape_stats, delta_resets)},
};

void scrape_manager_metrics(const struct scrape_manager *m, struct buf *b)
{
    const struct scrape_stats *s;
    size_t pos = 0, delta_bytes = 0;
    uint64_t k;
    void *v;

#define JT(s) ((const char *const[]){ "job", (s)->job, "type", (s)->type, NULL })
    for (size_t i = 0; i < ARRAY_SIZE(stats_counters); i++) {
        const struct stats_counter *c = &stats_counters[i];

        prom_head(b, c->name, "counter", c->help);
        for (s = m->stats; s; s = s->next)
            prom_u64(b, c->name, JT(s), *(const uint64_t *)((const char *)s + c->offset));
    }
    prom_head(b, "proflet_scrape_failures_total", "counter", "Failed scrapes, by reason.");
    for (s = m->stats; s; s = s->next)
        for (int i = 0; i < FAIL_N; i++)
            prom_u64(b, "proflet_scrape_failures_total",
                     (const char *const[]){ "job", s->job, "type", s->type, "reason",
                                            scrape__fail_names[i], NULL },
                     s->failures[i]);
    prom_head(b, "proflet_scrape_duration_seconds", "histogram", "Scrape request duration.");
    for (s = m->stats; s; s = s->next)
        prom_hist(b, "proflet_scrape_duration_seconds", JT(s), &s->duration);
#undef JT
    prom_head(b, "proflet_scrape_start_lateness_seconds", "histogram",
              "How late a scrape tick fired after its planned instant.");
    prom_hist(b, "proflet_scrape_start_lateness_seconds", NULL, &m->lateness);

    while (hashmap_next(&m->pairs, &pos, &k, &v)) {
        const struct scrape_pair *p = v;

        if (p->delta && !p->busy)
            delta_bytes += pprof_delta_mem(p->delta);
    }
    prom_head(b, "proflet_scrape_pairs", "gauge", "Running (target, profile type) pairs.");
    prom_u64(b, "proflet_scrape_pairs", NULL, m->pairs.n);
    prom_head(b, "proflet_scrape_pairs_created_total", "counter",
              "Pairs started (new targets, or targets whose labels or URL changed).");
    prom_u64(b, "proflet_scrape_pairs_created_total", NULL, m->pairs_created);
    prom_head(b, "proflet_scrape_pairs_removed_total", "counter", "Pairs stopped.");
    prom_u64(b, "proflet_scrape_pairs_removed_total", NULL, m->pairs_removed);
    prom_head(b, "proflet_scrape_ownership_changes_total", "counter",
              "Targets this process started (gained) or stopped (lost) scraping because the "
              "owner filter's answer changed (clustering: a peer joined or left).");
    prom_u64(b, "proflet_scrape_ownership_changes_total",
             (const char *const[]){ "direction", "gained", NULL }, m->owner_gained);
    prom_u64(b, "proflet_scrape_ownership_changes_total",
             (const char *const[]){ "direction", "lost", NULL }, m->owner_lost);
    prom_head(b, "proflet_target_errors_total", "counter", "Targets rejected after relabeling.");
    prom_u64(b, "proflet_target_errors_total", NULL, m->target_errors);
    prom_head(b, "proflet_scrape_dropped_targets", "gauge",
              "Targets the relabel rules dropped (the API lists keep-dropped-targets of them).");
    for (const struct scrape_job *j = m->jobs; j; j = j->next)
        prom_u64(b, "proflet_scrape_dropped_targets",
                 (const char *const[]){ "job", j->name, NULL }, j->dropped);
    prom_head(b, "proflet_scrape_dropped_pairs", "gauge",
              "(target, profile type) pairs profile-relabel-configs dropped: never scraped.");
    for (const struct scrape_job *j = m->jobs; j; j = j->next)
        prom_u64(b, "proflet_scrape_dropped_pairs",
                 (const char *const[]){ "job", j->name, NULL }, j->pairs_dropped);
    prom_head(b, "proflet_delta_state_bytes", "gauge", "Memory held by delta state.");
    prom_u64(b, "proflet_delta_state_bytes", NULL, delta_bytes);
}
