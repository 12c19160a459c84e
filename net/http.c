/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP client: the one libcurl-multi <-> libuv bridge (docs/design.md
 * "The libcurl-libuv bridge": the socket and timer callbacks, the drain,
 * re-entrancy, the fd map, parked requests, shutdown).
 *
 * Each struct net_client owns one CURLM driven by libcurl's multi_socket
 * API, one uv_poll_t per fd and one uv_timer_t. The multi's connection
 * cache keeps connections to each target alive between requests; easy
 * handles are per request. Requests waiting for an oauth2 token (auth.c)
 * are parked: set up, linked and counted, not in the multi.
 *
 * Threading. Loop thread only; libcurl's threaded resolver runs lookups on
 * its own threads (CURL_VERSION_ASYNCHDNS is required). User done-callbacks
 * run from drain() and may start, cancel or close freely.
 *
 * Ownership. The client owns its requests (freed after their callback, or
 * on cancel) and its poll contexts (freed in their close callbacks). It
 * frees itself when its last close callback has run (two-phase teardown).
 * Request options are borrowed until completion; the request body is given
 * to libcurl without a copy (CURLOPT_POSTFIELDS). */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/macros.h"
#include "net/internal.h"
#include "net/net.h"
#include "proflet_version.h"

#define DEFAULT_MAX_RESPONSE ((size_t)64 * 1024 * 1024)
#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_MAX_CONNECTS 1024

struct sock_ctx {
    uv_poll_t poll;
    curl_socket_t fd;
    int events; /* UV_READABLE | UV_WRITABLE: what libcurl waits for */
    struct net_client *c;
};

struct net_request {
    struct net_client *c;
    CURL *easy;
    struct net_request *prev, *next;
    net_done_cb cb;
    void *ud;
    int (*on_data)(const char *p, size_t n, void *ud);
    struct buf body;
    size_t max_response;
    size_t received;
    int fail;          /* NET_E* decided by our write callback, 0 if none */
    char failmsg[128]; /* its message (libcurl overwrites errbuf after us) */
    bool completing;   /* its done callback is running */
    bool doomed;       /* the multi failed under it; completes with NET_EIO */
    bool park_pending; /* setup_easy parked it: not added to the multi */
    struct curl_slist *headers;
    struct curl_slist *connect_to;
    struct curl_slist *proxy_headers;
    /* Waiting for an oauth2 token: on `park` (holding a reference on
     * park_auth), not yet in the multi. */
    struct net__park *park;
    struct net_auth *park_auth;
    struct net_request *park_prev, *park_next;
    struct net_auth *token_for; /* this is that auth's token request */
    uint64_t start_ns;
    char errbuf[CURL_ERROR_SIZE];
};

struct net_client {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    long max_connects;
    struct net_request *head;
    size_t inflight;
    struct sock_ctx **socks; /* indexed by fd */
    size_t n_socks;
    unsigned pending; /* close callbacks not yet run */
    int in_curl;      /* >0 while user code runs inside a libcurl callback */
    bool closing;
    bool close_deferred; /* net_client_close was called from inside libcurl */
    bool fail_next;      /* test hook */
    void (*close_cb)(void *ud);
    void *close_ud;
};

const char *net_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
    case NET_ETIMEDOUT:
        return "request timed out";
    case NET_ETOOLARGE:
        return "response body too large";
    case NET_ECONNECT:
        return "could not connect";
    case NET_EABORTED:
        return "aborted by receiver";
    case NET_ETLS:
        return "TLS error";
    case NET_EIO:
        return "transfer failed";
    case NET_ECANCELED:
        return "canceled";
    case NET_EAUTH:
        return "no credentials";
    default:
        return err < 0 && err > -4096 ? strerror(-err) : "unknown error";
    }
}

/* ------------------------------------------------------------ sockets */

static void client_maybe_free(struct net_client *c)
{
    void (*cb)(void *);
    void *ud;

    if (!c->closing || c->pending > 0)
        return;
    cb = c->close_cb;
    ud = c->close_ud;
    free(c->socks);
    free(c);
    if (cb)
        cb(ud);
}

static void sock_close_cb(uv_handle_t *h)
{
    struct sock_ctx *s = container_of((uv_poll_t *)h, struct sock_ctx, poll);
    struct net_client *c = s->c;

    free(s);
    c->pending--;
    client_maybe_free(c);
}

