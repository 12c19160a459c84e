/* SPDX-License-Identifier: Apache-2.0 */
/* What the scrape manager reports: the targets as `proflet targets` prints
 * them (promtool's shape), /api/v1/targets (Prometheus' API shape), the text
 * table of /targets, and the scrape metrics (docs/design.md "Modules"). Loop
 * thread only; everything is read from the manager's state. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <xxhash.h>

#include "common/macros.h"
#include "common/utf8.h"
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

static json_object *jstr(const char *s)
{
    return scrape__json_string(s, s ? strlen(s) : 0);
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

/* /api/v1/targets, shaped like Prometheus' API, in parts. The iterator
 * walks the jobs twice (active targets, then dropped ones), then writes
 * the dropped counts. Its position is (job ordinal and name, source slot
 * and key, target index): all re-checked at each part, so a reload or a
 * discovery update between parts moves it on, never through a stale
 * pointer. */
enum iter_phase { IT_START, IT_ACTIVE, IT_DROPPED, IT_COUNTS, IT_DONE };

struct scrape_targets_iter {
    const struct scrape_manager *m;
    char *only_job;
    enum iter_phase phase;
    size_t job_idx;              /* ordinal in m->jobs */
    const struct scrape_job *at; /* the job at ordinal at_idx when m->jobs_gen was at_gen */
    size_t at_idx;
    uint64_t at_gen;
    char *job_name;        /* the job at job_idx when last seen, or NULL */
    size_t slot;           /* sources slot of the current source */
    uint64_t source_key;   /* its key, 0 before the first */
    size_t target;         /* next target of the source */
    size_t listed_dropped; /* dropped targets listed for the job so far */
    bool first;            /* no element written in the current array */
};

/* Appends one array element (a comma before all but the first) and
 * frees it. */
