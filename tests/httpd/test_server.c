/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the status server (httpd/) with real sockets on loopback.
 * The server runs on the test's loop in the main thread; a client thread
 * speaks raw HTTP over blocking sockets (5 s timeouts), records what it
 * saw, and wakes the loop with uv_async_send when done. Assertions run on
 * the main thread after the join. Every test asserts uv_loop_close()==0. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "httpd/httpd.h"
#include "httpd/internal.h"
#include "net/net.h"
#include "net_test.h"
#include "test.h"
#include "test_loop.h"

/* ------------------------------------------------------ server side */

struct hstate {
    int calls;
    char method[16];
    char path[512];
    char query[512];
    size_t body_len;
    struct httpd *s;
    int closed;
    int parts;         /* stream parts produced */
    int streams_freed; /* stream states freed */
    /* /parked: a stream whose part comes from "pool work", here a timer */
    uv_timer_t park_timer;
    void *parked;     /* the parked stream's state (compared, never read) */
    int parked_calls; /* calls of its stream function */
    int park_ms;      /* when the timer resumes it; 0: never */
    /* /later: an answer the handler gives later, from the same timer */
    void *later;      /* its token (compared, never read once freed) */
    int laters_freed; /* tokens given back by the server */
};

/* A streamed answer: `left` parts of 10 KiB, each "part N" padded. */
struct sstate {
    int left, sent;
    struct hstate *h;
};

/* /parked: the first call parks; the timer resumes it; then one part. */
struct pstate {
    struct hstate *h;
    bool ready;
};

static int stream_part(struct buf *out, size_t chunk, void *state)
{
    struct sstate *st = state;

    (void)chunk;
    st->h->parts++;
    buf_printf(out, "part %d;", st->sent++);
    while (out->len < 10 * 1024)
        buf_puts(out, ".");
    return --st->left > 0 ? 1 : 0;
}

static void stream_free(void *state)
{
    struct sstate *st = state;

    st->h->streams_freed++;
    free(st);
}

static void stream_free_plain(void *state)
{
    struct pstate *st = state;

    st->h->streams_freed++;
    free(st);
}

static void park_timer_cb(uv_timer_t *t)
{
    struct hstate *h = t->data;

    /* The state may be gone (the connection closed): resume only compares. */
    if (h->parked && !h->streams_freed)
        ((struct pstate *)h->parked)->ready = true;
    httpd_resume(h->s, h->parked);
}

static int parked_part(struct buf *out, size_t chunk, void *state)
{
    struct pstate *st = state;

    (void)chunk;
    st->h->parked_calls++;
    if (!st->ready) {
        if (st->h->park_ms)
            uv_timer_start(&st->h->park_timer, park_timer_cb, (uint64_t)st->h->park_ms, 0);
        return HTTPD_STREAM_PARKED;
    }
    buf_puts(out, "ready");
    return 0;
}

static void later_timer_cb(uv_timer_t *t)
{
    struct hstate *h = t->data;

    httpd_finish(h->s, h->later, 201, NULL, "later");
}

static void later_free(void *token)
{
    struct hstate *h = *(struct hstate **)token;

    h->laters_freed++;
    free(token);
}

static void handler(const struct httpd_request *req, struct httpd_response *resp, void *ud)
{
    struct hstate *h = ud;

    h->calls++;
    snprintf(h->method, sizeof(h->method), "%s", req->method);
    snprintf(h->path, sizeof(h->path), "%s", req->path);
    snprintf(h->query, sizeof(h->query), "%s", req->query);
    h->body_len = req->body_len;
    if (strcmp(req->path, "/missing") == 0) {
        resp->status = 404;
        buf_puts(&resp->body, "nope\n");
    } else if (strcmp(req->path, "/big") == 0) {
        /* 3 MiB, tagged with the query so order can be checked. */
        buf_printf(&resp->body, "%s:", req->query);
        while (resp->body.len < 3 * 1024 * 1024)
            buf_puts(&resp->body, "0123456789abcdef0123456789abcdef"
                                  "0123456789abcdef0123456789abcde\n");
        resp->content_type = "application/octet-stream";
    } else if (strcmp(req->path, "/quit") == 0) {
        httpd_close(h->s, NULL, NULL);
        buf_puts(&resp->body, "bye\n");
    } else if (strcmp(req->path, "/stream") == 0) {
        struct sstate *st = calloc(1, sizeof(*st));

        st->left = atoi(req->query);
        st->h = h;
        resp->content_type = "application/octet-stream";
        resp->stream = stream_part;
        resp->stream_state = st;
        resp->stream_free = stream_free;
    } else if (strcmp(req->path, "/parked") == 0) {
        struct pstate *st = calloc(1, sizeof(*st));

        st->h = h;
        h->parked = st;
        resp->stream = parked_part;
        resp->stream_state = st;
        resp->stream_free = stream_free_plain;
    } else if (strcmp(req->path, "/later") == 0) {
        struct hstate **token = malloc(sizeof(*token));

        *token = h;
        h->later = token;
        buf_puts(&resp->body, "not this"); /* ignored: the answer comes later */
        resp->later = token;
        resp->later_free = later_free;
        if (h->park_ms)
            uv_timer_start(&h->park_timer, later_timer_cb, (uint64_t)h->park_ms, 0);
    } else if (strcmp(req->path, "/k16") == 0) {
        while (resp->body.len < 16 * 1024)
            buf_puts(&resp->body, "0123456789abcdef");
    } else if (strcmp(req->path, "/echo") == 0) {
        resp->content_type = "application/octet-stream";
        buf_append(&resp->body, req->body, req->body_len);
    } else {
        buf_printf(&resp->body, "%s %s %s %zu", req->method, req->path, req->query, req->body_len);
    }
}

static void closed_cb(void *ud)
{
    ((struct hstate *)ud)->closed++;
}

/* A server on a fresh loop with the test's handler; `o` gives the other
 * options (NULL: the defaults). Returns its port. */
