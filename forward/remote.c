/* SPDX-License-Identifier: Apache-2.0 */
/* Remote sink: Pyroscope push (batched PushRequest) or the legacy /ingest
 * API (one profile per request): building requests, classifying their
 * answers, retries with jittered exponential backoff, health, the spool
 * glue, secret files and the close. The memory queue and the choice of
 * each request's profiles are in remote_queue.c (docs/design.md "Modules").
 *
 * Queue model (docs/forwarding.md): the logical FIFO of an endpoint is the
 * memory queue followed by the spool. A fresh profile goes to memory only if
 * the endpoint is healthy, the queue has room and its series has nothing
 * waiting in the spool; otherwise it is appended to the spool. Replayed
 * spool records join the memory queue when it runs low, beside fresh
 * profiles of other series.
 *
 * What is resent is decided by fwd__classify(): accepted profiles are never
 * resent; refused retryable ones are; an unattributed whole-request refusal
 * is resent (or split when not retryable); an outcome nobody reported
 * (timeout, reset) is resent one profile per request and counted.
 *
 * Threading: loop thread; PushRequest encoding and gzip run on the agent's
 * work queue (fwd__job_submit), each job owning its output buffer and
 * reading profiles whose references its request's queue entries hold. Ownership: the sink owns its queue
 * entries (each holding a profile reference) and its requests. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "forward/internal.h"
#include "net/net.h"
#include "pprof/pprof.h"

#define SECRET_REFRESH_MS 5000
#define ERRBODY_MAX (64 * 1024)

struct remote;

struct req {
    struct fwd__job job;
    struct remote *rm;
    struct net_request *nr;
    struct fwd__qent **e;
    size_t n;
    uint64_t bytes;
    uint8_t *body; /* owned (push); ingest points at the profile */
    size_t body_len;
    const uint8_t *send;
    size_t send_len;
    char *url; /* ingest */
    bool gzip;
    int enc_err;
    bool encoding;
    struct fwd_profile **ps;  /* encode input (refs held by the entries) */
    const struct labels **ls; /* their merged labels (the entries') */
};

struct remote {
    struct fwd_ep *ep;
    struct net_client *http;
    char *push_url;
    char **hdr;
    size_t n_hdr;
    struct net_secret *password, *bearer; /* inline or file, re-read off the loop */
    struct net_auth *auth;                /* authorization, http-headers, oauth2 */
    struct net_tls tls;
    struct fwd__queue q;
    struct req **inflight;
    unsigned n_inflight;
    /* health */
    bool healthy;
    unsigned fails;
    uint64_t backoff_until;
    /* spool */
    struct fwd__spool *spool;
    bool loading;
    /* handles */
    uv_timer_t timer;          /* batch wait, backoff */
    uv_timer_t tick;           /* 1 s: spool age and retries, secrets */
    uv_timer_t deadline_timer; /* the close deadline, whatever the others say */
    unsigned handles;
    unsigned jobs;
    uint64_t tick_n;
    /* close */
    bool closing, close_spooled, spool_closing;
    uint64_t deadline;
};

static void pump(struct remote *rm);
static void maybe_closed(struct remote *rm);

/* ------------------------------------------------------------- entries */

static void ent_free(struct remote *rm, struct fwd__qent *e, bool ack)
{
    if (ack && e->token && rm->spool)
        fwd__spool_ack(rm->spool, e->token);
    labels_done(&e->labels);
    fwd_profile_unref(e->p);
    free(e);
}

/* ------------------------------------------------------------- the spool */

static void to_spool(struct remote *rm, struct fwd_profile *p)
{
    fwd__spool_append(rm->spool, p);
}

/* Moves fresh entries that are not in flight to the spool (the endpoint is
 * down): they then survive a restart. Replayed entries stay in memory; they
 * are still on disk. */
static void spill(struct remote *rm)
{
    struct fwd__qent *e, *next;

    if (!rm->spool)
        return;
    /* Replayed entries are on disk already. A series with profiles in the
     * spool keeps its memory entries (older) ahead of them; decided before
     * moving anything, so a series is moved whole or not at all. */
    for (e = rm->q.head; e; e = e->next)
        e->keep = e->token || fwd__spool_series_count(rm->spool, e->series) > 0;
    for (e = rm->q.head; e; e = next) {
        next = e->next;
        if (e->keep)
            continue;
        fwd__queue_unlink(&rm->q, e);
        to_spool(rm, e->p);
        ent_free(rm, e, false);
    }
}

