/* SPDX-License-Identifier: Apache-2.0 */
/* One scrape pair, a (target, profile type): a timer at its Prometheus
 * offset, one request in flight at most, response checks, then a job on the
 * work queue: a delta for cumulative types, a gzip check for the others
 * (whose bytes are then sent as they came). Profiles go to the manager's
 * callback; errors to its error callback, at most once a minute per pair
 * (docs/design.md "The path of a profile").
 *
 * Loop thread only. A pair is freed only when its timer is closed, no
 * request is in flight and no job holds it (`busy`), so removing a target
 * while its delta is being computed is safe. A pair's next scrape cannot
 * start while its previous job is pending, so profiles of one pair never
 * overtake each other. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/macros.h"
#include "scrape/internal.h"

const char *const scrape__fail_names[FAIL_N] = {
    [FAIL_CONNECT] = "connect",
    [FAIL_TIMEOUT] = "timeout",
    [FAIL_TOO_LARGE] = "too_large",
    [FAIL_HTTP_STATUS] = "http_status",
    [FAIL_EMPTY] = "empty",
    [FAIL_NOT_PPROF] = "not_pprof",
    [FAIL_IO] = "io",
    [FAIL_DECODE] = "decode",
    [FAIL_BACKLOG] = "backlog",
    [FAIL_OVER_BUDGET] = "over_budget",
};

static bool is_cumulative(const struct scrape_profile_cfg *prof)
{
    return prof->kind == SCRAPE_KIND_CUMULATIVE_MEMORY ||
           prof->kind == SCRAPE_KIND_CUMULATIVE_CONTENTION;
}

static struct pprof_delta *delta_for(const struct scrape_profile_cfg *prof)
{
    if (!is_cumulative(prof))
        return NULL;
    return pprof_delta_new(prof->kind == SCRAPE_KIND_CUMULATIVE_MEMORY ? PPROF_DELTA_MEMORY
                                                                       : PPROF_DELTA_CONTENTION);
}

static void maybe_free(struct scrape_pair *p)
{
    if (!p->closing || !p->timer_closed || p->busy || p->req)
        return;
    pprof_delta_free(p->delta);
    labels_done(&p->tp.labels);
    free(p->tp.url);
    free(p->last_error);
    p->m->live_pairs--;
    p->m->pair_freed(p->m);
    free(p);
}

static void set_error(struct scrape_pair *p, enum scrape_fail why, const char *msg)
{
    struct scrape_error e;
    unsigned suppressed = 0;

    if (p->stats)
        p->stats->failures[why]++;
    free(p->last_error);
    p->last_error = strdup(msg);
    if (!p->m->on_error || !log_ratelimit_allow(&p->log_rl, clock_mono_ms(), 1, 60000, &suppressed))
        return;
    e = (struct scrape_error){ .job = p->job->name,
                               .instance = labels_get(&p->tp.labels, "instance"),
                               .type = p->tp.profile->name,
                               .url = p->tp.url,
                               .reason = scrape__fail_names[why],
                               .message = msg,
                               .suppressed = suppressed };
    p->m->on_error(&e, p->m->ud);
}

static void clear_error(struct scrape_pair *p)
{
    free(p->last_error);
    p->last_error = NULL;
}

/* Hands `data` (owned) on with the pair's labels. */
static void emit_profile(struct scrape_pair *p, uint8_t *data, size_t len, int64_t start_ns,
                         int64_t end_ns, int compression)
{
    if (p->stats)
        p->stats->profiles_out++;
    p->m->on_profile(&p->tp.labels, data, len, start_ns, end_ns, compression, p->m->ud);
}

/* ------------------------------------------------------------ delta jobs */

struct delta_job {
    struct scrape_pair *pair;
    uint8_t *in;
    size_t in_len;
    struct pprof_limits limits;
    uint8_t *out;
    size_t out_len;
    int rc;
    int64_t start_ns, end_ns;
    bool passthrough;     /* check the gzip only; send `in` as it came */
    struct conf_doc *doc; /* keeps the profile type's filter alive */
    char err[256];
};

static void delta_work(void *arg)
{
    struct delta_job *j = arg;

    j->err[0] = '\0';
    if (j->passthrough) {
        j->rc = 0;
        if (j->in_len >= 2 && j->in[0] == 0x1f && j->in[1] == 0x8b) {
            j->rc = pprof_gzip_check(j->in, j->in_len, j->limits.max_decompressed);
            if (j->rc < 0)
                snprintf(j->err, sizeof(j->err), "invalid gzip body: %s", pprof_strerror(j->rc));
        }
        if (j->rc == 0) {
            j->out = j->in;
            j->out_len = j->in_len;
            j->in = NULL;
        }
        return;
    }
    j->rc = pprof_delta_process(j->pair->delta, j->in, j->in_len, &j->limits, &j->out, &j->out_len,
                                j->err, sizeof(j->err));
    free(j->in);
    j->in = NULL;
}

