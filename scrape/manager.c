/* SPDX-License-Identifier: Apache-2.0 */
/* The scrape manager: turns configurations and discovery updates into the
 * set of running scrape pairs (docs/design.md "The path of a profile").
 *
 * Loop thread only. Each job keeps, per discovery source, a reference to
 * the discovered label sets (discovery's own, not a copy) and what was
 * built from them. A pair is
 * reference-counted by the sources that yield it: a rebuild first builds the
 * new targets (creating or updating pairs), then releases the old ones, so a
 * pair whose key (public labels + URL) did not change keeps its timer and
 * its delta state across discovery updates and config reloads. A dry run
 * (`proflet targets`) builds targets and never a pair. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/clock.h"
#include "common/intern.h"
#include "common/macros.h"
#include "scrape/internal.h"

static uint64_t source_key(const char *s)
{
    return XXH64(s, strlen(s), 0);
}

static void entry_free(struct source_entry *e)
{
    if (!e)
        return;
    for (size_t i = 0; e->results && i < e->n; i++)
        target_result_done(&e->results[i]);
    disc_targets_unref(e->discovered);
    free(e->results);
    free(e->source);
    free(e);
}

/* A source entry for the targets of `grp`, with room for the results of
 * a build done in slices when `pending`; NULL on OOM. */
static struct source_entry *entry_new(const struct disc_group *grp, bool pending)
{
    struct source_entry *e = calloc(1, sizeof(*e));

    if (!e)
        return NULL;
    e->source = strdup(grp->source);
    e->discovered = disc_targets_ref(grp->targets);
    e->n = grp->targets->n;
    if (pending)
        e->results = calloc(e->n ? e->n : 1, sizeof(*e->results));
    if (!e->source || (pending && !e->results)) {
        entry_free(e);
        return NULL;
    }
    return e;
}

/* Asks the owner filter about a built target, by the hash of its final
 * labels (the same on every process with the same configuration). A target
 * owned elsewhere keeps its labels for the API but yields no pair. */
static void apply_owner(struct scrape_manager *m, struct target_result *r)
{
    const char *owner = NULL;
    bool mine = m->owner(labels_hash(&r->labels), &owner, m->owner_ud);

    if (owner)
        r->owner = intern(owner, strlen(owner)); /* only shown: a failed copy shows none */
    if (!mine) {
        r->elsewhere = true;
        r->pairs_dropped = r->pairs_nameless = 0; /* counted by its owner */
        target_pairs_clear(r);
    }
}

/* ------------------------------------------------ sampling and limit
 * target-sampling and target-limit look at all of a job's targets at once:
 * a build asks the job's current choice (apply_selection), and after
 * discovery changes the job chooses again (job_reselect) and rebuilds the
 * sources whose targets changed side. */

static void job_reselect(struct scrape_manager *m, struct scrape_job *job);
static void size_clients(struct scrape_manager *m);
static void pending_rehome(struct scrape_manager *m);
static void pending_restart_all(struct scrape_manager *m);

static bool job_selects(const struct scrape_job *job)
{
    return job->sc->sampling.max_per_group || job->sc->target_limit;
}

static void apply_selection(struct scrape_job *job, struct target_result *r)
{
    r->eligible = true;
    r->id = labels_hash(&r->labels);
    if (job->sc->sampling.max_per_group) {
        r->group = scrape__sample_group(&job->sc->sampling, &r->labels, &r->discovered);
        r->sampled_out = !hashmap_get(&job->chosen, r->id);
    }
    r->over_limit = !r->sampled_out && job->over_limit;
    if (r->sampled_out || r->over_limit) {
        r->pairs_dropped = r->pairs_nameless = 0;
        target_pairs_clear(r);
    }
}

/* Builds the targets of `e` under `job` and takes a reference on every pair
 * they yield, creating or updating pairs as needed. Outside a dry run the
 * labels a result was built with are not kept: the pairs hold what is sent,
 * and what the API shows is rebuilt from the discovered labels. */