static int server_up_opts(uv_loop_t *loop, struct hstate *h, const char *addr,
                          const struct httpd_opts *o)
{
    struct httpd_opts so = o ? *o : (struct httpd_opts){ 0 };
    char err[256];
    int rc;

    memset(h, 0, sizeof(*h));
    ASSERT_EQ(uv_loop_init(loop), 0);
    so.loop = loop;
    so.addr = addr;
    so.handler = handler;
    so.ud = h;
    rc = httpd_new(&so, &h->s, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "httpd_new: %s\n", err);
    ASSERT_EQ(rc, 0);
    ASSERT_GT(httpd_port(h->s), 0);
    return httpd_port(h->s);
}

static int server_up(uv_loop_t *loop, struct hstate *h, const char *addr)
{
    return server_up_opts(loop, h, addr, NULL);
}

static void server_down(uv_loop_t *loop, struct hstate *h)
{
    httpd_close(h->s, closed_cb, h);
    RUN_UNTIL(loop, h->closed >= 1, 5000);
    ASSERT_EQ(finish_loop(loop, 5000), 0);
}

/* ------------------------------------------------------ client thread */

struct job {
    uv_async_t async;
    pthread_t th;
    int finished;
    int port;
    void (*fn)(struct job *);
    void *arg;
};

static void *job_main(void *p)
{
    struct job *j = p;

    j->fn(j);
    uv_async_send(&j->async);
    return NULL;
}

static void job_done_cb(uv_async_t *a)
{
    ((struct job *)a->data)->finished = 1;
}

/* Runs fn on a thread while the loop serves; returns once it is done. */
static void run_job(uv_loop_t *loop, int port, void (*fn)(struct job *), void *arg)
{
    struct job *j = calloc(1, sizeof(*j));

    ASSERT_NOT_NULL(j);
    j->port = port;
    j->fn = fn;
    j->arg = arg;
    uv_async_init(loop, &j->async, job_done_cb);
    j->async.data = j;
    ASSERT_EQ(pthread_create(&j->th, NULL, job_main, j), 0);
    RUN_UNTIL(loop, j->finished >= 1, 60000);
    pthread_join(j->th, NULL);
    uv_close((uv_handle_t *)&j->async, (uv_close_cb)free);
}

struct conn {
    int fd;
    size_t len;
    size_t cap;
    char *buf; /* grows to 8 MiB at most */
};

static struct conn *c_open(int port)
{
    struct conn *c = calloc(1, sizeof(*c));
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    struct timeval tv = { .tv_sec = 5 };
    int one = 1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(c->fd);
        c->fd = -1;
    }
    return c;
}

static void c_close(struct conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    free(c);
}

static int c_send(struct conn *c, const void *p, size_t n)
{
    const char *s = p;

    while (n > 0) {
        ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);

        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

static int c_sends(struct conn *c, const char *s)
{
    return c_send(c, s, strlen(s));
}

static int c_fill(struct conn *c)
{
    ssize_t r;

    if (c->len == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64 * 1024;
        char *p = cap <= 8 * 1024 * 1024 ? realloc(c->buf, cap) : NULL;

        if (!p)
            return -1;
        c->buf = p;
        c->cap = cap;
    }
    r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (r <= 0)
        return -1;
    c->len += (size_t)r;
    return 0;
}

struct resp {
    int status;
    char head[2048];
    char *body;
    size_t body_len;
};

/* Reads one response (framed by Content-Length). 0 or -1. */
static int c_response(struct conn *c, struct resp *r, bool head_only)
{
    char *end = NULL;
    size_t hlen, clen = 0;
    const char *cl;

    memset(r, 0, sizeof(*r));
    while (!c->buf || (end = memmem(c->buf, c->len, "\r\n\r\n", 4)) == NULL)
        if (c_fill(c) < 0)
            return -1;
    hlen = (size_t)(end - c->buf) + 4;
    if (hlen >= sizeof(r->head))
        return -1;
    memcpy(r->head, c->buf, hlen);
    r->head[hlen] = '\0';
    if (sscanf(r->head, "HTTP/1.1 %d ", &r->status) != 1)
        return -1;
    cl = strcasestr(r->head, "\r\nContent-Length: ");
    if (cl)
        clen = strtoul(cl + 18, NULL, 10);
    if (head_only)
        clen = 0;
    while (c->len < hlen + clen)
        if (c_fill(c) < 0)
            return -1;
    r->body = malloc(clen + 1);
    memcpy(r->body, c->buf + hlen, clen);
    r->body[clen] = '\0';
    r->body_len = clen;
    memmove(c->buf, c->buf + hlen + clen, c->len - hlen - clen);
    c->len -= hlen + clen;
    return 0;
}

/* True if the peer closes (EOF or reset) with nothing else to read. */
static bool c_eof(struct conn *c)
{
    char b;
    ssize_t r;

    if (c->len > 0)
        return false;
    r = recv(c->fd, &b, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
}

/* Results recorded by the thread, checked on the main thread. */
struct rec {
    struct resp r[32];
    int n;
    int errors;
    bool eof;
    uint64_t ms;
};

static void rec_free(struct rec *x)
{
    for (int i = 0; i < 32; i++)
        free(x->r[i].body);
}

static void rec_response(struct rec *x, struct conn *c, bool head_only)
{
    if (x->n >= 32 || c_response(c, &x->r[x->n], head_only) < 0)
        x->errors++;
    else
        x->n++;
}

/* ------------------------------------------------------ tests */

static void job_get_decoded(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);

    c_sends(c, "GET /a%20b/c%2F+d?x=1&y=%41 HTTP/1.1\r\nHost: t\r\n\r\n");
    rec_response(x, c, false);
    c_close(c);
}

TEST(get_decodes_path_and_splits_query)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_get_decoded, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.r[0].status, 200);
    ASSERT(strncmp(x.r[0].head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ASSERT_NOT_NULL(strstr(x.r[0].head, "Content-Type: text/plain; charset=utf-8\r\n"));
    ASSERT_STR_EQ(h.path, "/a b/c/+d");
    ASSERT_STR_EQ(h.query, "x=1&y=%41");
    ASSERT_STR_EQ(h.method, "GET");
    ASSERT_STR_EQ(x.r[0].body, "GET /a b/c/+d x=1&y=%41 0");
    ASSERT_NULL(strstr(x.r[0].head, "Connection: close"));
    rec_free(&x);
    server_down(&loop, &h);
}

static void job_keepalive_pipeline(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);

    c_sends(c, "GET /one HTTP/1.1\r\nHost: t\r\n\r\n");
    rec_response(x, c, false);
    c_sends(c, "POST /two HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
    rec_response(x, c, false);
    /* Three requests in one segment, the last one chunked. */
    c_sends(c, "GET /p1 HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n"
               "POST /p3?q HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
               "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
    for (int i = 0; i < 3; i++)
        rec_response(x, c, false);
    c_close(c);
}

TEST(keep_alive_and_pipelining)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_keepalive_pipeline, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.n, 5);
    ASSERT_EQ(h.calls, 5);
    ASSERT_STR_EQ(x.r[0].body, "GET /one  0");
    ASSERT_STR_EQ(x.r[1].body, "POST /two  5");
    ASSERT_STR_EQ(x.r[2].body, "GET /p1  0");
    ASSERT_EQ(x.r[3].status, 404);
    ASSERT(strncmp(x.r[3].head, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
    ASSERT_STR_EQ(x.r[3].body, "nope\n");
    ASSERT_STR_EQ(x.r[4].body, "POST /p3 q 7");
    for (int i = 0; i < 5; i++)
        ASSERT_NULL(strstr(x.r[i].head, "Connection: close"));
    rec_free(&x);
    server_down(&loop, &h);
}

static void job_head(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);

    c_sends(c, "HEAD /thing HTTP/1.1\r\nHost: t\r\n\r\nGET /after HTTP/1.1\r\nHost: t\r\n\r\n");
    rec_response(x, c, true);
    rec_response(x, c, false);
    c_close(c);
}

TEST(head_sends_length_but_no_body)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_head, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.r[0].status, 200);
    /* The length of the GET body, "HEAD /thing  0" is 14 bytes. */
    ASSERT_NOT_NULL(strstr(x.r[0].head, "Content-Length: 14\r\n"));
    /* Framing holds: the next response is read right after the head. */
    ASSERT_STR_EQ(x.r[1].body, "GET /after  0");
    rec_free(&x);
    server_down(&loop, &h);
}

