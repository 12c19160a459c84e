/* SPDX-License-Identifier: Apache-2.0 */
/* Integration tests of the libcurl-multi + libuv client (net/http.c)
 * against real local servers: tests/net/http_server.py (spawned, on
 * 127.0.0.1), a holding server on the test's own loop (the cancel test)
 * and, for TLS, certificates made with openssl at test time.
 * Every test ends with net_client_close() and asserts uv_loop_close()==0. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/internal.h"
#include "net/net.h"
#include "net_test.h"
#include "proflet_version.h"
#include "test.h"
#include "test_loop.h"

static struct pyserver srv;
static bool srv_up;

static void stop_srv(void)
{
    pyserver_stop(&srv);
}

/* The shared server, started on first use. */
static int port(void)
{
    if (!srv_up) {
        ASSERT_EQ(pyserver_start(&srv, NULL), 0);
        srv_up = true;
        atexit(stop_srv);
    }
    return srv.port;
}

struct result {
    int done;
    int result;
    long status;
    char *body;
    size_t len;
    char ctype[128];
    char error[256];
    uint64_t duration_us;
};

static void on_done(struct net_request *r, struct net_response *resp, void *ud)
{
    struct result *res = ud;

    (void)r;
    res->result = resp->result;
    res->status = resp->status;
    free(res->body);
    res->body = buf_steal(&resp->body, &res->len);
    snprintf(res->ctype, sizeof(res->ctype), "%s", resp->content_type ? resp->content_type : "");
    snprintf(res->error, sizeof(res->error), "%s", resp->error ? resp->error : "");
    res->duration_us = resp->duration_us;
    res->done++;
}

static void result_done(struct result *res)
{
    free(res->body);
    res->body = NULL;
}

static void count_cb(void *ud)
{
    (*(int *)ud)++;
}

static struct net_client *client_new(uv_loop_t *loop)
{
    char err[256] = "";
    struct net_client *c;

    ASSERT_EQ(uv_loop_init(loop), 0);
    if (net_client_new(&(struct net_client_opts){ .loop = loop }, &c, err, sizeof(err)) < 0)
        fprintf(stderr, "net_client_new: %s\n", err);
    ASSERT_NOT_NULL(c);
    return c;
}

static void client_close(uv_loop_t *loop, struct net_client *c)
{
    int closed = 0;

    net_client_close(c, count_cb, &closed);
    RUN_UNTIL(loop, closed >= 1, 5000);
    ASSERT_EQ(finish_loop(loop, 5000), 0);
}

/* Starts one request and runs the loop until it is done. */
static void fetch(uv_loop_t *loop, struct net_client *c, struct net_request_opts *o,
                  struct result *res)
{
    int before = res->done;

    ASSERT_EQ(net_request_start(c, o, on_done, res, NULL), 0);
    RUN_UNTIL(loop, res->done >= before + 1, 15000);
}

static const char *url(const char *path)
{
    static char u[8][512];
    static int i;

    i = (i + 1) % 8;
    snprintf(u[i], sizeof(u[i]), "http://127.0.0.1:%d%s", port(), path);
    return u[i];
}

TEST(get_bytes_body_type_duration)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .url = url("/bytes?n=100000&ct=text/x-test") };

    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 200);
    ASSERT_EQ(res.len, 100000);
    ASSERT_EQ(memcmp(res.body, "0123456789abcdef0123", 20), 0);
    ASSERT_STR_EQ(res.ctype, "text/x-test");
    ASSERT_GT(res.duration_us, 0);
    ASSERT_LT(res.duration_us, 10 * 1000 * 1000);
    ASSERT_EQ(net_client_inflight(c), 0);
    result_done(&res);
    client_close(&loop, c);
}

TEST(http_error_statuses_are_responses)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .url = url("/status?code=404") };

    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 404);
    ASSERT_STR_EQ(res.body, "status 404");
    o.url = url("/status?code=500");
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 500);
    result_done(&res);
    client_close(&loop, c);
}