static int put_elem(struct buf *out, json_object *o, bool *first)
{
    int rc = buf_puts(out, *first ? "" : ",");

    *first = false;
    if (rc == 0)
        rc = buf_puts(out, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return rc;
}

/* Calls `fn` for the views of one target: one per pair when `active`, else
 * its one dropped view. Returns what `fn` last returned. */
static int visit_target(const struct scrape_manager *m, const struct scrape_job *job,
                        struct source_entry *e, size_t i, bool active, scrape_target_fn fn,
                        void *ud)
{
    struct target_result *r = &e->results[i];
    struct scrape_target_view t = { 0 };
    struct labels disc = LABELS_INIT;
    char why[300] = "";
    int rc = 0;

    target_discovered(job->sc, &e->discovered->t[i], &disc);
    t.job = job->name;
    t.discovered = &disc;
    t.owner = r->owner;
    if (!active) {
        t.error = r->error;
        if (r->elsewhere)
            snprintf(why, sizeof(why), "owned by %s", r->owner ? r->owner : "no live peer yet");
        else if (r->sampled_out)
            snprintf(why, sizeof(why), "not sampled: %u targets of its group are scraped",
                     job->sc->sampling.max_per_group);
        else if (r->over_limit)
            snprintf(why, sizeof(why), "target-limit exceeded: %zu targets, limit %u",
                     job->selected, job->sc->target_limit);
        else if (r->dropped)
            snprintf(why, sizeof(why), "dropped by relabeling");
        t.drop_reason = why[0] ? why : NULL;
        rc = fn(&t, ud);
        labels_done(&disc);
        return rc;
    }
    /* A target's views go in one part: "enough" is kept for after the last. */
    for (size_t q = 0; rc >= 0 && q < r->n_pairs; q++) {
        const struct scrape_pair *p = hashmap_get(&m->pairs, r->pairs[q].key);
        int got;

        if (!p)
            continue;
        t.labels = &p->tp.labels;
        t.url = p->tp.url;
        t.profile_type = p->tp.profile->name;
        t.last_error = p->last_error;
        t.last_scrape_ns = p->last_scrape_ns;
        t.last_duration_us = p->last_duration_us;
        t.interval_ms = p->tp.interval_ms;
        t.pair_key = p->key;
        got = fn(&t, ud);
        rc = got < 0 ? got : rc | got;
    }
    labels_done(&disc);
    return rc;
}

/* The JSON visitor of /api/v1/targets: one array element per view. */
struct json_out {
    struct buf *out;
    bool *first;
    size_t chunk;
};

static int json_view(const struct scrape_target_view *v, void *ud)
{
    struct json_out *jo = ud;
    json_object *t = json_object_new_object();
    char ts[64];
    int rc;

    json_object_object_add(t, "discoveredLabels", scrape__labels_json(v->discovered));
    if (v->labels)
        json_object_object_add(t, "labels", scrape__labels_json(v->labels));
    json_object_object_add(t, "scrapePool", jstr(v->job));
    if (!v->labels) {
        if (v->error)
            json_object_object_add(t, "error", jstr(v->error));
        if (v->drop_reason && strncmp(v->drop_reason, "dropped by", 10) != 0)
            json_object_object_add(t, "dropReason", jstr(v->drop_reason));
        if (v->drop_reason && strncmp(v->drop_reason, "owned by", 8) == 0)
            json_object_object_add(t, "owner", jstr(v->owner ? v->owner : ""));
    } else {
        json_object_object_add(t, "scrapeUrl", jstr(v->url));
        if (v->owner)
            json_object_object_add(t, "owner", jstr(v->owner));
        json_object_object_add(t, "profileType", jstr(v->profile_type));
        json_object_object_add(t, "lastError", jstr(v->last_error ? v->last_error : ""));
        ns_to_rfc3339(v->last_scrape_ns, ts, sizeof(ts));
        json_object_object_add(t, "lastScrape", jstr(ts));
        json_object_object_add(t, "lastScrapeDuration",
                               json_object_new_double((double)v->last_duration_us / 1e6));
        json_object_object_add(t, "health", jstr(scrape_target_health(v)));
        json_object_object_add(t, "scrapeInterval", json_object_new_int64((int64_t)v->interval_ms));
    }
    rc = put_elem(jo->out, t, jo->first);
    if (rc < 0)
        return rc;
    return jo->out->len >= jo->chunk;
}

const char *scrape_target_health(const struct scrape_target_view *v)
{
    return !v->last_scrape_ns ? "unknown" : v->last_error ? "down" : "up";
}

/* The job the iterator stands at, re-found by name if jobs came or went;
 * NULL past the last. */
static const struct scrape_job *iter_job(struct scrape_targets_iter *it)
{
    const struct scrape_job *j = it->m->jobs;
    size_t n = 0;

    /* From where the last call stood while the list is the same one: a
     * walk from the head for every job made a listing of thousands of jobs
     * quadratic, and it runs on the loop. */
    if (it->at && it->at_gen == it->m->jobs_gen && it->at_idx <= it->job_idx) {
        j = it->at;
        n = it->at_idx;
    }
    for (; j && n < it->job_idx; j = j->next)
        n++;
    it->at = j;
    it->at_idx = n;
    it->at_gen = it->m->jobs_gen;
    if (j && it->job_name && strcmp(j->name, it->job_name) != 0) {
        size_t k = 0;

        for (const struct scrape_job *x = it->m->jobs; x; x = x->next, k++) {
            if (strcmp(x->name, it->job_name) == 0) {
                it->job_idx = k;
                return x;
            }
        }
        /* Gone: the job now at this place starts from its beginning. */
        free(it->job_name);
        it->job_name = NULL;
        it->slot = 0;
        it->source_key = 0;
        it->target = 0;
        it->listed_dropped = 0;
    }
    return j;
}

static int iter_next_job(struct scrape_targets_iter *it)
{
    free(it->job_name);
    it->job_name = NULL;
    it->job_idx++;
    it->slot = 0;
    it->source_key = 0;
    it->target = 0;
    it->listed_dropped = 0;
    return 0;
}

/* Visits targets of the current phase until `fn` returns 1 (enough for this
 * part); `*over` when the phase is done. */
static int iter_targets(struct scrape_targets_iter *it, scrape_target_fn fn, void *ud, bool *over)
{
    bool active = it->phase == IT_ACTIVE;
    const struct scrape_job *job;

    *over = false;
    while ((job = iter_job(it)) != NULL) {
        size_t pos = it->slot;
        uint64_t k;
        void *v;

        if (it->only_job && strcmp(it->only_job, job->name) != 0) {
            iter_next_job(it);
            continue;
        }
        if (!it->job_name && !(it->job_name = strdup(job->name)))
            return -ENOMEM;
        while (hashmap_next(&job->sources, &pos, &k, &v)) {
            struct source_entry *e = v;

            if (k != it->source_key) { /* a new source, or ours went away */
                it->source_key = k;
                it->target = 0;
            }
            it->slot = pos - 1;
            while (e->results && it->target < e->n) {
                struct target_result *r = &e->results[it->target];
                bool listed_as_dropped = r->dropped || r->elsewhere || r->sampled_out ||
                                         r->over_limit || (r->error && !r->n_pairs);
                int rc = 0;

                if (active && !listed_as_dropped) {
                    rc = visit_target(it->m, job, e, it->target, true, fn, ud);
                } else if (!active && listed_as_dropped &&
                           !((r->dropped || r->elsewhere || r->sampled_out) &&
                             job->sc->keep_dropped_targets &&
                             ++it->listed_dropped > job->sc->keep_dropped_targets)) {
                    rc = visit_target(it->m, job, e, it->target, false, fn, ud);
                }
                it->target++;
                if (rc < 0)
                    return rc;
                if (rc > 0)
                    return 0;
            }
            it->target = SIZE_MAX; /* this source is done */
        }
        iter_next_job(it);
    }
    *over = true;
    return 0;
}

int scrape_targets_iter_visit(struct scrape_targets_iter *it, bool dropped, scrape_target_fn fn,
                              void *ud)
{
    bool over = false;
    int rc;

    if (it->phase == IT_START)
        it->phase = dropped ? IT_DROPPED : IT_ACTIVE;
    if (it->phase == IT_DONE)
        return 0;
    rc = iter_targets(it, fn, ud, &over);
    if (rc < 0)
        return rc;
    if (over)
        it->phase = IT_DONE;
    return over ? 0 : 1;
}

struct scrape_targets_iter *scrape_targets_iter_new(const struct scrape_manager *m, const char *job)
{
    struct scrape_targets_iter *it = calloc(1, sizeof(*it));

    if (!it)
        return NULL;
    it->m = m;
    if (job && !(it->only_job = strdup(job))) {
        free(it);
        return NULL;
    }
    return it;
}

int scrape_targets_iter_next(struct scrape_targets_iter *it, struct buf *out, size_t chunk)
{
    bool over;
    int rc = 0;

    while (rc == 0 && it->phase != IT_DONE && out->len < chunk) {
        switch (it->phase) {
        case IT_START:
            rc = buf_puts(out, "{\"status\":\"success\",\"data\":{\"activeTargets\":[");
            it->phase = IT_ACTIVE;
            it->first = true;
            break;
        case IT_ACTIVE:
        case IT_DROPPED: {
            struct json_out jo = { out, &it->first, chunk };

            rc = iter_targets(it, json_view, &jo, &over);
            if (rc < 0 || !over)
                break;
            rc = buf_puts(out, it->phase == IT_ACTIVE ? "],\"droppedTargets\":["
                                                      : "],\"droppedTargetCounts\":{");
            it->phase = it->phase == IT_ACTIVE ? IT_DROPPED : IT_COUNTS;
            it->first = true;
            it->job_idx = 0;
            break;
        }
        case IT_COUNTS: {
            /* Prometheus' droppedTargetCounts: every dropped target counts,
             * whether or not its labels were kept. */
            json_object *counts = json_object_new_object();
            const char *s;

            for (const struct scrape_job *j = it->m->jobs; j; j = j->next)
                if (!it->only_job || strcmp(it->only_job, j->name) == 0)
                    scrape__json_add(counts, j->name, json_object_new_int64((int64_t)j->dropped));
            s = json_object_to_json_string_ext(counts, JSON_C_TO_STRING_PLAIN);
            /* the object without its braces: they are ours */
            rc = buf_append(out, s + 1, strlen(s) - 2);
            json_object_put(counts);
            if (rc == 0)
                rc = buf_puts(out, "}}}\n");
            it->phase = IT_DONE;
            break;
        }
        case IT_DONE:
            break;
        }
    }
    if (rc < 0)
        return rc == -ENOMEM ? -ENOMEM : -E2BIG;
    return it->phase == IT_DONE ? 0 : 1;
}

void scrape_targets_iter_free(struct scrape_targets_iter *it)
{
    if (!it)
        return;
    free(it->only_job);
    free(it->job_name);
    free(it);
}

/* One field of the text table: what a target sent (its URL from its
 * labels, its error) is written visibly, so one pair is one line. */
static void text_field(struct buf *out, const char *s, int width)
{
    size_t before = out->len, n;

    utf8_append_visible(out, s ? s : "", s ? strlen(s) : 0);
    for (n = out->len - before; (int)n < width; n++)
        buf_puts(out, " ");
}

/* /targets?format=text: the same for people. */
void scrape_manager_targets_text(const struct scrape_manager *m, struct buf *out)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    buf_printf(out, "%-20s %-12s %-6s %-24s %-10s %s\n", "JOB", "TYPE", "HEALTH", "LAST SCRAPE",
               "DURATION", "URL / ERROR");
    while (hashmap_next(&m->pairs, &pos, &k, &v)) {
        const struct scrape_pair *p = v;
        char ts[64];

        ns_to_rfc3339(p->last_scrape_ns, ts, sizeof(ts));
        text_field(out, p->job->name, 20);
        buf_puts(out, " ");
        text_field(out, p->tp.profile->name, 12);
        buf_printf(out, " %-6s %-24s %-10.3f ",
                   !p->last_scrape_ns ? "?"
                   : p->last_error    ? "down"
                                      : "up",
                   ts, (double)p->last_duration_us / 1e6);
        text_field(out, p->tp.url, 0);
        if (p->last_error) {
            buf_puts(out, "  ");
            text_field(out, p->last_error, 0);
        }
        buf_puts(out, "\n");
    }
}

