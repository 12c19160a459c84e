/* SPDX-License-Identifier: Apache-2.0 */
/* The forwarder: a list of endpoints built from the config, each a sink
 * (directory, or remote push / ingest) with its own queue. fwd_submit()
 * hands a profile to every endpoint, each taking its own reference, and
 * returns at once. This file also owns fwd_apply() (endpoints whose settings
 * are unchanged keep their queues), the submission of every pool job to the
 * agent's work queue (and again of those it cancels), the Prometheus
 * metrics and the two-phase close (docs/design.md "Modules";
 * docs/forwarding.md).
 *
 * Threading: loop thread only. Ownership: the forwarder owns its endpoints;
 * an endpoint reads its settings in place and holds a reference on the
 * loaded document they live in (so an endpoint kept across reloads keeps
 * them, write rules included); it owns only its merged list of external
 * labels. Replaced endpoints are closed in the background (flushed, then
 * spooled) and freed when done. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/workq.h"
#include "forward/internal.h"

struct fwd {
    uv_loop_t *loop;
    struct net_client *http;
    struct workq *work;
    /* Jobs the queue cancelled before they started, oldest first, and the
     * timer that submits them again from a later loop turn. */
    struct fwd__job *cancelled, **cancelled_tail;
    uv_timer_t resubmit;
    struct fwd_ep *eps;     /* active endpoints, config order */
    struct fwd_ep *retired; /* being closed after a reload */
    fwd_error_cb err_cb;
    void *err_ud;
    char last_error[FWD__ERRLEN];
    /* close */
    bool closing;
    unsigned close_pending;
    void (*close_cb)(void *ud);
    void *close_ud;
};

static const char *const drop_names[FWD_DROP__N] = {
    [FWD_DROP_INVALID] = "invalid_labels",
    [FWD_DROP_REJECTED] = "rejected",
    [FWD_DROP_TOO_LARGE] = "too_large",
    [FWD_DROP_RETRIES] = "retries_exhausted",
    [FWD_DROP_QUEUE_FULL] = "queue_full",
    [FWD_DROP_SPOOL_FULL] = "spool_full",
    [FWD_DROP_SPOOL_AGE] = "spool_age",
    [FWD_DROP_SPOOL_CORRUPT] = "spool_corrupt",
    [FWD_DROP_IO] = "io_error",
    [FWD_DROP_SHUTDOWN] = "shutdown",
    [FWD_DROP_WRITE_RELABEL] = "write_relabel",
};

const char *fwd__drop_name(enum fwd__drop r)
{
    return r < FWD_DROP__N ? drop_names[r] : "unknown";
}

struct net_client *fwd__http(const struct fwd *f)
{
    return f->http;
}

struct workq *fwd__workq(const struct fwd *f)
{
    return f->work;
}

/* --------------------------------------------------------------- endpoint */

/* Everything an endpoint runs with: unchanged endpoints keep their queues
 * across reloads. `ext` is the merged list the endpoint adds, so a change
 * of a global external label counts too; the write rules count by their
 * configuration. */
static char *signature(const struct cfg_remote *r, const struct conf_kv *ext, unsigned n_ext,
                       const struct cfg_spool *s)
{
    struct cfg_remote sig = *r;
    struct buf b;
    size_t n;

    sig.external_labels = (struct conf_kv *)ext;
    sig.n_external_labels = n_ext;
    buf_init(&b, 1 << 20);
    conf_signature(&fwd_remote_cfg_entry, &sig, &b);
    buf_printf(&b, "spool:%s:%s:%" PRIu64 ",%" PRIu64 ",%" PRIu64 ";", s->dir ? s->dir : "-",
               s->fsync ? s->fsync : "-", s->max_bytes, s->max_age_ms, s->segment_bytes);
    return buf_steal(&b, &n);
}

static void ep_free(struct fwd_ep *ep)
{
    if (!ep)
        return;
    if (ep->ops && ep->sink)
        ep->ops->free(ep);
    free(ep->ext);
    free(ep->signature);
    conf_doc_unref(ep->doc);
    free(ep);
}

/* An endpoint over settings as loaded: nothing is copied, defaulted,
 * checked or compiled here (forward/config.c did all of it at load). */