static struct sock_ctx *sock_lookup(struct net_client *c, curl_socket_t fd)
{
    if (fd < 0 || (size_t)fd >= c->n_socks)
        return NULL;
    return c->socks[fd];
}

/* Stops polling at once (libuv forbids closing an fd under an active poll),
 * forgets the fd and closes the handle; the context is freed in its close
 * callback. */
static void sock_release(struct net_client *c, struct sock_ctx *s)
{
    uv_poll_stop(&s->poll);
    c->socks[s->fd] = NULL;
    c->pending++;
    uv_close((uv_handle_t *)&s->poll, sock_close_cb);
}

static void close_all_socks(struct net_client *c)
{
    for (size_t i = 0; i < c->n_socks; i++)
        if (c->socks[i])
            sock_release(c, c->socks[i]);
}

static int socks_reserve(struct net_client *c, curl_socket_t fd)
{
    size_t n = c->n_socks ? c->n_socks : 64;
    struct sock_ctx **p;

    if ((size_t)fd < c->n_socks)
        return 0;
    while (n <= (size_t)fd)
        n *= 2;
    p = realloc(c->socks, n * sizeof(*p));
    if (!p)
        return -ENOMEM;
    memset(p + c->n_socks, 0, (n - c->n_socks) * sizeof(*p));
    c->socks = p;
    c->n_socks = n;
    return 0;
}

static void rebuild(struct net_client *c, CURLMcode mc);
static void drain(struct net_client *c);

/* Hands one event to libcurl, then always drains: skipping the drain when
 * no handle is running loses the last DONE message. */
static void action(struct net_client *c, curl_socket_t fd, int flags)
{
    CURLMcode mc;
    int running;

    if (!c->multi)
        return;
    mc = curl_multi_socket_action(c->multi, fd, flags, &running);
    if (c->fail_next) {
        c->fail_next = false;
        mc = CURLM_INTERNAL_ERROR;
    }
    if (c->close_deferred) {
        c->close_deferred = false;
        net_client_close(c, c->close_cb, c->close_ud);
        return;
    }
    if (mc != CURLM_OK) {
        rebuild(c, mc);
        return;
    }
    drain(c);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *s = container_of(h, struct sock_ctx, poll);
    struct net_client *c = s->c;
    curl_socket_t fd = s->fd;
    int flags = 0;

    if (status < 0) {
        /* A socket error (libuv reports POLLERR as EBADF, and stops
         * polling). Say the socket is ready for what libcurl waits for, so
         * that its own read or write meets the error and libcurl handles
         * it as it would: a kept-alive connection the server closed just
         * as a request went out on it is retried on a fresh one. Passing
         * CURL_CSELECT_ERR instead fails that request at once. */
        flags = (s->events & UV_READABLE ? CURL_CSELECT_IN : 0) |
                (s->events & UV_WRITABLE ? CURL_CSELECT_OUT : 0);
        if (!flags)
            flags = CURL_CSELECT_IN | CURL_CSELECT_OUT;
        if (status == UV_EBADF)
            sock_release(c, s);
    } else {
        if (events & UV_READABLE)
            flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
            flags |= CURL_CSELECT_OUT;
    }
    action(c, fd, flags);
}

/* CURLMOPT_SOCKETFUNCTION. Also receives curl-internal fds (resolver
 * wake-ups), which are treated like any other. */
static int socket_fn(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct net_client *c = userp;
    struct sock_ctx *s = sock_lookup(c, fd);
    int events = 0;

    (void)easy;
    (void)socketp; /* our map is the authority, see the top of this file */
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            uv_poll_stop(&s->poll);
            if (c->multi)
                curl_multi_assign(c->multi, fd, NULL);
            sock_release(c, s);
        }
        return 0;
    }
    if (c->closing)
        return 0;
    if (!s) {
        if (socks_reserve(c, fd) < 0)
            return -1;
        s = calloc(1, sizeof(*s));
        if (!s)
            return -1;
        s->fd = fd;
        s->c = c;
        if (uv_poll_init_socket(c->loop, &s->poll, fd) < 0) {
            free(s);
            return -1;
        }
        c->socks[fd] = s;
        if (c->multi)
            curl_multi_assign(c->multi, fd, s);
    }
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        events |= UV_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        events |= UV_WRITABLE;
    /* On an active poll this only changes the mask. */
    s->events = events;
    uv_poll_start(&s->poll, events, poll_cb);
    return 0;
}

