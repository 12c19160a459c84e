/* SPDX-License-Identifier: Apache-2.0 */
/* The status HTTP/1.1 server: sockets, connections and responses
 * (docs/design.md "HTTP server").
 *
 * Purpose. Serves /metrics and friends on the loop. Parsing is in
 * parse.c (http-parser); this file listens, accepts connections, parses
 * their input one request at a time, calls the handler and writes the
 * answer (head and body as separate buffers, the body not copied), or
 * streams it part by part from a producer (chunked transfer encoding), and
 * counts every connection.
 *
 * Turns. Nothing is served from a read callback: a read marks its
 * connection runnable and stops reading it; an idle handle then serves the
 * runnable connections round robin, one request or one stream part each,
 * for at most TURN_NS before the loop goes back to its timers and sockets.
 * However many clients pipeline, a scrape tick waits at most one turn.
 *
 * Limits. At most max_conns connections; at the limit a new one evicts the
 * oldest that is idle or still sending its head (slow-loris heads cannot
 * lock out a health probe), else one whose answer has made no progress for
 * the header timeout, else it is closed at once. A request must arrive whole
 * within header_ms of its first byte; an idle keep-alive connection, or one
 * whose answer is not read, closes after idle_ms. While more than OUT_HIGH
 * bytes of answers wait to be written a connection is neither read nor
 * served: a client that never reads holds at most OUT_HIGH plus one answer
 * (or one stream part) plus one read buffer. Every connection is counted
 * when it closes, by why (httpd_get_stats): a client that vanishes
 * must cost its connection only, and be seen to.
 *
 * Errors. A request the parser rejects gets 400/413/431 with "Connection:
 * close"; we then shut down our side and discard input for a short linger
 * so the client can read the answer instead of a reset.
 *
 * Threading and ownership. Loop thread only. The server owns its
 * connections; a connection is freed when both its handles have closed, and
 * the server when its listener, its idle handle, auth.c's handle (if it
 * made one) and every connection are gone. A stream's state is freed when
 * the stream ends or its connection starts closing. A stream whose
 * producer has no part yet (its work runs on the pool) is parked: neither
 * read nor served until the producer calls httpd_resume(); the idle
 * timeout still closes it. The handler may call httpd_close(); each step
 * re-checks for that.
 *
 * TLS and basic auth. A connection accepted under a web config with TLS
 * speaks it through tls.c (memory BIOs: this file still does every read
 * and write); one with basic-auth users has each request's credentials
 * checked by auth.c, whose verdict comes back through auth_done(). While
 * a check runs off the loop the connection is neither read nor served. */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/macros.h"
#include "httpd/httpd.h"
#include "httpd/internal.h"

#define READ_BUF (16 * 1024)
#define OUT_HIGH (64 * 1024)
#define SNDBUF (64 * 1024)
#define STREAM_CHUNK (32 * 1024)
#define STREAM_MAX (1024 * 1024)
#define TURN_NS (2 * 1000 * 1000)
#define LINGER_MS 2000
#define LINGER_MAX_BYTES (4 * 1024 * 1024)

enum conn_state {
    CONN_OPEN,       /* reading and answering */
    CONN_LAST_WRITE, /* the last answer is being written */
    CONN_LINGER,     /* our side is shut down; discarding input briefly */
    CONN_CLOSING,    /* handles are closing */
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer; /* header, idle, then linger timeout */
    uv_shutdown_t shut;
    struct httpd *s;
    struct conn *prev, *next;    /* every connection, newest first */
    STAILQ_ENTRY(conn) run_link; /* the run queue */
    bool queued;
    struct httpd__req req;
    struct buf path;
    char *in; /* the last read (READ_BUF), parsed in turns; NULL once used */
    size_t in_off, in_len;
    size_t out_pending;
    unsigned writes;
    size_t discarded;
    uint64_t active_ms;          /* accept, last answer or write progress: eviction order */
    enum httpd_close_reason why; /* counted when it closes; DONE unless set */
    bool in_request;             /* part of a request has been parsed */
    struct {
        httpd_stream_fn fn;
        void *state;
        void (*free)(void *state);
        bool chunked;
        bool close;
        bool parked; /* the producer has no part yet: httpd_resume() */
    } stream;
    int handles; /* open uv handles */
    enum conn_state state;
    bool reading;
    bool peer_eof; /* the client shut down its side; answer what we have */
    /* TLS (tls.c), NULL without: ciphertext read into `tin` is fed to it;
     * what it has to send is written to the socket by tls_flush(). */
    struct httpd__tls *tls;
    char *tin;
    bool tls_closed; /* close_notify sent */
    /* Basic auth: a password being checked off the loop (auth.c). */
    struct httpd_web *web;      /* the web config of its accept (a reference) */
    struct httpd__auth_wait aw; /* aw.waiting: the parsed request waits for the check */
    bool auth_ok;
    /* An answer the handler gives later (httpd_finish), with what the
     * request said about the answer's form. */
    struct {
        void *token;
        void (*free)(void *token);
        bool head_only, keep;
    } later;
};