struct reject {
    const char *req;
    size_t req_len;
    struct rec x;
};

static void job_reject(struct job *j)
{
    struct reject *rj = j->arg;
    struct conn *c = c_open(j->port);

    c_send(c, rj->req, rj->req_len);
    rec_response(&rj->x, c, false);
    rj->x.eof = c_eof(c);
    c_close(c);
}

/* Sends `req`, expects `status` with Connection: close, then EOF, and no
 * handler call. */
static void expect_reject(const char *req, size_t len, int status)
{
    uv_loop_t loop;
    struct hstate h;
    struct reject rj = { .req = req, .req_len = len };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_reject, &rj);
    ASSERT_EQ(rj.x.errors, 0);
    ASSERT_EQ(rj.x.r[0].status, status);
    ASSERT_NOT_NULL(strstr(rj.x.r[0].head, "Connection: close\r\n"));
    ASSERT(rj.x.eof);
    ASSERT_EQ(h.calls, 0);
    rec_free(&rj.x);
    server_down(&loop, &h);
}

TEST(oversized_header_is_431)
{
    struct buf b;

    buf_init(&b, 64 * 1024);
    buf_puts(&b, "GET / HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 20; i++) {
        buf_printf(&b, "X-Pad-%d: ", i);
        for (int k = 0; k < 1000; k++)
            buf_puts(&b, "a");
        buf_puts(&b, "\r\n");
    }
    buf_puts(&b, "\r\n");
    expect_reject(b.data, b.len, 431);
    buf_done(&b);
}

TEST(oversized_body_is_413)
{
    static const char declared[] = "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n";
    struct buf b;

    expect_reject(declared, sizeof(declared) - 1, 413);
    /* Chunked, so only counting can catch it. */
    buf_init(&b, 2 * 1024 * 1024);
    buf_puts(&b, "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 17; i++) {
        buf_puts(&b, "10000\r\n"); /* 64 KiB chunks, 1.06 MiB in all */
        for (int k = 0; k < 1024; k++)
            buf_puts(&b, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        buf_puts(&b, "\r\n");
    }
    expect_reject(b.data, b.len, 413);
    buf_done(&b);
}

TEST(garbage_is_400_and_closes)
{
    static const char garbage[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http\r\n\r\n";
    static const char bad_escape[] = "GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n";
    static const char nul_escape[] = "GET /a%00b HTTP/1.1\r\nHost: t\r\n\r\n";

    expect_reject(garbage, sizeof(garbage) - 1, 400);
    expect_reject(bad_escape, sizeof(bad_escape) - 1, 400);
    expect_reject(nul_escape, sizeof(nul_escape) - 1, 400);
}

static void job_body_at_cap(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);
    char *body = malloc(HTTPD__MAX_BODY);
    char head[128];

    memset(body, 'b', HTTPD__MAX_BODY);
    snprintf(head, sizeof(head), "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n",
             HTTPD__MAX_BODY);
    c_sends(c, head);
    c_send(c, body, HTTPD__MAX_BODY);
    rec_response(x, c, false);
    free(body);
    c_close(c);
}

TEST(body_at_the_cap_is_accepted)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_body_at_cap, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.r[0].status, 200);
    ASSERT_EQ(h.body_len, HTTPD__MAX_BODY);
    ASSERT_EQ(x.r[0].body_len, HTTPD__MAX_BODY);
    ASSERT_EQ(x.r[0].body[HTTPD__MAX_BODY - 1], 'b');
    rec_free(&x);
    server_down(&loop, &h);
}