TEST(post_body_headers_user_agent)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    const char *hdrs[] = { "X-Test: one", "X-Scope-OrgID: team-a" };
    static const char body[] = "hello\0world"; /* binary-safe: the NUL is sent */
    struct net_request_opts o = {
        .method = "POST",
        .url = url("/echo"),
        .headers = hdrs,
        .n_headers = 2,
        .body = body,
        .body_len = sizeof(body) - 1,
    };

    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 200);
    ASSERT(strncmp(res.body, "POST /echo\n", 11) == 0);
    ASSERT_NOT_NULL(strstr(res.body, "X-Test: one\n"));
    ASSERT_NOT_NULL(strstr(res.body, "X-Scope-OrgID: team-a\n"));
    ASSERT_NOT_NULL(strstr(res.body, "User-Agent: proflet/" PROFLET_VERSION "\n"));
    ASSERT_NOT_NULL(strstr(res.body, "Content-Length: 11\n"));
    ASSERT_NULL(strstr(res.body, "Expect:"));
    ASSERT(res.len >= 11);
    ASSERT_EQ(memcmp(res.body + res.len - 11, body, 11), 0);

    /* A custom method with a body, and a custom user agent. */
    o.method = "PUT";
    o.user_agent = "probe/1";
    o.n_headers = 0;
    fetch(&loop, c, &o, &res);
    ASSERT(strncmp(res.body, "PUT /echo\n", 10) == 0);
    ASSERT_NOT_NULL(strstr(res.body, "User-Agent: probe/1\n"));
    result_done(&res);
    client_close(&loop, c);
}

TEST(basic_auth_and_bearer)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .url = url("/echo"), .username = "u", .password = "p" };

    fetch(&loop, c, &o, &res);
    ASSERT_NOT_NULL(strstr(res.body, "Authorization: Basic dTpw\n")); /* base64("u:p") */
    o.username = NULL;
    o.bearer_token = "tok.123";
    fetch(&loop, c, &o, &res);
    ASSERT_NOT_NULL(strstr(res.body, "Authorization: Bearer tok.123\n"));
    o.bearer_token = NULL;
    fetch(&loop, c, &o, &res);
    ASSERT_NULL(strstr(res.body, "Authorization"));
    result_done(&res);
    client_close(&loop, c);
}

TEST(head_request_has_no_body)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .method = "HEAD", .url = url("/bytes?n=100") };

    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 200);
    ASSERT_EQ(res.len, 0);
    result_done(&res);
    client_close(&loop, c);
}

TEST(timeout)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .url = url("/slow?ms=3000"), .timeout_ms = 200 };

    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_ETIMEDOUT);
    ASSERT_EQ(res.status, 0);
    ASSERT(res.error[0] != '\0');
    ASSERT_GE(res.duration_us, 150 * 1000);
    ASSERT_LT(res.duration_us, 2000 * 1000);
    result_done(&res);
    client_close(&loop, c);
}

TEST(body_cap_endless_declared_exact)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .url = url("/endless"), .max_response = 1024 * 1024 };

    /* A chunked body that never ends stops at the cap. */
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_ETOOLARGE);
    ASSERT_NOT_NULL(strstr(res.error, "1048576"));
    /* A declared Content-Length over the cap. */
    o.url = url("/bytes?n=2000");
    o.max_response = 1000;
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_ETOOLARGE);
    /* Exactly at the cap is fine. */
    o.url = url("/bytes?n=1000");
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.len, 1000);
    result_done(&res);
    client_close(&loop, c);
}

TEST(gzip_decoded_and_capped_after_decoding)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .url = url("/gzip?n=5000"), .accept_gzip = true };

    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.len, 5000);
    ASSERT_EQ(res.body[0], 'a');
    ASSERT_EQ(res.body[4999], 'a');
    /* 10 KiB on the wire, 10 MiB decoded: the cap counts decoded bytes. */
    o.url = url("/bomb");
    o.max_response = 1024 * 1024;
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_ETOOLARGE);
    result_done(&res);
    client_close(&loop, c);
}

TEST(close_mid_body_is_eio)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .url = url("/closemid") };

    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_EIO);
    ASSERT(res.error[0] != '\0');
    result_done(&res);
    client_close(&loop, c);
}

/* Keep-alive: 20 sequential requests, each started from the previous one's
 * done callback, travel over one TCP connection. A fresh server counts its
 * accepted connections. The control run asks for "Connection: close" and
 * must see one connection per request, proving the counter counts. */
struct chain {
    struct net_client *c;
    struct net_request_opts *o;
    int left;
    int failures;
    int done;
    char first_failure[320]; /* what the first failed request saw */
};

static void chain_cb(struct net_request *r, struct net_response *resp, void *ud)
{
    struct chain *ch = ud;

    (void)r;
    if ((resp->result != 0 || resp->status != 200) && ch->failures++ == 0)
        snprintf(ch->first_failure, sizeof(ch->first_failure),
                 "request %d: result %d, status %ld, %s", 20 - ch->left, resp->result, resp->status,
                 resp->error ? resp->error : "");
    if (--ch->left > 0) {
        if (net_request_start(ch->c, ch->o, chain_cb, ch, NULL) != 0)
            ch->failures++;
    } else {
        ch->done = 1;
    }
}