static void spool_loaded(void *ud, struct fwd_profile **p, uint64_t *tokens, size_t n)
{
    struct remote *rm = ud;
    uint64_t now = uv_now(rm->ep->loop);

    rm->loading = false;
    for (size_t i = 0; i < n; i++) {
        struct fwd__qent *e = calloc(1, sizeof(*e));
        int kept = e ? fwd__labels_final(rm->ep, &e->labels, &p[i]->labels) : -ENOMEM;

        /* The spool keeps profiles as submitted: a replayed one gets its
         * final labels here, once for its stay in memory (the rules of a
         * later configuration may drop what an earlier one spooled). */
        if (kept <= 0) {
            free(e);
            fwd__ep_drop(rm->ep, kept == 0 ? FWD_DROP_WRITE_RELABEL : FWD_DROP_IO, 1, p[i]->len);
            fwd__spool_ack(rm->spool, tokens[i]);
            fwd_profile_unref(p[i]);
            continue;
        }
        e->p = p[i];
        e->token = tokens[i];
        e->seq = rm->q.next_seq++;
        e->series = fwd__series_hash(&p[i]->labels);
        e->queued_at = now;
        fwd__queue_append(&rm->q, e);
    }
    pump(rm);
    maybe_closed(rm);
}

static void spool_changed(void *ud)
{
    struct remote *rm = ud;

    pump(rm);
    maybe_closed(rm);
}

static const struct fwd__spool_ops_cb spool_cb = { spool_loaded, spool_changed };

/* ------------------------------------------------------------- requests */

static bool series_busy(const void *ud, uint64_t series)
{
    const struct remote *rm = ud;

    for (unsigned i = 0; i < rm->n_inflight; i++) {
        const struct req *q = rm->inflight[i];

        for (size_t k = 0; k < q->n; k++) {
            if (q->e[k]->series == series)
                return true;
        }
    }
    return false;
}

static uint64_t backoff_ms(struct remote *rm)
{
    const struct cfg_remote *c = rm->ep->cfg;
    uint64_t b = c->min_backoff_ms, r = 0;

    for (unsigned i = 1; i < rm->fails && b < c->max_backoff_ms; i++)
        b *= 2;
    if (b > c->max_backoff_ms)
        b = c->max_backoff_ms;
    if (getrandom(&r, sizeof(r), 0) != sizeof(r))
        r = clock_mono_ns();
    b += r % (b ? b : 1); /* [b, 2b) */
    return b > c->max_backoff_ms ? c->max_backoff_ms : b;
}

static void req_free(struct req *q)
{
    free(q->e);
    free(q->ps);
    free(q->ls);
    free(q->body);
    free(q->url);
    free(q);
}

static void inflight_add(struct remote *rm, struct req *q)
{
    rm->inflight[rm->n_inflight++] = q;
    rm->ep->st.inflight_profiles += q->n;
}

static void inflight_remove(struct remote *rm, struct req *q)
{
    for (unsigned i = 0; i < rm->n_inflight; i++) {
        if (rm->inflight[i] == q) {
            rm->inflight[i] = rm->inflight[--rm->n_inflight];
            rm->ep->st.inflight_profiles -= q->n;
            break;
        }
    }
}

/* While closing: when nothing can be sent before the deadline (backing off
 * past it, nothing in flight), waiting for it is pointless; it is now. */
static void close_early(struct remote *rm)
{
    uint64_t now = uv_now(rm->ep->loop);

    if (rm->closing && !rm->healthy && rm->backoff_until >= rm->deadline && rm->n_inflight == 0 &&
        rm->deadline > now)
        rm->deadline = now;
}

/* `retry_after_ms`: what the server asked for (Retry-After on 429 and 503),
 * 0 for none; it replaces the exponential backoff, capped by max-backoff. */
