/* SPDX-License-Identifier: Apache-2.0 */
/* The remote-write sink (forward/remote.c, remote_queue.c, wire.c) against
 * a real HTTP server in this process: a small HTTP/1.1 server on
 * 127.0.0.1 (libuv + http-parser) on the same loop as the forwarder. It
 * records what arrives (method, path, the headers that matter, the
 * PushRequest's sample ids) and answers from a script set by each test.
 *
 * What is checked, from the server's side:
 * - a partial failure (the push API names some series in its error
 *   message, as Pyroscope does and tests/receiver/receiver.py imitates):
 *   only the named series are resent, the rest count as sent once; a
 *   series refused for good is dropped and counted with reason "rejected";
 * - on the wire: push requests carry Connect-Protocol-Version: 1 and
 *   Content-Type: application/proto, legacy /ingest requests the profile
 *   bytes as application/octet-stream;
 * - a close whose deadline passes while a request is still being encoded
 *   ends when that encoding does, without sending or encoding again.
 *
 * Loop thread only; every wait is a condition with a deadline. Each test
 * ends with the forwarder, the client and the server closed and asserts
 * uv_loop_close() == 0. */
#include <errno.h>
#include <http_parser.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/macros.h"
#include "common/workq.h"
#include "forward/forward.h"
#include "net/net.h"
#include "push.pb-c.h"
#include "tcfg.h"
#include "test.h"
#include "test_loop.h"

#define MAX_REQS 16
#define MAX_IDS 8
#define BODY_CAP (1u << 20)
#define WAIT_MS 10000

/* ------------------------------------------------------------ the server */

/* One request as the server saw it. */
struct sreq {
    char method[8];
    char url[2048];
    char content_type[64];
    char connect_version[16]; /* Connect-Protocol-Version, "" if absent */
    char connect_timeout[32]; /* Connect-Timeout-Ms */
    uint8_t *body;
    size_t body_len;
    char ids[MAX_IDS][37]; /* push: the sample ids, in request order */
    size_t n_ids;
    bool decoded;          /* push: the body is a PushRequest */
};

struct tsrv;

/* Fills the answer to request `r` (the `n`th): a status and a JSON body. */
typedef void (*answer_fn)(struct tsrv *s, const struct sreq *r, size_t n, int *status,
                          char *body, size_t bodylen);

struct sconn {
    uv_tcp_t h;
    http_parser p;
    struct tsrv *s;
    struct sconn *next;
    struct sreq cur;
    char field[64];
    size_t field_len;
    char value[256];
    size_t value_len;
    bool in_value;
    bool too_big;
};

struct tsrv {
    uv_tcp_t listener;
    int port;
    struct sconn *conns;
    unsigned open_handles;
    struct sreq reqs[MAX_REQS];
    size_t n_reqs;
    size_t overflow; /* requests past MAX_REQS (a failure in itself) */
    answer_fn answer;
};

static void sreq_done(struct sreq *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
}

static void copy_trunc(char *dst, size_t cap, size_t *len, const char *at, size_t n)
{
    size_t room = cap - 1 - *len;

    if (n > room)
        n = room;
    memcpy(dst + *len, at, n);
    *len += n;
    dst[*len] = '\0';
}

static void commit_header(struct sconn *c)
{
    struct sreq *r = &c->cur;
    char *dst = NULL;
    size_t cap = 0;

    if (!strcasecmp(c->field, "Content-Type"))
        dst = r->content_type, cap = sizeof(r->content_type);
    else if (!strcasecmp(c->field, "Connect-Protocol-Version"))
        dst = r->connect_version, cap = sizeof(r->connect_version);
    else if (!strcasecmp(c->field, "Connect-Timeout-Ms"))
        dst = r->connect_timeout, cap = sizeof(r->connect_timeout);
    if (dst) {
        size_t n = c->value_len < cap - 1 ? c->value_len : cap - 1;

        memcpy(dst, c->value, n);
        dst[n] = '\0';
    }
    c->field_len = c->value_len = 0;
    c->field[0] = c->value[0] = '\0';
    c->in_value = false;
}

static struct sconn *conn_of(http_parser *p)
{
    return p->data;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    struct sconn *c = conn_of(p);
    size_t len = strlen(c->cur.url);

    copy_trunc(c->cur.url, sizeof(c->cur.url), &len, at, n);
    return 0;
}