static int connections_after_chain(const char *const *hdrs, size_t n_hdrs)
{
    struct pyserver own;
    uv_loop_t loop;
    struct net_client *c;
    struct result res = { 0 };
    char u[256];
    struct net_request_opts o = { .headers = hdrs, .n_headers = n_hdrs };
    struct chain ch = { .o = &o, .left = 20 };
    int conns;

    ASSERT_EQ(pyserver_start(&own, NULL), 0);
    c = client_new(&loop);
    ch.c = c;
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/bytes?n=10", own.port);
    o.url = u;
    ASSERT_EQ(net_request_start(c, &o, chain_cb, &ch, NULL), 0);
    RUN_UNTIL(&loop, ch.done >= 1, 20000);
    if (ch.failures)
        test__fail(__FILE__, __LINE__, "%d of 20 chained requests failed; %s", ch.failures,
                   ch.first_failure);
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/conns", own.port);
    o.headers = NULL;
    o.n_headers = 0;
    fetch(&loop, c, &o, &res);
    pyserver_stop(&own);
    ASSERT_EQ(res.status, 200);
    conns = atoi(res.body);
    result_done(&res);
    client_close(&loop, c);
    return conns;
}

TEST(keep_alive_reuses_one_connection)
{
    const char *close_hdr[] = { "Connection: close" };

    ASSERT_EQ(connections_after_chain(NULL, 0), 1);
    ASSERT_GE(connections_after_chain(close_hdr, 1), 20);
}

struct many {
    int done;
    int ok;
};

static void many_cb(struct net_request *r, struct net_response *resp, void *ud)
{
    struct many *m = ud;

    (void)r;
    if (resp->result == 0 && resp->status == 200 && resp->body.len == 1000)
        m->ok++;
    m->done++;
}

TEST(two_hundred_parallel_requests)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct many m = { 0 };
    struct net_request_opts o = { .url = url("/bytes?n=1000") };

    for (int i = 0; i < 200; i++)
        ASSERT_EQ(net_request_start(c, &o, many_cb, &m, NULL), 0);
    ASSERT_EQ(net_client_inflight(c), 200);
    RUN_UNTIL(&loop, m.done >= 200, 30000);
    ASSERT_EQ(m.ok, 200);
    ASSERT_EQ(net_client_inflight(c), 0);
    client_close(&loop, c);
}

static void never_cb(struct net_request *r, struct net_response *resp, void *ud)
{
    (void)r;
    (void)resp;
    (*(int *)ud)++;
}

/* A server on the test's own loop for the cancel test: it counts the
 * connections it accepts and the requests it reads whole, answers each with
 * a head announcing 100000 bytes and the first 10 of them, then holds the
 * rest, and counts the connections the peer closed. What the client has
 * done is then known from the server's side, with no sleep. */
struct hold_srv {
    uv_tcp_t listener;
    int port;
    int accepted, requests, body_started, peer_closed, handles;
};

struct hold_conn {
    uv_tcp_t h;
    struct hold_srv *s;
    uv_write_t w;
    char req[16384];
    size_t len;
    bool answered;
};

static const char hold_answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n0123456789";

static void hold_conn_closed(uv_handle_t *h)
{
    struct hold_conn *c = h->data;

    c->s->handles--;
    free(c);
}

static void hold_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct hold_conn *c = h->data;

    (void)hint;
    /* Past the cap (or once answered) the bytes are read and dropped. */
    if (c->answered || c->len >= sizeof(c->req) - 1)
        c->len = 0;
    b->base = c->req + c->len;
    b->len = sizeof(c->req) - 1 - c->len;
}

static void hold_written(uv_write_t *w, int status)
{
    struct hold_conn *c = w->data;

    if (status == 0)
        c->s->body_started++;
}

static void hold_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct hold_conn *c = st->data;
    uv_buf_t out = uv_buf_init((char *)hold_answer, sizeof(hold_answer) - 1);

    (void)b;
    if (n < 0) {
        c->s->peer_closed += n == UV_EOF || n == UV_ECONNRESET;
        uv_close((uv_handle_t *)&c->h, hold_conn_closed);
        return;
    }
    if (c->answered)
        return;
    c->len += (size_t)n;
    c->req[c->len] = '\0';
    if (!strstr(c->req, "\r\n\r\n"))
        return;
    c->answered = true;
    c->s->requests++;
    c->w.data = c;
    if (uv_write(&c->w, st, &out, 1, hold_written) < 0)
        uv_close((uv_handle_t *)&c->h, hold_conn_closed);
}

static void hold_accept(uv_stream_t *l, int status)
{
    struct hold_srv *s = l->data;
    struct hold_conn *c;
    int r;

    if (status < 0)
        return;
    c = calloc(1, sizeof(*c));
    ASSERT_NOT_NULL(c);
    c->s = s;
    s->handles++;
    s->accepted++;
    r = test_accept(l, &c->h, hold_alloc, hold_read);
    c->h.data = c;
    if (r < 0)
        uv_close((uv_handle_t *)&c->h, hold_conn_closed);
}