uint64_t scrape__name_key(const char *a, const char *b)
{
    uint64_t h = XXH64(a, strlen(a), 0);

    return b ? XXH64(b, strlen(b), h) : h;
}

/* Found through an index, since every pair of a reload asks: a walk of the
 * list made a reload of thousands of jobs quadratic. The list stays, in
 * creation order, for the metrics. */
struct scrape_stats *scrape__stats_for(struct scrape_manager *m, const char *job, const char *type)
{
    uint64_t key = scrape__name_key(job, type);
    struct scrape_stats *s = hashmap_get(&m->stats_by_name, key);

    if (s && strcmp(s->job, job) == 0 && strcmp(s->type, type) == 0)
        return s;
    /* Two names of one hash, or an index that missed an insert: the list
     * holds them all. */
    if (s || m->stats_unindexed)
        for (s = m->stats; s; s = s->next)
            if (strcmp(s->job, job) == 0 && strcmp(s->type, type) == 0)
                return s;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->job = strdup(job);
    s->type = strdup(type);
    if (!s->job || !s->type) {
        free(s->job);
        free(s->type);
        free(s);
        return NULL;
    }
    prom_hist_init(&s->duration, prom_latency_bounds, ARRAY_SIZE(prom_latency_bounds));
    s->next = m->stats;
    m->stats = s;
    if (!hashmap_get(&m->stats_by_name, key) && hashmap_put(&m->stats_by_name, key, s) < 0)
        m->stats_unindexed = true;
    return s;
}