struct write_req {
    uv_write_t w;
    struct conn *c;
    char *own[3];
    size_t len;
};

struct httpd {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_idle_t idle; /* runs turns while the run queue is not empty */
    httpd_handler handler;
    void *ud;
    struct conn *conns;
    STAILQ_HEAD(, conn) run; /* connections with work for a turn */
    size_t n_open;
    size_t max_conns;
    uint64_t accepted;
    uint64_t closed[HTTPD_CLOSE_N];
    int port;
    uint64_t idle_ms;
    uint64_t header_ms;
    int handles; /* listener, idle handle (and auth's, once it closes) */
    struct httpd_web *web;
    struct httpd__auth auth; /* basic auth's checks (auth.c) */
    bool closing;
    void (*close_cb)(void *ud);
    void *close_ud;
};

static void conn_close(struct conn *c);
static void conn_kick(struct conn *c);
static void stop_reading(struct conn *c);
static void server_turn(uv_idle_t *h);
static int tls_pull(struct conn *c);
static void write_cb(uv_write_t *w, int status);
static int tls_flush(struct conn *c);
static void auth_answer(struct conn *c, int status);
static void dispatch(struct conn *c);
static void conn_handle_closed(uv_handle_t *h);

static void server_maybe_free(struct httpd *s)
{
    void (*cb)(void *);
    void *ud;

    if (!s->closing || s->handles > 0 || s->conns)
        return;
    cb = s->close_cb;
    ud = s->close_ud;
    httpd_web_unref(s->web);
    httpd__auth_done(&s->auth);
    free(s);
    if (cb)
        cb(ud);
}

static void conn_handle_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    struct httpd *s = c->s;

    if (--c->handles > 0)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    httpd__req_done(&c->req);
    buf_done(&c->path);
    free(c->in);
    free(c->tin);
    httpd__tls_free(c->tls);
    httpd_web_unref(c->web);
    httpd__auth_wait_done(&c->aw);
    free(c);
    server_maybe_free(s);
}

static void run_enqueue(struct conn *c)
{
    struct httpd *s = c->s;

    if (c->queued)
        return;
    c->queued = true;
    STAILQ_INSERT_TAIL(&s->run, c, run_link);
    if (!s->closing && !uv_is_active((uv_handle_t *)&s->idle))
        uv_idle_start(&s->idle, server_turn);
}

static struct conn *run_pop(struct httpd *s)
{
    struct conn *c = STAILQ_FIRST(&s->run);

    if (c) {
        STAILQ_REMOVE_HEAD(&s->run, run_link);
        c->queued = false;
    }
    return c;
}

static void run_remove(struct conn *c)
{
    if (c->queued)
        STAILQ_REMOVE(&c->s->run, c, conn, run_link);
    c->queued = false;
}

static void stream_end(struct conn *c)
{
    void (*fr)(void *) = c->stream.free;
    void *st = c->stream.state;

    memset(&c->stream, 0, sizeof(c->stream));
    if (fr)
        fr(st);
}

/* The handler's token of a deferred answer goes back to it, once. */
static void later_end(struct conn *c)
{
    void (*fr)(void *) = c->later.free;
    void *token = c->later.token;

    c->later.token = NULL;
    c->later.free = NULL;
    if (token && fr)
        fr(token);
}

static void conn_close(struct conn *c)
{
    if (c->state == CONN_CLOSING)
        return;
    c->state = CONN_CLOSING;
    c->s->n_open--;
    c->s->closed[c->why]++;
    run_remove(c);
    httpd__auth_cancel(&c->aw);
    stream_end(c);
    later_end(c);
    /* Pending writes and the shutdown get their callbacks (UV_ECANCELED)
     * before the close callbacks. */
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
}

static void timeout_cb(uv_timer_t *t)
{
    struct conn *c = t->data;

    if (c->state != CONN_LINGER) /* the end of a linger is the normal end */
        c->why = HTTPD_CLOSE_TIMEOUT;
    conn_close(c);
}