static void hold_listener_closed(uv_handle_t *h)
{
    ((struct hold_srv *)h->data)->handles--;
}

static void hold_start(uv_loop_t *loop, struct hold_srv *s)
{
    memset(s, 0, sizeof(*s));
    s->handles = 1;
    s->port = test_listen_loopback(loop, &s->listener, hold_accept);
    s->listener.data = s;
    ASSERT_GT(s->port, 0);
}

TEST(cancel_before_and_during_transfer)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct net_request *a, *b;
    struct result res = { 0 };
    struct hold_srv hs;
    int called = 0;
    char u[128];
    struct net_request_opts o = { .url = u };

    hold_start(&loop, &hs);
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/hold", hs.port);
    ASSERT_EQ(net_request_start(c, &o, never_cb, &called, &a), 0);
    ASSERT_EQ(net_request_start(c, &o, never_cb, &called, &b), 0);
    ASSERT_EQ(net_client_inflight(c), 2);
    net_request_cancel(a); /* before the loop ever ran it */
    ASSERT_EQ(net_client_inflight(c), 1);
    /* b is in transfer once the server has its request and has started
     * sending the body. */
    RUN_UNTIL(&loop, hs.body_started >= 1, 10000);
    ASSERT_EQ(called, 0);
    net_request_cancel(b);
    ASSERT_EQ(net_client_inflight(c), 0);
    /* The cancel ends the transfer: its connection closes. */
    RUN_UNTIL(&loop, hs.peer_closed >= 1, 10000);
    /* a never reached the server; b's answer never reached its callback. */
    ASSERT_EQ(hs.accepted, 1);
    ASSERT_EQ(hs.requests, 1);
    ASSERT_EQ(called, 0);
    uv_close((uv_handle_t *)&hs.listener, hold_listener_closed);
    /* The client still works. */
    o.url = url("/bytes?n=3");
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.len, 3);
    ASSERT_EQ(called, 0);
    ASSERT_EQ(hs.handles, 0);
    result_done(&res);
    client_close(&loop, c);
}

TEST(close_with_requests_in_flight)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    int called = 0, closed = 0;
    struct net_request_opts o = { .url = url("/slow?ms=3000") };
    struct net_request_opts o2 = { .url = url("/bytes?n=10") };
    struct result res = { 0 };

    for (int i = 0; i < 10; i++)
        ASSERT_EQ(net_request_start(c, &o, never_cb, &called, NULL), 0);
    /* One finished request leaves a cached connection to close too. */
    fetch(&loop, c, &o2, &res);
    ASSERT_EQ(res.result, 0);
    run_for(&loop, 100);
    net_client_close(c, count_cb, &closed);
    ASSERT_EQ(net_request_start(c, &o2, never_cb, &called, NULL), -ESHUTDOWN);
    RUN_UNTIL(&loop, closed >= 1, 5000);
    ASSERT_EQ(closed, 1);
    ASSERT_EQ(called, 0);
    result_done(&res);
    ASSERT_EQ(finish_loop(&loop, 5000), 0);
}

TEST(connection_refused_is_econnect)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    char u[128];
    struct net_request_opts o = { .url = u };

    snprintf(u, sizeof(u), "http://127.0.0.1:%d/", unused_port());
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_ECONNECT);
    ASSERT_EQ(res.status, 0);
    ASSERT(res.error[0] != '\0');
    result_done(&res);
    client_close(&loop, c);
}

/* A timer keeps ticking while "localhost" is resolved and fetched: the
 * lookup runs off the loop (libcurl's threaded resolver). */
static void tick_cb(uv_timer_t *t)
{
    (*(int *)t->data)++;
}

TEST(localhost_resolves_asynchronously)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    char u[128];
    struct net_request_opts o = { .url = u };
    uv_timer_t tick;
    int ticks = 0;

    snprintf(u, sizeof(u), "http://localhost:%d/bytes?n=7", port());
    uv_timer_init(&loop, &tick);
    tick.data = &ticks;
    uv_timer_start(&tick, tick_cb, 1, 1);
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.len, 7);
    ASSERT_GT(ticks, 0);
    uv_close((uv_handle_t *)&tick, NULL);
    result_done(&res);
    client_close(&loop, c);
}

