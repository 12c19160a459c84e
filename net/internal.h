/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of net/ shared between its sources, its tests and its
 * fuzz target. Not for other modules: use net/net.h.
 *
 * The request parser (server_parse.c) is kept apart from the socket code
 * (server.c) so that the fuzz target can drive exactly the bytes -> request
 * -> response path the server runs, without a loop or a socket. */
#ifndef PROFLET_NET_INTERNAL_H
#define PROFLET_NET_INTERNAL_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "net/net.h"

/* Limits of the status server (see net_server_start in net.h). */
#define NET__MAX_HEAD (16 * 1024)    /* request line + headers */
#define NET__MAX_BODY (1024 * 1024)  /* request body */
#define NET__MAX_CONNS 256
#define NET__IDLE_MS (60 * 1000)
#define NET__HEADER_MS (10 * 1000)
#define NET__MAX_RESP_BODY ((size_t)64 * 1024 * 1024)

/* Parser state for one connection. Embeddable; one request at a time: after
 * a message completes the parser pauses until net__req_next(). */
struct net__req {
    http_parser parser;
    struct buf url;     /* raw request target, capped by NET__MAX_HEAD */
    struct buf body;    /* capped by NET__MAX_BODY */
    struct buf hfield;  /* current header name, only kept if short */
    struct buf hvalue;  /* current header value, only kept if short */
    size_t head_bytes;  /* bytes of request line and headers seen */
    bool in_header;     /* a header name has been seen and not yet finished */
    bool hlong;         /* name or value too long to be one we look at */
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
    bool complete;      /* a full request waits for dispatch */
    bool keep_alive;    /* valid once complete (or on error: false) */
    int error;          /* HTTP status of a rejected request (400/413/431) */
};

/* Initialises an empty parser. */
void net__req_init(struct net__req *q);
/* Frees its buffers; accepts a zeroed or half-built parser. */
void net__req_done(struct net__req *q);
/* Feeds bytes. Consumes input up to the end of one complete request (then
 * q->complete) or up to an error (then q->error); returns the bytes used. */
size_t net__req_feed(struct net__req *q, const char *p, size_t n);
/* After a complete request: fills `out`. The decoded path is written to
 * `path` (owned by the caller, reset first). Returns 0, or 400 when the
 * target cannot be parsed or decodes to a NUL byte. */
int net__req_get(struct net__req *q, struct net_http_request *out, struct buf *path);
/* Percent-decodes s[0..n) into `out` (room for n bytes; no NUL is added;
 * NULL only measures and checks),
 * '+' to a space when `plus_is_space` (query strings, as HTML forms send
 * them). Returns the decoded length, or -EINVAL for a bad escape or one
 * that decodes to a NUL byte. */
int net__pct_decode(const char *s, size_t n, char *out, bool plus_is_space);
/* Forgets the completed request and un-pauses the parser for the next. */
void net__req_next(struct net__req *q);
/* True if the completed request was HEAD. */
bool net__req_is_head(const struct net__req *q);

/* content_length values of net__resp_head that are not lengths. */
#define NET__LEN_CHUNKED ((size_t)-1) /* "Transfer-Encoding: chunked" */
#define NET__LEN_UNTIL_CLOSE ((size_t)-2) /* no length: the body ends at the close */

/* Writes a response head. `keep_alive_10` adds "Connection: keep-alive" for
 * an HTTP/1.0 client that asked for it; `close` adds "Connection: close". */
int net__resp_head(struct buf *out, int status, const char *content_type, size_t content_length,
                   bool close, bool keep_alive_10);
/* Whether a completed request is a cross-origin browser request with a
 * state-changing method (anything but GET, HEAD and OPTIONS): its
 * Sec-Fetch-Site says cross-site or same-site, or its Origin's host:port
 * differs from its Host. Requests from non-browser clients (no Origin, no
 * Sec-Fetch-Site) pass. */
bool net__req_cross_origin(const struct net__req *q);
/* Standard reason phrase for a status ("Unknown" if none). */
const char *net__reason(int status);

/* An Authorization header's value, "Basic base64(user:password)" (the
 * scheme in any case, spaces after it), -> *user and *pass, malloc'd (the
 * password is the caller's to cleanse). 0, or -1 with both NULL when it is
 * not Basic, not base64, longer than the server keeps (511 bytes), or
 * decodes to no ':' or to a NUL byte. */