static void mark_failure(struct remote *rm, uint64_t retry_after_ms)
{
    bool was = rm->healthy;
    uint64_t wait = backoff_ms(rm);

    if (retry_after_ms)
        wait = retry_after_ms < rm->ep->cfg->max_backoff_ms ? retry_after_ms
                                                            : rm->ep->cfg->max_backoff_ms;
    rm->fails++;
    rm->healthy = false;
    rm->backoff_until = uv_now(rm->ep->loop) + wait;
    if (was)
        spill(rm);
    close_early(rm);
}

static void mark_success(struct remote *rm)
{
    rm->fails = 0;
    rm->healthy = true;
    rm->backoff_until = 0;
}

/* A refused entry: back to the queue, or out when its retries are spent. */
static void requeue(struct remote *rm, struct fwd__qent *e, bool retry)
{
    struct fwd_ep *ep = rm->ep;

    if (retry) {
        e->attempts++;
        ep->st.retried_profiles++;
        ep->st.retried_bytes += e->p->len;
    }
    if (ep->cfg->max_retries && e->attempts > ep->cfg->max_retries) {
        if (rm->spool && !e->token) {
            to_spool(rm, e->p);
            ent_free(rm, e, false);
            return;
        }
        if (!rm->spool || rm->closing) {
            fwd__ep_drop(ep, FWD_DROP_RETRIES, 1, e->p->len);
            ent_free(rm, e, true);
            return;
        }
        e->attempts = 0; /* a spooled record stays until delivered or aged out */
    }
    fwd__queue_insert_sorted(&rm->q, e);
}

static void on_done(struct net_request *nr, struct net_response *resp, void *ud)
{
    struct req *q = ud;
    struct remote *rm = q->rm;
    struct fwd_ep *ep = rm->ep;
    const char **ids = calloc(q->n, sizeof(*ids));
    uint8_t *states = calloc(q->n, 1);
    char msg[FWD__ERRLEN];
    enum fwd__verdict v;
    bool any_retry = false;

    inflight_remove(rm, q);
    prom_hist_observe(&ep->st.lat, (double)resp->duration_us / 1e6);
    for (size_t i = 0; ids && i < q->n; i++)
        ids[i] = q->e[i]->p->id;
    if (!ids || !states) {
        v = FWD_V_AMBIGUOUS;
        snprintf(msg, sizeof(msg), "out of memory");
    } else {
        v = fwd__classify(resp->result, resp->status, resp->body.data, resp->body.len, ids, q->n,
                          states, msg, sizeof(msg));
    }
    if (v != FWD_V_OK) {
        const char *why = net_secret_error(rm->bearer) ? net_secret_error(rm->bearer)
                                                       : net_secret_error(rm->password);

        ep->st.failed_requests++;
        if (why)
            fwd__ep_error(ep, "%s (%zu profiles); %s", msg, q->n, why);
        else
            fwd__ep_error(ep, "%s (%zu profiles)", msg, q->n);
    }
    if (resp->result == 0 && (resp->status == 401 || resp->status == 403)) {
        /* A rotated credential: read the files again before the retry. */
        net_secret_expire(rm->bearer);
        net_secret_expire(rm->password);
    }
    if (resp->result == 0 && resp->status == 429 && !ep->cfg->retry_on_http_429 && v == FWD_V_RETRY)
        v = FWD_V_REFUSED; /* retry-on-http-429: false drops */
    for (size_t i = 0; i < q->n; i++) {
        struct fwd__qent *e = q->e[i];

        switch (v) {
        case FWD_V_OK:
            ep->st.sent_profiles++;
            ep->st.sent_bytes += e->p->len;
            ent_free(rm, e, true);
            break;
        case FWD_V_PARTIAL:
            if (states[i] == FWD_P_OK) {
                ep->st.sent_profiles++;
                ep->st.sent_bytes += e->p->len;
                ent_free(rm, e, true);
            } else if (states[i] == FWD_P_DROP) {
                fwd__ep_drop(ep, FWD_DROP_REJECTED, 1, e->p->len);
                ent_free(rm, e, true);
            } else {
                any_retry = true;
                requeue(rm, e, true);
            }
            break;
        case FWD_V_SPLIT:
        case FWD_V_TOO_LARGE:
            if (q->n == 1) {
                fwd__ep_drop(ep, v == FWD_V_SPLIT ? FWD_DROP_REJECTED : FWD_DROP_TOO_LARGE, 1,
                             e->p->len);
                ent_free(rm, e, true);
            } else {
                e->max_batch = (unsigned)(q->n / 2);
                requeue(rm, e, false);
            }
            break;
        case FWD_V_AMBIGUOUS:
            if (q->n > 1) {
                ep->st.ambiguous_profiles++;
                e->max_batch = 1;
            }
            any_retry = true;
            requeue(rm, e, true);
            break;
        case FWD_V_RETRY:
        case FWD_V_UNREACHED:
            any_retry = true;
            requeue(rm, e, true);
            break;
        case FWD_V_REFUSED:
            fwd__ep_drop(ep, FWD_DROP_REJECTED, 1, e->p->len);
            ent_free(rm, e, true);
            break;
        }
    }
    if (any_retry)
        mark_failure(rm,
                     (resp->status == 429 || resp->status == 503) ? resp->retry_after_s * 1000 : 0);
    else
        mark_success(rm);
    free(ids);
    free(states);
    req_free(q);
    pump(rm);
    maybe_closed(rm);
}