/* The idle clock: restarted on progress while no request is being read. */
static void arm_idle(struct conn *c)
{
    if (c->state == CONN_OPEN && !c->in_request)
        uv_timer_start(&c->timer, timeout_cb, c->s->idle_ms, 0);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct conn *c = h->data;

    (void)hint;
    if (c->tls) { /* ciphertext, for the read BIO */
        if (!c->tin)
            c->tin = malloc(READ_BUF);
        *b = uv_buf_init(c->tin, c->tin ? READ_BUF : 0);
        return;
    }
    if (!c->in)
        c->in = malloc(READ_BUF);
    *b = uv_buf_init(c->in, c->in ? READ_BUF : 0);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct conn *c = st->data;

    (void)b;
    if (nread == 0 || c->state == CONN_CLOSING)
        return;
    if (nread == UV_EOF && c->state != CONN_LINGER) {
        /* A half-close (e.g. "HTTP/1.0 request, then shutdown"): finish
         * the answers already queued or not yet parsed, then close. */
        c->peer_eof = true;
        c->why = HTTPD_CLOSE_CLIENT_CLOSED;
        stop_reading(c);
        conn_kick(c);
        return;
    }
    if (nread < 0) {
        if (c->state != CONN_LINGER)
            c->why = HTTPD_CLOSE_RESET;
        conn_close(c);
        return;
    }
    if (c->state != CONN_OPEN) {
        c->discarded += (size_t)nread;
        if (c->discarded > LINGER_MAX_BYTES)
            conn_close(c);
        return;
    }
    if (c->tls) {
        if (httpd__tls_feed(c->tls, c->tin, (size_t)nread) < 0) {
            conn_close(c);
            return;
        }
        stop_reading(c);
        conn_kick(c); /* decrypts */
        return;
    }
    c->in_off = 0;
    c->in_len = (size_t)nread;
    stop_reading(c);
    conn_kick(c);
}

static void start_reading(struct conn *c)
{
    if (!c->reading && c->state != CONN_CLOSING) {
        if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
            c->reading = true;
    }
}

static void stop_reading(struct conn *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

/* Decides what a connection waits for: room for output, a turn (input to
 * parse or a stream to continue), or more input. */
static void conn_kick(struct conn *c)
{
    if (c->state != CONN_OPEN || c->aw.waiting || c->later.token)
        return;
    if (c->out_pending > OUT_HIGH) {
        stop_reading(c);
        return;
    }
    if (c->stream.fn && c->stream.parked) {
        stop_reading(c); /* httpd_resume() queues it again */
        return;
    }
    if (c->stream.fn || c->in_len > c->in_off) {
        stop_reading(c);
        run_enqueue(c);
        return;
    }
    if (c->tls) {
        int n = tls_pull(c);

        if (n != 0) {
            if (n > 0) {
                stop_reading(c);
                run_enqueue(c);
            }
            return;
        }
    }
    if (c->in && !c->tls) {
        free(c->in); /* idle connections hold no buffer */
        c->in = NULL;
        c->in_off = c->in_len = 0;
    }
    if (c->peer_eof) {
        if (c->writes == 0)
            conn_close(c);
        return;
    }
    start_reading(c);
}

/* One chunk of ciphertext from tls.c's write pump to the socket (owned). */
static int tls_write_chunk(char *p, size_t n, void *ud)
{
    struct conn *c = ud;
    struct write_req *wr = calloc(1, sizeof(*wr));
    uv_buf_t b;
    int rc;

    if (!wr) {
        free(p);
        return -ENOMEM;
    }
    wr->c = c;
    wr->own[0] = p;
    wr->len = n;
    b = uv_buf_init(p, (unsigned)n);
    rc = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, write_cb);
    if (rc < 0) {
        free(p);
        free(wr);
        return rc;
    }
    c->writes++;
    c->out_pending += n;
    return 0;
}

/* Writes what OpenSSL has queued in the write BIO. */
static int tls_flush(struct conn *c)
{
    return httpd__tls_flush(c->tls, tls_write_chunk, c);
}

/* Decrypts what the read BIO holds into c->in. Returns >0 when plaintext
 * is there, 0 when more ciphertext is needed, <0 when the connection is
 * done (closed, or the peer ended the session). */
static int tls_pull(struct conn *c)
{
    int n;

    if (!c->in && !(c->in = malloc(READ_BUF))) {
        conn_close(c);
        return -ENOMEM;
    }
    n = httpd__tls_read(c->tls, c->in, READ_BUF);
    if (tls_flush(c) < 0) { /* handshake messages, alerts */
        conn_close(c);
        return -EIO;
    }
    if (n > 0) {
        c->in_off = 0;
        c->in_len = (size_t)n;
        return n;
    }
    if (n == HTTPD__TLS_WANT && !c->peer_eof)
        return 0;
    if (n == HTTPD__TLS_WANT || n == HTTPD__TLS_CLOSED) {
        /* the client is done: answer what is queued, then close */
        c->peer_eof = true;
        c->why = HTTPD_CLOSE_CLIENT_CLOSED;
        stop_reading(c);
        if (c->writes == 0)
            conn_close(c);
        return -EPIPE;
    }
    /* A failed handshake or a bad record: let the alert go out, then close. */
    c->state = CONN_LAST_WRITE;
    c->why = HTTPD_CLOSE_ERROR;
    c->tls_closed = true;
    run_remove(c);
    stop_reading(c);
    if (c->writes == 0)
        conn_close(c);
    return -EPROTO;
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;

    if (status < 0 || c->state == CONN_CLOSING) {
        if (status != UV_ECANCELED)
            conn_close(c);
        return;
    }
    c->state = CONN_LINGER;
    uv_timer_start(&c->timer, timeout_cb, LINGER_MS, 0);
    start_reading(c);
}