/* The scrape metrics are families of three shapes: one series per (job,
 * type), read from its scrape_stats (walked from the newest: counters are
 * added at the head of a list nothing removes from while the manager lives,
 * so a cursor into it stays valid and never meets an entry twice), the
 * manager's own figures, and one series per job (the jobs list is replaced
 * by a reload: a cursor into it is good only while m->jobs_gen stands). */
#define U64(name, help, field) PROM_FAMILY_U64(name, "counter", help, struct scrape_stats, field)

static const struct prom_family stats_families[] = {
    U64("proflet_scrapes_total", "Scrapes completed, by job and profile type.", scrapes),
    U64("proflet_scrape_body_bytes_total", "Bytes of scraped profile bodies.", body_bytes),
    U64("proflet_scrape_skipped_ticks_total",
        "Ticks skipped because the previous scrape of the pair was still running.", skipped_ticks),
    U64("proflet_profiles_produced_total", "Profiles handed to the forwarder.", profiles_out),
    U64("proflet_delta_baselines_total",
        "First profiles of a pair kept as the delta baseline and not sent.", delta_baselines),
    U64("proflet_delta_resets_total",
        "Target restarts detected by the delta; that profile is dropped.", delta_resets),
    PROM_FAMILY_U64_BY("proflet_scrape_failures_total", "counter", "Failed scrapes, by reason.",
                       struct scrape_stats, failures, "reason", scrape__fail_names),
    PROM_FAMILY_HIST("proflet_scrape_duration_seconds", "Scrape request duration.",
                     struct scrape_stats, duration),
};