static struct fwd_ep *ep_new(struct fwd *f, struct conf_doc *doc, const struct cfg_remote *rc,
                             const struct cfg_spool *spool, const struct conf_kv *ext, size_t n_ext,
                             char *err, size_t errlen)
{
    struct fwd_ep *ep = calloc(1, sizeof(*ep));

    if (!ep)
        goto oom;
    ep->f = f;
    ep->loop = f->loop;
    prom_hist_init(&ep->st.lat, prom_latency_bounds, ARRAY_SIZE(prom_latency_bounds));
    ep->doc = conf_doc_ref(doc);
    ep->cfg = rc;
    ep->spool = spool;
    ep->name = rc->name;
    /* Global external labels first: the endpoint's own, set after, win. */
    ep->ext = calloc(n_ext + rc->n_external_labels + 1, sizeof(*ep->ext));
    if (!ep->ext)
        goto oom;
    for (size_t i = 0; i < n_ext; i++)
        ep->ext[ep->n_ext++] = ext[i];
    for (unsigned i = 0; i < rc->n_external_labels; i++)
        ep->ext[ep->n_ext++] = rc->external_labels[i];
    if (!(ep->signature = signature(rc, ep->ext, ep->n_ext, spool)))
        goto oom;
    ep->ops = rc->protocol == CFG_PROTO_DIR ? &fwd__dir_ops : &fwd__remote_ops;
    return ep;
oom:
    snprintf(err, errlen, "out of memory");
    ep_free(ep);
    return NULL;
}

void fwd__ep_error(struct fwd_ep *ep, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(ep->last_error, sizeof(ep->last_error), fmt, ap);
    va_end(ap);
    ep->last_error_ms = clock_wall_ms();
    snprintf(ep->f->last_error, sizeof(ep->f->last_error), "%s: %s", ep->name, ep->last_error);
    if (ep->f->err_cb)
        ep->f->err_cb(ep->name, ep->last_error, ep->f->err_ud);
}

void fwd__ep_drop(struct fwd_ep *ep, enum fwd__drop r, uint64_t profiles, uint64_t bytes)
{
    ep->st.dropped_profiles[r] += profiles;
    ep->st.dropped_bytes[r] += bytes;
}

/* ------------------------------------------------------------------ jobs */

#define RESUBMIT_RETRY_MS 100 /* after a resubmission the queue refused (OOM) */

static void job_run(void *arg);
static void job_after(void *arg, int status);

static int job_queue(struct fwd *f, struct fwd__job *j)
{
    struct workq_stats st;
    uint64_t cost = j->cost;

    /* A job costlier than the whole budget would be refused: it claims the
     * whole budget instead and so runs alone. */
    workq_get_stats(f->work, &st);
    if (st.max_cost && cost > st.max_cost)
        cost = st.max_cost;
    return workq_submit_cost(f->work, 0, cost, job_run, job_after, j);
}

static void job_run(void *arg)
{
    struct fwd__job *j = arg;

    j->fn(j);
}

static void resubmit(uv_timer_t *t)
{
    struct fwd *f = container_of(t, struct fwd, resubmit);
    struct fwd__job *j = f->cancelled, *left = NULL, **left_tail = &left;

    f->cancelled = NULL;
    f->cancelled_tail = &f->cancelled;
    while (j) {
        struct fwd__job *next = j->next;

        j->next = NULL;
        if (job_queue(f, j) < 0) {
            *left_tail = j;
            left_tail = &j->next;
        }
        j = next;
    }
    if (left) {
        *left_tail = f->cancelled;
        if (!f->cancelled)
            f->cancelled_tail = left_tail;
        f->cancelled = left;
        uv_timer_start(&f->resubmit, resubmit, RESUBMIT_RETRY_MS, 0);
    }
}

static void job_after(void *arg, int status)
{
    struct fwd__job *j = arg;
    struct fwd *f = j->f;

    if (status == 0) {
        j->after(j);
        return;
    }
    /* Cancelled before it started (UV_ECANCELED: the agent cancels the
     * backlog when it begins to shut down). Not submitted again from here:
     * workq_cancel_backlog() would cancel it again, for ever. */
    j->next = NULL;
    *f->cancelled_tail = j;
    f->cancelled_tail = &j->next;
    if (!uv_is_active((uv_handle_t *)&f->resubmit))
        uv_timer_start(&f->resubmit, resubmit, 0, 0);
}

