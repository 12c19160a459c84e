/* Scraping: one timer per (target, profile type) at its Prometheus offset,
 * one request in flight per pair, response checks, then either straight to
 * the forwarder (duration, gauge, godeltaprof and custom types: the bytes are
 * sent as they came) or through the worker pool for a delta (cumulative
 * types).
 *
 * Loop thread only. A pair is freed only when its timer is closed, no
 * request is in flight and no worker job holds it (`busy`), so removing a
 * target while its delta is being computed is safe. A pair's next scrape
 * cannot start while its previous worker job is pending, so profiles of one
 * pair never overtake each other. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "forward/forward.h"
#include "net/net.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

const char *const agent_fail_names[FAIL_N] = {
    [FAIL_CONNECT] = "connect",     [FAIL_TIMEOUT] = "timeout",
    [FAIL_TOO_LARGE] = "too_large", [FAIL_HTTP_STATUS] = "http_status",
    [FAIL_EMPTY] = "empty",         [FAIL_NOT_PPROF] = "not_pprof",
    [FAIL_IO] = "io",               [FAIL_DECODE] = "decode",
    [FAIL_BACKLOG] = "backlog",
};

const double agent_hist_bounds[AGENT_HIST_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30,
};

void agent__hist_observe(struct agent_hist *h, double v)
{
    int i = 0;

    while (i < AGENT_HIST_BUCKETS && v > agent_hist_bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

struct agent_stats *agent__stats_for(struct agent *a, const char *job, const char *type)
{
    struct agent_stats *s;

    for (s = a->stats; s; s = s->next)
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
    s->next = a->stats;
    a->stats = s;
    return s;
}

static struct agent *pair_agent(struct scrape_pair *p)
{
    return p->timer.loop->data;
}

static bool is_cumulative(const struct cfg_profile *prof)
{
    return prof->kind == CFG_KIND_CUMULATIVE_MEMORY ||
           prof->kind == CFG_KIND_CUMULATIVE_CONTENTION;
}

static void maybe_free(struct scrape_pair *p)
{
    if (!p->closing || !p->timer_closed || p->busy || p->req)
        return;
    pprof_delta_free(p->delta);
    labels_done(&p->tp.labels);
    free(p->tp.url);
    free(p->last_error);
    free(p);
}

static void set_error(struct agent *a __attribute__((unused)), struct scrape_pair *p, enum agent_fail why,
                      const char *msg)
{
    unsigned suppressed = 0;
    char sup[24];

    if (p->stats)
        p->stats->failures[why]++;
    free(p->last_error);
    p->last_error = strdup(msg);
    if (!log_ratelimit_allow(&p->log_rl, agent__now_ms(), 1, 60000, &suppressed))
        return;
    snprintf(sup, sizeof(sup), "%u", suppressed);
    log_warn("scrape failed", "job", p->job->name, "instance",
             labels_get(&p->tp.labels, "instance"), "type", p->tp.profile->name, "url",
             p->tp.url, "reason", agent_fail_names[why], "err", msg, "suppressed", sup);
}

static void clear_error(struct scrape_pair *p)
{
    free(p->last_error);
    p->last_error = NULL;
}

/* Sends `data` (owned) with the pair's labels plus the global external
 * labels, which win over target labels as in Alloy's pyroscope.write. */
static void forward_profile(struct agent *a, struct scrape_pair *p, uint8_t *data, size_t len,
                            int64_t start_ns, int64_t end_ns)
{
    struct labels ls = LABELS_INIT;
    struct fwd_profile *prof;

    if (labels_copy(&ls, &p->tp.labels) < 0) {
        free(data);
        return;
    }
    for (size_t i = 0; i < a->external.n; i++)
        labels_set(&ls, a->external.v[i].name, a->external.v[i].value);
    prof = fwd_profile_new(&ls, data, len, start_ns, end_ns);
    labels_done(&ls);
    if (!prof)
        return;
    if (p->stats)
        p->stats->profiles_out++;
    fwd_submit(a->fwd, prof);
    fwd_profile_unref(prof);
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
    bool passthrough;      /* check the gzip only; send `in` as it came */
    char err[256];
};