TEST(socket_action_failure_rebuilds_multi)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct many m = { 0 };
    struct result res[3] = { { 0 } };
    struct net_request_opts o = { .url = url("/slow?ms=1000") };
    int done = 0;

    for (int i = 0; i < 3; i++)
        ASSERT_EQ(net_request_start(c, &o, on_done, &res[i], NULL), 0);
    run_for(&loop, 100);
    net__client_fail_next_action(c);
    for (int i = 0; i < 3; i++) {
        RUN_UNTIL(&loop, res[i].done >= 1, 5000);
        ASSERT_EQ(res[i].result, NET_EIO);
        ASSERT_NOT_NULL(strstr(res[i].error, "multi handle failed"));
        done++;
        result_done(&res[i]);
    }
    ASSERT_EQ(done, 3);
    ASSERT_EQ(net_client_inflight(c), 0);
    /* The rebuilt multi works. */
    o.url = url("/bytes?n=1000");
    ASSERT_EQ(net_request_start(c, &o, many_cb, &m, NULL), 0);
    RUN_UNTIL(&loop, m.done >= 1, 5000);
    ASSERT_EQ(m.ok, 1);
    client_close(&loop, c);
}

struct stream {
    size_t total;
    int chunks;
    int abort_after;
    int start_rc;
    struct net_client *c;
};

struct stream_res {
    struct result r;
    struct stream s;
};

/* on_data and the done callback share the request's ud. */
static struct stream *stream_of(void *ud)
{
    return &((struct stream_res *)ud)->s;
}

static int on_data(const char *p, size_t n, void *ud)
{
    struct stream *s = stream_of(ud);
    struct net_request_opts o = { .url = "http://127.0.0.1:1/" };

    (void)p;
    s->total += n;
    s->chunks++;
    if (s->c) /* starting a request from inside libcurl is refused */
        s->start_rc = net_request_start(s->c, &o, never_cb, NULL, NULL);
    if (s->abort_after && s->chunks >= s->abort_after)
        return -1;
    return 0;
}

static void stream_done(struct net_request *r, struct net_response *resp, void *ud)
{
    on_done(r, resp, &((struct stream_res *)ud)->r);
}

TEST(streaming_on_data)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct stream_res sr = { 0 };
    struct net_request_opts o = { .url = url("/bytes?n=300000"), .on_data = on_data };

    sr.s.c = c;
    ASSERT_EQ(net_request_start(c, &o, stream_done, &sr, NULL), 0);
    RUN_UNTIL(&loop, sr.r.done >= 1, 10000);
    ASSERT_EQ(sr.r.result, 0);
    ASSERT_EQ(sr.s.total, 300000);
    ASSERT_EQ(sr.r.len, 0);
    ASSERT_EQ(sr.s.start_rc, -EDEADLK);
    ASSERT_EQ(net_client_inflight(c), 0);

    /* Abort from the callback. */
    memset(&sr, 0, sizeof(sr));
    sr.s.abort_after = 1;
    ASSERT_EQ(net_request_start(c, &o, stream_done, &sr, NULL), 0);
    RUN_UNTIL(&loop, sr.r.done >= 1, 10000);
    ASSERT_EQ(sr.r.result, NET_EABORTED);

    /* The cap applies to the streamed total. */
    memset(&sr, 0, sizeof(sr));
    o.url = url("/endless");
    o.max_response = 100000;
    ASSERT_EQ(net_request_start(c, &o, stream_done, &sr, NULL), 0);
    RUN_UNTIL(&loop, sr.r.done >= 1, 10000);
    ASSERT_EQ(sr.r.result, NET_ETOOLARGE);
    ASSERT_LE(sr.s.total, 100000);
    result_done(&sr.r);
    client_close(&loop, c);
}

struct closer {
    struct net_client *c;
    int closed;
    int called;
    int chunks;
};

static int close_on_data(const char *p, size_t n, void *ud)
{
    struct closer *k = ud;

    (void)p;
    (void)n;
    if (k->chunks++ == 0)
        net_client_close(k->c, count_cb, &k->closed);
    return 0;
}

static void closer_done(struct net_request *r, struct net_response *resp, void *ud)
{
    (void)r;
    (void)resp;
    ((struct closer *)ud)->called++;
}

/* Closing from inside on_data (i.e. inside libcurl) is deferred until
 * libcurl has returned; it still completes and no callback runs. */
TEST(close_from_on_data_is_deferred)
{
    uv_loop_t loop;
    struct closer k = { 0 };
    struct net_request_opts o = { .url = url("/endless"), .on_data = close_on_data };

    k.c = client_new(&loop);
    ASSERT_EQ(net_request_start(k.c, &o, closer_done, &k, NULL), 0);
    RUN_UNTIL(&loop, k.closed >= 1, 10000);
    ASSERT_EQ(k.called, 0);
    ASSERT_GE(k.chunks, 1);
    ASSERT_EQ(finish_loop(&loop, 5000), 0);
}