static void job_close_variants(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c;

    /* Asked for close. */
    c = c_open(j->port);
    c_sends(c, "GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    rec_response(x, c, false);
    x->eof = c_eof(c);
    c_close(c);
    /* HTTP/1.0 closes by default... */
    c = c_open(j->port);
    c_sends(c, "GET /b HTTP/1.0\r\n\r\n");
    rec_response(x, c, false);
    if (!c_eof(c))
        x->errors++;
    c_close(c);
    /* ...unless it asks for keep-alive. */
    c = c_open(j->port);
    c_sends(c, "GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    rec_response(x, c, false);
    c_sends(c, "GET /d HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    rec_response(x, c, false);
    c_close(c);
}

TEST(connection_close_and_http10)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_close_variants, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.n, 4);
    ASSERT(x.eof);
    ASSERT_NOT_NULL(strstr(x.r[0].head, "Connection: close\r\n"));
    ASSERT_NOT_NULL(strstr(x.r[1].head, "Connection: close\r\n"));
    ASSERT_NOT_NULL(strstr(x.r[2].head, "Connection: keep-alive\r\n"));
    ASSERT_STR_EQ(x.r[3].body, "GET /d  0");
    rec_free(&x);
    server_down(&loop, &h);
}

static void job_half_close(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);

    /* Requests, then our side shut: the answers must still come. */
    c_sends(c, "GET /h1 HTTP/1.1\r\nHost: t\r\n\r\nGET /big?h HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /h3 HTTP/1.1\r\nHost: t\r\n\r\n");
    shutdown(c->fd, SHUT_WR);
    for (int i = 0; i < 3; i++)
        rec_response(x, c, false);
    x->eof = c_eof(c);
    c_close(c);
}

TEST(half_closed_client_still_gets_answers)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_half_close, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.n, 3);
    ASSERT_STR_EQ(x.r[0].body, "GET /h1  0");
    ASSERT(strncmp(x.r[1].body, "h:", 2) == 0);
    ASSERT_STR_EQ(x.r[2].body, "GET /h3  0");
    ASSERT(x.eof);
    rec_free(&x);
    server_down(&loop, &h);
}

static void job_many(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c[100];
    int ok = 0;

    for (int i = 0; i < 100; i++) {
        c[i] = c_open(j->port);
        c_sends(c[i], "GET /m HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    for (int i = 0; i < 100; i++) {
        struct resp r;

        if (c_response(c[i], &r, false) == 0 && r.status == 200 && strcmp(r.body, "GET /m  0") == 0)
            ok++;
        free(r.body);
        c_close(c[i]);
    }
    x->n = ok;
}

TEST(many_concurrent_connections)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_many, &x);
    ASSERT_EQ(x.n, 100);
    ASSERT_EQ(h.calls, 100);
    server_down(&loop, &h);
}

static void job_conn_cap(struct job *j)
{
    struct rec *x = j->arg;
    struct conn **c = calloc(HTTPD__MAX_CONNS + 1, sizeof(*c));
    struct conn *extra;
    int served = 0;

    /* Fill every slot, each proven accepted by an answer. */
    for (int i = 0; i < HTTPD__MAX_CONNS; i++) {
        struct resp r;

        c[i] = c_open(j->port);
        c_sends(c[i], "GET /cap HTTP/1.1\r\nHost: t\r\n\r\n");
        if (c_response(c[i], &r, false) == 0 && r.status == 200)
            served++;
        free(r.body);
    }
    x->n = served;
    /* One more evicts the oldest idle connection and is served. */
    extra = c_open(j->port);
    {
        struct resp r;

        if (c_sends(extra, "GET /cap HTTP/1.1\r\nHost: t\r\n\r\n") == 0 &&
            c_response(extra, &r, false) == 0 && r.status == 200)
            x->n++;
        free(r.body);
    }
    x->eof = c_eof(c[0]);
    c_close(extra);
    for (int i = 0; i < HTTPD__MAX_CONNS; i++)
        c_close(c[i]);
    free(c);
}

TEST(connection_cap)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_conn_cap, &x);
    ASSERT_EQ(x.n, HTTPD__MAX_CONNS + 1);
    ASSERT(x.eof); /* the oldest idle one was closed */
    server_down(&loop, &h);
}

static void job_idle(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);
    uint64_t t0 = uv_hrtime();

    c_sends(c, "GET /partial HTTP/1.1\r\nHost"); /* a head that never ends */
    x->eof = c_eof(c);
    x->ms = (uv_hrtime() - t0) / 1000000;
    c_close(c);
}

TEST(header_timeout_closes_slow_heads)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port =
        server_up_opts(&loop, &h, "127.0.0.1:0", &(struct httpd_opts){ .header_timeout_ms = 300 });

    run_job(&loop, port, job_idle, &x);
    ASSERT(x.eof);
    ASSERT_GE(x.ms, 250);
    ASSERT_LT(x.ms, 3000);
    ASSERT_EQ(h.calls, 0);
    server_down(&loop, &h);
}

static void job_expect(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);
    char *end = NULL;

    c_sends(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
               "Expect: 100-continue\r\n\r\n");
    while (!c->buf || (end = memmem(c->buf, c->len, "\r\n\r\n", 4)) == NULL)
        if (c_fill(c) < 0)
            break;
    if (!end || strncmp(c->buf, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 0) {
        x->errors++;
        c_close(c);
        return;
    }
    memmove(c->buf, end + 4, c->len - (size_t)(end + 4 - c->buf));
    c->len -= (size_t)(end + 4 - c->buf);
    c_sends(c, "ping");
    rec_response(x, c, false);
    c_close(c);
}

TEST(expect_100_continue)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_expect, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.r[0].status, 200);
    ASSERT_STR_EQ(x.r[0].body, "ping");
    rec_free(&x);
    server_down(&loop, &h);
}