static void entry_build_range(struct scrape_manager *m, struct scrape_job *job,
                              struct source_entry *e, size_t from, size_t to)
{
    if (!e->results)
        return;
    for (size_t i = from; i < to; i++) {
        struct target_result *r = &e->results[i];

        if (target_build(job->sc, &e->discovered->t[i], r) < 0 || r->error)
            m->target_errors++;
        if (!m->dry_run && job_selects(job) && !r->dropped && !r->error)
            apply_selection(job, r);
        if (m->owner && r->n_pairs && !r->dropped && !r->error)
            apply_owner(m, r);
        /* A dry run only reports what the rules built: no pair, so no
         * timer, connection or DNS lookup for a target. */
        if (m->dry_run)
            continue;
        labels_done(&r->discovered);
        labels_done(&r->labels);
        job->dropped += r->dropped;
        job->pairs_dropped += r->pairs_dropped;
        job->pairs_nameless += r->pairs_nameless;
        job->elsewhere += r->elsewhere;
        job->sampled_out += r->sampled_out;
        job->kept += r->n_pairs > 0;
        for (size_t k = 0; k < r->n_pairs; k++) {
            struct target_pair *tp = &r->pairs[k];
            uint64_t key = tp->key;
            struct scrape_pair *p = hashmap_get(&m->pairs, key);

            if (p && p->gen == m->gen) {
                p->refs++; /* the same pair from another target or source */
                continue;
            }
            if (p) {
                scrape__pair_update(m, p, job, tp);
                p->refs++;
            } else {
                p = scrape__pair_new(m, job, tp);
                if (!p)
                    continue;
            }
            p->gen = m->gen;
            tp->key = key; /* the rest moved into the pair; keep the key for release */
        }
    }
}

/* Builds all of `e` at once. */
static void entry_build(struct scrape_manager *m, struct scrape_job *job, struct source_entry *e)
{
    e->results = calloc(e->n ? e->n : 1, sizeof(*e->results));
    entry_build_range(m, job, e, 0, e->n);
}

/* Drops the references `e`'s targets held; pairs left with none stop. A
 * results array built only in part holds zeroed results past the part,
 * which hold nothing. */
static void entry_release(struct scrape_manager *m, struct scrape_job *job, struct source_entry *e)
{
    if (!e->results)
        return;
    for (size_t i = 0; i < e->n; i++) {
        struct target_result *r = &e->results[i];

        if (!m->dry_run) {
            job->dropped -= r->dropped;
            job->pairs_dropped -= r->pairs_dropped;
            job->pairs_nameless -= r->pairs_nameless;
            job->elsewhere -= r->elsewhere;
            job->sampled_out -= r->sampled_out;
            job->kept -= r->n_pairs > 0;
        }
        for (size_t k = 0; k < r->n_pairs; k++) {
            struct scrape_pair *p = hashmap_get(&m->pairs, r->pairs[k].key);

            if (p && p->refs && --p->refs == 0)
                scrape__pair_remove(m, p);
        }
    }
}

/* The current job of that name, through the index: a reload and the first
 * discovery sync look up every job, and a walk of the list made them
 * quadratic in the number of jobs. */
static struct scrape_job *job_find(struct scrape_manager *m, const char *name)
{
    struct scrape_job *j = hashmap_get(&m->jobs_by_name, scrape__name_key(name, NULL));

    if (j && strcmp(j->name, name) == 0)
        return j;
    /* Two names of one hash, or an index that missed an insert. */
    if (j || m->jobs_unindexed)
        for (j = m->jobs; j; j = j->next)
            if (strcmp(j->name, name) == 0)
                return j;
    return NULL;
}

/* Makes `jobs` the current jobs and indexes them by name. */
static void set_jobs(struct scrape_manager *m, struct scrape_job *jobs)
{
    hashmap_done(&m->jobs_by_name);
    hashmap_init(&m->jobs_by_name);
    m->jobs = jobs;
    m->jobs_gen++;
    m->jobs_unindexed = false;
    for (struct scrape_job *j = jobs; j; j = j->next) {
        uint64_t key = scrape__name_key(j->name, NULL);

        /* Names are unique; the first of two sharing a hash is indexed. */
        if (!hashmap_get(&m->jobs_by_name, key) && hashmap_put(&m->jobs_by_name, key, j) < 0)
            m->jobs_unindexed = true;
    }
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
    hashmap_done(&job->chosen);
    hashmap_done(&job->pending); /* the builds were cancelled or moved first */
    conf_doc_unref(job->doc);
    net_secret_free(job->bearer);
    net_secret_free(job->password);
    net_auth_free(job->auth);
    free(job->name);
    free(job);
}