TEST(bad_options_fail_without_callback)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    int called = 0;
    const char *evil[] = { "X-A: b\r\nX-Injected: 1" };
    struct net_request_opts o = { .url = NULL };

    ASSERT_EQ(net_request_start(c, &o, never_cb, &called, NULL), -EINVAL);
    o.url = url("/echo");
    o.headers = evil;
    o.n_headers = 1;
    ASSERT_EQ(net_request_start(c, &o, never_cb, &called, NULL), -EINVAL);
    o.n_headers = 0;
    o.bearer_token = "a\nb";
    ASSERT_EQ(net_request_start(c, &o, never_cb, &called, NULL), -EINVAL);
    o.bearer_token = NULL;
    o.url = "file:///etc/passwd";
    struct result res = { 0 };
    fetch(&loop, c, &o, &res); /* refused by libcurl at run time */
    ASSERT(res.result < 0);
    run_for(&loop, 50);
    ASSERT_EQ(called, 0);
    ASSERT_EQ(net_client_inflight(c), 0);
    result_done(&res);
    client_close(&loop, c);
}

TEST(redirects_only_when_asked)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    struct net_request_opts o = { .url = url("/redirect") };

    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.status, 302);
    o.follow_redirects = true;
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.status, 200);
    ASSERT_EQ(res.len, 5);
    result_done(&res);
    client_close(&loop, c);
}

TEST(proxy)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    char proxy[64];
    struct net_request_opts o = { .url = "http://target.invalid:6060/echo", .proxy_url = proxy };

    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", port());
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 200);
    ASSERT(strncmp(res.body, "PROXY GET http://target.invalid:6060/echo\n", 42) == 0);
    result_done(&res);
    client_close(&loop, c);
}

/* ----------------------------------------------- auth: headers and oauth2 */

static struct net_oauth2_cfg oauth2_cfg(const char *token_path)
{
    struct net_oauth2_cfg o = { .client_id = "my id",
                                .client_secret = "s3cret&x",
                                .token_url = (char *)url(token_path) };

    return o;
}

TEST(authorization_and_http_headers)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res = { 0 };
    char *vals[] = { "v1", "v2" }, *secs[] = { "hidden" };
    struct net_header_cfg hdr = {
        .name = "X-Multi", .values = vals, .n_values = 2, .secrets = secs, .n_secrets = 1
    };
    struct net_authorization_cfg az = { .type = "Token", .credentials = "abc" };
    struct net_http_cfg h = { .authorization = &az, .http_headers = &hdr, .n_http_headers = 1 };
    struct net_auth *a = net_auth_new(&loop, NULL, &h);
    struct net_request_opts o = { .url = url("/echo"), .auth = a };

    ASSERT_NOT_NULL(a);
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_NOT_NULL(strstr(res.body, "\nAuthorization: Token abc\n"));
    ASSERT_NOT_NULL(strstr(res.body, "\nX-Multi: v1\nX-Multi: v2\nX-Multi: hidden\n"));
    ASSERT_NULL(net_auth_error(a));
    net_auth_free(a);
    result_done(&res);
    client_close(&loop, c);
}

TEST(oauth2_requests_wait_for_one_cached_token)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res[4] = { { 0 } }, last = { 0 };
    char *scopes[] = { "a", "b c" };
    struct conf_kv params[] = { { .key = "audience", .value = "x y" } };
    struct net_oauth2_cfg o2 = oauth2_cfg("/token?expires=3600&ms=300");
    struct net_http_cfg h = { .oauth2 = &o2 };
    struct net_auth *a;
    struct net_request_opts o = { .url = url("/echo") };
    int done = 0;
    char *tok = NULL;

    o2.scopes = scopes;
    o2.n_scopes = 2;
    o2.endpoint_params = params;
    o2.n_endpoint_params = 1;
    ASSERT_NOT_NULL(a = net_auth_new(&loop, NULL, &h));
    o.auth = a;
    /* Three requests before any token: they wait for the same one. */
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(net_request_start(c, &o, on_done, &res[i], NULL), 0);
    for (int i = 0; i < 3; i++) {
        RUN_UNTIL(&loop, res[i].done >= 1, 15000);
        done++;
    }
    for (int i = 0; i < 3; i++) {
        char *t;

        ASSERT_EQ(res[i].result, 0);
        ASSERT_NOT_NULL(t = strstr(res[i].body, "\nAuthorization: Bearer tok-"));
        *strchr(t + 1, '\n') = '\0';
        if (!tok)
            tok = strdup(t);
        ASSERT_STR_EQ(t, tok);
    }
    /* A later request uses the cached token. */
    fetch(&loop, c, &o, &res[3]);
    ASSERT_NOT_NULL(strstr(res[3].body, tok + 1));
    /* The token request: client authentication and form. */
    o.url = url("/lasttoken");
    o.auth = NULL;
    fetch(&loop, c, &o, &last);
    ASSERT_STR_EQ(last.body, "Basic bXklMjBpZDpzM2NyZXQlMjZ4\n" /* my%20id:s3cret%26x */
                             "grant_type=client_credentials&scope=a%20b%20c&audience=x%20y");
    free(tok);
    for (int i = 0; i < 4; i++)
        result_done(&res[i]);
    result_done(&last);
    net_auth_free(a);
    client_close(&loop, c);
}

