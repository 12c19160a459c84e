/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of httpd/ shared between its sources, its tests and
 * its fuzz targets. Not for other modules: use httpd/httpd.h.
 *
 * The request parser (parse.c) is kept apart from the socket code
 * (server.c) so that the fuzz target can drive exactly the bytes -> request
 * -> response path the server runs, without a loop or a socket. */
#ifndef PROFLET_HTTPD_INTERNAL_H
#define PROFLET_HTTPD_INTERNAL_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/buf.h"
#include "httpd/httpd.h"

/* OpenSSL's and the socket API's types, spelled as they spell them, so
 * that this header needs neither's include. */
struct ssl_ctx_st;
struct x509_store_ctx_st;
struct sockaddr;

/* Limits of the status server (see httpd_new in httpd.h). */
#define HTTPD__MAX_HEAD (16 * 1024)   /* request line + headers */
#define HTTPD__MAX_BODY (1024 * 1024) /* request body */
#define HTTPD__MAX_CONNS 256
#define HTTPD__IDLE_MS (60 * 1000)
#define HTTPD__HEADER_MS (10 * 1000)
#define HTTPD__MAX_RESP_BODY ((size_t)64 * 1024 * 1024)

/* --- parse.c: requests and response heads ------------------------------ */

/* Parser state for one connection. Embeddable; one request at a time: after
 * a message completes the parser pauses until httpd__req_next(). */
struct httpd__req {
    http_parser parser;
    struct buf url;    /* raw request target, capped by HTTPD__MAX_HEAD */
    struct buf body;   /* capped by HTTPD__MAX_BODY */
    struct buf hfield; /* current header name, only kept if short */
    struct buf hvalue; /* current header value, only kept if short */
    size_t head_bytes; /* bytes of request line and headers seen */
    bool in_header;    /* a header name has been seen and not yet finished */
    bool hlong;        /* name or value too long to be one we look at */
    bool last_was_value;
    bool expect_continue; /* "Expect: 100-continue" was sent */
    /* The headers the access checks read ("" if absent; a value too long
     * to keep sets its *_long flag). */
    char origin[256];
    char host[256];
    char fetch_site[32];
    char authorization[512];
    bool has_origin, origin_long, host_long, authorization_long;
    bool headers_done;
    bool complete;   /* a full request waits for dispatch */
    bool keep_alive; /* valid once complete (or on error: false) */
    int error;       /* HTTP status of a rejected request (400/413/431) */
};

/* Initialises an empty parser. */
void httpd__req_init(struct httpd__req *q);
/* Frees its buffers; accepts a zeroed or half-built parser. */
void httpd__req_done(struct httpd__req *q);
/* Feeds bytes. Consumes input up to the end of one complete request (then
 * q->complete) or up to an error (then q->error); returns the bytes used. */
size_t httpd__req_feed(struct httpd__req *q, const char *p, size_t n);
/* After a complete request: fills `out`. The decoded path is written to
 * `path` (owned by the caller, reset first). Returns 0, or 400 when the
 * target cannot be parsed or decodes to a NUL byte. */
int httpd__req_get(struct httpd__req *q, struct httpd_request *out, struct buf *path);
/* Percent-decodes s[0..n) into `out` (room for n bytes; no NUL is added;
 * NULL only measures and checks),
 * '+' to a space when `plus_is_space` (query strings, as HTML forms send
 * them). Returns the decoded length, or -EINVAL for a bad escape or one
 * that decodes to a NUL byte. */
int httpd__pct_decode(const char *s, size_t n, char *out, bool plus_is_space);
/* Forgets the completed request and un-pauses the parser for the next. */
void httpd__req_next(struct httpd__req *q);
/* True if the completed request was HEAD. */
bool httpd__req_is_head(const struct httpd__req *q);

/* content_length values of httpd__resp_head that are not lengths. */
#define HTTPD__LEN_CHUNKED ((size_t)-1)     /* "Transfer-Encoding: chunked" */
#define HTTPD__LEN_UNTIL_CLOSE ((size_t)-2) /* no length: the body ends at the close */