static void send_req(struct remote *rm, struct req *q)
{
    struct fwd_ep *ep = rm->ep;
    const char *h[64];
    size_t nh = 0;
    char tmo[64];
    struct net_request_opts o = { 0 };
    int r;

    for (size_t i = 0; i < rm->n_hdr && nh < 60; i++)
        h[nh++] = rm->hdr[i];
    snprintf(tmo, sizeof(tmo), "Connect-Timeout-Ms: %" PRIu64, ep->cfg->remote_timeout_ms);
    if (ep->cfg->protocol == CFG_PROTO_PUSH) {
        h[nh++] = "Content-Type: application/proto";
        h[nh++] = "Connect-Protocol-Version: 1";
        h[nh++] = tmo;
        if (q->gzip)
            h[nh++] = "Content-Encoding: gzip";
    } else {
        h[nh++] = "Content-Type: application/octet-stream";
    }
    o.method = "POST";
    o.url = ep->cfg->protocol == CFG_PROTO_PUSH ? rm->push_url : q->url;
    o.headers = h;
    o.n_headers = nh;
    o.body = q->send;
    o.body_len = q->send_len;
    o.max_response = ERRBODY_MAX;
    o.timeout_ms = ep->cfg->remote_timeout_ms;
    o.connect_timeout_ms = ep->cfg->remote_timeout_ms < 10000 ? ep->cfg->remote_timeout_ms : 10000;
    o.bearer_token = net_secret_get(rm->bearer);
    if (ep->cfg->http.basic_auth) {
        const char *pw = net_secret_get(rm->password);

        o.username = ep->cfg->http.basic_auth->username ? ep->cfg->http.basic_auth->username : "";
        o.password = pw ? pw : "";
    }
    o.tls = &rm->tls;
    o.proxy_url = ep->cfg->http.proxy_url;
    o.no_proxy = ep->cfg->http.no_proxy;
    o.proxy_from_environment = ep->cfg->http.proxy_from_environment;
    o.proxy_headers = ep->cfg->http.proxy_connect_header;
    o.n_proxy_headers = ep->cfg->http.n_proxy_connect_header;
    o.auth = rm->auth;
    o.http2 = ep->cfg->http.enable_http2;
    /* A redirect is followed with the same method and body (net keeps a
     * POST a POST); when not followed, fwd__classify() retries it. */
    o.follow_redirects = ep->cfg->http.follow_redirects;
    ep->st.requests++;
    r = net_request_start(rm->http, &o, on_done, q, &q->nr);
    if (r < 0) {
        struct net_response resp = { .result = NET_ECONNECT, .error = "could not start" };

        buf_init(&resp.body, 1);
        inflight_add(rm, q); /* on_done removes it */
        on_done(NULL, &resp, q);
        return;
    }
    inflight_add(rm, q);
}