#undef U64

/* The manager's own figures, taken when they are written. */
struct global_figures {
    struct prom_hist lateness;
    uint64_t pairs, pairs_created, pairs_removed, ownership_changes[2], target_errors;
    uint64_t delta_state_bytes;
};

static const char *const directions[] = { "gained", "lost" };

#define U64(name, type, help, field) PROM_FAMILY_U64(name, type, help, struct global_figures, field)

static const struct prom_family global_families[] = {
    PROM_FAMILY_HIST("proflet_scrape_start_lateness_seconds",
                     "How late a scrape tick fired after its planned instant.",
                     struct global_figures, lateness),
    U64("proflet_scrape_pairs", "gauge", "Running (target, profile type) pairs.", pairs),
    U64("proflet_scrape_pairs_created_total", "counter",
        "Pairs started (new targets, or targets whose labels or URL changed).", pairs_created),
    U64("proflet_scrape_pairs_removed_total", "counter", "Pairs stopped.", pairs_removed),
    PROM_FAMILY_U64_BY("proflet_scrape_ownership_changes_total", "counter",
                       "Targets this process started (gained) or stopped (lost) scraping because "
                       "the owner filter's answer changed (clustering: a peer joined or left).",
                       struct global_figures, ownership_changes, "direction", directions),
    U64("proflet_target_errors_total", "counter", "Targets rejected after relabeling.",
        target_errors),
    U64("proflet_delta_state_bytes", "gauge", "Memory held by delta state.", delta_state_bytes),
};

#undef U64

/* A job's figures, taken when its series is written. */
struct job_figures {
    uint64_t dropped, sampled_out, over_limit, limit_exceeded;
    uint64_t pairs_dropped[2]; /* by a drop, by removing __name__ */
};

static const char *const pair_drop_reasons[] = { "drop", "no_name" };

#define U64(name, type, help, field) PROM_FAMILY_U64(name, type, help, struct job_figures, field)