/* Writes a response head. `keep_alive_10` adds "Connection: keep-alive" for
 * an HTTP/1.0 client that asked for it; `close` adds "Connection: close". */
int httpd__resp_head(struct buf *out, int status, const char *content_type, size_t content_length,
                     bool close, bool keep_alive_10);
/* Whether a completed request is a cross-origin browser request with a
 * state-changing method (anything but GET, HEAD and OPTIONS): its
 * Sec-Fetch-Site says cross-site or same-site, or its Origin's host:port
 * differs from its Host. Requests from non-browser clients (no Origin, no
 * Sec-Fetch-Site) pass. */
bool httpd__req_cross_origin(const struct httpd__req *q);
/* Standard reason phrase for a status ("Unknown" if none). */
const char *httpd__reason(int status);

/* --- web.c: the web config, for server.c and auth.c -------------------- */

/* The TLS context, or NULL without TLS. */
struct ssl_ctx_st *httpd__web_ssl(const struct httpd_web *w);
/* httpd_web_load from `len` bytes of YAML named `name` (which starts every
 * message), without reading the TLS files it names or building a context
 * (httpd__web_ssl gives NULL): the YAML layer alone, for the fuzz target. */
int httpd__web_load_string(const char *text, size_t len, const char *name, struct httpd_web **out,
                           char *err, size_t errlen);
/* The i-th basic_auth_users name and (in *hash, if not NULL) its hash, or
 * NULL past the last. */
const char *httpd__web_user(const struct httpd_web *w, unsigned i, const char **hash);
/* The bcrypt hash of a user, or NULL. */
const char *httpd__web_hash(const struct httpd_web *w, const char *user);
/* What an unknown user's password is checked against (auth on only): a
 * bcrypt setting of the configured cost that no password matches. */
const char *httpd__web_dummy_hash(const struct httpd_web *w);
/* Verify callback that accepts any client certificate (RequestClientCert,
 * RequireAnyClientCert). */
int httpd__web_accept_any_cert(int ok, struct x509_store_ctx_st *x);

/* --- tls.c: TLS over memory BIOs ---------------------------------------- */

/* A server-side TLS session of one connection: an SSL with a memory BIO
 * each way. Loop thread. */
struct httpd__tls;

/* A session on `ctx`, in accept state (the handshake runs as the first
 * ciphertext comes in). NULL when out of memory. */
struct httpd__tls *httpd__tls_new(struct ssl_ctx_st *ctx);
/* Frees a session (NULL is fine). */
void httpd__tls_free(struct httpd__tls *t);
/* Ciphertext read from the socket, for the read pump. 0, or -EIO when the
 * read BIO cannot take it. */
int httpd__tls_feed(struct httpd__tls *t, const char *p, size_t n);
/* What httpd__tls_read returns when it has no plaintext. */
enum {
    HTTPD__TLS_WANT = 0,    /* more ciphertext is needed */
    HTTPD__TLS_CLOSED = -1, /* the client ended the session (close_notify) */
    HTTPD__TLS_FAILED = -2, /* a failed handshake or a bad record */
};
/* The read pump: decrypts what was fed into `buf` (at most `len` bytes),
 * running the handshake on the way. Returns the plaintext's length (>0)
 * or one of the codes above. What it makes OpenSSL send (handshake
 * messages, alerts) waits for httpd__tls_flush. */
int httpd__tls_read(struct httpd__tls *t, char *buf, size_t len);
/* Encrypts `n` bytes of answer (`n` > 0) into the write BIO. 0 or
 * -EPROTO. */
int httpd__tls_write(struct httpd__tls *t, const void *p, size_t n);
/* Queues a close_notify (sent by the next flush). */
void httpd__tls_shutdown(struct httpd__tls *t);
/* The write pump: hands each chunk of pending ciphertext to `sink`, which
 * owns it (malloc'd) whatever it returns. Stops at the first negative
 * return of `sink` and returns it; -ENOMEM when a chunk cannot be had; 0
 * once the write BIO is empty. */
int httpd__tls_flush(struct httpd__tls *t, int (*sink)(char *p, size_t n, void *ud), void *ud);