static void job_backpressure(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);
    char req[64];

    /* 20 pipelined requests for 3 MiB each, sent before reading anything. */
    for (int i = 0; i < 20; i++) {
        snprintf(req, sizeof(req), "GET /big?%d HTTP/1.1\r\nHost: t\r\n\r\n", i);
        c_sends(c, req);
    }
    for (int i = 0; i < 20; i++) {
        struct resp r;
        char tag[16];

        snprintf(tag, sizeof(tag), "%d:", i);
        if (c_response(c, &r, false) == 0 && r.status == 200 && r.body_len >= 3 * 1024 * 1024 &&
            strncmp(r.body, tag, strlen(tag)) == 0)
            x->n++;
        free(r.body);
    }
    c_close(c);
}

TEST(pipelined_large_answers_in_order)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_backpressure, &x);
    ASSERT_EQ(x.n, 20);
    ASSERT_EQ(h.calls, 20);
    server_down(&loop, &h);
}

static void job_quit(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);

    c_sends(c, "GET /quit HTTP/1.1\r\nHost: t\r\n\r\n");
    x->eof = c_eof(c) || (c_response(c, &x->r[0], false) == 0 && c_eof(c));
    c_close(c);
}

TEST(handler_may_close_the_server)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_quit, &x);
    ASSERT(x.eof);
    ASSERT_EQ(h.calls, 1);
    rec_free(&x);
    ASSERT_EQ(finish_loop(&loop, 5000), 0);
}

/* The client and the server on one loop: libcurl as a real peer. */
struct e2e {
    int done;
    int ok;
};

static void e2e_cb(struct net_request *r, struct net_response *resp, void *ud)
{
    struct e2e *e = ud;

    (void)r;
    if (resp->result == 0 && resp->status == 200 && resp->body.len == 6 &&
        memcmp(resp->body.data, "pprof!", 6) == 0 && resp->content_type &&
        strcmp(resp->content_type, "application/octet-stream") == 0)
        e->ok++;
    e->done++;
}

static void count_cb(void *ud)
{
    (*(int *)ud)++;
}

TEST(net_client_against_httpd)
{
    uv_loop_t loop;
    struct hstate h;
    struct e2e e = { 0 };
    char err[128], u[128];
    int port = server_up(&loop, &h, "127.0.0.1:0");
    struct net_client *c = NULL;
    struct net_request_opts o = { .method = "POST", .url = u, .body = "pprof!", .body_len = 6 };
    int closed = 0;

    ASSERT_EQ(net_client_new(&(struct net_client_opts){ .loop = &loop, .max_connects = 4 }, &c, err,
                             sizeof(err)),
              0);
    snprintf(u, sizeof(u), "http://127.0.0.1:%d/echo", port);
    for (int i = 0; i < 20; i++)
        ASSERT_EQ(net_request_start(c, &o, e2e_cb, &e, NULL), 0);
    RUN_UNTIL(&loop, e.done >= 20, 10000);
    ASSERT_EQ(e.ok, 20);
    ASSERT_EQ(h.calls, 20);
    net_client_close(c, count_cb, &closed);
    RUN_UNTIL(&loop, closed >= 1, 5000);
    server_down(&loop, &h);
}

TEST(listen_addresses)
{
    uv_loop_t loop;
    struct hstate h;
    struct httpd *s2;
    char err[256];
    int port;

    /* All interfaces; reachable over IPv4 loopback. */
    server_up(&loop, &h, ":0");
    server_down(&loop, &h);
    /* IPv6 in brackets. */
    server_up(&loop, &h, "[::1]:0");
    server_down(&loop, &h);
    /* localhost, and the port in use. */
    port = server_up(&loop, &h, "localhost:0");
    {
        char addr[64];

        snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
        ASSERT_EQ(httpd_new(&(struct httpd_opts){ .loop = &loop, .addr = addr, .handler = handler },
                            &s2, err, sizeof(err)),
                  UV_EADDRINUSE);
        ASSERT_NULL(s2);
        ASSERT_NOT_NULL(strstr(err, "address already in use"));
        ASSERT_NOT_NULL(strstr(err, addr)); /* the message names the address */
    }
    server_down(&loop, &h);
    /* Refused before anything is created. */
    ASSERT_EQ(uv_loop_init(&loop), 0);
    for (size_t i = 0; i < 4; i++) {
        static const char *const bad[] = { "nocolon", "1.2.3.4:70000", "example.com:80", "::1:80" };

        err[0] = '\0';
        ASSERT_EQ(
            httpd_new(&(struct httpd_opts){ .loop = &loop, .addr = bad[i], .handler = handler },
                      &s2, err, sizeof(err)),
            -EINVAL);
        ASSERT_NULL(s2);
        ASSERT_NOT_NULL(strstr(err, bad[i]));
    }
    /* Every refusal says why. */
    ASSERT_EQ(httpd_new(&(struct httpd_opts){ .loop = &loop, .addr = "127.0.0.1:0" }, &s2, err,
                        sizeof(err)),
              -EINVAL);
    ASSERT_NOT_NULL(strstr(err, "handler"));
    ASSERT_EQ(httpd_new(NULL, &s2, err, sizeof(err)), -EINVAL);
    ASSERT_NOT_NULL(strstr(err, "options"));
    ASSERT_EQ(finish_loop(&loop, 1000), 0);
}