static void enc_work(struct fwd__job *job)
{
    struct req *q = container_of(job, struct req, job);
    uint8_t *gz;
    size_t gzlen;

    enum pprof_compression c = q->rm->ep->cfg->compression;

    if (q->rm->ep->cfg->protocol == CFG_PROTO_INGEST) {
        const uint8_t *data;

        q->enc_err = fwd__profile_body(q->ps[0], c, &data, &q->body_len, &q->body);
        q->send = data;
        q->send_len = q->body_len;
        return;
    }
    q->enc_err = fwd__push_encode(q->ps, q->ls, q->n, c, &q->body, &q->body_len);
    if (q->enc_err == 0 && q->gzip) {
        q->enc_err =
            pprof_compress(q->body, q->body_len,
                           c == PPROF_COMPRESS_NONE ? PPROF_COMPRESS_FASTEST : c, &gz, &gzlen);
        if (q->enc_err == 0) {
            free(q->body);
            q->body = gz;
            q->body_len = gzlen;
        }
    }
    q->send = q->body;
    q->send_len = q->body_len;
}

static void enc_done(struct fwd__job *job)
{
    struct req *q = container_of(job, struct req, job);
    struct remote *rm = q->rm;

    rm->jobs--;
    inflight_remove(rm, q);
    q->encoding = false;
    if (rm->closing && uv_now(rm->ep->loop) >= rm->deadline) {
        for (size_t i = 0; i < q->n; i++)
            fwd__queue_insert_sorted(&rm->q, q->e[i]);
        req_free(q);
    } else if (q->enc_err < 0) {
        /* Out of memory: put everything back and retry later. */
        for (size_t i = 0; i < q->n; i++)
            requeue(rm, q->e[i], false);
        mark_failure(rm, 0);
        req_free(q);
    } else {
        send_req(rm, q);
    }
    pump(rm);
    maybe_closed(rm);
}

static void start_req(struct remote *rm, struct fwd__qent **batch, size_t n, uint64_t bytes)
{
    struct fwd_ep *ep = rm->ep;
    struct req *q = calloc(1, sizeof(*q));
    int r;

    if (!q || !(q->e = malloc(n * sizeof(*q->e))) || !(q->ps = malloc(n * sizeof(*q->ps))) ||
        !(q->ls = malloc(n * sizeof(*q->ls)))) {
        if (q)
            req_free(q);
        for (size_t i = 0; i < n; i++)
            fwd__queue_insert_sorted(&rm->q, batch[i]);
        return;
    }
    q->rm = rm;
    q->n = n;
    q->bytes = bytes;
    memcpy(q->e, batch, n * sizeof(*batch));
    for (size_t i = 0; i < n; i++) {
        q->ps[i] = batch[i]->p;
        q->ls[i] = &batch[i]->labels;
    }
    if (ep->cfg->protocol == CFG_PROTO_INGEST) {
        q->url = fwd__ingest_url(ep->cfg->url, &batch[0]->labels, batch[0]->p->start_ns,
                                 batch[0]->p->end_ns);
        q->send = batch[0]->p->data;
        q->send_len = batch[0]->p->len;
        if (!q->url) {
            fwd__queue_insert_sorted(&rm->q, batch[0]);
            req_free(q);
            return;
        }
        if (!fwd__recompress_needed(batch[0]->p, ep->cfg->compression)) {
            send_req(rm, q);
            return;
        }
    }
    q->gzip = ep->cfg->protocol == CFG_PROTO_PUSH && ep->cfg->gzip_request;
    q->encoding = true;
    inflight_add(rm, q); /* counts against the window; series busy */
    /* Its peak memory is about the request body, the profiles' bytes, or
     * for profiles compressed again, their inflated bytes: gzip'd pprof
     * inflates 3-5x. */
    size_t again = 0;

    for (size_t i = 0; i < n; i++)
        again += fwd__recompress_needed(batch[i]->p, ep->cfg->compression);
    if (again)
        bytes *= 6;
    r = fwd__job_submit(ep->f, &q->job, bytes, enc_work, enc_done);
    if (r < 0) {
        inflight_remove(rm, q);
        for (size_t i = 0; i < n; i++)
            fwd__queue_insert_sorted(&rm->q, batch[i]);
        req_free(q);
        return;
    }
    rm->jobs++;
    ep->st.recompressed_profiles += again;
}

static void on_timer(uv_timer_t *t);