/* The last answer is out: send FIN, keep reading (and discarding) for a
 * moment so the client reads our answer rather than a reset. */
static void begin_linger(struct conn *c)
{
    if (c->tls && !c->tls_closed) {
        /* close_notify first; the shutdown follows once it is written */
        c->tls_closed = true;
        httpd__tls_shutdown(c->tls);
        if (tls_flush(c) < 0) {
            conn_close(c);
            return;
        }
        if (c->writes > 0)
            return;
    }
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, shutdown_cb) < 0)
        conn_close(c);
}

static void write_cb(uv_write_t *w, int status)
{
    struct write_req *wr = container_of(w, struct write_req, w);
    struct conn *c = wr->c;

    c->out_pending -= wr->len;
    c->writes--;
    for (size_t i = 0; i < ARRAY_SIZE(wr->own); i++)
        free(wr->own[i]);
    free(wr);
    if (c->state == CONN_CLOSING)
        return;
    if (status < 0) {
        c->why = HTTPD_CLOSE_RESET;
        conn_close(c);
        return;
    }
    c->active_ms = uv_now(c->s->loop);
    if (c->state == CONN_LAST_WRITE) {
        if (c->writes > 0)
            uv_timer_start(&c->timer, timeout_cb, c->s->idle_ms, 0);
        if (c->writes == 0) {
            if (c->peer_eof)
                conn_close(c);
            else
                begin_linger(c);
        }
        return;
    }
    arm_idle(c);
    if (c->out_pending <= OUT_HIGH)
        conn_kick(c);
}

/* Queues up to three pieces (each owned if `own` says so, freed after the
 * write; NULL pieces are skipped). */
static int conn_writev(struct conn *c, const uv_buf_t *parts, const bool *own, size_t n)
{
    struct write_req *wr = calloc(1, sizeof(*wr));
    uv_buf_t bufs[3];
    unsigned nb = 0;
    int rc = 0;

    if (!wr) {
        for (size_t i = 0; i < n; i++)
            if (own[i])
                free(parts[i].base);
        return -ENOMEM;
    }
    wr->c = c;
    for (size_t i = 0; i < n && i < ARRAY_SIZE(bufs); i++) {
        if (own[i])
            wr->own[i] = parts[i].base;
        if (parts[i].len) {
            bufs[nb++] = parts[i];
            wr->len += parts[i].len;
        }
    }
    if (nb == 0) {
        bufs[nb++] = uv_buf_init("", 0);
    }
    if (c->tls) {
        /* Encrypt now; the plaintext goes at once, the ciphertext is what
         * waits (and counts) for the socket. */
        for (unsigned i = 0; i < nb; i++)
            if (bufs[i].len && httpd__tls_write(c->tls, bufs[i].base, bufs[i].len) < 0)
                rc = -EPROTO;
        for (size_t i = 0; i < ARRAY_SIZE(wr->own); i++)
            free(wr->own[i]);
        free(wr);
        return rc < 0 ? rc : tls_flush(c);
    }
    rc = uv_write(&wr->w, (uv_stream_t *)&c->tcp, bufs, nb, write_cb);
    if (rc < 0) {
        for (size_t i = 0; i < ARRAY_SIZE(wr->own); i++)
            free(wr->own[i]);
        free(wr);
        return rc;
    }
    c->writes++;
    c->out_pending += wr->len;
    return 0;
}

/* Queues head + body (both owned, freed after the write). */
static int conn_write(struct conn *c, char *head, size_t head_len, char *body, size_t body_len)
{
    uv_buf_t parts[2] = { uv_buf_init(head, (unsigned)head_len),
                          uv_buf_init(body, (unsigned)body_len) };
    bool own[2] = { true, true };

    return conn_writev(c, parts, own, 2);
}

/* The last answer of the connection is queued: no more requests. */
static void last_answer(struct conn *c)
{
    c->state = CONN_LAST_WRITE;
    uv_timer_stop(&c->timer);
    run_remove(c);
    stop_reading(c);
    /* Make sure the linger starts even if the write completes at once. */
    uv_timer_start(&c->timer, timeout_cb, c->s->idle_ms, 0);
}

/* Queues a head (and the body, unless head_only). `close` says
 * "Connection: close"; `last` makes it the connection's last answer. */