int net__auth_parse(const char *value, char **user, char **pass);

/* web.c, for server.c (types spelled as OpenSSL's so that this header
 * needs no OpenSSL include). */
struct ssl_ctx_st;
struct x509_store_ctx_st;
/* The TLS context, or NULL without TLS. */
struct ssl_ctx_st *net__web_ssl(const struct net_web *w);
/* net_web_load from `len` bytes of YAML named `name` (which starts every
 * message), without reading the TLS files it names or building a context
 * (net__web_ssl gives NULL): the YAML layer alone, for the fuzz target. */
int net__web_load_string(const char *text, size_t len, const char *name, struct net_web **out,
                         char *err, size_t errlen);
/* The i-th basic_auth_users name and (in *hash, if not NULL) its hash, or
 * NULL past the last. */
const char *net__web_user(const struct net_web *w, unsigned i, const char **hash);
/* The bcrypt hash of a user, or NULL. */
const char *net__web_hash(const struct net_web *w, const char *user);
/* Whether `password` matches `hash` (bcrypt: slow, run off the loop). */
bool net__web_verify(const char *password, const char *hash);
/* What an unknown user's password is checked against (auth on only): a
 * bcrypt setting of the configured cost that no password matches. */
const char *net__web_dummy_hash(const struct net_web *w);
/* Verify callback that accepts any client certificate (RequestClientCert,
 * RequireAnyClientCert). */
int net__web_accept_any_cert(int ok, struct x509_store_ctx_st *x);

/* --- requests and the auth runtime (http.c <-> auth.c) ---------------- */

/* A list of requests waiting for an oauth2 token. Each holds a reference to
 * the auth, dropped when it leaves the list (resumed, cancelled, closed). */
struct net__park {
    struct net_request *head;
};

/* Appends "Name: value" to a request's headers (before it starts); -EINVAL
 * for CR or LF. */
int net__request_add_header(struct net_request *r, const char *line);

/** True when `s` (NULL: false) holds CR or LF: text that would end a header
 * line early, refused wherever such text is set or checked. */
bool net__has_crlf(const char *s);
/* The client a request belongs to. */
struct net_client *net__request_client(const struct net_request *r);
/* Marks `r` as the token request of `a`: if it is freed without its done
 * callback (cancel, client close), the auth's fetch_gone is called. */
void net__request_set_token_for(struct net_request *r, struct net_auth *a);
/* Parks a request that is set up but not started; takes a reference on `a`. */
void net__park_add(struct net__park *p, struct net_request *r, struct net_auth *a);
/* Empties `p`: each request gets the header `auth_line` and starts, or (NULL)
 * completes with NET_EAUTH and `err`. Done callbacks run from here: call it
 * only where they may (a done callback, never inside libcurl). */
void net__park_release(struct net__park *p, const char *auth_line, const char *err);

/* What http.c asks of an auth (auth.c), as a const table so that the two
 * files do not call each other: every struct net_auth starts with a
 * pointer to it. */
struct net__auth_ops {
    /* Adds the auth's headers to `r` (from setup); returns 0 when the
     * request can start, 1 when it must wait for a token (the auth has
     * parked it) or a negative errno. */
    int (*apply)(struct net_auth *a, struct net_request *r);
    /* Drops a parked request's reference. */
    void (*unref)(struct net_auth *a);
    /* The token request was freed without its callback (cancelled). */
    void (*fetch_gone)(struct net_auth *a);
};

static inline const struct net__auth_ops *net__auth_ops(const struct net_auth *a)
{
    return *(const struct net__auth_ops *const *)a;
}

/* Parses a token endpoint's JSON answer (`len` bytes, RFC 6749 5.1):
 * 0 with `*line` = "Authorization: TYPE TOKEN" (owned by the caller) and
 * `*expires_in` (seconds, 0 if absent), or -EINVAL (no usable token) or
 * -ENOMEM. oauth2_token.c; pure. */
int net__oauth2_token_parse(const char *body, size_t len, char **line, int64_t *expires_in);

/* Test hook: makes the next curl_multi_socket_action() call of `c` behave as
 * if it had failed, to exercise the multi-handle rebuild. */
void net__client_fail_next_action(struct net_client *c);

#endif
