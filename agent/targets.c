/* The target manager: turns discovery updates and configs into the set of
 * running scrape pairs.
 *
 * Loop thread only. Each job keeps, per discovery source, the discovered
 * label sets as delivered and the targets built from them. A pair is
 * reference-counted by the sources that yield it: a rebuild first builds the
 * new targets (creating or updating pairs), then releases the old ones, so a
 * pair whose key (public labels + URL) did not change keeps its timer and
 * its delta state across discovery updates and config reloads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "agent/agent.h"

struct agent_cfg *agent__cfg_ref(struct agent_cfg *c)
{
    if (c)
        c->refs++;
    return c;
}

void agent__cfg_unref(struct agent_cfg *c)
{
    if (!c || --c->refs)
        return;
    cfg_free(c->cfg);
    free(c);
}

static uint64_t source_key(const char *s)
{
    return XXH64(s, strlen(s), 0);
}

static void entry_free(struct source_entry *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n; i++) {
        labels_done(&e->discovered[i]);
        if (e->results)
            target_result_done(&e->results[i]);
    }
    free(e->discovered);
    free(e->results);
    free(e->source);
    free(e);
}

/* Builds the targets of `e` under `job` and takes a reference on every pair
 * they yield, creating or updating pairs as needed. */
static void entry_build(struct agent *a, struct scrape_job *job, struct source_entry *e)
{
    e->results = calloc(e->n ? e->n : 1, sizeof(*e->results));
    if (!e->results)
        return;
    for (size_t i = 0; i < e->n; i++) {
        struct target_result *r = &e->results[i];

        if (target_build(job->sc, job->rules, &e->discovered[i], r) < 0) {
            a->target_errors++;
            continue;
        }
        if (r->error) {
            a->target_errors++;
            log_debug("invalid target", "job", job->name, "source", e->source, "err", r->error);
        }
        /* A dry run (`proflet targets`) only reports what the rules built:
         * no pair, so no timer, connection or DNS lookup for a target. */
        if (a->targets_mode)
            continue;
        for (size_t k = 0; k < r->n_pairs; k++) {
            struct target_pair *tp = &r->pairs[k];
            uint64_t key = tp->key;
            struct scrape_pair *p = hashmap_get(&a->pairs, key);

            if (p && p->gen == a->gen) {
                p->refs++; /* the same pair from another target or source */
                continue;
            }
            if (p) {
                agent__pair_update(a, p, job, tp);
                p->refs++;
            } else {
                p = agent__pair_new(a, job, tp);
                if (!p)
                    continue;
            }
            p->gen = a->gen;
            tp->key = key; /* the rest moved into the pair; keep the key for release */
        }
    }
}

/* Drops the references `e`'s targets held; pairs left with none stop. */
static void entry_release(struct agent *a, struct source_entry *e)
{
    if (!e->results)
        return;
    for (size_t i = 0; i < e->n; i++) {
        struct target_result *r = &e->results[i];

        for (size_t k = 0; k < r->n_pairs; k++) {
            struct scrape_pair *p = hashmap_get(&a->pairs, r->pairs[k].key);

            if (p && p->refs && --p->refs == 0)
                agent__pair_remove(a, p);
        }
    }
}

static struct scrape_job *job_find(struct scrape_job *jobs, const char *name)
{
    for (; jobs; jobs = jobs->next)
        if (strcmp(jobs->name, name) == 0)
            return jobs;
    return NULL;
}

static void job_free(struct scrape_job *job)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    if (!job)
        return;
    while (hashmap_next(&job->sources, &pos, &k, &v))
        entry_free(v);
    hashmap_done(&job->sources);
    relabel_rules_free(job->rules);
    agent__cfg_unref(job->acfg);
    free(job->bearer_token);
    free(job->password);
    free(job->name);
    free(job);
}

void agent__free_jobs(struct agent *a)
{
    while (a->jobs) {
        struct scrape_job *next = a->jobs->next;

        job_free(a->jobs);
        a->jobs = next;
    }
}