static int send_answer(struct conn *c, int status, const char *ctype, struct buf *body,
                       size_t length, bool head_only, bool close, bool last)
{
    struct buf h;
    char *hp, *bp = NULL;
    size_t hl, bl = 0;
    bool ka10 = !close && c->req.parser.http_major == 1 && c->req.parser.http_minor == 0;
    int rc;

    buf_init(&h, 4096);
    rc = httpd__resp_head(&h, status, ctype, length, close, ka10);
    if (rc < 0) {
        buf_done(&h);
        return rc;
    }
    hp = buf_steal(&h, &hl);
    if (body && !head_only && status != 204 && status != 304)
        bp = buf_steal(body, &bl);
    rc = conn_write(c, hp, hl, bp, bl);
    if (rc == 0 && last)
        last_answer(c);
    return rc;
}

static void send_error(struct conn *c, int status)
{
    struct buf body;

    buf_init(&body, 256);
    buf_printf(&body, "%d %s\n", status, httpd__reason(status));
    if (send_answer(c, status, NULL, &body, body.len, false, true, true) < 0)
        conn_close(c);
    buf_done(&body);
}

/* 401 with a Basic challenge, or 429 when the client's address has
 * enough checks waiting; the connection stays usable (a client that
 * reconnects instead costs a TLS handshake each time). */
static void auth_answer(struct conn *c, int status)
{
    struct buf body;
    bool keep = c->req.keep_alive;

    buf_init(&body, 256);
    buf_printf(&body, "%d %s\n", status, httpd__reason(status));
    if (send_answer(c, status, NULL, &body, body.len, false, !keep, !keep) < 0)
        conn_close(c);
    buf_done(&body);
    if (c->state == CONN_OPEN) {
        httpd__req_next(&c->req);
        arm_idle(c);
    }
}

/* One part of a streamed answer, or its end. */
static void stream_step(struct conn *c)
{
    char size[24];
    struct buf b;
    int rc, n = 0;

    buf_init(&b, STREAM_MAX);
    rc = c->stream.fn(&b, STREAM_CHUNK, c->stream.state);
    if (c->state != CONN_OPEN) { /* the producer closed the server */
        buf_done(&b);
        return;
    }
    if (rc < 0) {
        buf_done(&b);
        conn_close(c);
        return;
    }
    c->stream.parked = rc == HTTPD_STREAM_PARKED;
    if (b.len) {
        size_t len;
        char *data;

        data = buf_steal(&b, &len);
        if (c->stream.chunked) {
            uv_buf_t parts[3] = { uv_buf_init(size, (unsigned)n), uv_buf_init(data, (unsigned)len),
                                  uv_buf_init("\r\n", 2) };
            bool own[3] = { false, true, false };
            char *sz;

            /* The size line must outlive this frame. */
            n = snprintf(size, sizeof(size), "%zx\r\n", len);
            sz = malloc((size_t)n);
            if (!sz) {
                free(data);
                conn_close(c);
                return;
            }
            memcpy(sz, size, (size_t)n);
            parts[0] = uv_buf_init(sz, (unsigned)n);
            own[0] = true;
            if (conn_writev(c, parts, own, 3) < 0) {
                conn_close(c);
                return;
            }
        } else if (conn_write(c, data, len, NULL, 0) < 0) {
            conn_close(c);
            return;
        }
    }
    buf_done(&b);
    if (rc == 0) {
        bool close = c->stream.close;
        bool chunked = c->stream.chunked;

        stream_end(c);
        if (chunked) {
            uv_buf_t last = uv_buf_init("0\r\n\r\n", 5);
            bool own = false;

            if (conn_writev(c, &last, &own, 1) < 0) {
                conn_close(c);
                return;
            }
        }
        if (close)
            last_answer(c);
        else
            arm_idle(c);
    }
}

/* A password check is over (auth.c): answer the request that waited for
 * it, if its connection is still open. */
static void auth_done(struct httpd__auth_wait *w, bool ok, void *ud)
{
    struct conn *c = container_of(w, struct conn, aw);

    (void)ud;
    if (c->state == CONN_CLOSING)
        return;
    c->auth_ok = ok;
    if (!c->auth_ok) {
        auth_answer(c, 401);
    } else {
        dispatch(c);
        if (c->state == CONN_OPEN)
            httpd__req_next(&c->req);
    }
    conn_kick(c);
}