/* CURLOPT_OPENSOCKETFUNCTION: a fresh fd must not still have a poll from a
 * socket libcurl closed behind our back. */
static curl_socket_t opensocket_fn(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct net_client *c = clientp;
    curl_socket_t fd;
    struct sock_ctx *s;

    (void)purpose;
    fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (fd < 0)
        return CURL_SOCKET_BAD;
    s = sock_lookup(c, fd);
    if (s)
        sock_release(c, s);
    return fd;
}

/* CURLOPT_CLOSESOCKETFUNCTION: stop a poll still active on the fd before it
 * is closed (libuv forbids closing a polled fd). */
static int closesocket_fn(void *clientp, curl_socket_t fd)
{
    struct net_client *c = clientp;
    struct sock_ctx *s = sock_lookup(c, fd);

    if (s)
        sock_release(c, s);
    return close(fd);
}

/* ------------------------------------------------------------ timer */

static void timer_cb(uv_timer_t *t)
{
    struct net_client *c = container_of(t, struct net_client, timer);

    action(c, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION. Never calls socket_action (curl #3537). 0 ms
 * becomes 1 ms: on libuv < 1.48 a 0 ms timer started from a timer callback
 * runs again in the same pass and busy-loops (libuv #4245). */
static int timer_fn(CURLM *m, long ms, void *userp)
{
    struct net_client *c = userp;

    (void)m;
    if (c->closing)
        return 0;
    if (ms < 0)
        uv_timer_stop(&c->timer);
    else
        uv_timer_start(&c->timer, timer_cb, ms == 0 ? 1 : (uint64_t)ms, 0);
    return 0;
}

/* ------------------------------------------------------------ multi */

static CURLM *multi_new(struct net_client *c)
{
    CURLM *m = curl_multi_init();

    if (!m)
        return NULL;
    curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, socket_fn);
    curl_multi_setopt(m, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, timer_fn);
    curl_multi_setopt(m, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, c->max_connects);
    return m;
}

int net_client_new(const struct net_client_opts *o, struct net_client **out, char *err,
                   size_t errlen)
{
    curl_version_info_data *vi;
    struct net_client *c;

    *out = NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "libcurl initialisation failed");
        return -EIO;
    }
    vi = curl_version_info(CURLVERSION_NOW);
    if (!(vi->features & CURL_VERSION_ASYNCHDNS)) {
        snprintf(err, errlen,
                 "libcurl %s has no asynchronous resolver (CURL_VERSION_ASYNCHDNS); "
                 "DNS lookups would block the event loop",
                 vi->version);
        return -ENOTSUP;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->loop = o->loop;
    c->max_connects = o->max_connects ? (long)o->max_connects : DEFAULT_MAX_CONNECTS;
    c->multi = multi_new(c);
    if (!c->multi) {
        snprintf(err, errlen, "curl_multi_init failed: out of memory");
        free(c);
        return -ENOMEM;
    }
    uv_timer_init(o->loop, &c->timer);
    *out = c;
    return 0;
}

void net_client_set_max_connects(struct net_client *c, size_t max_connects)
{
    if (!c)
        return;
    c->max_connects = max_connects ? (long)max_connects : DEFAULT_MAX_CONNECTS;
    if (c->multi)
        curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, c->max_connects);
}

size_t net_client_inflight(const struct net_client *c)
{
    return c ? c->inflight : 0;
}

void net__client_fail_next_action(struct net_client *c)
{
    c->fail_next = true;
}

/* ------------------------------------------------------------ requests */

static void req_link(struct net_client *c, struct net_request *r)
{
    r->prev = NULL;
    r->next = c->head;
    if (c->head)
        c->head->prev = r;
    c->head = r;
    c->inflight++;
}

static void req_unlink(struct net_client *c, struct net_request *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else if (c->head == r)
        c->head = r->next;
    else
        return; /* not linked */
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    c->inflight--;
}

static void park_unlink(struct net_request *r)
{
    struct net_auth *a = r->park_auth;

    if (!r->park)
        return;
    if (r->park_prev)
        r->park_prev->park_next = r->park_next;
    else
        r->park->head = r->park_next;
    if (r->park_next)
        r->park_next->park_prev = r->park_prev;
    r->park = NULL;
    r->park_auth = NULL;
    r->park_prev = r->park_next = NULL;
    if (a)
        net__auth_ops(a)->unref(a);
}

/* The easy handle must already be out of any multi. */
static void req_free(struct net_request *r)
{
    if (!r)
        return;
    park_unlink(r);
    if (r->token_for && !r->completing)
        net__auth_ops(r->token_for)->fetch_gone(r->token_for);
    if (r->easy)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    curl_slist_free_all(r->proxy_headers);
    curl_slist_free_all(r->connect_to);
    buf_done(&r->body);
    free(r);
}

static size_t write_fn(char *p, size_t size, size_t nmemb, void *ud)
{
    struct net_request *r = ud;
    size_t n = size * nmemb;
    int rc;

    if (r->fail)
        return 0;
    if (n > r->max_response - r->received) {
        r->fail = NET_ETOOLARGE;
        snprintf(r->failmsg, sizeof(r->failmsg), "response body exceeds %zu bytes",
                 r->max_response);
        return 0; /* short count: the transfer fails with CURLE_WRITE_ERROR */
    }
    r->received += n;
    if (r->on_data) {
        r->c->in_curl++;
        rc = r->on_data(p, n, r->ud);
        r->c->in_curl--;
        if (rc < 0) {
            r->fail = NET_EABORTED;
            snprintf(r->failmsg, sizeof(r->failmsg), "receiver aborted the transfer (%d)", rc);
            return 0;
        }
        return n;
    }
    rc = buf_append(&r->body, p, n);
    if (rc < 0) {
        r->fail = rc == -E2BIG ? NET_ETOOLARGE : NET_EIO;
        snprintf(r->failmsg, sizeof(r->failmsg), "buffering the response: %s", strerror(-rc));
        return 0;
    }
    return n;
}

static int map_curl_error(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return NET_ETIMEDOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return NET_ECONNECT;
    case CURLE_FILESIZE_EXCEEDED:
        return NET_ETOOLARGE;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_USE_SSL_FAILED:
    case CURLE_SSL_CLIENTCERT:
        return NET_ETLS;
    default:
        return NET_EIO;
    }
}