int agent__apply_config(struct agent *a, struct agent_cfg *acfg, char *err, size_t errlen)
{
    struct scrape_job *jobs = NULL, **tail = &jobs, *old;
    struct cfg *cfg = acfg->cfg;
    int r;

    for (unsigned i = 0; i < cfg->n_scrape; i++) {
        const struct cfg_scrape *sc = &cfg->scrape[i];
        struct scrape_job *job = calloc(1, sizeof(*job));
        char rerr[512];

        if (!job || !(job->name = strdup(sc->job_name))) {
            free(job);
            r = -ENOMEM;
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        *tail = job;
        tail = &job->next;
        hashmap_init(&job->sources);
        job->acfg = agent__cfg_ref(acfg);
        job->sc = sc;
        /* A job without its own scheme inherits the global one. */
        r = relabel_rules_new(sc->relabel, sc->n_relabel,
                              sc->name_validation ? sc->name_validation : cfg->name_validation,
                              &job->rules, rerr, sizeof(rerr));
        if (r < 0) {
            snprintf(err, errlen, "job %s: %s", sc->job_name, rerr);
            goto fail;
        }
    }

    /* Rebuild every known source under the new jobs, then let go of the old. */
    a->gen++;
    for (struct scrape_job *job = jobs; job; job = job->next) {
        size_t pos = 0;
        uint64_t k;
        void *v;

        old = job_find(a->jobs, job->name);
        if (!old)
            continue;
        while (hashmap_next(&old->sources, &pos, &k, &v)) {
            struct source_entry *oe = v, *ne = calloc(1, sizeof(*ne));

            if (!ne)
                continue;
            ne->source = oe->source;
            ne->discovered = oe->discovered;
            ne->n = oe->n;
            oe->source = NULL;
            oe->discovered = NULL;
            entry_build(a, job, ne);
            if (hashmap_put(&job->sources, k, ne) < 0)
                entry_free(ne);
        }
    }
    for (old = a->jobs; old; old = old->next) {
        size_t pos = 0;
        uint64_t k;
        void *v;

        while (hashmap_next(&old->sources, &pos, &k, &v)) {
            struct source_entry *oe = v;

            entry_release(a, oe);
            /* discovered labels moved to the new entry: only results remain */
            if (!oe->discovered) {
                for (size_t i = 0; oe->results && i < oe->n; i++)
                    target_result_done(&oe->results[i]);
                free(oe->results);
                oe->results = NULL;
                oe->n = 0;
            }
        }
    }
    agent__free_jobs(a);
    a->jobs = jobs;
    return 0;
fail:
    while (jobs) {
        struct scrape_job *next = jobs->next;

        job_free(jobs);
        jobs = next;
    }
    return r;
}

void agent__on_discovery(const char *jobname, const struct disc_group *groups, size_t n,
                         void *ud)
{
    struct agent *a = ud;
    struct scrape_job *job = job_find(a->jobs, jobname);

    if (!job || a->stopping)
        return;
    a->gen++;
    for (size_t g = 0; g < n; g++) {
        const struct disc_group *grp = &groups[g];
        uint64_t key = source_key(grp->source);
        struct source_entry *old = hashmap_get(&job->sources, key), *ne = NULL;

        if (grp->n_targets) {
            ne = calloc(1, sizeof(*ne));
            if (!ne)
                continue;
            ne->source = strdup(grp->source);
            ne->discovered = calloc(grp->n_targets, sizeof(*ne->discovered));
            if (!ne->source || !ne->discovered) {
                entry_free(ne);
                continue;
            }
            ne->n = grp->n_targets;
            for (size_t i = 0; i < grp->n_targets; i++)
                labels_copy(&ne->discovered[i], &grp->targets[i]);
            entry_build(a, job, ne);
            if (hashmap_put(&job->sources, key, ne) < 0) {
                entry_release(a, ne);
                entry_free(ne);
                continue;
            }
        } else {
            hashmap_del(&job->sources, key);
        }
        if (old) {
            entry_release(a, old);
            entry_free(old);
        }
    }
    for (int i = 0; i < AGENT_SCRAPE_CLIENTS; i++)
        net_client_set_max_connects(a->scrapers[i], a->pairs.n / AGENT_SCRAPE_CLIENTS * 2 + 64);
}

/* ----------------------------------------------------------------- views */

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
void agent__targets_json(struct agent *a, const char *only_job, bool show_dropped,
                         struct buf *out)
{
    json_object *root = json_object_new_object(), *data = json_object_new_object();
    json_object *active = json_object_new_array(), *dropped = json_object_new_array();

    for (struct scrape_job *job = a->jobs; job; job = job->next) {
        size_t pos = 0;
        uint64_t k;
        void *v;

        if (only_job && strcmp(only_job, job->name) != 0)
            continue;
        while (hashmap_next(&job->sources, &pos, &k, &v)) {
            struct source_entry *e = v;

            for (size_t i = 0; e->results && i < e->n; i++) {
                struct target_result *r = &e->results[i];

                if (r->dropped || (r->error && !r->n_pairs)) {
                    json_object *t = json_object_new_object();

                    if (!show_dropped && !r->error) {
                        json_object_put(t);
                        continue;
                    }
                    json_object_object_add(t, "discoveredLabels", labels_json(&r->discovered));
                    json_object_object_add(t, "scrapePool", json_object_new_string(job->name));
                    if (r->error)
                        json_object_object_add(t, "error", json_object_new_string(r->error));
                    json_object_array_add(dropped, t);
                    continue;
                }
                for (size_t q = 0; q < r->n_pairs; q++) {
                    struct scrape_pair *p = hashmap_get(&a->pairs, r->pairs[q].key);
                    json_object *t;
                    char ts[64];

                    if (!p)
                        continue;
                    t = json_object_new_object();
                    json_object_object_add(t, "discoveredLabels", labels_json(&r->discovered));
                    json_object_object_add(t, "labels", labels_json(&p->tp.labels));
                    json_object_object_add(t, "scrapePool", json_object_new_string(job->name));
                    json_object_object_add(t, "scrapeUrl", json_object_new_string(p->tp.url));
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
            }
        }
    }
    json_object_object_add(root, "status", json_object_new_string("success"));
    json_object_object_add(data, "activeTargets", active);
    json_object_object_add(data, "droppedTargets", dropped);
    json_object_object_add(root, "data", data);
    buf_puts(out, json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
    buf_puts(out, "\n");
    json_object_put(root);
}

/* /targets: the same for people. */
void agent__targets_text(struct agent *a, struct buf *out)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    buf_printf(out, "%-20s %-12s %-6s %-24s %-10s %s\n", "JOB", "TYPE", "HEALTH",
               "LAST SCRAPE", "DURATION", "URL / ERROR");
    while (hashmap_next(&a->pairs, &pos, &k, &v)) {
        struct scrape_pair *p = v;
        char ts[64];

        ns_to_rfc3339(p->last_scrape_ns, ts, sizeof(ts));
        buf_printf(out, "%-20s %-12s %-6s %-24s %-10.3f %s%s%s\n", p->job->name,
                   p->tp.profile->name,
                   !p->last_scrape_ns ? "?" : p->last_error ? "down" : "up", ts,
                   (double)p->last_duration_us / 1e6, p->tp.url, p->last_error ? "  " : "",
                   p->last_error ? p->last_error : "");
    }
}