/* One complete request: call the handler and queue its answer. */
static void dispatch(struct conn *c)
{
    struct httpd *s = c->s;
    struct httpd_request hr;
    struct httpd_response resp;
    bool head_only = httpd__req_is_head(&c->req);
    bool keep = c->req.keep_alive;
    bool http10 = c->req.parser.http_major == 1 && c->req.parser.http_minor == 0;
    size_t length;
    int rc;

    c->in_request = false;
    c->active_ms = uv_now(s->loop);
    memset(&hr, 0, sizeof(hr));
    if (httpd__req_get(&c->req, &hr, &c->path) != 0) {
        send_error(c, 400);
        return;
    }
    if (httpd__req_cross_origin(&c->req)) {
        send_error(c, 403);
        return;
    }
    if (c->web && httpd_web_auth(c->web)) {
        if (!c->auth_ok) {
            int a = httpd__auth_begin(&s->auth, &c->aw, c->web, c->req.authorization,
                                      c->req.authorization_long);

            if (a > 0) /* being checked; auth_done() continues */
                return;
            if (a == -2) { /* its address has enough checks waiting */
                auth_answer(c, 429);
                return;
            }
            if (a < 0) {
                auth_answer(c, 401);
                return;
            }
        }
        c->auth_ok = false; /* each request proves itself */
        hr.user = c->aw.user;
    }
    memset(&resp, 0, sizeof(resp));
    resp.status = 200;
    buf_init(&resp.body, HTTPD__MAX_RESP_BODY);
    s->handler(&hr, &resp, s->ud);
    if (c->state != CONN_OPEN) { /* the handler closed the server */
        buf_done(&resp.body);
        if (resp.stream_free)
            resp.stream_free(resp.stream_state);
        if (resp.later && resp.later_free)
            resp.later_free(resp.later);
        return;
    }
    if (resp.later) { /* answered by httpd_finish(); nothing else is kept */
        buf_done(&resp.body);
        if (resp.stream_free)
            resp.stream_free(resp.stream_state);
        c->later.token = resp.later;
        c->later.free = resp.later_free;
        c->later.head_only = head_only;
        c->later.keep = keep && !http10;
        arm_idle(c);
        return;
    }
    if (resp.status < 200 || resp.status > 999) {
        resp.status = 500;
        buf_reset(&resp.body);
        if (resp.stream_free)
            resp.stream_free(resp.stream_state);
        resp.stream = NULL;
    }
    length = resp.body.len;
    if (resp.stream) {
        c->stream.fn = resp.stream;
        c->stream.state = resp.stream_state;
        c->stream.free = resp.stream_free;
        /* HTTP/1.0 has no chunks: the body ends with the connection. */
        c->stream.chunked = !http10;
        c->stream.close = http10 || !keep;
        length = http10 ? HTTPD__LEN_UNTIL_CLOSE : HTTPD__LEN_CHUNKED;
        if (http10)
            keep = false;
        if (head_only || resp.status == 204 || resp.status == 304)
            stream_end(c);
    }
    rc = send_answer(c, resp.status, resp.content_type, &resp.body, length, head_only, !keep,
                     !keep && !c->stream.fn);
    buf_done(&resp.body);
    if (rc < 0) {
        conn_close(c);
        return;
    }
    if (c->state == CONN_OPEN)
        arm_idle(c);
}

static void send_continue(struct conn *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    uv_buf_t b = uv_buf_init((char *)msg, sizeof(msg) - 1);
    bool own = false;

    if (conn_writev(c, &b, &own, 1) < 0)
        conn_close(c);
}

/* One turn of a connection: one stream part, or parsing up to the end of
 * one request and answering it. */
static void conn_turn(struct conn *c)
{
    if (c->stream.fn) {
        stream_step(c);
        return;
    }
    while (c->in_off < c->in_len && c->state == CONN_OPEN) {
        bool had_headers = c->req.headers_done;
        size_t used;

        if (!c->in_request) {
            /* The header deadline runs from a request's first byte. */
            c->in_request = true;
            uv_timer_start(&c->timer, timeout_cb, c->s->header_ms, 0);
        }
        used = httpd__req_feed(&c->req, c->in + c->in_off, c->in_len - c->in_off);
        c->in_off += used;
        if (c->req.error) {
            send_error(c, c->req.error);
            return;
        }
        if (!had_headers && c->req.headers_done && c->req.expect_continue && !c->req.complete)
            send_continue(c);
        if (!c->req.complete)
            continue;
        dispatch(c);
        if (c->state == CONN_OPEN && !c->aw.waiting) /* else auth_done() goes on */
            httpd__req_next(&c->req);
        return;
    }
}

static void server_turn(uv_idle_t *h)
{
    struct httpd *s = h->data;
    uint64_t t0 = clock_mono_ns();
    struct conn *c;

    /* One request or stream part per connection in its turn, round robin,
     * until the queue is empty or the turn's time is used up. */
    while (!s->closing && clock_mono_ns() - t0 < TURN_NS && (c = run_pop(s)) != NULL) {
        conn_turn(c);
        conn_kick(c);
    }
    if (STAILQ_EMPTY(&s->run) || s->closing)
        uv_idle_stop(&s->idle);
}