int fwd__job_submit(struct fwd *f, struct fwd__job *j, uint64_t cost,
                    void (*fn)(struct fwd__job *j), void (*after)(struct fwd__job *j))
{
    j->f = f;
    j->fn = fn;
    j->after = after;
    j->cost = cost;
    j->next = NULL;
    return job_queue(f, j);
}

/* ---------------------------------------------------------------- public */

int fwd_new(const struct fwd_opts *o, struct fwd **out, char *err, size_t errlen)
{
    struct fwd *f = calloc(1, sizeof(*f));

    *out = NULL;
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    f->loop = o->loop;
    f->http = o->http;
    f->work = o->work;
    f->err_cb = o->on_error;
    f->err_ud = o->ud;
    f->cancelled_tail = &f->cancelled;
    uv_timer_init(o->loop, &f->resubmit);
    *out = f;
    return 0;
}

const char *fwd_last_error(const struct fwd *f)
{
    return f->last_error;
}

static void retire(struct fwd *f, struct fwd_ep *ep, uint64_t deadline_ms)
{
    ep->closing = true;
    ep->next = f->retired;
    f->retired = ep;
    ep->ops->close(ep, uv_now(f->loop) + deadline_ms);
}

/* The settings were checked at load (url, names unique, fsync...): what
 * can still fail here is the running program's, not the file's. */
int fwd_apply(struct fwd *f, struct conf_doc *doc, const struct cfg_remote *remotes,
              size_t n_remotes, const struct cfg_spool *spool, const struct conf_kv *external,
              size_t n_external, char *err, size_t errlen)
{
    struct fwd_ep *fresh = NULL, **tail = &fresh, *ep, *old, **pp;
    int r = 0;

    if (f->closing) {
        snprintf(err, errlen, "forwarder is closing");
        return -ESHUTDOWN;
    }
    for (size_t i = 0; i < n_remotes; i++) {
        const struct cfg_remote *rc = &remotes[i];

        if (rc->protocol != CFG_PROTO_DIR && !f->http) {
            snprintf(err, errlen, "remote-write[%zu]: no HTTP client", i);
            r = -EINVAL;
            goto fail;
        }
        ep = ep_new(f, doc, rc, spool, external, n_external, err, errlen);
        if (!ep) {
            r = -ENOMEM;
            goto fail;
        }
        *tail = ep;
        tail = &ep->next;
    }
    /* Keep unchanged endpoints; start the new ones. */
    for (ep = fresh; ep; ep = ep->next) {
        for (old = f->eps; old; old = old->next) {
            if (strcmp(old->signature, ep->signature) == 0)
                break;
        }
        if (old)
            continue;
        r = ep->ops->start(ep, err, errlen);
        if (r < 0)
            goto fail_started;
    }
    /* Swap: unchanged endpoints keep their running objects (and queues). */
    {
        struct fwd_ep *result = NULL, **rt = &result;

        while (fresh) {
            ep = fresh;
            fresh = ep->next;
            ep->next = NULL;
            for (pp = &f->eps; *pp && strcmp((*pp)->signature, ep->signature) != 0;)
                pp = &(*pp)->next;
            if (*pp) {
                old = *pp;
                *pp = old->next;
                ep_free(ep);
                ep = old;
                ep->next = NULL;
            }
            *rt = ep;
            rt = &ep->next;
        }
        /* Whatever is left in the old list is gone from the config. */
        while (f->eps) {
            old = f->eps;
            f->eps = old->next;
            retire(f, old, old->cfg->remote_timeout_ms);
        }
        f->eps = result;
    }
    return 0;

fail_started:
    /* Stop the ones already started synchronously: they hold no profiles. */
    while (fresh) {
        ep = fresh;
        fresh = ep->next;
        for (old = f->eps; old; old = old->next) {
            if (strcmp(old->signature, ep->signature) == 0)
                break;
        }
        if (!old && ep->sink) {
            retire(f, ep, 0);
            continue;
        }
        ep_free(ep);
    }
    return r;
fail:
    while (fresh) {
        ep = fresh;
        fresh = ep->next;
        ep_free(ep);
    }
    return r;
}

