/* SPDX-License-Identifier: Apache-2.0 */
/* The discovery manager: runs the providers a config asks for, keeps what
 * each provider currently sees by source and hands every job the groups
 * that changed for it (docs/design.md "The path of a profile").
 *
 * Sharing: as Prometheus' discovery manager does, providers whose settings
 * are the same run once. A provider kind with a `signature` op (kubernetes,
 * file) is keyed by that signature: every job (and every piece of a job)
 * whose settings give the same signature subscribes to one provider, so the
 * Helm chart's one-job-per-profile-type layout costs one list+watch, not one
 * per job. Kinds without it (static) are per job and compared with `same`.
 * A provider runs while at least one job subscribes to it; an apply that
 * leaves it without subscribers stops it.
 *
 * State: a provider's targets live once, in its own source table (source ->
 * targets). A job keeps only the set of its sources that changed since the
 * last delivery; at delivery the group of a source is built from the tables
 * of the providers the job subscribes to (their concatenation, so a pod seen
 * by two different kubernetes_sd pieces of a job appears twice, as in
 * Prometheus). Subscribing or unsubscribing marks every source of the
 * provider dirty in that job, so a new job receives the current groups and
 * a job that goes away gets an empty group for each of its sources.
 *
 * Threading: loop thread only. Every provider emits through disc__emit(),
 * which only records the change and arms one coalescing timer; the update
 * callback therefore never runs from inside disc_manager_apply() or from
 * inside a provider callback, only from that timer. Updates are delivered at
 * once when the last delivery is at least `coalesce_ms` old, else when that
 * much time has passed since it, so a change waits at most `coalesce_ms`.
 *
 * Ownership: the manager owns the providers, their source tables, the jobs
 * and the per-(job, provider kind) counters, which outlive providers so that
 * counters stay monotonic. Teardown is two-phase: disc_manager_close()
 * closes the providers and the timer and frees the manager when the last
 * close callback has run. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/macros.h"
#include "common/promtext.h"
#include "common/strtab.h"
#include "discovery/internal.h"

/* One source of a provider: what the provider sees there now (never empty). */
struct psrc {
    struct strtab_node node; /* first */
    struct disc_targets *d;
};

/* One changed source of a job, waiting for delivery. */
struct dsrc {
    struct strtab_node node; /* first */
    struct dsrc *dnext;
};

/* A provider's own table; the base struct only knows it by name. */
struct disc__srctab {
    struct strtab t;
};

/* Job j receives provider p's groups. Linked in both p's and j's lists. */
struct disc__sub {
    struct disc__provider *p;
    struct disc__job *job;
    struct disc__stats *stats; /* (job, provider kind) counters */
    bool mark;                 /* wanted by the config being applied */
    bool fresh;                /* made by the apply in progress: undone if it fails */
    struct disc__sub *pnext;   /* next job of p */
    struct disc__sub *jnext;   /* next provider of the job, in subscription order */
};

/* The providers of one kind and one key (the settings signature of a
 * shareable kind, else the job's name), so an apply finds a job's provider
 * without a walk of all of them. */
struct disc__pbucket {
    struct strtab_node node; /* first; the name is "kind\x1fkey" */
    struct disc__provider *head;
};

struct disc__job {
    char *name;
    struct strtab_node tnode; /* in the manager's index of jobs (name borrowed) */
    struct disc__sub *subs;
    struct strtab dirty_set;
    struct dsrc *dirty; /* the same entries, as a list */
    size_t n_dirty;
    bool listed_dirty;
    struct disc__job *next;
    struct disc__job *dnext;
};

struct disc_manager {
    uv_loop_t *loop;
    struct net_client *http;
    struct workq *work;
    uint64_t coalesce_ms;
    disc_update_cb cb;
    void *ud;
    disc_error_cb err_cb;
    void *err_ud;
    char last_error[512];
    uv_timer_t timer;
    uint64_t last_delivery;
    bool delivered_once;
    bool applied;
    bool ready;
    bool in_callback;
    bool closing;
    unsigned pending_closes;
    void (*close_cb)(void *ud);
    void *close_ud;
    struct disc__job *jobs;
    struct strtab jobs_idx; /* the jobs by name */
    struct disc__job *dirty_jobs;
    struct disc__provider *providers;
    struct strtab providers_idx; /* struct disc__pbucket by kind and key */
    size_t n_providers;
    struct disc__stats *stats;
    uint64_t updates;
    uint64_t groups_delivered;
};