/* The client's address, the key of its auth queue (auth.c). */
static void peer_key(struct conn *c)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);

    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) < 0)
        httpd__auth_set_peer(&c->aw, NULL);
    else
        httpd__auth_set_peer(&c->aw, (struct sockaddr *)&ss);
}

/* A connection to close for a new one, or NULL: the oldest that is idle,
 * lingering or still sending its request; else the oldest whose answer has
 * been stuck for the header timeout. */
static struct conn *pick_victim(struct httpd *s)
{
    uint64_t now = uv_now(s->loop);
    struct conn *best = NULL, *stuck = NULL;

    for (struct conn *c = s->conns; c; c = c->next) {
        bool waiting = c->state == CONN_LINGER || (c->state == CONN_OPEN && !c->stream.fn &&
                                                   c->out_pending == 0 && !c->req.complete);

        if (c->state == CONN_CLOSING)
            continue;
        if (waiting) {
            if (!best || c->active_ms <= best->active_ms)
                best = c;
        } else if (now - c->active_ms >= s->header_ms) {
            if (!stuck || c->active_ms <= stuck->active_ms)
                stuck = c;
        }
    }
    return best ? best : stuck;
}

static void connection_cb(uv_stream_t *ls, int status)
{
    struct httpd *s = ls->data;
    struct conn *c;

    if (status < 0 || s->closing)
        return;
    if (s->n_open >= s->max_conns) {
        struct conn *v = pick_victim(s);

        if (v) {
            v->why = HTTPD_CLOSE_EVICTED;
            conn_close(v);
        }
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->s = s;
    httpd__req_init(&c->req);
    buf_init(&c->path, HTTPD__MAX_HEAD);
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles = 2;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_open++;
    s->accepted++;
    c->active_ms = uv_now(s->loop);
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 || s->n_open > s->max_conns) {
        c->why = HTTPD_CLOSE_ERROR;
        conn_close(c);
        return;
    }
    peer_key(c);
    if (s->web) {
        c->web = httpd_web_ref(s->web);
        if (httpd__web_ssl(s->web) && !(c->tls = httpd__tls_new(httpd__web_ssl(s->web)))) {
            conn_close(c);
            return;
        }
    }
    uv_tcp_nodelay(&c->tcp, 1);
    /* A small kernel send buffer: the kernel's share of a client that does
     * not read stays small too (socket memory counts against the pod). */
    uv_send_buffer_size((uv_handle_t *)&c->tcp, &(int){ SNDBUF });
    /* The first request's deadline runs from the accept. */
    c->in_request = true;
    uv_timer_start(&c->timer, timeout_cb, s->header_ms, 0);
    start_reading(c);
}

/* "host:port", "[v6]:port" or ":port". Hosts must be numeric (or
 * "localhost"): a name lookup here would block the loop. */
static int parse_addr(const char *addr, struct sockaddr_storage *ss, bool *any, char *err,
                      size_t errlen)
{
    char host[64];
    const char *colon, *hs, *he;
    char *end;
    long port;

    *any = false;
    if (!addr)
        goto bad;
    if (addr[0] == '[') {
        hs = addr + 1;
        he = strchr(hs, ']');
        if (!he || he[1] != ':')
            goto bad;
        colon = he + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon || memchr(addr, ':', (size_t)(colon - addr)))
            goto bad;
        hs = addr;
        he = colon;
    }
    if ((size_t)(he - hs) >= sizeof(host))
        goto bad;
    memcpy(host, hs, (size_t)(he - hs));
    host[he - hs] = '\0';
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || *end || port < 0 || port > 65535)
        goto bad;
    if (!host[0]) {
        *any = true;
        return uv_ip6_addr("::", (int)port, (struct sockaddr_in6 *)ss);
    }
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0 ||
        uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
bad:
    snprintf(err, errlen,
             "bad listen address \"%s\": want host:port, [v6]:port or :port "
             "with a numeric host (or localhost; no other host names) and a port in 0..65535",
             addr ? addr : "(null)");
    return -EINVAL;
}

static int bind_listen(struct httpd *s, const struct sockaddr *sa)
{
    int rc = uv_tcp_bind(&s->listener, sa, 0);

    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 511, connection_cb);
    return rc;
}

/* Whether an IPv6 socket can be bound here (":port" then listens dual-stack
 * on "::"). Probed with a throw-away socket on an ephemeral port. */