static void arm_at(struct remote *rm, uint64_t at)
{
    uint64_t now = uv_now(rm->ep->loop);
    uint64_t due = uv_timer_get_due_in(&rm->timer);

    if (uv_is_closing((uv_handle_t *)&rm->timer))
        return;
    if (at <= now)
        at = now + 1;
    if (uv_is_active((uv_handle_t *)&rm->timer) && now + due <= at)
        return;
    uv_timer_start(&rm->timer, on_timer, at - now, 0);
}

static void pump(struct remote *rm)
{
    struct fwd_ep *ep = rm->ep;
    uint64_t now = uv_now(ep->loop);
    unsigned window = rm->healthy ? ep->cfg->max_inflight : 1;
    unsigned max_n = ep->cfg->protocol == CFG_PROTO_INGEST ? 1 : ep->cfg->batch_max_profiles;
    struct fwd__batch b = { 0 };

    /* Past the close's deadline nothing starts: maybe_closed() spools or
     * drops what is queued once the last job has called back. An encoding
     * job that ends then puts its profiles back in the queue; starting
     * another here would go on until the process is killed. */
    if (rm->close_spooled || (rm->closing && now >= rm->deadline))
        return;
    if (!rm->healthy && now < rm->backoff_until) {
        arm_at(rm, rm->backoff_until);
        return;
    }
    if (!rm->healthy)
        max_n = 1;
    b.e = malloc(max_n * sizeof(*b.e));
    if (!b.e)
        return;
    while (rm->n_inflight < window && rm->q.head) {
        uint64_t due;

        fwd__queue_pick(&rm->q, &b, max_n, ep->cfg->batch_max_bytes, series_busy, rm);
        if (b.n == 0)
            break;
        due = fwd__batch_due(&b, ep->cfg->batch_max_wait_ms, rm->healthy && !rm->closing);
        if (due > now) {
            arm_at(rm, due);
            break;
        }
        for (size_t i = 0; i < b.n; i++)
            fwd__queue_unlink(&rm->q, b.e[i]);
        start_req(rm, b.e, b.n, b.bytes);
    }
    free(b.e);
    /* Replay when the queue runs low; an unhealthy endpoint with nothing in
     * memory loads records to probe with. */
    if (rm->spool && (rm->healthy || !rm->q.head) && !rm->loading && !rm->closing &&
        ep->st.queue_len < (uint64_t)max_n * window &&
        fwd__spool_load(rm->spool, (size_t)ep->cfg->batch_max_profiles * ep->cfg->max_inflight,
                        ep->cfg->queue_max_bytes / 4))
        rm->loading = true;
}

static void on_timer(uv_timer_t *t)
{
    struct remote *rm = container_of(t, struct remote, timer);

    pump(rm);
    maybe_closed(rm);
}

static void on_tick(uv_timer_t *t)
{
    struct remote *rm = container_of(t, struct remote, tick);

    rm->tick_n++;
    if (rm->spool && !rm->closing)
        fwd__spool_expire(rm->spool);
    pump(rm);
}

/* ------------------------------------------------------------- lifecycle */

static int add_hdr(struct remote *rm, const char *k, const char *v)
{
    char **n = realloc(rm->hdr, (rm->n_hdr + 1) * sizeof(*n));

    if (!n)
        return -ENOMEM;
    rm->hdr = n;
    if (asprintf(&rm->hdr[rm->n_hdr], "%s: %s", k, v) < 0)
        return -ENOMEM;
    rm->n_hdr++;
    return 0;
}