static const char *const err_kind_names[DISC_ERR__N] = {
    [DISC_ERR_CONFIG] = "config",
    [DISC_ERR_HTTP] = "http",
    [DISC_ERR_AUTH] = "auth",
    [DISC_ERR_JSON] = "json",
    [DISC_ERR_TOO_LARGE] = "too_large",
    [DISC_ERR_EVENT] = "event",
    [DISC_ERR_DISCONNECT] = "disconnect",
    [DISC_ERR_FILE_READ] = "file_read",
    [DISC_ERR_FILE_PARSE] = "file_parse",
};

/* ---------------------------------------------------------------- helpers */

void disc__targets_free(struct labels *t, size_t n)
{
    if (!t)
        return;
    for (size_t i = 0; i < n; i++)
        labels_done(&t[i]);
    free(t);
}

struct disc_targets *disc_targets_ref(struct disc_targets *d)
{
    if (d)
        d->_refs++;
    return d;
}

void disc_targets_unref(struct disc_targets *d)
{
    if (!d || --d->_refs)
        return;
    for (size_t i = 0; i < d->n; i++)
        labels_done(&d->t[i]);
    free(d);
}

/* Moves `n` label sets into a new shared block (compacted: it is kept until
 * the source changes). `t` is freed either way. */
static struct disc_targets *targets_block(struct labels *t, size_t n)
{
    struct disc_targets *d = malloc(sizeof(*d) + n * sizeof(d->t[0]));

    if (!d) {
        disc__targets_free(t, n);
        return NULL;
    }
    d->_refs = 1;
    d->n = n;
    for (size_t i = 0; i < n; i++) {
        d->t[i] = t[i];
        labels_compact(&d->t[i]);
    }
    free(t);
    return d;
}

static bool targets_equal(const struct labels *a, size_t na, const struct labels *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (!labels_equal(&a[i], &b[i]))
            return false;
    return true;
}

uv_loop_t *disc__loop(const struct disc_manager *m)
{
    return m->loop;
}

struct net_client *disc__http(const struct disc_manager *m)
{
    return m->http;
}

struct workq *disc__work(const struct disc_manager *m)
{
    return m->work;
}

static void psrc_free(struct strtab_node *e)
{
    struct psrc *ps = (struct psrc *)e;

    disc_targets_unref(ps->d);
    free(ps->node.name);
    free(ps);
}

static void dsrc_free(struct strtab_node *e)
{
    free(e->name);
    free(e);
}

static const struct psrc *provider_src(const struct disc__provider *p, const char *name)
{
    return p->_srcs ? (const struct psrc *)strtab_find(&p->_srcs->t, name) : NULL;
}

/* ---------------------------------------------------------------- jobs */

/* Through the index: an apply looks up every job, and a walk of the list
 * made a reload of thousands of jobs quadratic. */
static struct disc__job *job_find(struct disc_manager *m, const char *name, bool create)
{
    struct strtab_node *e = strtab_find(&m->jobs_idx, name);
    struct disc__job *j;

    if (e)
        return (struct disc__job *)((char *)e - offsetof(struct disc__job, tnode));
    if (!create)
        return NULL;
    j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->name = strdup(name);
    j->tnode.name = j->name;
    if (!j->name || strtab_insert(&m->jobs_idx, &j->tnode) < 0) {
        free(j->name);
        free(j);
        return NULL;
    }
    j->next = m->jobs;
    m->jobs = j;
    return j;
}

static void job_free(struct disc__job *j)
{
    if (!j)
        return;
    strtab_done(&j->dirty_set, dsrc_free);
    free(j->name);
    free(j);
}

/* Frees the jobs that have no provider and nothing left to deliver. */
static void forget_idle_jobs(struct disc_manager *m)
{
    for (struct disc__job **pp = &m->jobs; *pp;) {
        struct disc__job *j = *pp;

        if (!j->subs && !j->n_dirty && !j->listed_dirty) {
            *pp = j->next;
            strtab_unlink(&m->jobs_idx, &j->tnode);
            job_free(j);
        } else {
            pp = &j->next;
        }
    }
}

/* ---------------------------------------------------------------- delivery */

static void check_ready(struct disc_manager *m)
{
    if (m->ready || !m->applied || m->dirty_jobs)
        return;
    for (struct disc__provider *p = m->providers; p; p = p->_next)
        if (!p->synced)
            return;
    m->ready = true;
}

/* Builds the group of `d` for j from its providers' tables: the one
 * provider's block itself, or a block of copies when several providers
 * contribute to the source. `g->targets` is a reference the caller drops. */
