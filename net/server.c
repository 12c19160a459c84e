/* The status HTTP/1.1 server: sockets, connections and responses.
 *
 * Purpose. Serves /metrics and friends on the loop. Parsing is in
 * server_parse.c (http-parser); this file accepts connections, feeds them
 * to the parser one request at a time, calls the handler synchronously and
 * writes the answer (head and body as two buffers, the body not copied).
 *
 * Limits. At most NET__MAX_CONNS open connections (more are accepted and
 * closed at once, so they do not sit in the backlog); each must complete a
 * request within NET__IDLE_MS of the previous one (or of its accept), which
 * also bounds slow-loris heads. While more than OUT_HIGH bytes of answers
 * wait to be written the connection stops reading, and the unparsed rest of
 * the last read (at most one read buffer) waits with it: a pipelining
 * client that never reads cannot make us queue without bound.
 *
 * Errors. A request the parser rejects gets 400/413/431 with "Connection:
 * close"; we then shut down our side and discard input for a short linger
 * so the client can read the answer instead of a reset.
 *
 * Threading and ownership. Loop thread only. The server owns its
 * connections; a connection is freed when both its handles have closed, and
 * the server when its listener and every connection are gone. The handler
 * may call net_server_close(); each step re-checks for that. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/net.h"
#include "common/macros.h"
#include "net/internal.h"

#define READ_BUF (64 * 1024)
#define OUT_HIGH (1024 * 1024)
#define LINGER_MS 2000
#define LINGER_MAX_BYTES (4 * 1024 * 1024)


enum conn_state {
    CONN_OPEN,        /* reading and answering */
    CONN_LAST_WRITE,  /* the last answer is being written */
    CONN_LINGER,      /* our side is shut down; discarding input briefly */
    CONN_CLOSING,     /* handles are closing */
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer; /* idle timeout, then linger timeout */
    uv_shutdown_t shut;
    struct net_server *s;
    struct conn *prev, *next;
    struct net__req req;
    struct buf path;
    char *stash; /* unparsed input held back while answers drain */
    size_t stash_len;
    size_t out_pending;
    unsigned writes;
    size_t discarded;
    int handles; /* open uv handles */
    enum conn_state state;
    bool reading;
    bool peer_eof; /* the client shut down its side; answer what we have */
};

struct write_req {
    uv_write_t w;
    struct conn *c;
    char *head;
    char *body;
    size_t len;
};

struct net_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    net_handler handler;
    void *ud;
    struct conn *conns;
    size_t n_open;
    int port;
    uint64_t idle_ms;
    bool listener_open;
    bool closing;
    void (*close_cb)(void *ud);
    void *close_ud;
    char rbuf[READ_BUF]; /* shared: each read is parsed before the next */
};

static void conn_close(struct conn *c);
static void conn_process(struct conn *c, const char *p, size_t n);
static void stop_reading(struct conn *c);

static void server_maybe_free(struct net_server *s)
{
    void (*cb)(void *);
    void *ud;

    if (!s->closing || s->listener_open || s->conns)
        return;
    cb = s->close_cb;
    ud = s->close_ud;
    free(s);
    if (cb)
        cb(ud);
}

static void conn_handle_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    struct net_server *s = c->s;

    if (--c->handles > 0)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    net__req_done(&c->req);
    buf_done(&c->path);
    free(c->stash);
    free(c);
    server_maybe_free(s);
}

static void conn_close(struct conn *c)
{
    if (c->state == CONN_CLOSING)
        return;
    c->state = CONN_CLOSING;
    c->s->n_open--;
    /* Pending writes and the shutdown get their callbacks (UV_ECANCELED)
     * before the close callbacks. */
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
}

static void linger_timeout(uv_timer_t *t)
{
    conn_close(t->data);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct conn *c = h->data;

    (void)hint;
    *b = uv_buf_init(c->s->rbuf, sizeof(c->s->rbuf));
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct conn *c = st->data;

    if (nread == 0 || c->state == CONN_CLOSING)
        return;
    if (nread == UV_EOF && c->state != CONN_LINGER) {
        /* A half-close (e.g. "HTTP/1.0 request, then shutdown"): finish
         * the answers already queued or stashed, then close. */
        c->peer_eof = true;
        stop_reading(c);
        if (c->writes == 0 && !c->stash)
            conn_close(c);
        return;
    }
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (c->state != CONN_OPEN) {
        c->discarded += (size_t)nread;
        if (c->discarded > LINGER_MAX_BYTES)
            conn_close(c);
        return;
    }
    conn_process(c, b->base, (size_t)nread);
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

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;

    if (status < 0 || c->state == CONN_CLOSING) {
        if (status != UV_ECANCELED)
            conn_close(c);
        return;
    }
    c->state = CONN_LINGER;
    uv_timer_start(&c->timer, linger_timeout, LINGER_MS, 0);
    start_reading(c);
}