/* Runs the done callback and frees the request. The easy handle is already
 * out of the multi and the request unlinked, so the callback may start,
 * cancel or close anything. */
static void complete(struct net_request *r, int result, CURLcode rc)
{
    struct net_response resp;
    long status = 0;
    char *ctype = NULL;

    memset(&resp, 0, sizeof(resp));
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ctype);
    {
        curl_off_t after = 0;

        if (curl_easy_getinfo(r->easy, CURLINFO_RETRY_AFTER, &after) == CURLE_OK && after > 0)
            resp.retry_after_s = (uint64_t)after;
    }
    if (result == 0 && rc == CURLE_WRITE_ERROR && r->fail) {
        result = r->fail;
        snprintf(r->errbuf, sizeof(r->errbuf), "%s", r->failmsg);
    } else if (result == 0 && rc != CURLE_OK) {
        result = map_curl_error(rc);
    }
    if (result < 0 && !r->errbuf[0])
        snprintf(r->errbuf, sizeof(r->errbuf), "%s",
                 rc != CURLE_OK ? curl_easy_strerror(rc) : net_strerror(result));
    resp.result = result;
    resp.status = status;
    resp.error = result < 0 ? r->errbuf : NULL;
    resp.body = r->body;
    buf_init(&r->body, 0);
    resp.content_type = ctype;
    resp.duration_us = (clock_mono_ns() - r->start_ns) / 1000;
    r->completing = true;
    r->cb(r, &resp, r->ud);
    buf_done(&resp.body);
    req_free(r);
}