TEST(oauth2_failure_fails_waiting_requests_without_the_secret)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res[2] = { { 0 } };
    struct net_oauth2_cfg o2 = oauth2_cfg("/status?code=401");
    struct net_http_cfg h = { .oauth2 = &o2 };
    struct net_auth *a = net_auth_new(&loop, NULL, &h);
    struct net_request_opts o = { .url = url("/echo"), .auth = a };

    for (int i = 0; i < 2; i++)
        ASSERT_EQ(net_request_start(c, &o, on_done, &res[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        RUN_UNTIL(&loop, res[i].done >= 1, 15000);
        ASSERT_EQ(res[i].result, NET_EAUTH);
        ASSERT_STR_EQ(res[i].error, "oauth2: the token endpoint answered HTTP 401");
    }
    ASSERT_STR_EQ(net_auth_error(a), "oauth2: the token endpoint answered HTTP 401");
    ASSERT_NULL(strstr(net_auth_error(a), "s3cret"));
    for (int i = 0; i < 2; i++)
        result_done(&res[i]);
    net_auth_free(a);
    client_close(&loop, c);
}

/* Waiting requests survive their owner letting go of the auth; a cancelled
 * one never calls back; closing the client with requests and the token
 * request in flight frees everything (the sanitizer build checks). */
TEST(oauth2_cancel_free_and_close_while_waiting)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res[3] = { { 0 } };
    struct net_oauth2_cfg o2 = oauth2_cfg("/token?expires=3600&ms=300");
    struct net_http_cfg h = { .oauth2 = &o2 };
    struct net_auth *a = net_auth_new(&loop, NULL, &h);
    struct net_request_opts o = { .url = url("/echo"), .auth = a };
    struct net_request *r0;

    ASSERT_EQ(net_request_start(c, &o, on_done, &res[0], &r0), 0);
    ASSERT_EQ(net_request_start(c, &o, on_done, &res[1], NULL), 0);
    ASSERT_EQ(net_client_inflight(c), 3); /* two waiting, one token request */
    net_request_cancel(r0);
    net_auth_free(a);
    RUN_UNTIL(&loop, res[1].done >= 1, 15000);
    ASSERT_EQ(res[1].result, 0);
    ASSERT_NOT_NULL(strstr(res[1].body, "\nAuthorization: Bearer tok-"));
    ASSERT_EQ(res[0].done, 0);

    a = net_auth_new(&loop, NULL, &h);
    o.auth = a;
    ASSERT_EQ(net_request_start(c, &o, on_done, &res[2], NULL), 0);
    net_auth_free(a);
    client_close(&loop, c); /* asserts uv_loop_close() == 0 */
    ASSERT_EQ(res[2].done, 0);
    result_done(&res[1]);
}

/* A failed multi fails the token request and the requests waiting for it,
 * each once; the auth then fetches again. */
TEST(oauth2_waiting_requests_and_multi_rebuild)
{
    uv_loop_t loop;
    struct net_client *c = client_new(&loop);
    struct result res[3] = { { 0 } };
    struct net_oauth2_cfg o2 = oauth2_cfg("/token?expires=3600&ms=1000");
    struct net_http_cfg h = { .oauth2 = &o2 };
    struct net_auth *a = net_auth_new(&loop, NULL, &h);
    struct net_request_opts o = { .url = url("/echo"), .auth = a };

    for (int i = 0; i < 2; i++)
        ASSERT_EQ(net_request_start(c, &o, on_done, &res[i], NULL), 0);
    run_for(&loop, 100);
    net__client_fail_next_action(c);
    for (int i = 0; i < 2; i++) {
        RUN_UNTIL(&loop, res[i].done >= 1, 5000);
        ASSERT(res[i].result == NET_EIO || res[i].result == NET_EAUTH);
    }
    ASSERT_EQ(net_client_inflight(c), 0);
    o2.token_url = (char *)url("/token?expires=3600");
    fetch(&loop, c, &o, &res[2]);
    ASSERT_EQ(res[2].result, 0);
    ASSERT_NOT_NULL(strstr(res[2].body, "\nAuthorization: Bearer tok-"));
    ASSERT_EQ(res[0].done + res[1].done, 2);
    for (int i = 0; i < 3; i++)
        result_done(&res[i]);
    net_auth_free(a);
    client_close(&loop, c);
}