/* The last answer is out: send FIN, keep reading (and discarding) for a
 * moment so the client reads our answer rather than a reset. */
static void begin_linger(struct conn *c)
{
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, shutdown_cb) < 0)
        conn_close(c);
}

static void write_cb(uv_write_t *w, int status)
{
    struct write_req *wr = container_of(w, struct write_req, w);
    struct conn *c = wr->c;
    char *stash;
    size_t len;

    c->out_pending -= wr->len;
    c->writes--;
    free(wr->head);
    free(wr->body);
    free(wr);
    if (c->state == CONN_CLOSING)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->state == CONN_LAST_WRITE) {
        if (c->writes == 0) {
            if (c->peer_eof)
                conn_close(c);
            else
                begin_linger(c);
        }
        return;
    }
    if (c->out_pending > OUT_HIGH)
        return;
    if (c->stash) {
        stash = c->stash;
        len = c->stash_len;
        c->stash = NULL;
        c->stash_len = 0;
        conn_process(c, stash, len);
        free(stash);
    }
    if (c->state != CONN_OPEN || c->stash)
        return;
    if (c->peer_eof) {
        if (c->writes == 0)
            conn_close(c);
    } else if (c->out_pending <= OUT_HIGH) {
        start_reading(c);
    }
}

/* Queues head + body (both owned, freed after the write). */
static int conn_write(struct conn *c, char *head, size_t head_len, char *body, size_t body_len)
{
    struct write_req *wr = calloc(1, sizeof(*wr));
    uv_buf_t bufs[2];
    int rc;

    if (!wr) {
        free(head);
        free(body);
        return -ENOMEM;
    }
    wr->c = c;
    wr->head = head;
    wr->body = body;
    wr->len = head_len + body_len;
    bufs[0] = uv_buf_init(head, (unsigned)head_len);
    bufs[1] = uv_buf_init(body ? body : "", (unsigned)body_len);
    rc = uv_write(&wr->w, (uv_stream_t *)&c->tcp, bufs, body_len ? 2 : 1, write_cb);
    if (rc < 0) {
        free(head);
        free(body);
        free(wr);
        return rc;
    }
    c->writes++;
    c->out_pending += wr->len;
    return 0;
}

static int send_answer(struct conn *c, int status, const char *ctype, struct buf *body,
                       bool head_only, bool close)
{
    struct buf h;
    char *hp, *bp = NULL;
    size_t hl, bl = 0;
    bool ka10 = !close && c->req.parser.http_major == 1 && c->req.parser.http_minor == 0;
    int rc;

    buf_init(&h, 4096);
    rc = net__resp_head(&h, status, ctype, body ? body->len : 0, close, ka10);
    if (rc < 0) {
        buf_done(&h);
        return rc;
    }
    hp = buf_steal(&h, &hl);
    if (body && !head_only && status != 204 && status != 304)
        bp = buf_steal(body, &bl);
    rc = conn_write(c, hp, hl, bp, bl);
    if (rc == 0 && close) {
        c->state = CONN_LAST_WRITE;
        uv_timer_stop(&c->timer);
    }
    return rc;
}

static void send_error(struct conn *c, int status)
{
    struct buf body;

    buf_init(&body, 256);
    buf_printf(&body, "%d %s\n", status, net__reason(status));
    if (send_answer(c, status, NULL, &body, false, true) < 0)
        conn_close(c);
    buf_done(&body);
}

static void idle_timeout(uv_timer_t *t)
{
    conn_close(t->data);
}

/* One complete request: call the handler and queue its answer. */
static void dispatch(struct conn *c)
{
    struct net_server *s = c->s;
    struct net_http_request hr;
    struct net_http_response resp;
    bool head_only = net__req_is_head(&c->req);
    bool keep = c->req.keep_alive;
    int rc;

    memset(&hr, 0, sizeof(hr));
    if (net__req_get(&c->req, &hr, &c->path) != 0) {
        send_error(c, 400);
        return;
    }
    memset(&resp, 0, sizeof(resp));
    resp.status = 200;
    buf_init(&resp.body, NET__MAX_RESP_BODY);
    s->handler(&hr, &resp, s->ud);
    if (c->state != CONN_OPEN) { /* the handler closed the server */
        buf_done(&resp.body);
        return;
    }
    if (resp.status < 200 || resp.status > 999) {
        resp.status = 500;
        buf_reset(&resp.body);
    }
    rc = send_answer(c, resp.status, resp.content_type, &resp.body, head_only, !keep);
    buf_done(&resp.body);
    if (rc < 0) {
        conn_close(c);
        return;
    }
    if (keep)
        uv_timer_start(&c->timer, idle_timeout, s->idle_ms, 0);
}