static void drain(struct net_client *c)
{
    CURLMsg *m;
    int left;

    /* One message at a time: a done callback may cancel another request,
     * and curl_multi_remove_handle drops that request's queued message. */
    while (c->multi && !c->closing && (m = curl_multi_info_read(c->multi, &left)) != NULL) {
        struct net_request *r = NULL;
        CURL *easy = m->easy_handle;
        CURLcode rc = m->data.result;

        if (m->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
        curl_multi_remove_handle(c->multi, easy); /* m is dead from here */
        if (!r)
            continue;
        req_unlink(c, r);
        complete(r, 0, rc);
    }
}

/* After a socket_action error every transfer is in an unknown state: throw
 * the multi away (with its connections), start a fresh one and fail every
 * request that was in flight with NET_EIO. */
static void rebuild(struct net_client *c, CURLMcode mc)
{
    CURLM *old = c->multi;
    struct net_request *r;

    for (r = c->head; r; r = r->next) {
        r->doomed = true;
        curl_multi_remove_handle(old, r->easy);
    }
    c->multi = NULL;
    curl_multi_cleanup(old);
    close_all_socks(c);
    uv_timer_stop(&c->timer);
    c->multi = multi_new(c);
    for (;;) {
        for (r = c->head; r && !r->doomed; r = r->next)
            ;
        if (!r || c->closing)
            break;
        req_unlink(c, r);
        snprintf(r->errbuf, sizeof(r->errbuf), "multi handle failed: %s", curl_multi_strerror(mc));
        complete(r, NET_EIO, CURLE_OK);
    }
}

static int slist_add(struct curl_slist **l, const char *h)
{
    struct curl_slist *n;

    if (net__has_crlf(h))
        return -EINVAL;
    n = curl_slist_append(*l, h);
    if (!n)
        return -ENOMEM;
    *l = n;
    return 0;
}

static int add_header(struct net_request *r, const char *h)
{
    return slist_add(&r->headers, h);
}

int net__request_add_header(struct net_request *r, const char *line)
{
    return add_header(r, line);
}

struct net_client *net__request_client(const struct net_request *r)
{
    return r->c;
}

void net__request_set_token_for(struct net_request *r, struct net_auth *a)
{
    r->token_for = a;
}

/* A list of "Name: value" lines for the proxy, from `name: [values]`. */
static int proxy_header_list(struct net_request *r, const struct conf_param *p, size_t n)
{
    struct buf b;
    int rc = 0;

    buf_init(&b, 64 * 1024);
    for (size_t i = 0; i < n && rc == 0; i++) {
        for (unsigned v = 0; v < p[i].n_values && rc == 0; v++) {
            buf_reset(&b);
            rc = buf_printf(&b, "%s: %s", p[i].key, p[i].values[v]);
            if (rc == 0)
                rc = slist_add(&r->proxy_headers, b.data);
        }
    }
    buf_done(&b);
    return rc == -E2BIG ? -EINVAL : rc;
}

static long tls_version(int v)
{
    switch (v) {
    case NET_TLS10:
        return CURL_SSLVERSION_TLSv1_0;
    case NET_TLS11:
        return CURL_SSLVERSION_TLSv1_1;
    case NET_TLS12:
        return CURL_SSLVERSION_TLSv1_2;
    case NET_TLS13:
        return CURL_SSLVERSION_TLSv1_3;
    default:
        return CURL_SSLVERSION_DEFAULT;
    }
}

static long tls_max_version(int v)
{
    switch (v) {
    case NET_TLS10:
        return CURL_SSLVERSION_MAX_TLSv1_0;
    case NET_TLS11:
        return CURL_SSLVERSION_MAX_TLSv1_1;
    case NET_TLS12:
        return CURL_SSLVERSION_MAX_TLSv1_2;
    case NET_TLS13:
        return CURL_SSLVERSION_MAX_TLSv1_3;
    default:
        return CURL_SSLVERSION_MAX_DEFAULT;
    }
}

/* Inline PEM: libcurl copies the blob (CURL_BLOB_COPY). */
static int set_blob(CURL *e, CURLoption opt, const char *pem)
{
    struct curl_blob b = { .data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY };

    return curl_easy_setopt(e, opt, &b) == CURLE_OK ? 0 : -EINVAL;
}

/* tls.server_name: curl 7.88 has no option that sets SNI apart from the URL
 * host. So the URL's host becomes server_name (SNI and certificate check),
 * CURLOPT_CONNECT_TO sends the connection to the original host and port, and
 * an explicit Host header keeps what the server sees unchanged. Not used
 * through a proxy. */
static int apply_server_name(struct net_request *r, const char *url, const char *sn)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *xport = NULL, *nurl = NULL;
    char tmp[1024];
    struct curl_slist *n;
    int rc = -EINVAL;

    if (!u)
        return -ENOMEM;
    if (strpbrk(sn, ":/[]@ \r\n\t") || !*sn)
        goto out;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
        goto out;
    rc = 0;
    if (strcasecmp(scheme, "https") != 0 || strcasecmp(host, sn) == 0)
        goto out; /* nothing to do */
    rc = -EINVAL;
    if (curl_url_get(u, CURLUPART_PORT, &xport, 0) != CURLUE_OK)
        xport = NULL;
    if (curl_url_set(u, CURLUPART_HOST, sn, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &nurl, 0) != CURLUE_OK)
        goto out;
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s:%s:%s:%s", sn, port, host, port) >= sizeof(tmp))
        goto out;
    rc = -ENOMEM;
    n = curl_slist_append(r->connect_to, tmp);
    if (!n)
        goto out;
    r->connect_to = n;
    if ((size_t)snprintf(tmp, sizeof(tmp), "Host: %s%s%s", host, xport ? ":" : "",
                         xport ? xport : "") >= sizeof(tmp)) {
        rc = -EINVAL;
        goto out;
    }
    rc = add_header(r, tmp);
    if (rc < 0)
        goto out;
    rc = -EINVAL;
    if (curl_easy_setopt(r->easy, CURLOPT_URL, nurl) != CURLE_OK ||
        curl_easy_setopt(r->easy, CURLOPT_CONNECT_TO, r->connect_to) != CURLE_OK)
        goto out;
    rc = 0;
out:
    curl_free(nurl);
    curl_free(xport);
    curl_free(port);
    curl_free(host);
    curl_free(scheme);
    curl_url_cleanup(u);
    return rc;
}