static void delta_after(void *arg, int status)
{
    struct delta_job *j = arg;
    struct scrape_pair *p = j->pair;

    p->busy = false;
    conf_doc_unref(j->doc);
    if (status == UV_ECANCELED || p->closing) {
        free(j->in);
        free(j->out);
        free(j);
        maybe_free(p);
        return;
    }
    if (j->rc < 0) {
        char msg[300];

        snprintf(msg, sizeof(msg), "%s", j->err[0] ? j->err : pprof_strerror(j->rc));
        set_error(p,
                  j->rc == PPROF_ETOOLARGE     ? FAIL_TOO_LARGE
                  : j->rc == PPROF_EOVERBUDGET ? FAIL_OVER_BUDGET
                                               : FAIL_DECODE,
                  msg);
    } else if (j->rc == PPROF_DELTA_BASELINE) {
        p->stats->delta_baselines++;
        clear_error(p);
    } else if (j->rc == PPROF_DELTA_RESET) {
        p->stats->delta_resets++;
        clear_error(p);
    } else {
        clear_error(p);
        emit_profile(p, j->out, j->out_len, j->start_ns, j->end_ns,
                     j->passthrough ? -1 : (int)j->limits.compression);
        j->out = NULL;
    }
    free(j->in); /* a pass-through body that failed its gzip check */
    free(j->out);
    free(j);
}

/* --------------------------------------------------------------- scrapes */