static void free_jobs(struct scrape_job *jobs)
{
    while (jobs) {
        struct scrape_job *next = jobs->next;

        job_free(jobs);
        jobs = next;
    }
}

static struct scrape_job *job_new(struct scrape_manager *m, struct conf_doc *doc,
                                  const struct scrape_job_cfg *sc, const struct scrape_settings *s)
{
    const struct net_http_cfg *h = &sc->http;
    struct scrape_job *job = calloc(1, sizeof(*job));

    if (!job || !(job->name = strdup(sc->job_name))) {
        free(job);
        return NULL;
    }
    hashmap_init(&job->sources);
    hashmap_init(&job->chosen);
    hashmap_init(&job->pending);
    job->doc = conf_doc_ref(doc);
    job->sc = sc;
    job->max_body = sc->body_size_limit ? sc->body_size_limit : s->max_body_bytes;
    job->limits = *s->pprof;
    if (!m->dry_run && (h->bearer_token || h->bearer_token_file))
        job->bearer = net_secret_new(m->loop, m->work, h->bearer_token, h->bearer_token_file, 0);
    if (!m->dry_run && h->basic_auth && (h->basic_auth->password || h->basic_auth->password_file))
        job->password = net_secret_new(m->loop, m->work, h->basic_auth->password,
                                       h->basic_auth->password_file, 0);
    if (!m->dry_run && !(job->auth = net_auth_new(m->loop, m->work, h))) {
        job_free(job);
        return NULL;
    }
    return job;
}

/* Whether what was built under `old` stands under `sc`: the same settings,
 * by the signatures taken at load (0 is a signature that was not taken). */
static bool job_unchanged(const struct scrape_manager *m, const struct scrape_job *old,
                          const struct scrape_job_cfg *sc)
{
    return !m->dry_run && (sc->signature[0] || sc->signature[1]) &&
           old->sc->signature[0] == sc->signature[0] && old->sc->signature[1] == sc->signature[1];
}

/* The profile type of `sc` that stands for `prof` of `was`'s settings: the
 * one at the same index when they are the same settings, else by name (a
 * pair two jobs yield, the other of which went away). */
static const struct scrape_profile_cfg *profile_in(const struct scrape_job_cfg *sc,
                                                   const struct scrape_job *was,
                                                   const struct scrape_profile_cfg *prof)
{
    size_t i = (size_t)(prof - was->sc->profiles);

    if (i < was->sc->n_profiles && i < sc->n_profiles &&
        was->sc->signature[0] == sc->signature[0] && was->sc->signature[1] == sc->signature[1])
        return &sc->profiles[i];
    for (i = 0; i < sc->n_profiles; i++)
        if (strcmp(sc->profiles[i].name, prof->name) == 0)
            return &sc->profiles[i];
    return prof; /* cannot be: the job yields this pair, so it has the type */
}

/* Moves what `old` built to `job`, whose settings are the same: its
 * sources, counters and choice, and its pairs, which are re-pointed at the
 * new job and at the same profile type inside the new document. A pair
 * that a build of this apply claimed first stays with that build's job.
 * Nothing is built, so an unchanged job costs a walk of its pairs. */
static void job_adopt(struct scrape_manager *m, struct scrape_job *job, struct scrape_job *old)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    hashmap_done(&job->sources);
    job->sources = old->sources;
    hashmap_init(&old->sources);
    job->dropped = old->dropped;
    job->pairs_dropped = old->pairs_dropped;
    job->pairs_nameless = old->pairs_nameless;
    job->kept = old->kept;
    job->elsewhere = old->elsewhere;
    job->sampled_out = old->sampled_out;
    job->selected = old->selected;
    while (hashmap_next(&job->sources, &pos, &k, &v)) {
        struct source_entry *e = v;

        for (size_t i = 0; e->results && i < e->n; i++) {
            for (size_t q = 0; q < e->results[i].n_pairs; q++) {
                struct scrape_pair *p = hashmap_get(&m->pairs, e->results[i].pairs[q].key);

                if (!p || p->gen == m->gen)
                    continue; /* claimed already by a job of this apply */
                p->tp.profile = profile_in(job->sc, p->job, p->tp.profile);
                p->job = job;
                p->gen = m->gen;
            }
        }
    }
}