static void delta_work(void *arg)
{
    struct delta_job *j = arg;

    j->err[0] = '\0';
    if (j->passthrough) {
        uint8_t *plain = NULL;
        size_t plain_len = 0;

        j->rc = 0;
        if (j->in_len >= 2 && j->in[0] == 0x1f && j->in[1] == 0x8b) {
            j->rc = pprof_gunzip(j->in, j->in_len, j->limits.max_decompressed, &plain,
                                 &plain_len);
            free(plain);
            if (j->rc < 0)
                snprintf(j->err, sizeof(j->err), "invalid gzip body: %s",
                         pprof_strerror(j->rc));
        }
        if (j->rc == 0) {
            j->out = j->in;
            j->out_len = j->in_len;
            j->in = NULL;
        }
        return;
    }
    j->rc = pprof_delta_process(j->pair->delta, j->in, j->in_len, &j->limits, &j->out,
                                &j->out_len, j->err, sizeof(j->err));
    free(j->in);
    j->in = NULL;
}

static void delta_after(void *arg, int status)
{
    struct delta_job *j = arg;
    struct scrape_pair *p = j->pair;
    struct agent *a = pair_agent(p);

    p->busy = false;
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
        set_error(a, p, FAIL_DECODE, msg);
    } else if (j->rc == PPROF_DELTA_BASELINE) {
        p->stats->delta_baselines++;
        clear_error(p);
    } else if (j->rc == PPROF_DELTA_RESET) {
        p->stats->delta_resets++;
        clear_error(p);
    } else {
        clear_error(p);
        forward_profile(a, p, j->out, j->out_len, j->start_ns, j->end_ns);
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
    while (i < len && i < 64 && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' ||
                                 body[i] == '\t'))
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
    struct agent *a = pair_agent(p);
    const struct cfg_profile *prof = p->tp.profile;
    uint64_t now = agent__now_ns();
    int64_t start_ns = (int64_t)p->req_start_ns, end_ns;
    char msg[300];
    uint8_t *body;
    size_t len;

    (void)req;
    p->req = NULL;
    agent__cfg_unref(p->req_cfg);
    p->req_cfg = NULL;
    p->last_scrape_ns = p->req_start_ns;
    p->last_duration_us = resp->duration_us;
    if (p->stats) {
        p->stats->scrapes++;
        agent__hist_observe(&p->stats->duration, (double)resp->duration_us / 1e6);
    }
    if (p->closing) {
        maybe_free(p);
        return;
    }
    if (resp->result < 0) {
        enum agent_fail why = FAIL_IO;

        if (resp->result == NET_ECONNECT)
            why = FAIL_CONNECT;
        else if (resp->result == NET_ETIMEDOUT)
            why = FAIL_TIMEOUT;
        else if (resp->result == NET_ETOOLARGE)
            why = FAIL_TOO_LARGE;
        snprintf(msg, sizeof(msg), "%s%s%s", net_strerror(resp->result),
                 resp->error ? ": " : "", resp->error ? resp->error : "");
        set_error(a, p, why, msg);
        return;
    }
    if (resp->status < 200 || resp->status > 299) {
        size_t n = resp->body.len < 120 ? resp->body.len : 120;

        snprintf(msg, sizeof(msg), "server returned HTTP status %ld: %.*s", resp->status,
                 (int)n, resp->body.data ? resp->body.data : "");
        set_error(a, p, FAIL_HTTP_STATUS, msg);
        return;
    }
    if (resp->body.len == 0) {
        set_error(a, p, FAIL_EMPTY, "empty response body");
        return;
    }
    if (looks_like_text(resp->content_type, resp->body.data, resp->body.len) ||
        !looks_like_pprof((const uint8_t *)resp->body.data, resp->body.len)) {
        snprintf(msg, sizeof(msg), "response is not a pprof profile (content-type %s)",
                 resp->content_type ? resp->content_type : "none");
        set_error(a, p, FAIL_NOT_PPROF, msg);
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
        int r;

        if (!j) {
            free(body);
            return;
        }
        j->pair = p;
        j->in = body;
        j->in_len = len;
        j->limits = a->pprof_limits;
        j->start_ns = start_ns;
        j->end_ns = end_ns;
        j->passthrough = !(is_cumulative(prof) && p->delta);
        p->busy = true;
        r = agent__pool_submit(a, delta_work, delta_after, j);
        if (r < 0) {
            p->busy = false;
            free(j->in);
            free(j);
            set_error(a, p, FAIL_BACKLOG, "worker backlog full: profile skipped");
        }
    }
}