/* The pure parser: byte-at-a-time input gives the same request. */
TEST(parser_byte_at_a_time)
{
    static const char in[] = "POST /x%2Fy?k=v#frag HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
                             "\r\nabcGET /next HTTP/1.1\r\n\r\n";
    struct httpd__req q;
    struct httpd_request hr;
    struct buf path;
    size_t off = 0;

    httpd__req_init(&q);
    buf_init(&path, 1024);
    while (!q.complete && off < sizeof(in) - 1)
        off += httpd__req_feed(&q, in + off, 1);
    ASSERT(q.complete);
    ASSERT_EQ(q.error, 0);
    ASSERT(q.keep_alive);
    ASSERT_EQ(httpd__req_get(&q, &hr, &path), 0);
    ASSERT_STR_EQ(hr.method, "POST");
    ASSERT_STR_EQ(hr.path, "/x/y");
    ASSERT_STR_EQ(hr.query, "k=v");
    ASSERT_EQ(hr.body_len, 3);
    ASSERT_EQ(memcmp(hr.body, "abc", 3), 0);
    /* Paused: nothing more is consumed until next. */
    ASSERT_EQ(httpd__req_feed(&q, in + off, sizeof(in) - 1 - off), 0);
    httpd__req_next(&q);
    off += httpd__req_feed(&q, in + off, sizeof(in) - 1 - off);
    ASSERT(q.complete);
    ASSERT_EQ(off, sizeof(in) - 1);
    ASSERT_EQ(httpd__req_get(&q, &hr, &path), 0);
    ASSERT_STR_EQ(hr.path, "/next");
    ASSERT_STR_EQ(hr.query, "");
    buf_done(&path);
    httpd__req_done(&q);
}

/* Reads a chunked body into r->body; 0 or -1. */
static int c_chunked(struct conn *c, struct resp *r)
{
    size_t got = 0;

    free(r->body);
    r->body = NULL;
    for (;;) {
        char *eol;
        size_t n, hl;

        while (!c->buf || (eol = memmem(c->buf, c->len, "\r\n", 2)) == NULL)
            if (c_fill(c) < 0)
                return -1;
        n = strtoul(c->buf, NULL, 16);
        hl = (size_t)(eol - c->buf) + 2;
        while (c->len < hl + n + 2)
            if (c_fill(c) < 0)
                return -1;
        if (memcmp(c->buf + hl + n, "\r\n", 2) != 0)
            return -1;
        r->body = realloc(r->body, got + n + 1);
        memcpy(r->body + got, c->buf + hl, n);
        got += n;
        r->body[got] = '\0';
        memmove(c->buf, c->buf + hl + n + 2, c->len - hl - n - 2);
        c->len -= hl + n + 2;
        if (n == 0)
            break;
    }
    r->body_len = got;
    return 0;
}

static void job_stream(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);
    struct resp r;

    /* Two streams then a plain answer on one connection, in order. */
    c_sends(c, "GET /stream?30 HTTP/1.1\r\nHost: t\r\n\r\nGET /stream?2 HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /plain HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < 2; i++) {
        if (c_response(c, &r, true) < 0 || !strcasestr(r.head, "Transfer-Encoding: chunked") ||
            c_chunked(c, &r) < 0) {
            x->errors++;
            break;
        }
        x->r[x->n++] = r;
    }
    rec_response(x, c, false);
    c_close(c);
    /* HTTP/1.0: no chunks, the body ends at the close. */
    c = c_open(j->port);
    c_sends(c, "GET /stream?3 HTTP/1.0\r\n\r\n");
    while (c_fill(c) == 0)
        ;
    x->ms = c->len; /* the whole answer's size */
    x->eof = c->len > 0 && strstr(c->buf, "Transfer-Encoding") == NULL &&
             strstr(c->buf, "part 2;") != NULL;
    c_close(c);
}

TEST(streamed_answers_are_chunked_and_in_order)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    run_job(&loop, port, job_stream, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.n, 3);
    ASSERT_EQ(x.r[0].body_len, 30 * 10 * 1024);
    ASSERT(strncmp(x.r[0].body, "part 0;", 7) == 0);
    ASSERT(strstr(x.r[0].body + 29 * 10 * 1024, "part 29;") != NULL);
    ASSERT_EQ(x.r[1].body_len, 2 * 10 * 1024);
    ASSERT_EQ(x.r[2].status, 200);
    ASSERT(strstr(x.r[2].body, "/plain") != NULL);
    ASSERT(x.eof);
    ASSERT_EQ(h.streams_freed, 3);
    rec_free(&x);
    server_down(&loop, &h);
}

static void job_parked(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);
    struct resp r;

    c_sends(c, "GET /parked HTTP/1.1\r\nHost: t\r\n\r\nGET /plain HTTP/1.1\r\nHost: t\r\n\r\n");
    if (c_response(c, &r, true) < 0 || c_chunked(c, &r) < 0)
        x->errors++;
    else
        x->r[x->n++] = r;
    rec_response(x, c, false);
    c_close(c);
}

/* A stream whose part is made elsewhere parks: the server neither calls it
 * again nor serves the connection's next request until it is resumed. */
TEST(parked_stream_waits_for_resume)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    uv_timer_init(&loop, &h.park_timer);
    h.park_timer.data = &h;
    h.park_ms = 150;
    run_job(&loop, port, job_parked, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.n, 2);
    ASSERT_STR_EQ(x.r[0].body, "ready");
    ASSERT(strstr(x.r[1].body, "/plain") != NULL);
    ASSERT_EQ(h.parked_calls, 2); /* parked once, then the part: no polling */
    ASSERT_EQ(h.streams_freed, 1);
    rec_free(&x);
    uv_close((uv_handle_t *)&h.park_timer, NULL);
    server_down(&loop, &h);
}

static void job_parked_forever(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);
    struct resp r;

    c_sends(c, "GET /parked HTTP/1.1\r\nHost: t\r\n\r\n");
    /* The head comes at once; the body never does: the idle timeout ends it. */
    if (c_response(c, &r, true) < 0)
        x->errors++;
    else
        free(r.body);
    while (c_fill(c) == 0)
        ;
    x->eof = true;
    c_close(c);
}

/* A producer that never resumes does not hold a connection for ever, and a
 * resume after the stream is gone does nothing. */
TEST(parked_stream_ends_at_the_idle_timeout)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port =
        server_up_opts(&loop, &h, "127.0.0.1:0", &(struct httpd_opts){ .idle_timeout_ms = 300 });

    uv_timer_init(&loop, &h.park_timer);
    h.park_timer.data = &h;
    run_job(&loop, port, job_parked_forever, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT(x.eof);
    ASSERT_EQ(h.parked_calls, 1);
    ASSERT_EQ(h.streams_freed, 1);
    httpd_resume(h.s, h.parked); /* gone: nothing happens */
    ASSERT_EQ(h.parked_calls, 1);
    uv_close((uv_handle_t *)&h.park_timer, NULL);
    server_down(&loop, &h);
}