static int build_group(const struct disc__job *j, const struct dsrc *d, struct disc_group *g)
{
    const struct psrc *only = NULL;
    unsigned contributors = 0;
    size_t total = 0, k = 0;
    struct labels *t;

    g->source = d->node.name;
    g->targets = NULL;
    for (const struct disc__sub *s = j->subs; s; s = s->jnext) {
        const struct psrc *ps = provider_src(s->p, d->node.name);

        if (ps) {
            only = ps;
            contributors++;
            total += ps->d->n;
        }
    }
    if (contributors <= 1) {
        g->targets = only ? disc_targets_ref(only->d) : NULL;
        return 0;
    }
    if (!(t = calloc(total, sizeof(*t))))
        return -ENOMEM;
    for (const struct disc__sub *s = j->subs; s; s = s->jnext) {
        const struct psrc *ps = provider_src(s->p, d->node.name);

        for (size_t i = 0; ps && i < ps->d->n; i++) {
            if (labels_copy(&t[k++], &ps->d->t[i]) < 0) {
                disc__targets_free(t, k);
                return -ENOMEM;
            }
        }
    }
    return (g->targets = targets_block(t, total)) ? 0 : -ENOMEM;
}

static void flush_job(struct disc_manager *m, struct disc__job *j)
{
    struct disc_group *groups;
    struct dsrc *d, *n;
    size_t ng = 0, i;

    groups = calloc(j->n_dirty ? j->n_dirty : 1, sizeof(*groups));
    if (!groups)
        return; /* the sources stay dirty for the next try */
    for (d = j->dirty; d; d = d->dnext, ng++)
        if (build_group(j, d, &groups[ng]) < 0)
            goto out;
    m->in_callback = true;
    if (m->cb && ng)
        m->cb(j->name, groups, ng, m->ud);
    m->in_callback = false;
    m->groups_delivered += ng;
    for (d = j->dirty; d; d = n) {
        n = d->dnext;
        strtab_unlink(&j->dirty_set, &d->node);
        dsrc_free(&d->node);
    }
    j->dirty = NULL;
    j->n_dirty = 0;
out:
    for (i = 0; i < ng; i++)
        disc_targets_unref(groups[i].targets);
    free(groups);
}

static void schedule(struct disc_manager *m);

static void flush(struct disc_manager *m)
{
    struct disc__job *j, *n;

    /* Detach first: nothing below can add a new dirty job, but stay safe. */
    j = m->dirty_jobs;
    m->dirty_jobs = NULL;
    for (; j; j = n) {
        n = j->dnext;
        j->dnext = NULL;
        j->listed_dirty = false;
        flush_job(m, j);
        if (j->n_dirty) { /* OOM: retry later */
            j->listed_dirty = true;
            j->dnext = m->dirty_jobs;
            m->dirty_jobs = j;
        }
    }
    m->updates++;
    m->last_delivery = uv_now(m->loop);
    m->delivered_once = true;
    forget_idle_jobs(m);
    check_ready(m);
    if (m->dirty_jobs)
        schedule(m);
}

static void on_timer(uv_timer_t *t)
{
    struct disc_manager *m = t->data;

    if (!m->closing)
        flush(m);
}

static void schedule(struct disc_manager *m)
{
    uint64_t now, delay = 0;

    if (m->closing || uv_is_active((uv_handle_t *)&m->timer))
        return;
    now = uv_now(m->loop);
    if (m->coalesce_ms && m->delivered_once && now < m->last_delivery + m->coalesce_ms)
        delay = m->last_delivery + m->coalesce_ms - now;
    uv_timer_start(&m->timer, on_timer, delay, 0);
}

/* Queues `source` for delivery to j. Returns 0 or -ENOMEM (the change is
 * then lost for j, like any update dropped on OOM). */
static int mark_dirty(struct disc_manager *m, struct disc__job *j, const char *source)
{
    if (!strtab_find(&j->dirty_set, source)) {
        struct dsrc *d = calloc(1, sizeof(*d));

        if (!d || !(d->node.name = strdup(source))) {
            free(d);
            return -ENOMEM;
        }
        if (strtab_insert(&j->dirty_set, &d->node) < 0) {
            dsrc_free(&d->node);
            return -ENOMEM;
        }
        d->dnext = j->dirty;
        j->dirty = d;
        j->n_dirty++;
    }
    if (!j->listed_dirty) {
        j->listed_dirty = true;
        j->dnext = m->dirty_jobs;
        m->dirty_jobs = j;
    }
    schedule(m);
    return 0;
}

struct mark_ctx {
    struct disc_manager *m;
    struct disc__job *j;
};