static bool looks_like_text(const char *ct, const char *body, size_t len)
{
    size_t i = 0;

    if (ct && (strncmp(ct, "text/html", 9) == 0 || strncmp(ct, "application/json", 16) == 0))
        return true;
    while (i < len && i < 64 &&
           (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
        i++;
    if (i < len && (body[i] == '<' || body[i] == '{' || body[i] == '['))
        return true;
    return false;
}

/* A pprof body is gzip (1f 8b) or a protobuf whose first byte is a valid
 * key: field number >= 1 and a wire type below 6. */
static bool looks_like_pprof(const uint8_t *b, size_t len)
{
    if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
        return true;
    return len >= 1 && (b[0] & 7) < 6 && (b[0] >> 3) != 0;
}

static void scrape_done(struct net_request *req, struct net_response *resp, void *ud)
{
    struct scrape_pair *p = ud;
    struct scrape_manager *m = p->m;
    const struct scrape_profile_cfg *prof = p->tp.profile;
    uint64_t now = m->now_ns();
    int64_t start_ns = (int64_t)p->req_start_ns, end_ns;
    char msg[300];
    uint8_t *body;
    size_t len;

    (void)req;
    p->req = NULL;
    conf_doc_unref(p->req_doc);
    p->req_doc = NULL;
    p->last_scrape_ns = p->req_start_ns;
    p->last_duration_us = resp->duration_us;
    if (p->stats) {
        p->stats->scrapes++;
        prom_hist_observe(&p->stats->duration, (double)resp->duration_us / 1e6);
    }
    if (p->closing) {
        maybe_free(p);
        return;
    }
    if (resp->result < 0) {
        enum scrape_fail why = FAIL_IO;

        if (resp->result == NET_ECONNECT)
            why = FAIL_CONNECT;
        else if (resp->result == NET_ETIMEDOUT)
            why = FAIL_TIMEOUT;
        else if (resp->result == NET_ETOOLARGE)
            why = FAIL_TOO_LARGE;
        snprintf(msg, sizeof(msg), "%s%s%s", net_strerror(resp->result), resp->error ? ": " : "",
                 resp->error ? resp->error : "");
        set_error(p, why, msg);
        return;
    }
    if (resp->status < 200 || resp->status > 299) {
        size_t n = resp->body.len < 120 ? resp->body.len : 120;

        snprintf(msg, sizeof(msg), "server returned HTTP status %ld: %.*s", resp->status, (int)n,
                 resp->body.data ? resp->body.data : "");
        set_error(p, FAIL_HTTP_STATUS, msg);
        return;
    }
    if (resp->body.len == 0) {
        set_error(p, FAIL_EMPTY, "empty response body");
        return;
    }
    if (looks_like_text(resp->content_type, resp->body.data, resp->body.len) ||
        !looks_like_pprof((const uint8_t *)resp->body.data, resp->body.len)) {
        snprintf(msg, sizeof(msg), "response is not a pprof profile (content-type %s)",
                 resp->content_type ? resp->content_type : "none");
        set_error(p, FAIL_NOT_PPROF, msg);
        return;
    }
    if (p->stats)
        p->stats->body_bytes += resp->body.len;
    body = (uint8_t *)buf_steal(&resp->body, &len);
    if (p->tp.seconds) {
        end_ns = start_ns + (int64_t)p->tp.seconds * 1000000000LL;
    } else {
        end_ns = (int64_t)now;
        start_ns = end_ns - (int64_t)p->tp.interval_ms * 1000000LL;
    }
    /* Every body goes through the pool: a delta for cumulative types, a
     * gunzip check (the bytes are then sent untouched) for the others, so a
     * truncated or corrupt gzip is the target's error, not the server's. */
    {
        struct delta_job *j = calloc(1, sizeof(*j));
        uint64_t cost;
        size_t raw;
        int r;

        if (!j) {
            free(body);
            return;
        }
        j->pair = p;
        j->in = body;
        j->in_len = len;
        j->limits = p->job->limits;
        j->start_ns = start_ns;
        j->end_ns = end_ns;
        /* A filtered type that is not differenced goes through the same
         * pass, with no state (PPROF_DELTA_NONE); the filter is the current
         * configuration's, kept alive by the job's reference. */
        if (!is_cumulative(prof) && !prof->filter != !p->delta) {
            pprof_delta_free(p->delta);
            p->delta = prof->filter ? pprof_delta_new(PPROF_DELTA_NONE) : NULL;
        }
        if (p->delta)
            pprof_delta_set_filter(p->delta, prof->filter);
        j->passthrough = !p->delta;
        /* Admission: the job's peak memory must fit the shared budget. It
         * is known from the size the gzip trailer announces and, once a
         * delta of the pair has seen the profile's structure (its samples,
         * locations, strings), from what that structure needs, scaled to
         * the new size. The job is then held to that size and a delta to
         * that grant: past it, it stops as over_budget and leaves its need
         * for the next admission, which then fits it or refuses it before
         * anything is inflated. */
        r = pprof_job_cost(body, len, j->limits.max_decompressed, !j->passthrough, &raw, &cost);
        if (r < 0) {
            free(j->in);
            free(j);
            snprintf(msg, sizeof(msg), "%s",
                     r == PPROF_ETOOLARGE
                         ? "decompressed size announced over max-decompressed"
                         : "gzip trailer not plausible: truncated or corrupt stream");
            set_error(p, r == PPROF_ETOOLARGE ? FAIL_TOO_LARGE : FAIL_DECODE, msg);
            return;
        }
        j->limits.max_decompressed = raw;
        if (p->delta) {
            uint64_t need = pprof_delta_need(p->delta, raw);
            if (need && len + need > cost)
                cost = len + need;
            j->limits.max_memory = (size_t)(cost - len);
        }
        p->busy = true;
        j->doc = conf_doc_ref(p->job->doc);
        /* While it waits for a worker the job holds the body it carries. */
        r = workq_submit_held(m->work, WORKQ_SKIPPABLE, cost, len, delta_work, delta_after, j);
        if (r < 0) {
            p->busy = false;
            conf_doc_unref(j->doc);
            free(j->in);
            free(j);
            if (r == -E2BIG) {
                snprintf(msg, sizeof(msg),
                         "profile needs %" PRIu64 " MiB to process, over the memory budget",
                         (cost + (1 << 20) - 1) >> 20);
                set_error(p, FAIL_OVER_BUDGET, msg);
            } else {
                set_error(p, FAIL_BACKLOG, "worker backlog full: profile skipped");
            }
        }
    }
}

static void start_scrape(struct scrape_manager *m, struct scrape_pair *p)
{
    struct scrape_job *job = p->job;
    struct net_request_opts o;
    struct net_tls tls;
    int r;

    memset(&o, 0, sizeof(o));
    net_request_opts_from_cfg(&o, &tls, &job->sc->http, net_secret_get(job->bearer),
                              net_secret_get(job->password));
    o.auth = job->auth;
    o.url = p->tp.url;
    o.timeout_ms = p->tp.timeout_ms;
    o.max_response = job->max_body;
    o.http2 = false; /* pprof endpoints are HTTP/1.1 servers; ALPN buys nothing */
    o.no_dns_cache = true;
    p->req_start_ns = m->now_ns();
    r = m->transport.start(m->transport.ctx, &o, scrape_done, p, &p->req);
    if (r < 0) {
        p->req = NULL;
        set_error(p, FAIL_IO, "could not start request");
        return;
    }
    p->req_doc = conf_doc_ref(job->doc);
}

static void tick_cb(uv_timer_t *t);

static void schedule(struct scrape_pair *p, uint64_t now)
{
    uint64_t delay_ns = p->planned_ns > now ? p->planned_ns - now : 0;

    uv_timer_start(&p->timer, tick_cb, (delay_ns + 999999) / 1000000, 0);
}

static void tick_cb(uv_timer_t *t)
{
    struct scrape_pair *p = container_of(t, struct scrape_pair, timer);
    struct scrape_manager *m = p->m;
    uint64_t now = m->now_ns();
    uint64_t interval_ns = p->tp.interval_ms * 1000000ULL;
    uint64_t planned = p->planned_ns;

    prom_hist_observe(&m->lateness, now > planned ? (double)(now - planned) / 1e9 : 0);
    p->planned_ns += interval_ns;
    while (p->planned_ns <= now) {
        /* The loop stalled past a whole interval: those ticks are lost. */
        p->planned_ns += interval_ns;
        if (p->stats)
            p->stats->skipped_ticks++;
    }
    schedule(p, now);
    if (m->stopping)
        return;
    if (p->req || p->busy) {
        if (p->stats)
            p->stats->skipped_ticks++;
        return;
    }
    start_scrape(m, p);
}

static void pair_start_timer(struct scrape_manager *m, struct scrape_pair *p)
{
    uint64_t interval_ns = p->tp.interval_ms * 1000000ULL;
    uint64_t now = m->now_ns();

    p->offset_ns = target_offset_ns(p->tp.offset_hash, m->offset_seed, interval_ns);
    p->planned_ns = now + target_first_delay_ns(p->offset_ns, interval_ns, now);
    schedule(p, now);
}

struct scrape_pair *scrape__pair_new(struct scrape_manager *m, struct scrape_job *job,
                                     struct target_pair *tp)
{
    struct scrape_pair *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->m = m;
    m->live_pairs++;
    p->key = tp->key;
    p->tp = *tp;
    memset(tp, 0, sizeof(*tp));
    p->job = job;
    p->refs = 1;
    p->stats = scrape__stats_for(m, job->name, p->tp.profile->name);
    p->delta = delta_for(p->tp.profile);
    if (is_cumulative(p->tp.profile) && !p->delta)
        goto fail;
    uv_timer_init(m->loop, &p->timer);
    if (hashmap_put(&m->pairs, p->key, p) < 0) {
        p->closing = true;
        uv_close((uv_handle_t *)&p->timer, NULL);
        goto fail;
    }
    m->pairs_created++;
    if (p->tp.url) {
        p->client = scrape__client_of(p->tp.url) + 1;
        m->client_pairs[p->client - 1]++;
    }
    pair_start_timer(m, p);
    return p;
fail:
    pprof_delta_free(p->delta);
    labels_done(&p->tp.labels);
    free(p->tp.url);
    m->live_pairs--;
    free(p);
    return NULL;
}

void scrape__pair_update(struct scrape_manager *m, struct scrape_pair *p, struct scrape_job *job,
                         struct target_pair *tp)
{
    bool restart = tp->interval_ms != p->tp.interval_ms || tp->profile->kind != p->tp.profile->kind;

    labels_done(&p->tp.labels);
    free(p->tp.url);
    p->tp = *tp;
    memset(tp, 0, sizeof(*tp));
    p->job = job;
    p->stats = scrape__stats_for(m, job->name, p->tp.profile->name);
    if (restart) {
        /* A new interval or kind: a fresh schedule and fresh delta state. */
        if (!p->busy) {
            pprof_delta_free(p->delta);
            p->delta = delta_for(p->tp.profile);
        }
        uv_timer_stop(&p->timer);
        pair_start_timer(m, p);
    }
}

static void timer_closed_cb(uv_handle_t *h)
{
    struct scrape_pair *p = container_of(h, struct scrape_pair, timer);

    p->timer_closed = true;
    maybe_free(p);
}

/* The scrape client of a URL, by its scheme and authority, so every profile
 * type of one target shares that client's kept-alive connection. */
unsigned scrape__client_of(const char *url)
{
    const char *s = strstr(url, "://");
    const char *end;
    uint64_t h = 14695981039346656037ULL;

    s = s ? s + 3 : url;
    end = s + strcspn(s, "/?#");
    for (const char *c = url; c < end; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    return (unsigned)(h % SCRAPE_CLIENTS);
}

void scrape__pair_remove(struct scrape_manager *m, struct scrape_pair *p)
{
    if (p->closing)
        return;
    p->closing = true;
    hashmap_del(&m->pairs, p->key);
    m->pairs_removed++;
    if (p->client)
        m->client_pairs[p->client - 1]--;
    if (m->on_pair_gone)
        m->on_pair_gone(&p->tp.labels, m->ud);
    if (p->req) {
        m->transport.cancel(m->transport.ctx, p->req);
        p->req = NULL;
        conf_doc_unref(p->req_doc);
        p->req_doc = NULL;
    }
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, timer_closed_cb);
}