int scrape_manager_apply(struct scrape_manager *m, struct conf_doc *doc,
                         const struct scrape_job_cfg *cfgs, size_t n,
                         const struct scrape_settings *s, char *err, size_t errlen)
{
    struct scrape_job *jobs = NULL, **tail = &jobs, *old;

    for (size_t i = 0; i < n; i++) {
        struct scrape_job *job = job_new(m, doc, &cfgs[i], s);

        if (!job) {
            free_jobs(jobs);
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        *tail = job;
        tail = &job->next;
    }

    /* Rebuild every known source under the new jobs (a job whose settings
     * did not change takes the old build as it is), then let go of the old. */
    m->gen++;
    for (struct scrape_job *job = jobs; job; job = job->next) {
        size_t pos = 0;
        uint64_t k;
        void *v;

        old = job_find(m, job->name);
        if (!old)
            continue;
        /* The choice survives a reload: the chosen stay chosen. */
        {
            struct hashmap chosen = job->chosen;

            job->chosen = old->chosen;
            old->chosen = chosen;
        }
        job->over_limit = old->over_limit;
        job->limit_exceeded = old->limit_exceeded;
        if (job_unchanged(m, old, job->sc)) {
            job_adopt(m, job, old);
            continue;
        }
        while (hashmap_next(&old->sources, &pos, &k, &v)) {
            struct source_entry *oe = v, *ne = calloc(1, sizeof(*ne));

            if (!ne)
                continue;
            ne->source = oe->source;
            ne->discovered = disc_targets_ref(oe->discovered);
            ne->n = oe->n;
            oe->source = NULL;
            entry_build(m, job, ne);
            if (hashmap_put(&job->sources, k, ne) < 0)
                entry_free(ne);
        }
    }
    for (old = m->jobs; old; old = old->next) {
        size_t pos = 0;
        uint64_t k;
        void *v;

        while (hashmap_next(&old->sources, &pos, &k, &v))
            entry_release(m, old, v);
    }
    old = m->jobs;
    set_jobs(m, jobs);
    pending_rehome(m);
    free_jobs(old);
    conf_doc_unref(m->doc);
    m->doc = conf_doc_ref(doc);
    for (struct scrape_job *job = m->jobs; job; job = job->next)
        job_reselect(m, job);
    size_clients(m); /* a job may have gone with its pairs */
    return 0;
}

/* Builds every source of `job` again (pairs that stay are found by key and
 * kept), then lets go of what the old builds held; counts the targets whose
 * owner answer flipped. The caller has bumped m->gen. */
static void rebuild_job(struct scrape_manager *m, struct scrape_job *job)
{
    struct source_entry **olds = calloc(job->sources.n ? job->sources.n : 1, sizeof(*olds));
    size_t n = 0, pos = 0;
    uint64_t k;
    void *v;

    if (!olds)
        return;
    while (hashmap_next(&job->sources, &pos, &k, &v))
        olds[n++] = v;
    for (size_t i = 0; i < n; i++) {
        struct source_entry *oe = olds[i], *ne = calloc(1, sizeof(*ne));

        if (!ne || !(ne->source = strdup(oe->source))) {
            free(ne);
            olds[i] = NULL; /* keep the old build in place */
            continue;
        }
        ne->discovered = disc_targets_ref(oe->discovered);
        ne->n = oe->n;
        entry_build(m, job, ne);
        if (hashmap_put(&job->sources, source_key(ne->source), ne) < 0) {
            entry_release(m, job, ne);
            entry_free(ne);
            olds[i] = NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct source_entry *ne =
            olds[i] ? hashmap_get(&job->sources, source_key(olds[i]->source)) : NULL;

        /* The same discovered sets in the same order: result k of the new
         * build is target k of the old one. */
        for (size_t t = 0; ne && ne->results && olds[i]->results && t < ne->n; t++) {
            bool was = olds[i]->results[t].elsewhere, is = ne->results[t].elsewhere;

            m->owner_gained += was && !is && ne->results[t].n_pairs;
            m->owner_lost += !was && is && olds[i]->results[t].n_pairs;
        }
        if (olds[i]) {
            entry_release(m, job, olds[i]);
            entry_free(olds[i]);
        }
    }
    free(olds);
}

void scrape_manager_refilter(struct scrape_manager *m)
{
    if (m->stopping || m->closing)
        return;
    m->gen++;
    pending_restart_all(m);
    for (struct scrape_job *job = m->jobs; job; job = job->next)
        rebuild_job(m, job);
}

/* Chooses the job's targets again (target-sampling, then target-limit) over
 * every source, and rebuilds the job when a target changed side. */
static void job_reselect(struct scrape_manager *m, struct scrape_job *job)
{
    struct scrape_sample_cand *c;
    struct hashmap chosen;
    size_t n = 0, pos = 0, selected = 0;
    bool changed, over;
    uint64_t k;
    void *v;

    if (!job_selects(job) || m->dry_run)
        return;
    while (hashmap_next(&job->sources, &pos, &k, &v)) {
        struct source_entry *e = v;

        for (size_t i = 0; e->results && i < e->n; i++)
            n += e->results[i].eligible;
    }
    if (!(c = calloc(n ? n : 1, sizeof(*c))))
        return;
    n = 0;
    pos = 0;
    while (hashmap_next(&job->sources, &pos, &k, &v)) {
        struct source_entry *e = v;

        for (size_t i = 0; e->results && i < e->n; i++) {
            const struct target_result *r = &e->results[i];

            if (!r->eligible)
                continue;
            c[n].group = r->group;
            c[n].id = r->id;
            c[n].was_chosen = hashmap_get(&job->chosen, r->id) != NULL;
            c[n++].chosen = true;
        }
    }
    if (job->sc->sampling.max_per_group &&
        scrape__sample_choose(c, n, job->sc->sampling.max_per_group) < 0) {
        free(c);
        return;
    }
    hashmap_init(&chosen);
    for (size_t i = 0; i < n; i++) {
        if (!c[i].chosen)
            continue;
        selected++;
        if (job->sc->sampling.max_per_group && hashmap_put(&chosen, c[i].id, (void *)1) < 0) {
            hashmap_done(&chosen);
            free(c);
            return;
        }
    }
    over = job->sc->target_limit && selected > job->sc->target_limit;
    changed = over != job->over_limit || chosen.n != job->chosen.n;
    for (size_t i = 0; !changed && job->sc->sampling.max_per_group && i < n; i++)
        changed = c[i].chosen != c[i].was_chosen;
    free(c);
    job->selected = selected;
    if (!changed) {
        hashmap_done(&chosen);
        return;
    }
    hashmap_done(&job->chosen);
    job->chosen = chosen;
    job->limit_exceeded += over && !job->over_limit;
    job->over_limit = over;
    m->gen++;
    rebuild_job(m, job);
}

void scrape_manager_target_counts(const struct scrape_manager *m, size_t *owned, size_t *elsewhere)
{
    *owned = *elsewhere = 0;
    for (const struct scrape_job *j = m->jobs; j; j = j->next) {
        *owned += j->kept;
        *elsewhere += j->elsewhere;
    }
}

/* ------------------------------------------------ builds in slices
 * A discovery update can bring thousands of targets at once (a group of a
 * large static list, the first sync of thousands of jobs), and building a
 * target costs tens of microseconds of relabeling. Each loop turn builds at
 * most SCRAPE_BUILD_SLICE targets; what is left waits in a FIFO of pending
 * builds that an idle handle works through, one slice per turn.
 *
 * Consistency: a pending build is a new entry under construction, outside
 * the job's sources, so the listings and counts by source see the old
 * entry whole until the new one is complete and swapped in. Its pairs start
 * as its slices are built (as a scrape would start right after a whole
 * build), and the job's counters include the part built. A later update of
 * the same source supersedes a pending build (its part is released), and a
 * reload restarts pending builds under the new jobs. */

/* Targets built per loop turn: about 10 ms of CPU at ~20 us a target. */
#define SCRAPE_BUILD_SLICE 512

struct pending_build {
    struct scrape_job *job;
    uint64_t key;           /* source_key(e->source) */
    struct source_entry *e; /* results allocated, built up to `done` */
    size_t done;
    struct pending_build *prev, *next; /* the manager's FIFO */
};

static void job_after_sync(struct scrape_manager *m, struct scrape_job *job)
{
    job_reselect(m, job);
    size_clients(m);
}

/* Takes `n` targets out of this turn's budget; false if they do not fit.
 * The budget is renewed when the loop's clock has moved (a new turn) and
 * at the start of each idle turn. */
static bool budget_take(struct scrape_manager *m, size_t n)
{
    if (uv_now(m->loop) != m->budget_at) {
        m->budget_at = uv_now(m->loop);
        m->budget = SCRAPE_BUILD_SLICE;
    }
    if (n > m->budget)
        return false;
    m->budget -= n;
    return true;
}

static void pending_unlink(struct scrape_manager *m, struct pending_build *pb)
{
    if (pb->prev)
        pb->prev->next = pb->next;
    else
        m->pend_head = pb->next;
    if (pb->next)
        pb->next->prev = pb->prev;
    else
        m->pend_tail = pb->prev;
    pb->prev = pb->next = NULL;
}

static void pending_append(struct scrape_manager *m, struct pending_build *pb)
{
    pb->next = NULL;
    pb->prev = m->pend_tail;
    if (m->pend_tail)
        m->pend_tail->next = pb;
    else
        m->pend_head = pb;
    m->pend_tail = pb;
}

/* Drops a pending build: the part built lets go of its pairs. */
static void pending_cancel(struct scrape_manager *m, struct pending_build *pb)
{
    hashmap_del(&pb->job->pending, pb->key);
    pending_unlink(m, pb);
    entry_release(m, pb->job, pb->e);
    entry_free(pb->e);
    free(pb);
}

static void on_build_turn(uv_idle_t *h);

/* Queues `e` (owned, results allocated, nothing built) for job; false on
 * OOM, `e` then freed. */
static bool pending_add(struct scrape_manager *m, struct scrape_job *job, uint64_t key,
                        struct source_entry *e)
{
    struct pending_build *pb = calloc(1, sizeof(*pb));

    if (!pb || hashmap_put(&job->pending, key, pb) < 0) {
        free(pb);
        entry_free(e);
        return false;
    }
    pb->job = job;
    pb->key = key;
    pb->e = e;
    pending_append(m, pb);
    uv_idle_start(&m->build_idle, on_build_turn);
    return true;
}

/* Swaps a complete entry in for the source's current one. */
static void entry_install(struct scrape_manager *m, struct scrape_job *job, uint64_t key,
                          struct source_entry *ne)
{
    struct source_entry *old = hashmap_get(&job->sources, key);

    if (hashmap_put(&job->sources, key, ne) < 0) {
        entry_release(m, job, ne);
        entry_free(ne);
        return;
    }
    if (old) {
        entry_release(m, job, old);
        entry_free(old);
    }
}

static void on_build_turn(uv_idle_t *h)
{
    struct scrape_manager *m = h->data;

    m->budget_at = uv_now(m->loop);
    m->budget = SCRAPE_BUILD_SLICE;
    while (m->pend_head && m->budget) {
        struct pending_build *pb = m->pend_head;
        struct scrape_job *job = pb->job;
        size_t to = pb->e->n - pb->done > m->budget ? pb->done + m->budget : pb->e->n;

        m->gen++;
        entry_build_range(m, job, pb->e, pb->done, to);
        m->budget -= to - pb->done;
        pb->done = to;
        if (pb->done < pb->e->n)
            break;
        hashmap_del(&job->pending, pb->key);
        pending_unlink(m, pb);
        entry_install(m, job, pb->key, pb->e);
        free(pb);
        job_after_sync(m, job);
    }
    if (!m->pend_head)
        uv_idle_stop(h);
}

/* Drops every pending build (the manager stops). */
static void pending_cancel_all(struct scrape_manager *m)
{
    while (m->pend_head)
        pending_cancel(m, m->pend_head);
    uv_idle_stop(&m->build_idle);
}

/* After a reload: pending builds start again under the new job of their
 * name (they were built under the old settings), or are dropped with the
 * job. The jobs they stood in are replaced but not yet freed. */
/* Lets go of what a pending build has built so far: it starts again. */
static void pending_restart(struct scrape_manager *m, struct pending_build *pb)
{
    struct source_entry *e = pb->e;

    entry_release(m, pb->job, e);
    for (size_t i = 0; i < pb->done; i++)
        target_result_done(&e->results[i]);
    memset(e->results, 0, pb->done * sizeof(*e->results));
    pb->done = 0;
}

/* The owner filter changed: what pending builds asked it is stale. */
static void pending_restart_all(struct scrape_manager *m)
{
    for (struct pending_build *pb = m->pend_head; pb; pb = pb->next)
        pending_restart(m, pb);
}

static void pending_rehome(struct scrape_manager *m)
{
    struct pending_build *pb = m->pend_head, *next;

    for (; pb; pb = next) {
        struct scrape_job *job = job_find(m, pb->job->name);
        struct source_entry *e = pb->e;

        next = pb->next;
        hashmap_del(&pb->job->pending, pb->key);
        pending_restart(m, pb);
        if (!job || hashmap_put(&job->pending, pb->key, pb) < 0) {
            pending_unlink(m, pb);
            entry_free(e);
            free(pb);
            continue;
        }
        pb->job = job;
    }
}

void scrape_manager_sync(const char *jobname, const struct disc_group *groups, size_t n, void *ud)
{
    struct scrape_manager *m = ud;
    struct scrape_job *job = job_find(m, jobname);
    bool built = false;

    if (!job || m->stopping)
        return;
    m->gen++;
    for (size_t g = 0; g < n; g++) {
        const struct disc_group *grp = &groups[g];
        uint64_t key = source_key(grp->source);
        struct source_entry *old = hashmap_get(&job->sources, key), *ne = NULL;
        struct pending_build *pb = hashmap_get(&job->pending, key);

        if (pb)
            pending_cancel(m, pb); /* superseded */
        if (grp->targets && !m->dry_run && !budget_take(m, grp->targets->n)) {
            if (!(ne = entry_new(grp, true)))
                continue;
            pending_add(m, job, key, ne);
            continue;
        }
        built = true;
        if (grp->targets) {
            if (!(ne = entry_new(grp, false)))
                continue;
            entry_build(m, job, ne);
            if (hashmap_put(&job->sources, key, ne) < 0) {
                entry_release(m, job, ne);
                entry_free(ne);
                continue;
            }
        } else {
            hashmap_del(&job->sources, key);
        }
        if (old) {
            entry_release(m, job, old);
            entry_free(old);
        }
    }
    if (built)
        job_after_sync(m, job);
}

/* ------------------------------------------------------------ lifecycle */

/* Each client's keep-alive cache holds as many connections as the client
 * has pairs, plus a few. libcurl closes the connection idle the longest
 * once its cache is over that size, and a target that left (a deleted pod,
 * whose IP:port will not come back) is never asked again, so its connection
 * is the first to go, at the client's next completed transfer. A large
 * floor would keep, under pod churn, an idle connection (an fd, a poll
 * handle and libcurl's state) to nearly every departed target, since
 * libcurl's maximum idle age (118 s) outlasts many pods. */
static void size_clients(struct scrape_manager *m)
{
    for (int i = 0; i < SCRAPE_CLIENTS; i++) {
        if (m->clients[i])
            net_client_set_max_connects(m->clients[i], m->client_pairs[i] + SCRAPE_SPARE_CONNECTS);
    }
}

static int curl_start(void *ctx, const struct net_request_opts *o, net_done_cb cb, void *ud,
                      struct net_request **out)
{
    struct scrape_manager *m = ctx;

    return net_request_start(m->clients[scrape__client_of(o->url)], o, cb, ud, out);
}

static void curl_cancel(void *ctx, struct net_request *r)
{
    (void)ctx;
    net_request_cancel(r);
}

static size_t curl_inflight(void *ctx)
{
    struct scrape_manager *m = ctx;
    size_t n = 0;

    for (int i = 0; i < SCRAPE_CLIENTS; i++)
        n += m->clients[i] ? net_client_inflight(m->clients[i]) : 0;
    return n;
}

static void maybe_closed(struct scrape_manager *m)
{
    void (*cb)(void *ud);
    void *ud;

    if (!m->closing || m->pending_closes || m->live_pairs)
        return;
    free_jobs(m->jobs);
    hashmap_done(&m->jobs_by_name);
    conf_doc_unref(m->doc);
    hashmap_done(&m->pairs);
    hashmap_done(&m->stats_by_name);
    while (m->stats) {
        struct scrape_stats *next = m->stats->next;

        free(m->stats->job);
        free(m->stats->type);
        free(m->stats);
        m->stats = next;
    }
    cb = m->close_cb;
    ud = m->close_ud;
    free(m);
    if (cb)
        cb(ud);
}

static void pair_freed(struct scrape_manager *m)
{
    maybe_closed(m);
}

static void client_closed(void *ud)
{
    struct scrape_manager *m = ud;

    m->pending_closes--;
    maybe_closed(m);
}

static void idle_closed(uv_handle_t *h)
{
    client_closed(h->data);
}

static uint64_t wall_ns(void)
{
    return clock_wall_ns();
}

int scrape_manager_new(const struct scrape_manager_opts *o, struct scrape_manager **out, char *err,
                       size_t errlen)
{
    struct scrape_manager *m = calloc(1, sizeof(*m));
    int rc;

    *out = NULL;
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    m->loop = o->loop;
    m->work = o->work;
    m->dry_run = o->dry_run;
    m->offset_seed = o->offset_seed;
    m->on_profile = o->on_profile;
    m->on_pair_gone = o->on_pair_gone;
    m->on_error = o->on_error;
    m->ud = o->ud;
    m->now_ns = o->now_ns ? o->now_ns : wall_ns;
    m->owner = o->owner;
    m->owner_ud = o->owner_ud;
    m->pair_freed = pair_freed;
    hashmap_init(&m->pairs);
    hashmap_init(&m->jobs_by_name);
    hashmap_init(&m->stats_by_name);
    uv_idle_init(m->loop, &m->build_idle);
    m->build_idle.data = m;
    prom_hist_init(&m->lateness, prom_latency_bounds, ARRAY_SIZE(prom_latency_bounds));
    if (o->transport) {
        m->transport = *o->transport;
        *out = m;
        return 0;
    }
    m->transport = (struct scrape_transport){ curl_start, curl_cancel, curl_inflight, m };
    for (int i = 0; i < SCRAPE_CLIENTS && !m->dry_run; i++) {
        rc = net_client_new(&(struct net_client_opts){ .loop = m->loop, .max_connects = 1024 },
                            &m->clients[i], err, errlen);
        if (rc < 0) {
            m->closing = true;
            scrape_manager_close(m, NULL, NULL);
            return rc;
        }
    }
    *out = m;
    return 0;
}

void scrape_manager_stop(struct scrape_manager *m)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    m->stopping = true;
    pending_cancel_all(m);
    while (hashmap_next(&m->pairs, &pos, &k, &v))
        uv_timer_stop(&((struct scrape_pair *)v)->timer);
}

size_t scrape_manager_busy(const struct scrape_manager *m)
{
    size_t pos = 0, n = m->transport.inflight(m->transport.ctx);
    uint64_t k;
    void *v;

    while (hashmap_next(&m->pairs, &pos, &k, &v))
        n += ((struct scrape_pair *)v)->busy;
    return n;
}

void scrape_manager_close(struct scrape_manager *m, void (*cb)(void *ud), void *ud)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    m->stopping = true;
    m->closing = true;
    m->close_cb = cb;
    m->close_ud = ud;
    pending_cancel_all(m);
    while (hashmap_next(&m->pairs, &pos, &k, &v))
        scrape__pair_remove(m, v);
    m->pending_closes++; /* held while the clients' closes are started */
    m->pending_closes++;
    uv_close((uv_handle_t *)&m->build_idle, idle_closed);
    for (int i = 0; i < SCRAPE_CLIENTS; i++) {
        if (m->clients[i]) {
            m->pending_closes++;
            net_client_close(m->clients[i], client_closed, m);
            m->clients[i] = NULL;
        }
    }
    client_closed(m);
}