static void job_later(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);

    c_sends(c, "GET /later HTTP/1.1\r\nHost: t\r\n\r\nGET /plain HTTP/1.1\r\nHost: t\r\n\r\n");
    rec_response(x, c, false);
    rec_response(x, c, false);
    c_close(c);
}

/* A deferred answer is written when the handler gives it, and the request
 * pipelined behind it waits for it; the token comes back once. */
TEST(deferred_answer_comes_when_finished)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port = server_up(&loop, &h, "127.0.0.1:0");

    uv_timer_init(&loop, &h.park_timer);
    h.park_timer.data = &h;
    h.park_ms = 150;
    run_job(&loop, port, job_later, &x);
    ASSERT_EQ(x.errors, 0);
    ASSERT_EQ(x.n, 2);
    ASSERT_EQ(x.r[0].status, 201);
    ASSERT_STR_EQ(x.r[0].body, "later");
    ASSERT_EQ(x.r[1].status, 200);
    ASSERT(strstr(x.r[1].body, "/plain") != NULL);
    ASSERT_EQ(h.laters_freed, 1);
    rec_free(&x);
    uv_close((uv_handle_t *)&h.park_timer, NULL);
    server_down(&loop, &h);
}

static void job_later_forever(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);

    c_sends(c, "GET /later HTTP/1.1\r\nHost: t\r\n\r\n");
    while (c_fill(c) == 0)
        ;
    x->eof = c->len == 0; /* closed without an answer */
    c_close(c);
}

/* An answer never given does not hold the connection for ever: the idle
 * timeout closes it, the token comes back, and finishing it afterwards
 * writes nothing. */
TEST(deferred_answer_ends_at_the_idle_timeout)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    int port =
        server_up_opts(&loop, &h, "127.0.0.1:0", &(struct httpd_opts){ .idle_timeout_ms = 300 });

    uv_timer_init(&loop, &h.park_timer);
    h.park_timer.data = &h;
    run_job(&loop, port, job_later_forever, &x);
    ASSERT(x.eof);
    RUN_UNTIL(&loop, h.laters_freed == 1, 5000);
    httpd_finish(h.s, h.later, 200, NULL, "too late"); /* gone: nothing happens */
    ASSERT_EQ(h.laters_freed, 1);
    uv_close((uv_handle_t *)&h.park_timer, NULL);
    server_down(&loop, &h);
}

/* A client that asks much and never reads. */
static int small_rcvbuf_conn(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void job_noread(struct job *j)
{
    struct rec *x = j->arg;
    int fd = small_rcvbuf_conn(j->port), fd2 = small_rcvbuf_conn(j->port);
    struct buf req;

    buf_init(&req, 1 << 20);
    for (int i = 0; i < 200; i++)
        buf_puts(&req, "GET /k16 HTTP/1.1\r\nHost: t\r\n\r\n");
    x->errors += send(fd, req.data, req.len, MSG_NOSIGNAL) != (ssize_t)req.len;
    x->errors += send(fd2, "GET /stream?1000 HTTP/1.1\r\nHost: t\r\n\r\n", 39, MSG_NOSIGNAL) != 39;
    buf_done(&req);
    /* The main thread watches the counters; this thread only holds the
     * connections open, unread, until it is told to go. */
    while (!__atomic_load_n(&x->n, __ATOMIC_ACQUIRE))
        usleep(10000);
    close(fd);
    close(fd2);
}

static void noread_check(uv_timer_t *t)
{
    struct rec *x = t->data;

    __atomic_store_n(&x->n, 1, __ATOMIC_RELEASE);
}

TEST(client_that_never_reads_gets_bounded_output)
{
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    uv_timer_t t;
    int port = server_up(&loop, &h, "127.0.0.1:0");

    /* Serve for 1.5 s while the client sits on 200 requests of 16 KiB
     * answers and a 10 MB stream, reading nothing. */
    uv_timer_init(&loop, &t);
    t.data = &x;
    uv_timer_start(&t, noread_check, 1500, 0);
    run_job(&loop, port, job_noread, &x);
    uv_close((uv_handle_t *)&t, NULL);
    ASSERT_EQ(x.errors, 0);
    /* 64 KiB unsent + the kernel's small buffers: a few answers, not 200;
     * a few parts, not 1000. */
    fprintf(stderr, "answers %d, stream parts %d\n", h.calls - 1, h.parts);
    ASSERT_LT(h.calls, 30);
    ASSERT_LT(h.parts, 30);
    ASSERT_GT(h.parts, 0);
    server_down(&loop, &h);
    ASSERT_EQ(h.streams_freed, 1);
}

TEST(cross_origin_state_changes_are_403)
{
    static const struct {
        const char *req;
        bool cross;
    } cases[] = {
        { "POST /r HTTP/1.1\r\nHost: a:1\r\n\r\n", false },
        { "POST /r HTTP/1.1\r\nHost: a:1\r\nOrigin: http://a:1\r\n\r\n", false },
        { "POST /r HTTP/1.1\r\nHost: a:1\r\nOrigin: https://A:1\r\n\r\n", false },
        { "POST /r HTTP/1.1\r\nHost: a:1\r\nOrigin: http://b:1\r\n\r\n", true },
        { "POST /r HTTP/1.1\r\nHost: a:1\r\nOrigin: http://a:2\r\n\r\n", true },
        { "PUT /r HTTP/1.1\r\nHost: a:1\r\nOrigin: null\r\n\r\n", true },
        { "DELETE /r HTTP/1.1\r\nHost: a:1\r\nSec-Fetch-Site: cross-site\r\n\r\n", true },
        { "POST /r HTTP/1.1\r\nHost: a:1\r\nSec-Fetch-Site: same-site\r\n\r\n", true },
        { "POST /r HTTP/1.1\r\nHost: a:1\r\nSec-Fetch-Site: same-origin\r\n\r\n", false },
        { "POST /r HTTP/1.1\r\nHost: a:1\r\nSec-Fetch-Site: none\r\n\r\n", false },
        { "GET /r HTTP/1.1\r\nHost: a:1\r\nOrigin: http://b:1\r\nSec-Fetch-Site: "
          "cross-site\r\n\r\n",
          false },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct httpd__req q;

        httpd__req_init(&q);
        httpd__req_feed(&q, cases[i].req, strlen(cases[i].req));
        ASSERT(q.complete);
        if (httpd__req_cross_origin(&q) != cases[i].cross)
            fprintf(stderr, "case %zu: %s", i, cases[i].req);
        ASSERT_EQ(httpd__req_cross_origin(&q), cases[i].cross);
        httpd__req_done(&q);
    }
}

/* ------------------------------------------------------ basic auth */

#define ALICE_12 "$2b$12$3S/kA5eyaA5BlhmlrcIQyuATio9nUT65R1A7utUnmpXfPUosO1I4S"

static int thread_count(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");

    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "Threads:", 8) == 0)
            n = atoi(line + 8);
    if (f)
        fclose(f);
    return n;
}

