/* The discovery manager: runs the providers a config asks for, keeps every
 * job's target groups by source and hands the changed ones to the agent.
 *
 * Threading: loop thread only. Every provider emits through disc__emit(),
 * which only records the change and arms one coalescing timer; the update
 * callback therefore never runs from inside disc_manager_apply() or from
 * inside a provider callback, only from that timer. Updates are delivered at
 * once when the last delivery is at least `coalesce_ms` old, else when that
 * much time has passed since it, so a change waits at most `coalesce_ms`.
 *
 * Ownership: the manager owns the providers, the per-job source tables and
 * the per-(job, provider) counters. A source may receive targets from more
 * than one provider of a job (two kubernetes_sd pieces seeing the same pod);
 * the delivered group is their concatenation and disappears when the last
 * contribution does. Providers that are stopped lose their contributions at
 * once, so a job that goes away gets an empty group for each of its sources.
 * Teardown is two-phase: disc_manager_close() closes the providers and the
 * timer and frees the manager when the last close callback has run. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "discovery/internal.h"

struct disc__contrib {
    struct disc__provider *p;
    struct labels *t;
    size_t n;
    struct disc__contrib *next;
};

struct disc__src {
    char *name;
    struct disc__contrib *contribs;
    bool dirty;
    struct disc__src *hnext;
    struct disc__src *dnext;
};

struct disc__job {
    char *name;
    struct disc__src **buckets;
    size_t n_buckets;
    size_t n_srcs;
    struct disc__src *dirty;
    size_t n_dirty;
    bool listed_dirty;
    size_t n_providers;
    struct disc__job *next;
    struct disc__job *dnext;
};

struct disc_manager {
    uv_loop_t *loop;
    struct net_client *http;
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
    struct disc__job *dirty_jobs;
    struct disc__provider *providers;
    size_t n_providers;
    struct disc__stats *stats;
    uint64_t updates;
    uint64_t groups_delivered;
};

static const char *const err_kind_names[DISC_ERR__N] = {
    [DISC_ERR_CONFIG] = "config",         [DISC_ERR_HTTP] = "http",
    [DISC_ERR_AUTH] = "auth",             [DISC_ERR_JSON] = "json",
    [DISC_ERR_TOO_LARGE] = "too_large",   [DISC_ERR_EVENT] = "event",
    [DISC_ERR_DISCONNECT] = "disconnect", [DISC_ERR_FILE_READ] = "file_read",
    [DISC_ERR_FILE_PARSE] = "file_parse",
};

/* ---------------------------------------------------------------- helpers */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

void disc__targets_free(struct labels *t, size_t n)
{
    if (!t)
        return;
    for (size_t i = 0; i < n; i++)
        labels_done(&t[i]);
    free(t);
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

/* ---------------------------------------------------------------- jobs */

static struct disc__job *job_find(struct disc_manager *m, const char *name, bool create)
{
    struct disc__job *j;

    for (j = m->jobs; j; j = j->next)
        if (strcmp(j->name, name) == 0)
            return j;
    if (!create)
        return NULL;
    j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->name = strdup(name);
    j->n_buckets = 64;
    j->buckets = calloc(j->n_buckets, sizeof(*j->buckets));
    if (!j->name || !j->buckets) {
        free(j->name);
        free(j->buckets);
        free(j);
        return NULL;
    }
    j->next = m->jobs;
    m->jobs = j;
    return j;
}

static void src_free(struct disc__src *s)
{
    struct disc__contrib *c, *n;

    for (c = s->contribs; c; c = n) {
        n = c->next;
        disc__targets_free(c->t, c->n);
        free(c);
    }
    free(s->name);
    free(s);
}

static void job_free(struct disc__job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n_buckets; i++) {
        struct disc__src *s, *n;

        for (s = j->buckets[i]; s; s = n) {
            n = s->hnext;
            src_free(s);
        }
    }
    free(j->buckets);
    free(j->name);
    free(j);
}