static void send_continue(struct conn *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    char *p = malloc(sizeof(msg) - 1);

    if (p)
        memcpy(p, msg, sizeof(msg) - 1);
    if (!p || conn_write(c, p, sizeof(msg) - 1, NULL, 0) < 0)
        conn_close(c);
}

/* Parses and answers requests in p[0..n) until input runs out, the
 * connection stops being open, or answers pile up (then the rest waits in
 * c->stash and reading stops). */
static void conn_process(struct conn *c, const char *p, size_t n)
{
    while (n > 0 && c->state == CONN_OPEN) {
        bool had_headers = c->req.headers_done;
        size_t used = net__req_feed(&c->req, p, n);

        p += used;
        n -= used;
        if (c->req.error) {
            send_error(c, c->req.error);
            return;
        }
        if (!had_headers && c->req.headers_done && c->req.expect_continue && !c->req.complete)
            send_continue(c);
        if (!c->req.complete)
            continue;
        dispatch(c);
        if (c->state != CONN_OPEN)
            return;
        net__req_next(&c->req);
        if (c->out_pending > OUT_HIGH && n > 0) {
            c->stash = malloc(n);
            if (!c->stash) {
                conn_close(c);
                return;
            }
            memcpy(c->stash, p, n);
            c->stash_len = n;
            stop_reading(c);
            return;
        }
    }
    if (c->state == CONN_OPEN && c->out_pending > OUT_HIGH)
        stop_reading(c);
}

static void connection_cb(uv_stream_t *ls, int status)
{
    struct net_server *s = ls->data;
    struct conn *c;

    if (status < 0 || s->closing)
        return;
    c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->s = s;
    net__req_init(&c->req);
    buf_init(&c->path, NET__MAX_HEAD);
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
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 || s->n_open > NET__MAX_CONNS) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_start(&c->timer, idle_timeout, s->idle_ms, 0);
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
    snprintf(err, errlen, "bad listen address \"%s\": want host:port, [v6]:port or :port "
             "with a numeric host", addr ? addr : "(null)");
    return -EINVAL;
}

static int bind_listen(struct net_server *s, const struct sockaddr *sa)
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
    struct net_server *s = h->data;

    s->listener_open = false;
    server_maybe_free(s);
}

int net_server_start(uv_loop_t *loop, const char *addr, net_handler handler, void *ud,
                     struct net_server **out, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    struct sockaddr_storage bound;
    int blen = sizeof(bound);
    struct net_server *s;
    bool any;
    int rc;

    *out = NULL;
    rc = parse_addr(addr, &ss, &any, err, errlen);
    if (rc < 0)
        return rc;
    if (!handler) {
        snprintf(err, errlen, "no handler");
        return -EINVAL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->loop = loop;
    s->handler = handler;
    s->ud = ud;
    s->idle_ms = NET__IDLE_MS;
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    s->listener_open = true;
    if (any && !have_ipv6()) {
        /* No IPv6 on this host: all IPv4 interfaces instead. */
        int port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);

        uv_ip4_addr("0.0.0.0", port, (struct sockaddr_in *)&ss);
    }
    rc = bind_listen(s, (const struct sockaddr *)&ss);
    if (rc < 0) {
        snprintf(err, errlen, "listen on %s: %s", addr, uv_strerror(rc));
        s->closing = true;
        uv_close((uv_handle_t *)&s->listener, listener_closed);
        return rc;
    }
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen) == 0)
        s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    *out = s;
    return 0;
}

int net_server_port(const struct net_server *s)
{
    return s ? s->port : -1;
}

void net_server_set_idle_timeout(struct net_server *s, uint64_t ms)
{
    if (s)
        s->idle_ms = ms ? ms : NET__IDLE_MS;
}

void net_server_close(struct net_server *s, void (*cb)(void *ud), void *ud)
{
    struct conn *c;

    if (!s || s->closing)
        return;
    s->closing = true;
    s->close_cb = cb;
    s->close_ud = ud;
    for (c = s->conns; c; c = c->next)
        conn_close(c);
    uv_close((uv_handle_t *)&s->listener, listener_closed);
}