static bool have_ipv6(void)
{
    struct sockaddr_in6 a;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok;

    if (fd < 0)
        return false;
    memset(&a, 0, sizeof(a));
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

static void listener_closed(uv_handle_t *h)
{
    struct httpd *s = h->data;

    s->handles--;
    server_maybe_free(s);
}

/* Auth's handle has closed (httpd__auth_close). */
static void auth_closed(void *ud)
{
    struct httpd *s = ud;

    s->handles--;
    server_maybe_free(s);
}

int httpd_check_addr(const char *addr, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    bool any;

    return parse_addr(addr, &ss, &any, err, errlen) < 0 ? -EINVAL : 0;
}

int httpd_new(const struct httpd_opts *o, struct httpd **out, char *err, size_t errlen)
{
    uv_loop_t *loop;
    struct sockaddr_storage ss;
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    struct httpd *s;
    bool any;
    int rc;

    *out = NULL;
    if (!o || !o->loop) {
        snprintf(err, errlen, "no server options or loop");
        return -EINVAL;
    }
    loop = o->loop;
    rc = parse_addr(o->addr, &ss, &any, err, errlen);
    if (rc < 0)
        return rc;
    if (!o->handler) {
        snprintf(err, errlen, "no request handler for %s", o->addr);
        return -EINVAL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->loop = loop;
    s->handler = o->handler;
    s->ud = o->ud;
    s->idle_ms = o->idle_timeout_ms ? o->idle_timeout_ms : HTTPD__IDLE_MS;
    s->header_ms = o->header_timeout_ms ? o->header_timeout_ms : HTTPD__HEADER_MS;
    s->web = httpd_web_ref(o->web);
    STAILQ_INIT(&s->run);
    s->max_conns = HTTPD__MAX_CONNS;
    httpd__auth_init(&s->auth, loop, auth_done, s);
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    uv_idle_init(loop, &s->idle);
    s->idle.data = s;
    s->handles = 2;
    if (any && !have_ipv6()) {
        /* No IPv6 on this host: all IPv4 interfaces instead. */
        int port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);

        uv_ip4_addr("0.0.0.0", port, (struct sockaddr_in *)&ss);
    }
    rc = bind_listen(s, (const struct sockaddr *)&ss);
    if (rc < 0) {
        snprintf(err, errlen, "listen on %s: %s", o->addr, uv_strerror(rc));
        s->closing = true;
        uv_close((uv_handle_t *)&s->listener, listener_closed);
        uv_close((uv_handle_t *)&s->idle, listener_closed);
        return rc;
    }
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen) == 0)
        s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    *out = s;
    return 0;
}

int httpd_port(const struct httpd *s)
{
    return s ? s->port : -1;
}

void httpd_finish(struct httpd *s, void *token, int status, const char *content_type,
                  const char *text)
{
    struct conn *c;
    struct buf body;
    bool keep;
    int rc;

    for (c = s->conns; c && c->later.token != token; c = c->next)
        ;
    if (!token || !c)
        return;
    keep = c->later.keep;
    buf_init(&body, HTTPD__MAX_RESP_BODY);
    buf_puts(&body, text ? text : "");
    rc = send_answer(c, status < 200 || status > 999 ? 500 : status, content_type, &body, body.len,
                     c->later.head_only, !keep, !keep);
    buf_done(&body);
    later_end(c);
    if (rc < 0) {
        conn_close(c);
        return;
    }
    if (c->state == CONN_OPEN) {
        arm_idle(c);
        conn_kick(c); /* the next pipelined request, if any */
    }
}

void httpd_resume(struct httpd *s, const void *stream_state)
{
    for (struct conn *c = s ? s->conns : NULL; c; c = c->next) {
        if (c->state == CONN_OPEN && c->stream.fn && c->stream.parked &&
            c->stream.state == stream_state) {
            c->stream.parked = false;
            c->active_ms = uv_now(s->loop);
            arm_idle(c);
            conn_kick(c);
            return;
        }
    }
}

const char *httpd_close_reason_name(enum httpd_close_reason r)
{
    static const char *const names[HTTPD_CLOSE_N] = {
        [HTTPD_CLOSE_DONE] = "done",       [HTTPD_CLOSE_CLIENT_CLOSED] = "client_closed",
        [HTTPD_CLOSE_RESET] = "reset",     [HTTPD_CLOSE_TIMEOUT] = "timeout",
        [HTTPD_CLOSE_EVICTED] = "evicted", [HTTPD_CLOSE_ERROR] = "error",
    };

    return (unsigned)r < HTTPD_CLOSE_N ? names[r] : "unknown";
}

void httpd_get_stats(const struct httpd *s, struct httpd_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!s)
        return;
    out->accepted = s->accepted;
    out->open = s->n_open;
    memcpy(out->closed, s->closed, sizeof(out->closed));
}

void httpd_close(struct httpd *s, void (*cb)(void *ud), void *ud)
{
    struct conn *c;

    if (!s || s->closing)
        return;
    s->closing = true;
    s->close_cb = cb;
    s->close_ud = ud;
    for (c = s->conns; c; c = c->next)
        conn_close(c);
    if (httpd__auth_close(&s->auth, auth_closed))
        s->handles++;
    uv_close((uv_handle_t *)&s->listener, listener_closed);
    uv_close((uv_handle_t *)&s->idle, listener_closed);
}