static void job_wrong_password(struct job *j)
{
    struct rec *x = j->arg;
    struct conn *c = c_open(j->port);

    /* alice:wrong; the connection stays open, the answer is not awaited */
    c_sends(c, "GET / HTTP/1.1\r\nHost: t\r\nAuthorization: Basic YWxpY2U6d3Jvbmc=\r\n\r\n");
    x->errors = c->fd; /* closed by the test once the server is down */
    free(c->buf);
    free(c);
}

/* Closing the server while a bcrypt check runs does not wait for it: the
 * close completes (and the loop closes) in less than half a check. */
TEST(close_does_not_wait_for_a_password_check)
{
    static const char yaml[] = "basic_auth_users:\n  alice: '" ALICE_12 "'\n";
    uv_loop_t loop;
    struct hstate h;
    struct rec x = { 0 };
    struct httpd_web *w;
    char err[256];
    uint64_t t0, check_ns, close_ns;
    int port, before;

    ASSERT_EQ(httpd__web_load_string(yaml, sizeof(yaml) - 1, "web", &w, err, sizeof(err)), 0);
    t0 = uv_hrtime();
    ASSERT(!httpd__auth_verify("wrong", ALICE_12));
    check_ns = uv_hrtime() - t0;
    port = server_up_opts(&loop, &h, "127.0.0.1:0", &(struct httpd_opts){ .web = w });
    httpd_web_unref(w); /* the server holds its own reference */
    before = thread_count();
    run_job(&loop, port, job_wrong_password, &x);
    /* The check's thread appears once the request is parsed. */
    RUN_UNTIL(&loop, thread_count() > before, 5000);
    t0 = uv_hrtime();
    server_down(&loop, &h);
    close_ns = uv_hrtime() - t0;
    fprintf(stderr, "one check %.0f ms; the close took %.1f ms\n", check_ns / 1e6, close_ns / 1e6);
    ASSERT_LT(close_ns, check_ns / 2);
    ASSERT_EQ(h.calls, 0);
    close(x.errors);
}

/* The web config's limits: bcrypt costs 4 to 12; Go's names of cipher
 * suites and curves; max_version not below min_version. */
TEST(web_config_costs_and_tls_names)
{
    static const struct {
        const char *yaml;
        bool ok;
        const char *msg;
    } cases[] = {
        { "basic_auth_users:\n  a: "
          "'$2b$12$3S/kA5eyaA5BlhmlrcIQyuATio9nUT65R1A7utUnmpXfPUosO1I4S'\n",
          true, NULL },
        { "basic_auth_users:\n  a: "
          "'$2b$04$3S/kA5eyaA5BlhmlrcIQyuATio9nUT65R1A7utUnmpXfPUosO1I4S'\n",
          true, NULL },
        { "basic_auth_users:\n  a: "
          "'$2b$13$3S/kA5eyaA5BlhmlrcIQyuATio9nUT65R1A7utUnmpXfPUosO1I4S'\n",
          false, "cost of a is 13" },
        { "basic_auth_users:\n  a: "
          "'$2b$31$3S/kA5eyaA5BlhmlrcIQyuATio9nUT65R1A7utUnmpXfPUosO1I4S'\n",
          false, "4 to 12" },
        { "basic_auth_users:\n  a: "
          "'$2b$03$3S/kA5eyaA5BlhmlrcIQyuATio9nUT65R1A7utUnmpXfPUosO1I4S'\n",
          false, "cost of a is 3" },
        { "tls_server_config:\n  cert_file: c\n  key_file: k\n"
          "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384]\n"
          "  curve_preferences: [X25519, CurveP256]\n  prefer_server_cipher_suites: false\n"
          "  max_version: TLS13\n",
          true, NULL },
        { "tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: "
          "[ECDHE-RSA-AES128-GCM-SHA256]\n",
          false, "Go's cipher suite names" },
        { "tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: "
          "[TLS_ECDHE_RSA_WITH_RC4_128_SHA]\n",
          false, "RC4" },
        { "tls_server_config:\n  cert_file: c\n  key_file: k\n  curve_preferences: [P-256]\n",
          false, "curve_preferences" },
        { "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n  max_version: "
          "TLS12\n",
          false, "below min_version" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct httpd_web *w = NULL;
        char err[512] = "";
        int rc = httpd__web_load_string(cases[i].yaml, strlen(cases[i].yaml), "web", &w, err,
                                        sizeof(err));

        if ((rc == 0) != cases[i].ok || (cases[i].msg && !strstr(err, cases[i].msg)))
            fprintf(stderr, "case %zu: rc %d: %s\n", i, rc, err);
        ASSERT_EQ(rc == 0, cases[i].ok);
        if (cases[i].msg)
            ASSERT_NOT_NULL(strstr(err, cases[i].msg));
        httpd_web_unref(w);
    }
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