static void mark_one(struct strtab_node *e, void *ud)
{
    struct mark_ctx *c = ud;

    mark_dirty(c->m, c->j, e->name);
}

/* Marks every source of p dirty in j (p starts or stops feeding j). */
static void mark_all_dirty(struct disc_manager *m, struct disc__job *j,
                           const struct disc__provider *p)
{
    struct mark_ctx c = { m, j };

    if (m->closing || !p->_srcs)
        return; /* nothing is delivered any more, or nothing to mark */
    strtab_each(&p->_srcs->t, mark_one, &c);
}

/* ---------------------------------------------------------------- provider API */

int disc__provider_init(struct disc__provider *p, const struct disc__provider_ops *ops,
                        struct disc_manager *m, const char *job)
{
    memset(p, 0, sizeof(*p));
    p->ops = ops;
    p->m = m;
    p->job = strdup(job);
    return p->job ? 0 : -ENOMEM;
}

void disc__provider_done(struct disc__provider *p)
{
    if (!p)
        return;
    free(p->job);
    p->job = NULL;
    free(p->_sig);
    p->_sig = NULL;
    if (p->_srcs) {
        strtab_done(&p->_srcs->t, psrc_free);
        free(p->_srcs);
        p->_srcs = NULL;
    }
}

int disc__emit(struct disc__provider *p, const char *source, struct labels *targets, size_t n)
{
    struct disc_manager *m = p->m;
    struct psrc *ps;
    int rc = 0;

    if (p->_closing || !p->_srcs) {
        disc__targets_free(targets, n);
        return 0;
    }
    ps = (struct psrc *)strtab_find(&p->_srcs->t, source);
    if (n == 0) {
        free(targets);
        if (!ps)
            return 0;
        p->n_targets -= ps->d->n;
        strtab_unlink(&p->_srcs->t, &ps->node);
        psrc_free(&ps->node);
    } else if (ps && targets_equal(ps->d->t, ps->d->n, targets, n)) {
        disc__targets_free(targets, n);
        return 0;
    } else if (ps) {
        struct disc_targets *d = targets_block(targets, n);

        if (!d)
            return -ENOMEM;
        p->n_targets -= ps->d->n;
        disc_targets_unref(ps->d);
        ps->d = d;
        p->n_targets += n;
    } else {
        struct disc_targets *d = targets_block(targets, n);

        if (!d)
            return -ENOMEM;
        ps = calloc(1, sizeof(*ps));
        if (!ps || !(ps->node.name = strdup(source))) {
            free(ps);
            disc_targets_unref(d);
            return -ENOMEM;
        }
        ps->d = d;
        if (strtab_insert(&p->_srcs->t, &ps->node) < 0) {
            psrc_free(&ps->node);
            return -ENOMEM;
        }
        p->n_targets += n;
    }
    for (struct disc__sub *s = p->_subs; s; s = s->pnext)
        if (mark_dirty(m, s->job, source) < 0)
            rc = -ENOMEM; /* that job misses this change; the others still get it */
    return rc;
}

static double now_unix(void)
{
    return (double)clock_wall_ns() / 1e9;
}

void disc__touch_sync(struct disc__provider *p)
{
    double now = now_unix();

    for (struct disc__sub *s = p->_subs; s; s = s->pnext)
        if (s->stats)
            s->stats->last_sync = now;
}

void disc__synced(struct disc__provider *p)
{
    disc__touch_sync(p);
    if (p->synced)
        return;
    p->synced = true;
    check_ready(p->m);
}

void disc__count(struct disc__provider *p, enum disc__counter c)
{
    for (struct disc__sub *s = p->_subs; s; s = s->pnext) {
        struct disc__stats *st = s->stats;

        if (!st)
            continue;
        switch (c) {
        case DISC_CNT_LISTS:
            st->lists++;
            break;
        case DISC_CNT_WATCHES:
            st->watches++;
            break;
        case DISC_CNT_WATCH_RESTARTS:
            st->watch_restarts++;
            break;
        case DISC_CNT_RELISTS_EXPIRED:
            st->relists_expired++;
            break;
        }
    }
}

void disc__error(struct disc__provider *p, enum disc__err_kind kind, const char *fmt, ...)
{
    struct disc_manager *m = p->m;
    va_list ap;

    for (struct disc__sub *s = p->_subs; s; s = s->pnext)
        if (s->stats && kind < DISC_ERR__N)
            s->stats->errors[kind]++;
    va_start(ap, fmt);
    vsnprintf(m->last_error, sizeof(m->last_error), fmt, ap);
    va_end(ap);
    /* Reported once, naming every job the provider feeds (p->job). */
    if (m->err_cb)
        m->err_cb(p->job, p->ops->name, m->last_error, m->err_ud);
}