void fwd_submit(struct fwd *f, struct fwd_profile *p)
{
    if (!p || f->closing)
        return;
    for (struct fwd_ep *ep = f->eps; ep; ep = ep->next)
        ep->ops->submit(ep, p);
}

static void freed(uv_handle_t *h)
{
    struct fwd *f = container_of((uv_timer_t *)h, struct fwd, resubmit);
    void (*cb)(void *) = f->close_cb;
    void *ud = f->close_ud;

    free(f);
    if (cb)
        cb(ud);
}

/* Every endpoint has closed, so no job is left (each waits for its own). */
static void finish_close(struct fwd *f)
{
    uv_close((uv_handle_t *)&f->resubmit, freed);
}

void fwd__ep_closed(struct fwd_ep *ep)
{
    struct fwd *f = ep->f;

    for (struct fwd_ep **pp = &f->retired; *pp; pp = &(*pp)->next) {
        if (*pp == ep) {
            *pp = ep->next;
            break;
        }
    }
    ep_free(ep);
    if (f->closing && --f->close_pending == 0)
        finish_close(f);
}

void fwd_close(struct fwd *f, uint64_t deadline_ms, void (*cb)(void *ud), void *ud)
{
    struct fwd_ep *ep, *next;

    if (!f) {
        if (cb)
            cb(ud);
        return;
    }
    f->closing = true;
    f->close_cb = cb;
    f->close_ud = ud;
    f->close_pending = 1; /* held until every close has been started */
    for (ep = f->retired; ep; ep = ep->next)
        f->close_pending++;
    /* Endpoints retired by a reload are closing already: by this deadline
     * too if it comes sooner. */
    for (ep = f->retired; ep; ep = next) {
        next = ep->next;
        ep->ops->close(ep, uv_now(f->loop) + deadline_ms);
    }
    while (f->eps) {
        ep = f->eps;
        f->eps = ep->next;
        f->close_pending++;
        ep->closing = true;
        ep->next = f->retired;
        f->retired = ep;
        ep->ops->close(ep, uv_now(f->loop) + deadline_ms);
    }
    if (--f->close_pending == 0)
        finish_close(f);
}

/* --------------------------------------------------------------- metrics */

/* Every forward family has one series per endpoint, labelled by endpoint
 * and sink kind (and, for the dropped ones, by reason), read from the
 * endpoint's struct fwd__stats. */
#define U64(name, type, help, field) PROM_FAMILY_U64(name, type, help, struct fwd__stats, field)
#define BY_REASON(name, help, field) \
    PROM_FAMILY_U64_BY(name, "counter", help, struct fwd__stats, field, "reason", drop_names)

static const struct prom_family families[] = {
    U64("proflet_remote_sent_profiles_total", "counter", "Profiles accepted by the endpoint.",
        sent_profiles),
    U64("proflet_remote_sent_bytes_total", "counter", "Profile bytes accepted by the endpoint.",
        sent_bytes),
    U64("proflet_remote_retried_profiles_total", "counter",
        "Profiles sent again after a retryable failure.", retried_profiles),
    U64("proflet_remote_retried_bytes_total", "counter",
        "Profile bytes sent again after a retryable failure.", retried_bytes),
    U64("proflet_remote_requests_total", "counter", "Requests (or file writes) attempted.",
        requests),
    U64("proflet_remote_failed_requests_total", "counter", "Requests that did not fully succeed.",
        failed_requests),
    U64("proflet_remote_ambiguous_profiles_total", "counter",
        "Profiles resent after an outcome the server did not report (timeout, reset).",
        ambiguous_profiles),
    U64("proflet_remote_recompressed_profiles_total", "counter",
        "Profiles compressed again for the endpoint's compression setting.", recompressed_profiles),
    BY_REASON("proflet_remote_dropped_profiles_total", "Profiles dropped, by reason.",
              dropped_profiles),
    BY_REASON("proflet_remote_dropped_bytes_total", "Profile bytes dropped, by reason.",
              dropped_bytes),
    U64("proflet_remote_failed_profiles_total", "counter",
        "Profiles refused by the endpoint with a non-retryable error.",
        dropped_profiles[FWD_DROP_REJECTED]),
    U64("proflet_remote_queue_profiles", "gauge", "Profiles queued in memory.", queue_len),
    U64("proflet_remote_queue_bytes", "gauge", "Profile bytes queued in memory.", queue_bytes),
    U64("proflet_remote_inflight_profiles", "gauge", "Profiles in requests not yet answered.",
        inflight_profiles),
    U64("proflet_remote_spool_bytes", "gauge", "Bytes in the disk spool.", spool_bytes),
    U64("proflet_remote_spool_segments", "gauge", "Segment files in the disk spool.",
        spool_segments),
    U64("proflet_remote_spool_profiles", "gauge", "Profiles in the disk spool not yet delivered.",
        spool_records),
    U64("proflet_remote_spool_written_profiles_total", "counter", "Profiles written to the spool.",
        spool_written_profiles),
    U64("proflet_remote_spool_replayed_profiles_total", "counter",
        "Profiles read back from the spool.", spool_replayed_profiles),
    U64("proflet_remote_dir_files", "gauge", "Profiles in the directory sink's index.", files),
    U64("proflet_remote_dir_deleted_files_total", "counter",
        "Profiles deleted from the directory sink by its size cap.", files_deleted),
};