TEST(error_strings)
{
    ASSERT_STR_EQ(net_strerror(NET_ETOOLARGE), "response body too large");
    ASSERT_STR_EQ(net_strerror(NET_ECONNECT), "could not connect");
    ASSERT_STR_EQ(net_strerror(-ENOMEM), strerror(ENOMEM));
}

/* ---------------------------------------------------------------- TLS */

static char certdir[256];
static struct pyserver tls_srv, mtls_srv;

static void tls_cleanup(void)
{
    pyserver_stop(&tls_srv);
    pyserver_stop(&mtls_srv);
    remove_dir(certdir);
}

static const char *cert(const char *name)
{
    static char p[6][320];
    static int i;

    i = (i + 1) % 6;
    snprintf(p[i], sizeof(p[i]), "%s/%s", certdir, name);
    return p[i];
}

static void tls_setup(void)
{
    if (certdir[0])
        return;
    ASSERT_EQ(make_certs(certdir, sizeof(certdir)), 0);
    atexit(tls_cleanup);
    {
        const char *a[] = { "--tls", cert("srv.pem"), cert("srv.key"), NULL };

        ASSERT_EQ(pyserver_start(&tls_srv, a), 0);
    }
    {
        const char *a[] = { "--tls",       cert("srv.pem"), cert("srv.key"),
                            "--client-ca", cert("ca.pem"),  NULL };

        ASSERT_EQ(pyserver_start(&mtls_srv, a), 0);
    }
}

TEST(tls_verification)
{
    uv_loop_t loop;
    struct net_client *c;
    struct result res = { 0 };
    char u[128];
    struct net_tls tls = { 0 };
    struct net_request_opts o = { .url = u, .tls = &tls };

    tls_setup();
    c = client_new(&loop);
    snprintf(u, sizeof(u), "https://127.0.0.1:%d/bytes?n=5", tls_srv.port);

    /* Unknown CA: a TLS error. */
    tls.ca_file = "/nonexistent-ca-so-no-system-ca-applies.pem";
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_ETLS);
    tls.ca_file = NULL;
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_ETLS);

    /* Our CA. */
    tls.ca_file = cert("ca.pem");
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.len, 5);

    /* Skip verification without a CA. */
    tls.ca_file = NULL;
    tls.insecure_skip_verify = true;
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 200);

    /* HTTP/2 offered; the server only speaks 1.1, so ALPN falls back. */
    o.http2 = true;
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 200);
    result_done(&res);
    client_close(&loop, c);
}

TEST(tls_server_name)
{
    uv_loop_t loop;
    struct net_client *c;
    struct result res = { 0 };
    char u[128], host[64];
    struct net_tls tls = { 0 };
    struct net_request_opts o = { .url = u, .tls = &tls };

    tls_setup();
    c = client_new(&loop);
    /* Connect to 127.0.0.1 but verify the certificate as test.example. */
    snprintf(u, sizeof(u), "https://127.0.0.1:%d/echo", tls_srv.port);
    tls.ca_file = cert("ca.pem");
    tls.server_name = "test.example";
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.status, 200);
    /* The Host header still names what the URL names. */
    snprintf(host, sizeof(host), "Host: 127.0.0.1:%d\n", tls_srv.port);
    ASSERT_NOT_NULL(strstr(res.body, host));
    /* A name the certificate does not carry fails verification. */
    tls.server_name = "other.example";
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, NET_ETLS);
    result_done(&res);
    client_close(&loop, c);
}

TEST(tls_client_certificate)
{
    uv_loop_t loop;
    struct net_client *c;
    struct result res = { 0 };
    char u[128];
    struct net_tls tls = { 0 };
    struct net_request_opts o = { .url = u, .tls = &tls };

    tls_setup();
    c = client_new(&loop);
    snprintf(u, sizeof(u), "https://127.0.0.1:%d/bytes?n=4", mtls_srv.port);
    tls.ca_file = cert("ca.pem");
    fetch(&loop, c, &o, &res);
    ASSERT(res.result < 0); /* the server requires a client certificate */
    tls.cert_file = cert("cli.pem");
    tls.key_file = cert("cli.key");
    fetch(&loop, c, &o, &res);
    ASSERT_EQ(res.result, 0);
    ASSERT_EQ(res.len, 4);
    result_done(&res);
    client_close(&loop, c);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