static int on_field(http_parser *p, const char *at, size_t n)
{
    struct sconn *c = conn_of(p);

    if (c->in_value)
        commit_header(c);
    copy_trunc(c->field, sizeof(c->field), &c->field_len, at, n);
    return 0;
}

static int on_value(http_parser *p, const char *at, size_t n)
{
    struct sconn *c = conn_of(p);

    c->in_value = true;
    copy_trunc(c->value, sizeof(c->value), &c->value_len, at, n);
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct sconn *c = conn_of(p);

    if (c->in_value)
        commit_header(c);
    snprintf(c->cur.method, sizeof(c->cur.method), "%s",
             http_method_str((enum http_method)p->method));
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct sconn *c = conn_of(p);
    struct sreq *r = &c->cur;
    uint8_t *nb;

    if (r->body_len + n > BODY_CAP) {
        c->too_big = true;
        return -1;
    }
    nb = realloc(r->body, r->body_len + n);
    if (!nb)
        return -1;
    r->body = nb;
    memcpy(r->body + r->body_len, at, n);
    r->body_len += n;
    return 0;
}

static void decode_push(struct sreq *r)
{
    Push__V1__PushRequest *pr;

    if (!strstr(r->url, "/push.v1.PusherService/Push"))
        return;
    pr = push__v1__push_request__unpack(NULL, r->body_len, r->body);
    if (!pr)
        return;
    r->decoded = true;
    for (size_t i = 0; i < pr->n_series; i++) {
        for (size_t k = 0; k < pr->series[i]->n_samples && r->n_ids < MAX_IDS; k++)
            snprintf(r->ids[r->n_ids++], sizeof(r->ids[0]), "%s",
                     pr->series[i]->samples[k]->id);
    }
    push__v1__push_request__free_unpacked(pr, NULL);
}