static int setup_easy(struct net_request *r, const struct net_request_opts *o)
{
    CURL *e = r->easy;
    const char *method = o->method ? o->method : "GET";
    const struct net_tls *tls = o->tls;
    int rc;

#define SET(opt, val)                                  \
    do {                                               \
        if (curl_easy_setopt(e, opt, val) != CURLE_OK) \
            return -EINVAL;                            \
    } while (0)

    SET(CURLOPT_PRIVATE, r);
    SET(CURLOPT_URL, o->url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_NOSIGNAL, 1L);
    if (o->no_dns_cache)
        SET(CURLOPT_DNS_CACHE_TIMEOUT, 0L);
    SET(CURLOPT_ERRORBUFFER, r->errbuf);
    SET(CURLOPT_WRITEFUNCTION, write_fn);
    SET(CURLOPT_WRITEDATA, r);
    SET(CURLOPT_OPENSOCKETFUNCTION, opensocket_fn);
    SET(CURLOPT_OPENSOCKETDATA, r->c);
    SET(CURLOPT_CLOSESOCKETFUNCTION, closesocket_fn);
    SET(CURLOPT_CLOSESOCKETDATA, r->c);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_CONNECTTIMEOUT_MS,
        (long)(o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS));
    if (o->timeout_ms)
        SET(CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
    if (o->follow_redirects) {
        SET(CURLOPT_FOLLOWLOCATION, 1L);
        SET(CURLOPT_MAXREDIRS, 10L);
        SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        /* A POST stays a POST with its body on 301, 302 and 303 too (libcurl
         * would turn it into a GET, losing a push). */
        SET(CURLOPT_POSTREDIR, (long)CURL_REDIR_POST_ALL);
    }
    SET(CURLOPT_USERAGENT, o->user_agent ? o->user_agent : "proflet/" PROFLET_VERSION);
    SET(CURLOPT_HTTP_VERSION,
        o->http2 ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_1_1);
    if (o->accept_gzip)
        SET(CURLOPT_ACCEPT_ENCODING, "gzip");
    else if (strcmp(method, "HEAD") != 0)
        /* Early refusal of a declared oversize body; the write callback
         * enforces the cap either way (and on decoded bytes with gzip). */
        SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)r->max_response);

    if (strcmp(method, "GET") == 0) {
        SET(CURLOPT_HTTPGET, 1L);
    } else if (strcmp(method, "HEAD") == 0) {
        SET(CURLOPT_NOBODY, 1L);
    } else {
        if (net__has_crlf(method) || strchr(method, ' '))
            return -EINVAL;
        if (strcmp(method, "POST") != 0)
            SET(CURLOPT_CUSTOMREQUEST, method);
    }
    if (o->body || strcmp(method, "POST") == 0) {
        /* Borrowed, not copied: the caller keeps it alive until done. */
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
        SET(CURLOPT_POSTFIELDS, o->body ? o->body : "");
        /* No "Expect: 100-continue" round trip (and its 1 s wait on
         * servers that ignore it). */
        rc = add_header(r, "Expect:");
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < o->n_headers; i++) {
        rc = add_header(r, o->headers[i]);
        if (rc < 0)
            return rc;
    }
    if (o->bearer_token) {
        struct buf hb;

        if (net__has_crlf(o->bearer_token))
            return -EINVAL;
        buf_init(&hb, 64 * 1024);
        rc = buf_printf(&hb, "Authorization: Bearer %s", o->bearer_token);
        if (rc == 0)
            rc = add_header(r, hb.data);
        buf_done(&hb);
        if (rc < 0)
            return rc == -E2BIG ? -EINVAL : rc;
    } else if (o->username) {
        SET(CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        SET(CURLOPT_USERNAME, o->username);
        SET(CURLOPT_PASSWORD, o->password ? o->password : "");
    }
    if (tls) {
        if (tls->ca_file)
            SET(CURLOPT_CAINFO, tls->ca_file);
        if (tls->cert_file)
            SET(CURLOPT_SSLCERT, tls->cert_file);
        if (tls->key_file)
            SET(CURLOPT_SSLKEY, tls->key_file);
        if ((tls->ca_pem && set_blob(e, CURLOPT_CAINFO_BLOB, tls->ca_pem) < 0) ||
            (tls->cert_pem && set_blob(e, CURLOPT_SSLCERT_BLOB, tls->cert_pem) < 0) ||
            (tls->key_pem && set_blob(e, CURLOPT_SSLKEY_BLOB, tls->key_pem) < 0))
            return -EINVAL;
        if (tls->cert_pem || tls->key_pem) {
            SET(CURLOPT_SSLCERTTYPE, "PEM");
            SET(CURLOPT_SSLKEYTYPE, "PEM");
        }
        if (tls->min_version || tls->max_version)
            SET(CURLOPT_SSLVERSION,
                tls_version(tls->min_version) | tls_max_version(tls->max_version));
        if (tls->insecure_skip_verify) {
            SET(CURLOPT_SSL_VERIFYPEER, 0L);
            SET(CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (tls->server_name && !o->proxy_url) {
            rc = apply_server_name(r, o->url, tls->server_name);
            if (rc < 0)
                return rc;
        }
    }
    if (o->proxy_url) {
        SET(CURLOPT_PROXY, o->proxy_url);
        if (o->no_proxy)
            SET(CURLOPT_NOPROXY, o->no_proxy);
    } else if (!o->proxy_from_environment) {
        SET(CURLOPT_PROXY, ""); /* libcurl would read http_proxy & co. */
    }
    if (o->n_proxy_headers) {
        rc = proxy_header_list(r, o->proxy_headers, o->n_proxy_headers);
        if (rc < 0)
            return rc;
        SET(CURLOPT_PROXYHEADER, r->proxy_headers);
        SET(CURLOPT_HEADEROPT, (long)CURLHEADER_SEPARATE);
    }
    if (o->auth) {
        rc = net__auth_ops(o->auth)->apply(o->auth, r);
        if (rc < 0)
            return rc;
        if (rc == 1)
            r->park_pending = true;
    }
    if (r->headers)
        SET(CURLOPT_HTTPHEADER, r->headers);
#undef SET
    return 0;
}

int net_request_start(struct net_client *c, const struct net_request_opts *o, net_done_cb cb,
                      void *ud, struct net_request **out)
{
    struct net_request *r;
    int rc;

    if (out)
        *out = NULL;
    if (!c || !o || !o->url || !cb)
        return -EINVAL;
    if (c->closing || !c->multi)
        return -ESHUTDOWN;
    if (c->in_curl)
        return -EDEADLK; /* from on_data: curl_multi_add_handle would recurse */
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->c = c;
    r->cb = cb;
    r->ud = ud;
    r->on_data = o->on_data;
    r->max_response = o->max_response ? o->max_response : DEFAULT_MAX_RESPONSE;
    buf_init(&r->body, r->max_response);
    r->easy = curl_easy_init();
    if (!r->easy) {
        rc = -ENOMEM;
        goto fail;
    }
    rc = setup_easy(r, o);
    if (rc < 0)
        goto fail;
    r->start_ns = clock_mono_ns();
    req_link(c, r);
    if (r->park_pending)
        goto parked;
    /* Fires the timer function (0 ms -> 1 ms), which starts the transfer
     * from the loop; never a socket_action from here. */
    if (curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) {
        req_unlink(c, r);
        rc = -EIO;
        goto fail;
    }
parked:
    if (out)
        *out = r;
    return 0;
fail:
    req_free(r);
    return rc;
}

/* ------------------------------------------------------------- parking */

void net__park_add(struct net__park *p, struct net_request *r, struct net_auth *a)
{
    r->park = p;
    r->park_auth = a;
    r->park_prev = NULL;
    r->park_next = p->head;
    if (p->head)
        p->head->park_prev = r;
    p->head = r;
}

/* A parked request gets its token (or fails): called with the request
 * unparked, from a done callback of another request. */
static void resume(struct net_request *r, const char *auth_line, const char *err)
{
    struct net_client *c = r->c;

    r->park_pending = false;
    if (r->doomed) {
        /* rebuild() is failing this client's requests (the token request
         * among them): fail it here, as rebuild() would. */
        req_unlink(c, r);
        snprintf(r->errbuf, sizeof(r->errbuf), "multi handle failed");
        complete(r, NET_EIO, CURLE_OK);
        return;
    }
    if (!auth_line) {
        req_unlink(c, r);
        snprintf(r->errbuf, sizeof(r->errbuf), "%s", err ? err : "no credentials");
        complete(r, NET_EAUTH, CURLE_OK);
        return;
    }
    if (add_header(r, auth_line) < 0 ||
        curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers) != CURLE_OK || !c->multi ||
        curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) {
        req_unlink(c, r);
        snprintf(r->errbuf, sizeof(r->errbuf), "could not start the request with its token");
        complete(r, NET_EIO, CURLE_OK);
    }
}

void net__park_release(struct net__park *p, const char *auth_line, const char *err)
{
    struct net__park mine = { p->head };
    struct net_request *r;

    /* Move them out first: a done callback may start requests that park
     * again (on `p`) or cancel ones still waiting here (on `mine`). */
    p->head = NULL;
    for (r = mine.head; r; r = r->park_next)
        r->park = &mine;
    while ((r = mine.head) != NULL) {
        struct net_auth *a = r->park_auth;

        r->park_auth = NULL; /* keep the auth alive until the request is on its way */
        park_unlink(r);
        resume(r, auth_line, err);
        net__auth_ops(a)->unref(a);
    }
}

void net_request_cancel(struct net_request *r)
{
    struct net_client *c;

    if (!r || r->completing)
        return; /* inside its own done callback: it is freed right after */
    c = r->c;
    if (c->in_curl)
        return; /* from on_data: documented as not allowed; refuse safely */
    req_unlink(c, r);
    if (c->multi && !r->doomed)
        curl_multi_remove_handle(c->multi, r->easy);
    req_free(r);
}

static void timer_close_cb(uv_handle_t *h)
{
    struct net_client *c = container_of((uv_timer_t *)h, struct net_client, timer);

    c->pending--;
    client_maybe_free(c);
}

void net_client_close(struct net_client *c, void (*cb)(void *ud), void *ud)
{
    struct net_request *r;
    CURLM *m;

    if (!c || c->closing)
        return;
    c->close_cb = cb;
    c->close_ud = ud;
    if (c->in_curl) {
        /* From on_data: tearing the multi down inside libcurl would
         * recurse. action() finishes the job once libcurl has returned. */
        c->close_deferred = true;
        return;
    }
    c->closing = true;
    m = c->multi;
    c->multi = NULL;
    while ((r = c->head) != NULL) {
        req_unlink(c, r);
        if (m && !r->doomed)
            curl_multi_remove_handle(m, r->easy);
        req_free(r);
    }
    /* Cleanup first: it still sends REMOVE for cached connections. Then the
     * timer, then any poll left; everything is freed in close callbacks. */
    if (m)
        curl_multi_cleanup(m);
    close_all_socks(c);
    c->pending++;
    uv_close((uv_handle_t *)&c->timer, timer_close_cb);
}