static void manager_maybe_free(struct disc_manager *m);

void disc__provider_closed(struct disc__provider *p)
{
    struct disc_manager *m = p->m;

    p->ops->free(p);
    m->pending_closes--;
    manager_maybe_free(m);
}

/* ---------------------------------------------------------------- stats */

static struct disc__stats *stats_get(struct disc_manager *m, const char *job, const char *prov)
{
    struct disc__stats *s, **pp = &m->stats;

    for (s = m->stats; s; s = s->next) {
        if (strcmp(s->job, job) == 0 && strcmp(s->provider, prov) == 0)
            return s;
        pp = &s->next;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->job = strdup(job);
    if (!s->job) {
        free(s);
        return NULL;
    }
    s->provider = prov;
    *pp = s; /* append: metrics come out in first-seen order */
    return s;
}

/* ---------------------------------------------------------------- lifecycle */

int disc_manager_new(const struct disc_manager_opts *o, struct disc_manager **out, char *err,
                     size_t errlen)
{
    struct disc_manager *m = calloc(1, sizeof(*m));
    int rc;

    *out = NULL;
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    m->loop = o->loop;
    m->http = o->http;
    m->work = o->work;
    m->coalesce_ms = o->coalesce_ms;
    m->cb = o->on_update;
    m->ud = o->update_ud;
    m->err_cb = o->on_error;
    m->err_ud = o->error_ud;
    rc = uv_timer_init(o->loop, &m->timer);
    if (rc < 0) {
        snprintf(err, errlen, "coalescing timer: %s", uv_strerror(rc));
        free(m);
        return rc;
    }
    m->timer.data = m;
    *out = m;
    return 0;
}

const char *disc_manager_last_error(const struct disc_manager *m)
{
    return m->last_error;
}

size_t disc_manager_providers(const struct disc_manager *m)
{
    return m->n_providers;
}

/* Sets a shared provider's job name to its subscribers' names joined by
 * ',' (what error reports name). Keeps the old name on OOM. */
static void provider_name_jobs(struct disc__provider *p)
{
    size_t len = 0, o = 0;
    char *s;

    if (!p->ops->signature || !p->_subs)
        return;
    for (struct disc__sub *sb = p->_subs; sb; sb = sb->pnext)
        len += strlen(sb->job->name) + 1;
    s = malloc(len);
    if (!s)
        return;
    for (struct disc__sub *sb = p->_subs; sb; sb = sb->pnext)
        o += (size_t)sprintf(s + o, "%s%s", o ? "," : "", sb->job->name);
    free(p->job);
    p->job = s;
}

static struct disc__sub *sub_find(const struct disc__provider *p, const struct disc__job *j)
{
    for (struct disc__sub *s = p->_subs; s; s = s->pnext)
        if (s->job == j)
            return s;
    return NULL;
}

/* Makes j receive p's groups, starting with every group p has now. */
static struct disc__sub *subscribe(struct disc_manager *m, struct disc__provider *p,
                                   struct disc__job *j)
{
    struct disc__sub *s = calloc(1, sizeof(*s)), **pp;