static const char *job_bearer(struct agent *a, struct scrape_job *job)
{
    const struct cfg_http *h = &job->sc->http;
    uint64_t now = agent__now_ms();

    if (h->bearer_token)
        return h->bearer_token;
    if (!h->bearer_token_file)
        return NULL;
    /* Re-read about once a minute so rotated tokens are picked up. */
    if (!job->bearer_token || now - job->bearer_read_ms > 60000) {
        FILE *f = fopen(h->bearer_token_file, "re");
        char tok[8192];
        size_t n;

        job->bearer_read_ms = now;
        if (f) {
            n = fread(tok, 1, sizeof(tok) - 1, f);
            fclose(f);
            while (n && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
                n--;
            tok[n] = '\0';
            free(job->bearer_token);
            job->bearer_token = strdup(tok);
        } else if (!job->bearer_token) {
            log_warn("cannot read bearer token file", "job", job->name, "file",
                     h->bearer_token_file);
        }
    }
    (void)a;
    return job->bearer_token;
}

static const char *job_password(struct scrape_job *job)
{
    const struct cfg_basic_auth *ba = job->sc->http.basic_auth;

    if (!ba)
        return NULL;
    if (ba->password)
        return ba->password;
    if (ba->password_file && !job->password) {
        FILE *f = fopen(ba->password_file, "re");
        char pw[4096];
        size_t n;

        if (f) {
            n = fread(pw, 1, sizeof(pw) - 1, f);
            fclose(f);
            while (n && (pw[n - 1] == '\n' || pw[n - 1] == '\r'))
                n--;
            pw[n] = '\0';
            job->password = strdup(pw);
        }
    }
    return job->password;
}

/* The scrape client of a URL, by its scheme and authority, so every profile
 * type of one target shares that client's kept-alive connection. */
static unsigned client_of(const char *url)
{
    const char *s = strstr(url, "://");
    const char *end;
    uint64_t h = 14695981039346656037ULL;

    s = s ? s + 3 : url;
    end = s + strcspn(s, "/?#");
    for (const char *c = url; c < end; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    return (unsigned)(h % AGENT_SCRAPE_CLIENTS);
}

static void start_scrape(struct agent *a, struct scrape_pair *p)
{
    struct scrape_job *job = p->job;
    const struct cfg_scrape *sc = job->sc;
    struct net_request_opts o;
    struct net_tls tls;
    int r;

    memset(&o, 0, sizeof(o));
    memset(&tls, 0, sizeof(tls));
    o.url = p->tp.url;
    o.timeout_ms = p->tp.timeout_ms;
    o.max_response = sc->body_size_limit ? sc->body_size_limit : a->acfg->cfg->limits.max_body_bytes;
    o.bearer_token = job_bearer(a, job);
    if (sc->http.basic_auth) {
        o.username = sc->http.basic_auth->username;
        o.password = job_password(job);
    }
    tls.ca_file = sc->http.tls.ca_file;
    tls.cert_file = sc->http.tls.cert_file;
    tls.key_file = sc->http.tls.key_file;
    tls.server_name = sc->http.tls.server_name;
    tls.insecure_skip_verify = sc->http.tls.insecure_skip_verify;
    o.tls = &tls;
    o.proxy_url = sc->http.proxy_url;
    o.http2 = false;
    o.follow_redirects = sc->http.follow_redirects;
    o.no_dns_cache = true;
    p->req_start_ns = agent__now_ns();
    r = net_request_start(a->scrapers[client_of(p->tp.url)], &o, scrape_done, p, &p->req);
    if (r < 0) {
        p->req = NULL;
        set_error(a, p, FAIL_IO, "could not start request");
        return;
    }
    p->req_cfg = agent__cfg_ref(job->acfg);
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
    struct agent *a = pair_agent(p);
    uint64_t now = agent__now_ns();
    uint64_t interval_ns = p->tp.interval_ms * 1000000ULL;
    uint64_t planned = p->planned_ns;

    agent__hist_observe(&a->lateness, now > planned ? (double)(now - planned) / 1e9 : 0);
    p->planned_ns += interval_ns;
    while (p->planned_ns <= now) {
        /* The loop stalled past a whole interval: those ticks are lost. */
        p->planned_ns += interval_ns;
        if (p->stats)
            p->stats->skipped_ticks++;
    }
    schedule(p, now);
    if (a->stopping)
        return;
    if (p->req || p->busy) {
        if (p->stats)
            p->stats->skipped_ticks++;
        return;
    }
    start_scrape(a, p);
}

static void pair_start_timer(struct agent *a, struct scrape_pair *p)
{
    uint64_t interval_ns = p->tp.interval_ms * 1000000ULL;
    uint64_t now = agent__now_ns();

    p->offset_ns = target_offset_ns(p->tp.offset_hash, a->offset_seed, interval_ns);
    p->planned_ns = now + target_first_delay_ns(p->offset_ns, interval_ns, now);
    schedule(p, now);
}

struct scrape_pair *agent__pair_new(struct agent *a, struct scrape_job *job,
                                    struct target_pair *tp)
{
    struct scrape_pair *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->key = tp->key;
    p->tp = *tp;
    memset(tp, 0, sizeof(*tp));
    p->job = job;
    p->refs = 1;
    p->stats = agent__stats_for(a, job->name, p->tp.profile->name);
    if (is_cumulative(p->tp.profile)) {
        p->delta = pprof_delta_new(p->tp.profile->kind == CFG_KIND_CUMULATIVE_MEMORY
                                       ? PPROF_DELTA_MEMORY
                                       : PPROF_DELTA_CONTENTION);
        if (!p->delta) {
            labels_done(&p->tp.labels);
            free(p->tp.url);
            free(p);
            return NULL;
        }
    }
    uv_timer_init(a->loop, &p->timer);
    if (hashmap_put(&a->pairs, p->key, p) < 0) {
        p->closing = true;
        uv_close((uv_handle_t *)&p->timer, NULL);
        pprof_delta_free(p->delta);
        labels_done(&p->tp.labels);
        free(p->tp.url);
        free(p);
        return NULL;
    }
    a->pairs_created++;
    pair_start_timer(a, p);
    return p;
}

void agent__pair_update(struct agent *a, struct scrape_pair *p, struct scrape_job *job,
                        struct target_pair *tp)
{
    bool restart = tp->interval_ms != p->tp.interval_ms || tp->profile->kind != p->tp.profile->kind;

    labels_done(&p->tp.labels);
    free(p->tp.url);
    p->tp = *tp;
    memset(tp, 0, sizeof(*tp));
    p->job = job;
    p->stats = agent__stats_for(a, job->name, p->tp.profile->name);
    if (restart) {
        /* A new interval or kind: a fresh schedule and fresh delta state. */
        if (!p->busy) {
            pprof_delta_free(p->delta);
            p->delta = NULL;
            if (is_cumulative(p->tp.profile))
                p->delta = pprof_delta_new(p->tp.profile->kind == CFG_KIND_CUMULATIVE_MEMORY
                                               ? PPROF_DELTA_MEMORY
                                               : PPROF_DELTA_CONTENTION);
        }
        uv_timer_stop(&p->timer);
        pair_start_timer(a, p);
    }
}

static void timer_closed_cb(uv_handle_t *h)
{
    struct scrape_pair *p = container_of(h, struct scrape_pair, timer);

    p->timer_closed = true;
    maybe_free(p);
}

void agent__pair_remove(struct agent *a, struct scrape_pair *p)
{
    if (p->closing)
        return;
    p->closing = true;
    hashmap_del(&a->pairs, p->key);
    a->pairs_removed++;
    if (p->req) {
        net_request_cancel(p->req);
        p->req = NULL;
        agent__cfg_unref(p->req_cfg);
        p->req_cfg = NULL;
    }
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, timer_closed_cb);
}