static void job_grow(struct disc__job *j)
{
    size_t nb = j->n_buckets * 4;
    struct disc__src **b = calloc(nb, sizeof(*b));

    if (!b)
        return; /* keep the old table: longer chains, still correct */
    for (size_t i = 0; i < j->n_buckets; i++) {
        struct disc__src *s, *n;

        for (s = j->buckets[i]; s; s = n) {
            size_t k = fnv1a(s->name) & (nb - 1);

            n = s->hnext;
            s->hnext = b[k];
            b[k] = s;
        }
    }
    free(j->buckets);
    j->buckets = b;
    j->n_buckets = nb;
}

static struct disc__src *src_find(struct disc__job *j, const char *name, bool create)
{
    size_t k = fnv1a(name) & (j->n_buckets - 1);
    struct disc__src *s;

    for (s = j->buckets[k]; s; s = s->hnext)
        if (strcmp(s->name, name) == 0)
            return s;
    if (!create)
        return NULL;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->name = strdup(name);
    if (!s->name) {
        free(s);
        return NULL;
    }
    s->hnext = j->buckets[k];
    j->buckets[k] = s;
    if (++j->n_srcs > j->n_buckets * 2)
        job_grow(j);
    return s;
}

static void src_remove(struct disc__job *j, struct disc__src *s)
{
    struct disc__src **pp = &j->buckets[fnv1a(s->name) & (j->n_buckets - 1)];

    for (; *pp; pp = &(*pp)->hnext) {
        if (*pp == s) {
            *pp = s->hnext;
            j->n_srcs--;
            src_free(s);
            return;
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

static void flush_job(struct disc_manager *m, struct disc__job *j)
{
    struct disc_group *groups = NULL;
    struct labels **tmp = NULL;
    struct disc__src *s, *n;
    size_t ng = 0, i;

    groups = calloc(j->n_dirty ? j->n_dirty : 1, sizeof(*groups));
    tmp = calloc(j->n_dirty ? j->n_dirty : 1, sizeof(*tmp));
    if (!groups || !tmp)
        goto out; /* dropped on OOM: the sources stay dirty for the next try */
    for (s = j->dirty; s; s = s->dnext) {
        struct disc_group *g = &groups[ng++];
        size_t total = 0;

        g->source = s->name;
        for (struct disc__contrib *c = s->contribs; c; c = c->next)
            total += c->n;
        if (s->contribs && !s->contribs->next) {
            g->targets = s->contribs->t;
        } else if (total) {
            struct labels *t = malloc(total * sizeof(*t));
            size_t k = 0;

            if (!t)
                goto out;
            for (struct disc__contrib *c = s->contribs; c; c = c->next)
                for (i = 0; i < c->n; i++)
                    t[k++] = c->t[i]; /* shallow: borrowed for the callback */
            tmp[ng - 1] = t;
            g->targets = t;
        }
        g->n_targets = total;
    }
    m->in_callback = true;
    if (m->cb && ng)
        m->cb(j->name, groups, ng, m->ud);
    m->in_callback = false;
    m->groups_delivered += ng;
    for (s = j->dirty; s; s = n) {
        n = s->dnext;
        s->dirty = false;
        s->dnext = NULL;
        if (!s->contribs)
            src_remove(j, s);
    }
    j->dirty = NULL;
    j->n_dirty = 0;
out:
    for (i = 0; tmp && i < ng; i++)
        free(tmp[i]);
    free(tmp);
    free(groups);
}

static void schedule(struct disc_manager *m);

static void flush(struct disc_manager *m)
{
    struct disc__job *j, *n, **pp;

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
    /* Forget jobs that have neither providers nor sources left. */
    for (pp = &m->jobs; *pp;) {
        j = *pp;
        if (!j->n_providers && !j->n_srcs && !j->listed_dirty) {
            *pp = j->next;
            job_free(j);
        } else {
            pp = &j->next;
        }
    }
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

static void mark_dirty(struct disc_manager *m, struct disc__job *j, struct disc__src *s)
{
    if (!s->dirty) {
        s->dirty = true;
        s->dnext = j->dirty;
        j->dirty = s;
        j->n_dirty++;
    }
    if (!j->listed_dirty) {
        j->listed_dirty = true;
        j->dnext = m->dirty_jobs;
        m->dirty_jobs = j;
    }
    schedule(m);
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
}

int disc__emit(struct disc__provider *p, const char *source, struct labels *targets, size_t n)
{
    struct disc_manager *m = p->m;
    struct disc__job *j = p->_job;
    struct disc__contrib *c, **cp;
    struct disc__src *s;

    if (p->_closing || !j) {
        disc__targets_free(targets, n);
        return 0;
    }
    s = src_find(j, source, n > 0);
    if (!s) {
        disc__targets_free(targets, n);
        return n > 0 ? -ENOMEM : 0;
    }
    for (cp = &s->contribs; *cp; cp = &(*cp)->next)
        if ((*cp)->p == p)
            break;
    c = *cp;
    if (n == 0) {
        free(targets);
        if (!c)
            return 0;
        p->n_targets -= c->n;
        *cp = c->next;
        disc__targets_free(c->t, c->n);
        free(c);
        mark_dirty(m, j, s);
        return 0;
    }
    if (c && targets_equal(c->t, c->n, targets, n)) {
        disc__targets_free(targets, n);
        return 0;
    }
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c) {
            disc__targets_free(targets, n);
            return -ENOMEM;
        }
        c->p = p;
        *cp = c;
    } else {
        p->n_targets -= c->n;
        disc__targets_free(c->t, c->n);
    }
    c->t = targets;
    c->n = n;
    p->n_targets += n;
    mark_dirty(m, j, s);
    return 0;
}

static double now_unix(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void disc__touch_sync(struct disc__provider *p)
{
    if (p->stats)
        p->stats->last_sync = now_unix();
}

void disc__synced(struct disc__provider *p)
{
    disc__touch_sync(p);
    if (p->synced)
        return;
    p->synced = true;
    check_ready(p->m);
}

void disc__error(struct disc__provider *p, enum disc__err_kind kind, const char *fmt, ...)
{
    struct disc_manager *m = p->m;
    va_list ap;

    if (p->stats && kind < DISC_ERR__N)
        p->stats->errors[kind]++;
    va_start(ap, fmt);
    vsnprintf(m->last_error, sizeof(m->last_error), fmt, ap);
    va_end(ap);
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

struct disc_manager *disc_manager_new(uv_loop_t *loop, struct net_client *http,
                                      uint64_t coalesce_ms, disc_update_cb cb, void *ud)
{
    struct disc_manager *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    m->loop = loop;
    m->http = http;
    m->coalesce_ms = coalesce_ms;
    m->cb = cb;
    m->ud = ud;
    if (uv_timer_init(loop, &m->timer) < 0) {
        free(m);
        return NULL;
    }
    m->timer.data = m;
    return m;
}

void disc_manager_set_error_cb(struct disc_manager *m, disc_error_cb cb, void *ud)
{
    m->err_cb = cb;
    m->err_ud = ud;
}

const char *disc_manager_last_error(const struct disc_manager *m)
{
    return m->last_error;
}

size_t disc_manager_providers(const struct disc_manager *m)
{
    return m->n_providers;
}

/* Drops every contribution of p (its sources become dirty). */
static void drop_contributions(struct disc_manager *m, struct disc__provider *p)
{
    struct disc__job *j = p->_job;

    if (!j || !p->n_targets)
        return;
    for (size_t i = 0; i < j->n_buckets; i++) {
        for (struct disc__src *s = j->buckets[i]; s; s = s->hnext) {
            struct disc__contrib **cp;

            for (cp = &s->contribs; *cp; cp = &(*cp)->next) {
                if ((*cp)->p == p) {
                    struct disc__contrib *c = *cp;

                    *cp = c->next;
                    disc__targets_free(c->t, c->n);
                    free(c);
                    mark_dirty(m, j, s);
                    break;
                }
            }
        }
    }
    p->n_targets = 0;
}

static void provider_stop(struct disc_manager *m, struct disc__provider *p)
{
    struct disc__provider **pp;

    for (pp = &m->providers; *pp; pp = &(*pp)->_next) {
        if (*pp == p) {
            *pp = p->_next;
            break;
        }
    }
    m->n_providers--;
    drop_contributions(m, p);
    if (p->_job)
        p->_job->n_providers--;
    p->_closing = true;
    p->_job = NULL;
    m->pending_closes++;
    p->ops->close(p);
}

static struct disc__provider *find_same(struct disc_manager *m, const struct disc__provider_ops *ops,
                                        const struct cfg *cfg, const struct cfg_scrape *sc,
                                        unsigned idx)
{
    for (struct disc__provider *p = m->providers; p; p = p->_next)
        if (!p->_mark && p->ops == ops && strcmp(p->job, sc->job_name) == 0 &&
            ops->same(p, cfg, sc, idx))
            return p;
    return NULL;
}

static int ensure(struct disc_manager *m, const struct disc__provider_ops *ops,
                  const struct cfg *cfg, const struct cfg_scrape *sc, unsigned idx, char *err,
                  size_t errlen)
{
    struct disc__provider *p = find_same(m, ops, cfg, sc, idx);
    struct disc__job *j;
    char msg[384];
    int rc;

    if (p) {
        p->_mark = true;
        return 0;
    }
    msg[0] = '\0';
    j = job_find(m, sc->job_name, true);
    if (!j)
        return -ENOMEM;
    p = ops->create(m, cfg, sc, idx, msg, sizeof(msg));
    if (!p) {
        snprintf(err, errlen, "job %s: %s discovery #%u: %s", sc->job_name, ops->name, idx,
                 msg[0] ? msg : "out of memory");
        return -EINVAL;
    }
    p->stats = stats_get(m, sc->job_name, ops->name);
    p->_job = j;
    p->_mark = true;
    p->_next = m->providers;
    m->providers = p;
    m->n_providers++;
    j->n_providers++;
    rc = ops->start(p, msg, sizeof(msg));
    if (rc < 0) {
        snprintf(err, errlen, "job %s: %s discovery #%u: %s", sc->job_name, ops->name, idx, msg);
        provider_stop(m, p);
        return rc;
    }
    return 0;
}

int disc_manager_apply(struct disc_manager *m, const struct cfg *cfg, char *err, size_t errlen)
{
    struct disc__provider *p, *n;
    int first = 0;
    char e[512];

    if (m->in_callback || m->closing) {
        snprintf(err, errlen, "discovery: apply %s", m->closing ? "after close" : "from update");
        return -EBUSY;
    }
    for (p = m->providers; p; p = p->_next)
        p->_mark = false;
    for (unsigned i = 0; cfg && i < cfg->n_scrape; i++) {
        const struct cfg_scrape *sc = &cfg->scrape[i];
        int rc = 0;

        if (!sc->job_name)
            continue;
        if (sc->n_static)
            rc = ensure(m, &disc__static_ops, cfg, sc, 0, e, sizeof(e));
        if (rc < 0 && !first) {
            first = rc;
            snprintf(err, errlen, "%s", e);
        }
        for (unsigned k = 0; k < sc->n_file_sd; k++) {
            rc = ensure(m, &disc__file_ops, cfg, sc, k, e, sizeof(e));
            if (rc < 0 && !first) {
                first = rc;
                snprintf(err, errlen, "%s", e);
            }
        }
        for (unsigned k = 0; k < sc->n_k8s_sd; k++) {
            rc = ensure(m, &disc__k8s_ops, cfg, sc, k, e, sizeof(e));
            if (rc < 0 && !first) {
                first = rc;
                snprintf(err, errlen, "%s", e);
            }
        }
    }
    for (p = m->providers; p; p = n) {
        n = p->_next;
        if (!p->_mark)
            provider_stop(m, p);
    }
    /* Jobs left without providers or sources need no delivery at all. */
    for (struct disc__job **pp = &m->jobs; *pp;) {
        struct disc__job *j = *pp;

        if (!j->n_providers && !j->n_srcs && !j->listed_dirty) {
            *pp = j->next;
            job_free(j);
        } else {
            pp = &j->next;
        }
    }
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

static void put_escaped(struct buf *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            buf_puts(out, "\\\\");
        else if (*s == '"')
            buf_puts(out, "\\\"");
        else if (*s == '\n')
            buf_puts(out, "\\n");
        else
            buf_append(out, s, 1);
    }
}

static void put_series(struct buf *out, const char *name, const struct disc__stats *s,
                       const char *kind)
{
    buf_printf(out, "%s{job=\"", name);
    put_escaped(out, s->job);
    buf_printf(out, "\",provider=\"%s\"", s->provider);
    if (kind)
        buf_printf(out, ",kind=\"%s\"", kind);
    buf_puts(out, "} ");
}

static void head(struct buf *out, const char *name, const char *type, const char *help)
{
    buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

#define COUNTER(field, name, help)                                                            \
    do {                                                                                      \
        head(out, name, "counter", help);                                                     \
        for (s = m->stats; s; s = s->next) {                                                  \
            put_series(out, name, s, NULL);                                                   \
            buf_printf(out, "%llu\n", (unsigned long long)s->field);                          \
        }                                                                                     \
    } while (0)

void disc_manager_metrics(const struct disc_manager *m, struct buf *out)
{
    const struct disc__stats *s;

    head(out, "proflet_discovery_ready", "gauge",
         "1 once every discovery provider has completed its first sync.");
    buf_printf(out, "proflet_discovery_ready %d\n", m->ready ? 1 : 0);
    head(out, "proflet_discovery_providers", "gauge", "Discovery providers running.");
    buf_printf(out, "proflet_discovery_providers %zu\n", m->n_providers);
    head(out, "proflet_discovery_updates_total", "counter",
         "Coalesced update rounds delivered to the target manager.");
    buf_printf(out, "proflet_discovery_updates_total %llu\n", (unsigned long long)m->updates);
    head(out, "proflet_discovery_groups_delivered_total", "counter",
         "Changed target groups delivered to the target manager.");
    buf_printf(out, "proflet_discovery_groups_delivered_total %llu\n",
               (unsigned long long)m->groups_delivered);
    if (!m->stats)
        return;
    head(out, "proflet_discovery_targets", "gauge",
         "Targets currently discovered, by job and provider.");
    for (s = m->stats; s; s = s->next) {
        size_t n = 0;

        for (const struct disc__provider *p = m->providers; p; p = p->_next)
            if (p->stats == s)
                n += p->n_targets;
        put_series(out, "proflet_discovery_targets", s, NULL);
        buf_printf(out, "%zu\n", n);
    }
    COUNTER(lists, "proflet_discovery_lists_total", "Completed list operations (all pages).");
    COUNTER(watches, "proflet_discovery_watches_total", "Watch requests started.");
    COUNTER(watch_restarts, "proflet_discovery_watch_restarts_total",
            "Watches that ended and were started again.");
    COUNTER(relists_expired, "proflet_discovery_relists_expired_total",
            "Re-lists caused by an expired resource version (HTTP 410).");
    head(out, "proflet_discovery_errors_total", "counter",
         "Discovery errors by job, provider and kind.");
    for (s = m->stats; s; s = s->next) {
        for (int k = 0; k < DISC_ERR__N; k++) {
            put_series(out, "proflet_discovery_errors_total", s, err_kind_names[k]);
            buf_printf(out, "%llu\n", (unsigned long long)s->errors[k]);
        }
    }
    head(out, "proflet_discovery_last_sync_timestamp_seconds", "gauge",
         "Unix time of the last successful sync, 0 if none yet.");
    for (s = m->stats; s; s = s->next) {
        put_series(out, "proflet_discovery_last_sync_timestamp_seconds", s, NULL);
        buf_printf(out, "%.3f\n", s->last_sync);
    }
}