    if (!s)
        return NULL;
    s->p = p;
    s->job = j;
    s->stats = stats_get(m, j->name, p->ops->name);
    for (pp = &p->_subs; *pp; pp = &(*pp)->pnext)
        ;
    *pp = s;
    for (pp = &j->subs; *pp; pp = &(*pp)->jnext)
        ;
    *pp = s; /* appended: groups concatenate in subscription order */
    if (p->synced && s->stats)
        s->stats->last_sync = now_unix();
    mark_all_dirty(m, j, p);
    return s;
}

/* Stops feeding s->job from s->p: the job's groups lose p's targets. */
static void unsubscribe(struct disc_manager *m, struct disc__sub *s)
{
    struct disc__sub **pp;

    for (pp = &s->p->_subs; *pp != s; pp = &(*pp)->pnext)
        ;
    *pp = s->pnext;
    for (pp = &s->job->subs; *pp != s; pp = &(*pp)->jnext)
        ;
    *pp = s->jnext;
    mark_all_dirty(m, s->job, s->p);
    free(s);
}

/* The index key of a provider: its kind, and its signature or job. */
static char *provider_key(const struct disc__provider_ops *ops, const char *sig, const char *job)
{
    size_t len = strlen(ops->name) + 1 + strlen(sig ? sig : job) + 1;
    char *k = malloc(len);

    if (k)
        snprintf(k, len, "%s\x1f%s", ops->name, sig ? sig : job);
    return k;
}

/* Puts `p` at the head of the manager's list of providers. */
static void provider_list_push(struct disc_manager *m, struct disc__provider *p)
{
    p->_prev = NULL;
    p->_next = m->providers;
    if (m->providers)
        m->providers->_prev = p;
    m->providers = p;
    m->n_providers++;
}

static int provider_link(struct disc_manager *m, struct disc__provider *p)
{
    char *key = provider_key(p->ops, p->_sig, p->job);
    struct disc__pbucket *b;

    if (!key)
        return -ENOMEM;
    b = (struct disc__pbucket *)strtab_find(&m->providers_idx, key);
    if (b) {
        free(key);
    } else {
        if (!(b = calloc(1, sizeof(*b)))) {
            free(key);
            return -ENOMEM;
        }
        b->node.name = key;
        if (strtab_insert(&m->providers_idx, &b->node) < 0) {
            free(key);
            free(b);
            return -ENOMEM;
        }
    }
    p->_hnext = b->head;
    b->head = p;
    p->_bucket = b;
    provider_list_push(m, p);
    return 0;
}

static void provider_unlink(struct disc_manager *m, struct disc__provider *p)
{
    struct disc__pbucket *b = p->_bucket;

    if (p->_prev)
        p->_prev->_next = p->_next;
    else if (m->providers == p)
        m->providers = p->_next;
    if (p->_next)
        p->_next->_prev = p->_prev;
    p->_next = p->_prev = NULL;
    if (b) {
        for (struct disc__provider **pp = &b->head; *pp; pp = &(*pp)->_hnext) {
            if (*pp == p) {
                *pp = p->_hnext;
                break;
            }
        }
        if (!b->head) {
            strtab_unlink(&m->providers_idx, &b->node);
            free(b->node.name);
            free(b);
        }
        p->_bucket = NULL;
    }
    m->n_providers--;
}

static void provider_stop(struct disc_manager *m, struct disc__provider *p)
{
    provider_unlink(m, p);
    while (p->_subs)
        unsubscribe(m, p->_subs);
    p->n_targets = 0;
    p->_closing = true;
    m->pending_closes++;
    p->ops->close(p);
}

static struct disc__provider *find_provider(struct disc_manager *m,
                                            const struct disc__provider_ops *ops, const char *sig,
                                            const struct disc_job *job, unsigned idx)
{
    char *key = provider_key(ops, sig, job->name);
    struct disc__pbucket *b;

    if (!key) {
        /* No memory for the key: the walk finds it all the same. */
        for (struct disc__provider *p = m->providers; p; p = p->_next)
            if (p->ops == ops &&
                (sig ? strcmp(p->_sig, sig) == 0
                     : strcmp(p->job, job->name) == 0 && ops->same(p, job->sd, idx)))
                return p;
        return NULL;
    }
    b = (struct disc__pbucket *)strtab_find(&m->providers_idx, key);
    free(key);
    for (struct disc__provider *p = b ? b->head : NULL; p; p = p->_hnext) {
        if (p->ops != ops)
            continue;
        if (sig ? strcmp(p->_sig, sig) == 0
                : strcmp(p->job, job->name) == 0 && ops->same(p, job->sd, idx))
            return p;
    }
    return NULL;
}

/* Subscribes sc's job to the provider for piece `idx`, starting one when no
 * running provider has the same settings. */
static int ensure(struct disc_manager *m, const struct disc__provider_ops *ops,
                  const struct disc_cfg *g, const struct disc_job *job, unsigned idx, char *err,
                  size_t errlen)
{
    struct disc__job *j = job_find(m, job->name, true);
    char *sig = NULL;
    struct disc__provider *p;
    struct disc__sub *s;
    char msg[384];
    int rc;

    if (!j)
        goto oom;
    if (ops->signature && !(sig = ops->signature(g, job->sd, idx)))
        goto oom;
    p = find_provider(m, ops, sig, job, idx);
    if (p) {
        free(sig);
        s = sub_find(p, j);
        if (!s) {
            if (!(s = subscribe(m, p, j)))
                goto oom;
            s->fresh = true;
        }
        s->mark = true;
        return 0;
    }
    msg[0] = '\0';
    p = ops->create(m, g, job->name, job->sd, idx, msg, sizeof(msg));
    if (!p) {
        free(sig);
        snprintf(err, errlen, "job %s: %s discovery #%u: %s", job->name, ops->name, idx,
                 msg[0] ? msg : "out of memory");
        return -EINVAL;
    }
    p->_sig = sig;
    p->_srcs = calloc(1, sizeof(*p->_srcs));
    if (provider_link(m, p) < 0) {
        /* Stopped as any other: on the list, in no bucket. */
        provider_list_push(m, p);
        provider_stop(m, p);
        goto oom;
    }
    if (!p->_srcs || !(s = subscribe(m, p, j))) {
        provider_stop(m, p);
        goto oom;
    }
    s->mark = true;
    s->fresh = true;
    rc = ops->start(p, msg, sizeof(msg));
    if (rc < 0) {
        snprintf(err, errlen, "job %s: %s discovery #%u: %s", job->name, ops->name, idx, msg);
        provider_stop(m, p);
        return rc;
    }
    return 0;
oom:
    snprintf(err, errlen, "job %s: %s discovery #%u: out of memory", job->name, ops->name, idx);
    return -ENOMEM;
}

int disc_manager_apply(struct disc_manager *m, const struct disc_job *jobs, size_t n_jobs,
                       const struct disc_cfg *g, char *err, size_t errlen)
{
    struct disc__provider *p, *n;
    int first = 0;
    char e[512];

    if (m->in_callback || m->closing) {
        snprintf(err, errlen, "discovery: apply %s", m->closing ? "after close" : "from update");
        return -EBUSY;
    }
    for (p = m->providers; p; p = p->_next)
        for (struct disc__sub *s = p->_subs; s; s = s->pnext)
            s->mark = false;
    for (size_t i = 0; i < n_jobs; i++) {
        const struct disc_job *job = &jobs[i];
        const struct disc_sd_cfg *sd = job->sd;
        int rc = 0;

        if (!job->name)
            continue;
        if (sd->n_static)
            rc = ensure(m, &disc__static_ops, g, job, 0, e, sizeof(e));
        if (rc < 0 && !first) {
            first = rc;
            snprintf(err, errlen, "%s", e);
        }
        for (unsigned k = 0; k < sd->n_file_sd; k++) {
            rc = ensure(m, &disc__file_ops, g, job, k, e, sizeof(e));
            if (rc < 0 && !first) {
                first = rc;
                snprintf(err, errlen, "%s", e);
            }
        }
        for (unsigned k = 0; k < sd->n_k8s_sd; k++) {
            rc = ensure(m, &disc__k8s_ops, g, job, k, e, sizeof(e));
            if (rc < 0 && !first) {
                first = rc;
                snprintf(err, errlen, "%s", e);
            }
        }
    }
    /* Success: drop the subscriptions the config no longer asks for.
     * Failure: undo what this apply added and keep the rest as it was, so
     * the configuration in force keeps its discovery. Either way a provider
     * left without subscriptions stops; the others run on untouched. */
    for (p = m->providers; p; p = n) {
        struct disc__sub *s, *sn;

        n = p->_next;
        for (s = p->_subs; s; s = sn) {
            sn = s->pnext;
            if (first < 0 ? s->fresh : !s->mark)
                unsubscribe(m, s);
            else
                s->fresh = false;
        }
        if (!p->_subs)
            provider_stop(m, p);
        else
            provider_name_jobs(p);
    }
    forget_idle_jobs(m);
    m->applied = true;
    check_ready(m);
    return first;
}

bool disc_manager_ready(const struct disc_manager *m)
{
    return m->ready;
}

static void manager_maybe_free(struct disc_manager *m)
{
    void (*cb)(void *);
    void *ud;

    if (!m->closing || m->pending_closes)
        return;
    cb = m->close_cb;
    ud = m->close_ud;
    /* The indexes first: they read their entries. */
    strtab_done(&m->jobs_idx, NULL);
    strtab_done(&m->providers_idx, NULL);
    while (m->jobs) {
        struct disc__job *j = m->jobs;

        m->jobs = j->next;
        job_free(j);
    }
    while (m->stats) {
        struct disc__stats *s = m->stats;

        m->stats = s->next;
        free(s->job);
        free(s);
    }
    free(m);
    if (cb)
        cb(ud);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct disc_manager *m = h->data;

    m->pending_closes--;
    manager_maybe_free(m);
}

void disc_manager_close(struct disc_manager *m, void (*cb)(void *ud), void *ud)
{
    if (!m || m->closing)
        return;
    m->close_cb = cb;
    m->close_ud = ud;
    m->pending_closes++; /* held until every provider has been told to close */
    m->closing = true;
    while (m->providers)
        provider_stop(m, m->providers);
    m->dirty_jobs = NULL;
    m->pending_closes++;
    uv_close((uv_handle_t *)&m->timer, on_timer_closed);
    m->pending_closes--;
    manager_maybe_free(m);
}

/* ---------------------------------------------------------------- metrics */

/* The manager's own figures, taken when they are written. */
struct figures {
    uint64_t ready, providers, updates, groups_delivered;
};

#define U64(name, type, help, field) PROM_FAMILY_U64(name, type, help, struct figures, field)

static const struct prom_family global_families[] = {
    U64("proflet_discovery_ready", "gauge",
        "1 once every discovery provider has completed its first sync.", ready),
    U64("proflet_discovery_providers", "gauge",
        "Discovery providers running (one per distinct settings, shared by the jobs using it).",
        providers),
    U64("proflet_discovery_updates_total", "counter",
        "Coalesced update rounds delivered to the target manager.", updates),
    U64("proflet_discovery_groups_delivered_total", "counter",
        "Changed target groups delivered to the target manager.", groups_delivered),
};

#undef U64

/* The families of one series (or one set) per (job, provider kind), after
 * the manager's own figures, read from its disc__stats. Their list is
 * appended to and never shortened while the manager lives, so a cursor
 * into it stays valid across parts. */
#define U64(name, type, help, field) PROM_FAMILY_U64(name, type, help, struct disc__stats, field)

static const struct prom_family stat_families[] = {
    U64("proflet_discovery_targets", "gauge", "Targets currently discovered, by job and provider.",
        targets_shown),
    U64("proflet_discovery_lists_total", "counter", "Completed list operations (all pages).",
        lists),
    U64("proflet_discovery_watches_total", "counter", "Watch requests started.", watches),
    U64("proflet_discovery_watch_restarts_total", "counter",
        "Watches that ended and were started again.", watch_restarts),
    U64("proflet_discovery_relists_expired_total", "counter",
        "Re-lists caused by an expired resource version (HTTP 410).", relists_expired),
    PROM_FAMILY_U64_BY("proflet_discovery_errors_total", "counter",
                       "Discovery errors by job, provider and kind.", struct disc__stats, errors,
                       "kind", err_kind_names),
    PROM_FAMILY_F64("proflet_discovery_last_sync_timestamp_seconds", "gauge",
                    "Unix time of the last successful sync, 0 if none yet.", struct disc__stats,
                    last_sync),
};

#undef U64

static void global_metrics(const struct disc_manager *m, struct buf *out)
{
    const struct figures f = {
        .ready = m->ready,
        .providers = m->n_providers,
        .updates = m->updates,
        .groups_delivered = m->groups_delivered,
    };

    prom_families(out, global_families, ARRAY_SIZE(global_families), &f, NULL);
}

/* Sums each (job, provider kind)'s targets in one walk of the
 * subscriptions (a walk per series was quadratic in the jobs). */
static void sum_targets(const struct disc_manager *m)
{
    for (struct disc__stats *s = m->stats; s; s = s->next)
        s->targets_shown = 0;
    for (const struct disc__provider *p = m->providers; p; p = p->_next)
        for (const struct disc__sub *sb = p->_subs; sb; sb = sb->pnext)
            if (sb->stats)
                sb->stats->targets_shown += p->n_targets;
}

int disc_manager_metrics_next(const struct disc_manager *m, struct disc_metrics_cursor *c,
                              struct buf *out, size_t chunk)
{
    const size_t n_fam = ARRAY_SIZE(stat_families);

    if (!c->begun) {
        c->begun = true;
        global_metrics(m, out);
        if (!m->stats)
            c->family = (unsigned)n_fam; /* no (job, provider) yet: no family */
    }
    while (c->family < n_fam && out->len < chunk) {
        const struct prom_family *fam = &stat_families[c->family];

        if (!c->started) {
            c->started = true;
            c->at = m->stats;
            if (fam == &stat_families[0]) /* proflet_discovery_targets */
                sum_targets(m);
            prom_family_head(out, fam);
        }
        while (c->at && out->len < chunk) {
            const struct disc__stats *s = c->at;

            prom_family_series(
                out, fam, s, (const char *const[]){ "job", s->job, "provider", s->provider, NULL });
            c->at = s->next;
        }
        if (!c->at) {
            c->family++;
            c->started = false;
        }
    }
    return c->family < n_fam;
}

void disc_manager_metrics(const struct disc_manager *m, struct buf *out)
{
    struct disc_metrics_cursor c = { 0 };

    while (disc_manager_metrics_next(m, &c, out, SIZE_MAX) > 0)
        ;
}