/* --- auth.c: Basic auth ------------------------------------------------- */

/* An Authorization header's value, "Basic base64(user:password)" (the
 * scheme in any case, spaces after it), -> *user and *pass, malloc'd (the
 * password is the caller's to cleanse). 0, or -1 with both NULL when it is
 * not Basic, not base64, longer than the server keeps (511 bytes), or
 * decodes to no ':' or to a NUL byte. */
int httpd__basic_parse(const char *value, char **user, char **pass);
/* Whether `password` matches `hash` (bcrypt: slow, run off the loop). */
bool httpd__auth_verify(const char *password, const char *hash);

#define HTTPD__AUTH_CACHE 32 /* verified credentials remembered */

struct httpd__auth_hub;
struct httpd__auth_peer;
struct httpd__auth_job;
struct httpd__auth_wait;

/* A check's verdict for the request of `w`, on the loop: `ok` when its
 * credentials are good. `w` is no longer waiting then. */
typedef void (*httpd__auth_done_fn)(struct httpd__auth_wait *w, bool ok, void *ud);

/* The server's Basic-auth runtime, embedded in the server: the cache of
 * verified credentials, the per-address queues and the checks' threads.
 * Fields are auth.c's. */
struct httpd__auth {
    uv_loop_t *loop;
    httpd__auth_done_fn done;
    void *ud;
    struct httpd__auth_hub *hub;    /* NULL until the first check */
    uv_async_t async;               /* finished checks; open while hub is set */
    struct httpd__auth_peer *peers; /* client addresses, NULL until the first check */
    unsigned running;
    uint64_t serial;
    unsigned char cache[HTTPD__AUTH_CACHE][32]; /* verified credentials (SHA-256) */
    unsigned cache_next, cached;
    bool closing;
    void (*closed)(void *ud);
};

/* A connection's part in auth, embedded in it. Zeroed; `addr` set at
 * accept (httpd__auth_set_peer). Fields are auth.c's, except that the
 * server reads `user` (the accepted user) and `waiting`. */
struct httpd__auth_wait {
    char *user, *pass;                   /* the request's credentials (password cleansed) */
    bool waiting;                        /* its check is queued or running: done() follows */
    unsigned char addr[16];              /* client address: IPv6, v4-mapped; IPv6 cut to /64 */
    const struct httpd_web *web;         /* the connection's, borrowed */
    STAILQ_ENTRY(httpd__auth_wait) link; /* in its address queue */
    struct httpd__auth_peer *queued_at;  /* the address queue it waits in, or NULL */
    struct httpd__auth_job *job;         /* its running check, or NULL */
};

/* Sets up `a` (nothing allocated yet); `done` gets every verdict that
 * waited. */
void httpd__auth_init(struct httpd__auth *a, uv_loop_t *loop, httpd__auth_done_fn done, void *ud);
/* Checks the credentials of a parsed request (its Authorization value, or
 * `too_long` when the parser could not keep it) against `web`: 0 when
 * they are known good, -1 when they are bad, -2 when the address has too
 * many checks waiting, 1 when the check runs off the loop (`done` follows,
 * possibly before this returns). */
int httpd__auth_begin(struct httpd__auth *a, struct httpd__auth_wait *w,
                      const struct httpd_web *web, const char *authorization, bool too_long);
/* The connection closes: `w` leaves its queue, its running check forgets
 * it (no `done`). */
void httpd__auth_cancel(struct httpd__auth_wait *w);
/* Frees the credentials `w` holds. */
void httpd__auth_wait_done(struct httpd__auth_wait *w);
/* Keys `w` by its client's address (NULL: unknown, all zero). */
void httpd__auth_set_peer(struct httpd__auth_wait *w, const struct sockaddr *sa);
/* The server closes: no more checks start, running ones go on alone and
 * their results are dropped. True when `closed(ud)` will run once the
 * runtime's handle has closed; false when it has none. */
bool httpd__auth_close(struct httpd__auth *a, void (*closed)(void *ud));
/* Frees what is left, once closed. */
void httpd__auth_done(struct httpd__auth *a);

#endif