static const struct prom_family job_families[] = {
    U64("proflet_scrape_dropped_targets", "gauge",
        "Targets the relabel rules dropped (the API lists keep-dropped-targets of them).", dropped),
    U64("proflet_scrape_sampled_out_targets", "gauge",
        "Targets target-sampling leaves out (listed as dropped).", sampled_out),
    U64("proflet_scrape_target_limit_exceeded", "gauge",
        "1 while a job has more targets than its target-limit: none is scraped.", over_limit),
    U64("proflet_scrape_target_limit_exceeded_total", "counter",
        "Times a job went over its target-limit.", limit_exceeded),
    PROM_FAMILY_U64_BY("proflet_scrape_dropped_pairs", "gauge",
                       "(target, profile type) pairs profile-relabel-configs dropped, never "
                       "scraped: by a drop (reason=\"drop\") or by removing __name__ "
                       "(reason=\"no_name\").",
                       struct job_figures, pairs_dropped, "reason", pair_drop_reasons),
};

#undef U64

enum {
    FAM_GLOBAL = ARRAY_SIZE(stats_families),
    FAM_JOBS,
    FAM_END = FAM_JOBS + ARRAY_SIZE(job_families),
};

static void job_series(const struct prom_family *fam, const struct scrape_job *j, struct buf *b)
{
    const struct job_figures f = {
        .dropped = j->dropped,
        .sampled_out = j->sampled_out,
        .over_limit = j->over_limit,
        .limit_exceeded = j->limit_exceeded,
        .pairs_dropped = { j->pairs_dropped - j->pairs_nameless, j->pairs_nameless },
    };

    prom_family_series(b, fam, &f, (const char *const[]){ "job", j->name, NULL });
}

static void global_metrics(const struct scrape_manager *m, struct buf *b)
{
    struct global_figures f = {
        .lateness = m->lateness,
        .pairs = m->pairs.n,
        .pairs_created = m->pairs_created,
        .pairs_removed = m->pairs_removed,
        .ownership_changes = { m->owner_gained, m->owner_lost },
        .target_errors = m->target_errors,
    };
    size_t pos = 0;
    uint64_t k;
    void *v;

    while (hashmap_next(&m->pairs, &pos, &k, &v)) {
        const struct scrape_pair *p = v;

        if (p->delta && !p->busy)
            f.delta_state_bytes += pprof_delta_mem(p->delta);
    }
    prom_families(b, global_families, ARRAY_SIZE(global_families), &f, NULL);
}

int scrape_manager_metrics_next(const struct scrape_manager *m, struct scrape_metrics_cursor *c,
                                struct buf *b, size_t chunk)
{
    while (c->family < FAM_END && b->len < chunk) {
        unsigned fam = c->family;
        const struct prom_family *pf;

        if (fam == FAM_GLOBAL) {
            global_metrics(m, b);
            c->family++;
            continue;
        }
        pf = fam < FAM_GLOBAL ? &stats_families[fam] : &job_families[fam - FAM_JOBS];
        if (!c->started) {
            c->started = true;
            c->gen = m->jobs_gen;
            c->at = fam < FAM_GLOBAL ? (const void *)m->stats : (const void *)m->jobs;
            prom_family_head(b, pf);
        }
        /* A reload replaced the jobs mid-family: this answer ends the family
         * where it stood rather than list a job twice. */
        if (fam > FAM_GLOBAL && c->gen != m->jobs_gen)
            c->at = NULL;
        while (c->at && b->len < chunk) {
            if (fam < FAM_GLOBAL) {
                const struct scrape_stats *s = c->at;

                prom_family_series(b, pf, s,
                                   (const char *const[]){ "job", s->job, "type", s->type, NULL });
                c->at = s->next;
            } else {
                const struct scrape_job *j = c->at;

                job_series(pf, j, b);
                c->at = j->next;
            }
        }
        if (!c->at) {
            c->family++;
            c->started = false;
        }
    }
    return c->family < FAM_END;
}

void scrape_manager_metrics(const struct scrape_manager *m, struct buf *b)
{
    struct scrape_metrics_cursor c = { 0 };

    while (scrape_manager_metrics_next(m, &c, b, SIZE_MAX) > 0)
        ;
}