#undef U64
#undef BY_REASON

/* The spool's age is not kept but computed as it is written. */
struct spool_age {
    double seconds;
};

static const struct prom_family spool_age_family =
    PROM_FAMILY_F64("proflet_remote_spool_oldest_age_seconds", "gauge",
                    "Age of the oldest spooled profile.", struct spool_age, seconds);

static const struct prom_family push_duration_family =
    PROM_FAMILY_HIST("proflet_remote_push_duration_seconds", "Latency of requests to the endpoint.",
                     struct fwd__stats, lat);

#define EP_LABELS(ep) \
    ((const char *const[]){ "endpoint", (ep)->name, "kind", (ep)->ops->kind, NULL })

static void family(struct buf *out, const struct fwd *f, const struct prom_family *m)
{
    prom_family_head(out, m);
    for (const struct fwd_ep *ep = f->eps; ep; ep = ep->next)
        prom_family_series(out, m, &ep->st, EP_LABELS(ep));
}

void fwd_metrics(const struct fwd *f, struct buf *out)
{
    uint64_t wall = clock_wall_ms();

    if (!f->eps)
        return;
    for (size_t i = 0; i < ARRAY_SIZE(families); i++)
        family(out, f, &families[i]);
    prom_family_head(out, &spool_age_family);
    for (const struct fwd_ep *ep = f->eps; ep; ep = ep->next) {
        uint64_t oldest = ep->st.spool_oldest_ms;
        struct spool_age age = {
            .seconds = oldest && wall > oldest ? (double)(wall - oldest) / 1e3 : 0,
        };

        prom_family_series(out, &spool_age_family, &age, EP_LABELS(ep));
    }
    family(out, f, &push_duration_family);
}

#undef EP_LABELS

void fwd_endpoints_visit(const struct fwd *f,
                         void (*fn)(const struct fwd_endpoint_view *e, void *ud), void *ud)
{
    for (const struct fwd_ep *ep = f ? f->eps : NULL; ep; ep = ep->next) {
        struct fwd_endpoint_view v = {
            .name = ep->name,
            .url = ep->cfg->url,
            .queue_profiles = ep->st.queue_len,
            .queue_bytes = ep->st.queue_bytes,
            .inflight_profiles = ep->st.inflight_profiles,
            .spool_bytes = ep->st.spool_bytes,
            .spool_records = ep->st.spool_records,
            .spool_oldest_ms = ep->st.spool_oldest_ms,
            .sent_profiles = ep->st.sent_profiles,
            .sent_bytes = ep->st.sent_bytes,
            .retried_profiles = ep->st.retried_profiles,
            .failed_requests = ep->st.failed_requests,
            .last_error = ep->last_error,
            .last_error_ms = ep->last_error_ms,
            .compression = pprof_compression_name(ep->cfg->compression),
            .encoder = pprof_compression_encoder(ep->cfg->compression),
        };

        for (int r = 0; r < FWD_DROP__N; r++)
            v.dropped_profiles += ep->st.dropped_profiles[r];
        fn(&v, ud);
    }
}