static void write_done(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

static void respond(struct sconn *c, int status, const char *body)
{
    size_t blen = strlen(body);
    char head[256];
    int hn = snprintf(head, sizeof(head),
                      "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      status, blen);
    uv_write_t *w = malloc(sizeof(*w) + (size_t)hn + blen);
    char *data = (char *)(w + 1);
    uv_buf_t b;

    ASSERT_NOT_NULL(w);
    memcpy(data, head, (size_t)hn);
    memcpy(data + hn, body, blen);
    b = uv_buf_init(data, (unsigned)((size_t)hn + blen));
    if (uv_write(w, (uv_stream_t *)&c->h, &b, 1, write_done) < 0)
        free(w);
}

static int on_message_complete(http_parser *p)
{
    struct sconn *c = conn_of(p);
    struct tsrv *s = c->s;
    char body[1024] = "";
    int status = 200;
    size_t n = s->n_reqs;

    decode_push(&c->cur);
    s->answer(s, &c->cur, n, &status, body, sizeof(body));
    if (s->n_reqs < MAX_REQS) {
        s->reqs[s->n_reqs++] = c->cur;
    } else {
        s->overflow++;
        sreq_done(&c->cur);
    }
    memset(&c->cur, 0, sizeof(c->cur));
    respond(c, status, body);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_url = on_url,
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void conn_closed(uv_handle_t *h)
{
    struct sconn *c = container_of(h, struct sconn, h);
    struct tsrv *s = c->s;

    for (struct sconn **pp = &s->conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    sreq_done(&c->cur);
    free(c);
    s->open_handles--;
}

static void conn_close(struct sconn *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->h))
        uv_close((uv_handle_t *)&c->h, conn_closed);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)h;
    (void)hint;
    b->base = malloc(64 * 1024);
    b->len = b->base ? 64 * 1024 : 0;
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct sconn *c = container_of((uv_tcp_t *)st, struct sconn, h);

    if (n < 0) {
        conn_close(c);
    } else if (n > 0) {
        size_t used = http_parser_execute(&c->p, &parser_settings, b->base, (size_t)n);

        if (used != (size_t)n || HTTP_PARSER_ERRNO(&c->p) != HPE_OK) {
            fprintf(stderr, "test server: bad request (%s)\n",
                    c->too_big ? "body too large" : http_errno_name(HTTP_PARSER_ERRNO(&c->p)));
            conn_close(c);
        }
    }
    free(b->base);
}

static void on_conn(uv_stream_t *l, int status)
{
    struct tsrv *s = container_of((uv_tcp_t *)l, struct tsrv, listener);
    struct sconn *c;

    if (status < 0)
        return;
    c = calloc(1, sizeof(*c));
    ASSERT_NOT_NULL(c);
    c->s = s;
    s->open_handles++;
    c->next = s->conns;
    s->conns = c;
    http_parser_init(&c->p, HTTP_REQUEST);
    c->p.data = c;
    if (test_accept(l, &c->h, alloc_cb, read_cb) < 0)
        conn_close(c);
}

static void listener_closed(uv_handle_t *h)
{
    struct tsrv *s = container_of((uv_tcp_t *)h, struct tsrv, listener);

    s->open_handles--;
}

static void tsrv_start(uv_loop_t *loop, struct tsrv *s, answer_fn answer)
{
    memset(s, 0, sizeof(*s));
    s->answer = answer;
    s->open_handles = 1;
    s->port = test_listen_loopback(loop, &s->listener, on_conn);
    ASSERT_GT(s->port, 0);
}

static void tsrv_close(struct tsrv *s)
{
    for (struct sconn *c = s->conns; c; c = c->next)
        conn_close(c);
    uv_close((uv_handle_t *)&s->listener, listener_closed);
}

static void tsrv_free(struct tsrv *s)
{
    for (size_t i = 0; i < s->n_reqs; i++)
        sreq_done(&s->reqs[i]);
    s->n_reqs = 0;
}

/* How many requests carried sample `id`. */
static unsigned times_sent(const struct tsrv *s, const char *id)
{
    unsigned n = 0;

    for (size_t i = 0; i < s->n_reqs; i++) {
        for (size_t k = 0; k < s->reqs[i].n_ids; k++)
            n += strcmp(s->reqs[i].ids[k], id) == 0;
    }
    return n;
}

/* ---------------------------------------------------- forwarder harness */

struct rig {
    uv_loop_t loop;
    struct ticker tk;
    struct tsrv srv;
    struct net_client *http;
    struct workq *wq;
    struct fwd *fwd;
    char url[64];
    int closed;
};

static void rig_start(struct rig *g, answer_fn answer)
{
    char err[256] = "";

    memset(g, 0, sizeof(*g));
    ASSERT_EQ(uv_loop_init(&g->loop), 0);
    ticker_start(&g->loop, &g->tk, 5); /* RUN_UNTIL re-checks at least this often */
    tsrv_start(&g->loop, &g->srv, answer);
    snprintf(g->url, sizeof(g->url), "http://127.0.0.1:%d", g->srv.port);
    ASSERT_EQ(net_client_new(&(struct net_client_opts){ .loop = &g->loop }, &g->http, err,
                             sizeof(err)),
              0);
    ASSERT_EQ(workq_new(&(struct workq_opts){ .loop = &g->loop, .max_inflight = 4,
                                              .max_backlog = 64 },
                        &g->wq, err, sizeof(err)),
              0);
    ASSERT_EQ(fwd_new(&(struct fwd_opts){ .loop = &g->loop, .http = g->http, .work = g->wq },
                      &g->fwd, err, sizeof(err)),
              0);
}

/* A push or ingest endpoint on the rig's server: batches of `batch`,
 * which wait (10 min) until full, and backoffs short enough for a test. */
static void ep_init(struct cfg_remote *r, const char *name, const char *url,
                    enum cfg_protocol proto, unsigned batch)
{
    fwd_cfg_remote_init(r);
    r->name = (char *)name;
    r->url = (char *)url;
    r->protocol = proto;
    r->batch_max_profiles = batch;
    r->batch_max_wait_ms = 600000;
    r->min_backoff_ms = 10;
    r->max_backoff_ms = 40;
    r->remote_timeout_ms = 5000;
    r->max_retries = 5;
    r->retry_on_http_429 = true;
}

/* The endpoints read their settings in place: `eps` must outlive the
 * forwarder, and so does the spool setting, hence static (no spool). */
static void apply(struct rig *g, struct cfg_remote *eps, unsigned n)
{
    static struct tcfg c;
    char err[256] = "";

    c = (struct tcfg){.remote = eps, .n_remote = n};

    int r = tcfg_apply(g->fwd, &c, err, sizeof(err));

    if (r < 0)
        fprintf(stderr, "fwd_apply: %s\n", err);
    ASSERT_EQ(r, 0);
}

static void count_cb(void *ud)
{
    (*(int *)ud)++;
}

/* Closes the forwarder (it flushes what is queued, which the server then
 * sees), the client and the server; the loop must close clean. */
static void rig_close(struct rig *g)
{
    fwd_close(g->fwd, 3000, count_cb, &g->closed);
    RUN_UNTIL(&g->loop, g->closed == 1, WAIT_MS);
    ASSERT_EQ(g->closed, 1);
    net_client_close(g->http, count_cb, &g->closed);
    RUN_UNTIL(&g->loop, g->closed == 2, WAIT_MS);
    ASSERT_EQ(g->closed, 2);
    tsrv_close(&g->srv);
    ticker_stop(&g->tk);
    RUN_UNTIL(&g->loop, !uv_loop_alive(&g->loop), WAIT_MS);
    workq_free(g->wq);
    ASSERT_EQ(g->srv.open_handles, 0);
    ASSERT_EQ(uv_loop_close(&g->loop), 0);
}

static struct fwd_profile *mk(const char *series, int seed)
{
    struct labels ls = LABELS_INIT;
    size_t len = 200;
    uint8_t *d = malloc(len);

    ASSERT_NOT_NULL(d);
    for (size_t i = 0; i < len; i++)
        d[i] = (uint8_t)(i * 7 + (size_t)seed);
    labels_set(&ls, "service_name", "svc");
    labels_set(&ls, "__name__", "process_cpu");
    labels_set(&ls, "series", series);
    return fwd_profile_new(&ls, d, len, 1700000000000000000LL, 1700000010000000000LL);
}

/* The endpoint's counters as the status page shows them. */
struct epview {
    const char *name;
    bool found;
    uint64_t sent, retried, failed_requests, dropped, queue, inflight;
};

static void view_cb(const struct fwd_endpoint_view *e, void *ud)
{
    struct epview *v = ud;

    if (strcmp(e->name, v->name) != 0)
        return;
    v->found = true;
    v->sent = e->sent_profiles;
    v->retried = e->retried_profiles;
    v->failed_requests = e->failed_requests;
    v->dropped = e->dropped_profiles;
    v->queue = e->queue_profiles;
    v->inflight = e->inflight_profiles;
}

static struct epview view(struct rig *g, const char *name)
{
    struct epview v = {.name = name};

    fwd_endpoints_visit(g->fwd, view_cb, &v);
    ASSERT(v.found);
    return v;
}

static bool settled(struct rig *g, const char *name, uint64_t sent, uint64_t dropped)
{
    struct epview v = view(g, name);

    return v.sent == sent && v.dropped == dropped && v.queue == 0 && v.inflight == 0;
}

/* The value of one exposition line, "name{labels}", or -1 if absent. */
static double metric(struct rig *g, const char *series)
{
    struct buf b;
    const char *at;
    double v = -1;
    size_t n = strlen(series);

    buf_init(&b, 1 << 20);
    fwd_metrics(g->fwd, &b);
    for (at = b.data; at && (at = strstr(at, series)); at += n) {
        if ((at == b.data || at[-1] == '\n') && at[n] == ' ') {
            v = strtod(at + n + 1, NULL);
            break;
        }
    }
    buf_done(&b);
    return v;
}

/* ---------------------------------------------------- partial failures */

/* The server's script for partial_failure: the first request is refused
 * for its second series (503, retryable), its resend accepted; the third
 * request is refused for good (400) for its second series. The error
 * bodies are Connect errors naming the series by sample id, as Pyroscope
 * words them. */
static void answer_partial(struct tsrv *s, const struct sreq *r, size_t n, int *status,
                           char *body, size_t bodylen)
{
    (void)s;
    if (!r->decoded || r->n_ids < 2)
        return; /* 200 */
    if (n == 0) {
        *status = 503;
        snprintf(body, bodylen,
                 "{\"code\":\"unavailable\",\"message\":\"series 1 (id %s): ingester "
                 "unavailable\"}",
                 r->ids[1]);
    } else if (n == 2) {
        *status = 400;
        snprintf(body, bodylen,
                 "{\"code\":\"invalid_argument\",\"message\":\"series 1 (id %s): "
                 "invalid labels\"}",
                 r->ids[1]);
    }
}

TEST(partial_failure_resends_only_named_series)
{
    struct rig g;
    struct cfg_remote ep;
    struct fwd_profile *p[6];
    const char *names[6] = {"a", "b", "c", "d", "e", "f"};
    struct epview v;

    rig_start(&g, answer_partial);
    ep_init(&ep, "push", g.url, CFG_PROTO_PUSH, 3);
    apply(&g, &ep, 1);
    for (int i = 0; i < 6; i++)
        ASSERT_NOT_NULL(p[i] = mk(names[i], i));

    /* One full batch of three series; the server refuses the second. */
    for (int i = 0; i < 3; i++)
        fwd_submit(g.fwd, p[i]);
    RUN_UNTIL(&g.loop, settled(&g, "push", 3, 0), WAIT_MS);
    ASSERT_GE(g.srv.n_reqs, 2);
    ASSERT_EQ(g.srv.reqs[0].n_ids, 3);
    ASSERT_STR_EQ(g.srv.reqs[0].ids[0], p[0]->id);
    ASSERT_STR_EQ(g.srv.reqs[0].ids[1], p[1]->id);
    ASSERT_STR_EQ(g.srv.reqs[0].ids[2], p[2]->id);
    /* The resend holds the refused series only. */
    ASSERT_EQ(g.srv.reqs[1].n_ids, 1);
    ASSERT_STR_EQ(g.srv.reqs[1].ids[0], p[1]->id);
    ASSERT_EQ(g.srv.n_reqs, 2);
    v = view(&g, "push");
    ASSERT_EQ(v.sent, 3);
    ASSERT_EQ(v.retried, 1);
    ASSERT_EQ(v.failed_requests, 1);
    ASSERT_EQ(v.dropped, 0);

    /* A second batch; the server refuses its second series for good. */
    for (int i = 3; i < 6; i++)
        fwd_submit(g.fwd, p[i]);
    RUN_UNTIL(&g.loop, settled(&g, "push", 5, 1), WAIT_MS);
    ASSERT_EQ(g.srv.n_reqs, 3);
    ASSERT_EQ(g.srv.reqs[2].n_ids, 3);
    ASSERT_STR_EQ(g.srv.reqs[2].ids[1], p[4]->id);
    v = view(&g, "push");
    ASSERT_EQ(v.sent, 5);
    ASSERT_EQ(v.dropped, 1);
    ASSERT_EQ(v.retried, 1);
    ASSERT_EQ(v.failed_requests, 2);
    ASSERT_EQ(metric(&g, "proflet_remote_dropped_profiles_total{endpoint=\"push\",kind=\"remote\","
                         "reason=\"rejected\"}"),
              1);
    ASSERT_EQ(metric(&g, "proflet_remote_dropped_bytes_total{endpoint=\"push\",kind=\"remote\","
                         "reason=\"rejected\"}"),
              p[4]->len);
    ASSERT_EQ(metric(&g, "proflet_remote_sent_profiles_total{endpoint=\"push\",kind=\"remote\"}"),
              5);

    /* The close flushes whatever is still queued: the dropped profile is
     * not, so no request follows. Each accepted profile went out once, the
     * one refused for a while twice, the one refused for good once. */
    rig_close(&g);
    ASSERT_EQ(g.srv.n_reqs, 3);
    ASSERT_EQ(g.srv.overflow, 0);
    ASSERT_EQ(times_sent(&g.srv, p[0]->id), 1);
    ASSERT_EQ(times_sent(&g.srv, p[1]->id), 2);
    ASSERT_EQ(times_sent(&g.srv, p[2]->id), 1);
    ASSERT_EQ(times_sent(&g.srv, p[3]->id), 1);
    ASSERT_EQ(times_sent(&g.srv, p[4]->id), 1);
    ASSERT_EQ(times_sent(&g.srv, p[5]->id), 1);
    for (int i = 0; i < 6; i++)
        fwd_profile_unref(p[i]);
    tsrv_free(&g.srv);
}

/* ------------------------------------------------------------ the wire */

static void answer_ok(struct tsrv *s, const struct sreq *r, size_t n, int *status, char *body,
                      size_t bodylen)
{
    (void)s;
    (void)r;
    (void)n;
    *status = 200;
    snprintf(body, bodylen, "{}");
}

static const struct sreq *find_req(const struct tsrv *s, const char *path_prefix)
{
    for (size_t i = 0; i < s->n_reqs; i++) {
        if (strncmp(s->reqs[i].url, path_prefix, strlen(path_prefix)) == 0)
            return &s->reqs[i];
    }
    return NULL;
}

TEST(requests_carry_connect_headers_and_content_types)
{
    struct rig g;
    struct cfg_remote eps[2];
    struct fwd_profile *p;
    const struct sreq *push, *ingest;

    rig_start(&g, answer_ok);
    ep_init(&eps[0], "push", g.url, CFG_PROTO_PUSH, 1);
    ep_init(&eps[1], "ingest", g.url, CFG_PROTO_INGEST, 1);
    eps[0].remote_timeout_ms = 4321;
    apply(&g, eps, 2);
    ASSERT_NOT_NULL(p = mk("w", 9));
    fwd_submit(g.fwd, p);
    RUN_UNTIL(&g.loop, settled(&g, "push", 1, 0) && settled(&g, "ingest", 1, 0), WAIT_MS);
    ASSERT(settled(&g, "push", 1, 0));
    ASSERT(settled(&g, "ingest", 1, 0));
    ASSERT_EQ(g.srv.n_reqs, 2);

    /* Push: a Connect unary call with a binary protobuf body. */
    push = find_req(&g.srv, "/push.v1.PusherService/Push");
    ASSERT_NOT_NULL(push);
    ASSERT_STR_EQ(push->method, "POST");
    ASSERT_STR_EQ(push->url, "/push.v1.PusherService/Push");
    ASSERT_STR_EQ(push->connect_version, "1");
    ASSERT_STR_EQ(push->content_type, "application/proto");
    ASSERT_STR_EQ(push->connect_timeout, "4321");
    ASSERT(push->decoded);
    ASSERT_EQ(push->n_ids, 1);
    ASSERT_STR_EQ(push->ids[0], p->id);

    /* Legacy /ingest: the profile's own bytes, as an octet stream. */
    ingest = find_req(&g.srv, "/ingest?");
    ASSERT_NOT_NULL(ingest);
    ASSERT_STR_EQ(ingest->method, "POST");
    ASSERT(strstr(ingest->url, "name=svc%7Bseries%3Dw%7D") != NULL);
    ASSERT(strstr(ingest->url, "&format=pprof") != NULL);
    ASSERT_STR_EQ(ingest->content_type, "application/octet-stream");
    ASSERT_EQ(ingest->body_len, p->len);
    ASSERT_EQ(memcmp(ingest->body, p->data, p->len), 0);

    rig_close(&g);
    ASSERT_EQ(g.srv.n_reqs, 2);
    fwd_profile_unref(p);
    tsrv_free(&g.srv);
}

/* ------------------------------------------------------------ the close */

/* A job that holds the work queue's only slot until the test lets it go
 * (or 10 s pass, so that a failing test cannot hang). */
static atomic_bool blocker_release;

static void blocker_run(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10000 && !atomic_load(&blocker_release); i++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
}

static void blocker_after(void *arg, int status)
{
    (void)status;
    (*(int *)arg)++;
}

TEST(close_past_its_deadline_waits_for_the_encoding_only)
{
    struct rig g;
    struct cfg_remote ep;
    struct fwd_profile *p;
    int blocker_done = 0;
    uint64_t until;

    rig_start(&g, answer_ok);
    ep_init(&ep, "push", g.url, CFG_PROTO_PUSH, 1);
    apply(&g, &ep, 1);
    ASSERT_NOT_NULL(p = mk("a", 1));

    /* The push request's encoding waits behind the blocker. */
    workq_set_limits(g.wq, 1, 64);
    atomic_store(&blocker_release, false);
    ASSERT_EQ(workq_submit(g.wq, 0, blocker_run, blocker_after, &blocker_done), 0);
    fwd_submit(g.fwd, p);
    ASSERT_EQ(view(&g, "push").inflight, 1);

    /* The deadline passes with the encoding still to run: the close waits
     * for it, since its job calls back whatever happens. */
    fwd_close(g.fwd, 50, count_cb, &g.closed);
    until = uv_hrtime() + 200 * 1000000ull;
    RUN_UNTIL(&g.loop, uv_hrtime() >= until, WAIT_MS);
    ASSERT_EQ(g.closed, 0);

    /* Once it has run, the close ends, without encoding the profile again
     * or sending it past the deadline. */
    atomic_store(&blocker_release, true);
    RUN_UNTIL(&g.loop, g.closed == 1, 3000);
    ASSERT_EQ(g.closed, 1);
    ASSERT_EQ(blocker_done, 1);
    ASSERT_EQ(g.srv.n_reqs, 0);

    net_client_close(g.http, count_cb, &g.closed);
    RUN_UNTIL(&g.loop, g.closed == 2, WAIT_MS);
    ASSERT_EQ(g.closed, 2);
    tsrv_close(&g.srv);
    ticker_stop(&g.tk);
    RUN_UNTIL(&g.loop, !uv_loop_alive(&g.loop), WAIT_MS);
    workq_free(g.wq);
    ASSERT_EQ(uv_loop_close(&g.loop), 0);
    fwd_profile_unref(p);
    tsrv_free(&g.srv);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