static int remote_start(struct fwd_ep *ep, char *err, size_t errlen)
{
    struct remote *rm = calloc(1, sizeof(*rm));
    const struct cfg_remote *c = ep->cfg;
    int r;

    if (!rm)
        goto oom;
    ep->sink = rm;
    rm->ep = ep;
    rm->http = fwd__http(ep->f);
    rm->q.st = &ep->st;
    rm->healthy = true;
    if (strncmp(c->url, "http://", 7) != 0 && strncmp(c->url, "https://", 8) != 0) {
        snprintf(err, errlen, "%s: url must be http:// or https://, not %s", ep->name, c->url);
        return -EINVAL;
    }
    rm->push_url = fwd__push_url(c->url);
    rm->inflight = calloc(c->max_inflight + 1, sizeof(*rm->inflight));
    if (!rm->push_url || !rm->inflight)
        goto oom;
    for (unsigned i = 0; i < c->n_headers; i++) {
        if (add_hdr(rm, c->headers[i].key, c->headers[i].value) < 0)
            goto oom;
    }
    if (c->tenant_id && *c->tenant_id && add_hdr(rm, "X-Scope-OrgID", c->tenant_id) < 0)
        goto oom;
    net_tls_from_cfg(&rm->tls, &c->http.tls);
    if (!(rm->auth = net_auth_new(ep->loop, fwd__workq(ep->f), &c->http)))
        goto oom;
    /* Secret files are re-read off the loop when due, as the scrape's
     * are, every 5 s so that a rotated token reaches the next batch; an
     * unreadable file is the endpoint's error, not a start failure, so a
     * secret mounted late is picked up. */
    if ((c->http.bearer_token || c->http.bearer_token_file) &&
        !(rm->bearer = net_secret_new(ep->loop, fwd__workq(ep->f), c->http.bearer_token,
                                      c->http.bearer_token_file, SECRET_REFRESH_MS)))
        goto oom;
    if (c->http.basic_auth && (c->http.basic_auth->password || c->http.basic_auth->password_file) &&
        !(rm->password = net_secret_new(ep->loop, fwd__workq(ep->f), c->http.basic_auth->password,
                                        c->http.basic_auth->password_file, SECRET_REFRESH_MS)))
        goto oom;
    if (ep->spool->dir) {
        r = fwd__spool_open(ep, &spool_cb, rm, &rm->spool, err, errlen);
        if (r < 0)
            return r;
    }
    uv_timer_init(ep->loop, &rm->timer);
    uv_timer_init(ep->loop, &rm->tick);
    uv_timer_init(ep->loop, &rm->deadline_timer);
    rm->handles = 3;
    uv_timer_start(&rm->tick, on_tick, 1000, 1000);
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

static void remote_submit(struct fwd_ep *ep, struct fwd_profile *p)
{
    struct remote *rm = ep->sink;
    struct labels merged = LABELS_INIT;
    char why[FWD__ERRLEN];
    uint64_t series;
    struct fwd__qent *e;

    int kept;

    if (rm->closing)
        return;
    /* Decided here, before the spool: what the rules drop takes no disk. */
    if ((kept = fwd__labels_final(ep, &merged, &p->labels)) == 0) {
        fwd__ep_drop(ep, FWD_DROP_WRITE_RELABEL, 1, p->len);
        return;
    }
    if (kept < 0 || fwd__labels_validate(&merged, why, sizeof(why)) < 0) {
        labels_done(&merged);
        fwd__ep_drop(ep, FWD_DROP_INVALID, 1, p->len);
        return;
    }
    series = fwd__series_hash(&p->labels);
    if (rm->spool &&
        (!rm->healthy || !fwd__spool_ready(rm->spool) || fwd__queue_full(&rm->q, ep->cfg, p->len) ||
         fwd__spool_series_count(rm->spool, series) > 0)) {
        labels_done(&merged); /* the spool keeps the profile as submitted */
        to_spool(rm, p);
        return;
    }
    if (fwd__queue_full(&rm->q, ep->cfg, p->len)) {
        labels_done(&merged);
        fwd__ep_drop(ep, FWD_DROP_QUEUE_FULL, 1, p->len);
        return;
    }
    e = calloc(1, sizeof(*e));
    if (!e) {
        labels_done(&merged);
        fwd__ep_drop(ep, FWD_DROP_QUEUE_FULL, 1, p->len);
        return;
    }
    e->labels = merged; /* moved: merged once, sent as is */
    e->p = fwd_profile_ref(p);
    e->seq = rm->q.next_seq++;
    e->series = series;
    e->queued_at = uv_now(ep->loop);
    fwd__queue_append(&rm->q, e);
    pump(rm);
}

static void handle_closed(uv_handle_t *h)
{
    struct remote *rm = h->data;

    if (--rm->handles == 0)
        fwd__ep_closed(rm->ep);
}

static void spool_closed(void *ud)
{
    struct remote *rm = ud;

    rm->spool_closing = false;
    rm->timer.data = rm;
    rm->tick.data = rm;
    rm->deadline_timer.data = rm;
    uv_close((uv_handle_t *)&rm->timer, handle_closed);
    uv_close((uv_handle_t *)&rm->tick, handle_closed);
    uv_close((uv_handle_t *)&rm->deadline_timer, handle_closed);
}

/* Close: deliver until the deadline, then spool (or drop) what is left. */
static void maybe_closed(struct remote *rm)
{
    bool expired;

    if (!rm->closing || rm->spool_closing || rm->close_spooled)
        return;
    expired = uv_now(rm->ep->loop) >= rm->deadline;
    if (!expired && (rm->q.head || rm->n_inflight > 0))
        return;
    if (expired) {
        /* Cancel what is on the wire; the profiles go back to the queue. */
        for (unsigned i = 0; i < rm->n_inflight;) {
            struct req *q = rm->inflight[i];

            if (q->encoding && !q->nr) {
                i++; /* an encode job calls back, even if the queue cancels it */
                continue;
            }
            net_request_cancel(q->nr);
            rm->inflight[i] = rm->inflight[--rm->n_inflight];
            rm->ep->st.inflight_profiles -= q->n;
            for (size_t k = 0; k < q->n; k++)
                fwd__queue_insert_sorted(&rm->q, q->e[k]);
            req_free(q);
        }
    }
    if (rm->jobs > 0 || rm->n_inflight > 0 || rm->loading)
        return; /* a job will call back */
    rm->close_spooled = true;
    uv_timer_stop(&rm->timer);
    uv_timer_stop(&rm->deadline_timer);
    while (rm->q.head) {
        struct fwd__qent *e = rm->q.head;

        fwd__queue_unlink(&rm->q, e);
        if (rm->spool && !e->token)
            to_spool(rm, e->p);
        else if (!rm->spool)
            fwd__ep_drop(rm->ep, FWD_DROP_SHUTDOWN, 1, e->p->len);
        ent_free(rm, e, false);
    }
    if (rm->spool) {
        rm->spool_closing = true;
        fwd__spool_close(rm->spool, spool_closed, rm);
    } else {
        spool_closed(rm);
    }
}

static void on_deadline(uv_timer_t *t)
{
    maybe_closed(container_of(t, struct remote, deadline_timer));
}

static void remote_close(struct fwd_ep *ep, uint64_t deadline)
{
    struct remote *rm = ep->sink;
    uint64_t now = uv_now(ep->loop);

    if (!rm || rm->handles == 0) {
        /* start failed before any handle existed (and before the spool) */
        fwd__ep_closed(ep);
        return;
    }
    if (rm->closing) {
        /* Closing already (retired by a reload): an earlier deadline wins. */
        if (deadline < rm->deadline && !rm->close_spooled) {
            rm->deadline = deadline;
            uv_timer_start(&rm->deadline_timer, on_deadline, deadline > now ? deadline - now : 0,
                           0);
        }
        maybe_closed(rm);
        return;
    }
    rm->closing = true;
    rm->deadline = deadline;
    uv_timer_stop(&rm->tick);
    /* Its own timer: the batch and backoff timer is re-armed at will. */
    uv_timer_start(&rm->deadline_timer, on_deadline, deadline > now ? deadline - now : 0, 0);
    if (rm->healthy || now >= rm->backoff_until)
        pump(rm);
    close_early(rm);
    maybe_closed(rm);
}

static void remote_free(struct fwd_ep *ep)
{
    struct remote *rm = ep->sink;

    if (!rm)
        return;
    while (rm->q.head) {
        struct fwd__qent *e = rm->q.head;

        fwd__queue_unlink(&rm->q, e);
        ent_free(rm, e, false);
    }
    fwd__spool_free(rm->spool);
    for (size_t i = 0; i < rm->n_hdr; i++)
        free(rm->hdr[i]);
    free(rm->hdr);
    free(rm->push_url);
    free(rm->inflight);
    net_secret_free(rm->password);
    net_secret_free(rm->bearer);
    net_auth_free(rm->auth);
    free(rm);
    ep->sink = NULL;
}

const struct fwd__sink_ops fwd__remote_ops = {
    .kind = "remote",
    .start = remote_start,
    .submit = remote_submit,
    .close = remote_close,
    .free = remote_free,
};
