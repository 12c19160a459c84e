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

#include "common/buf.h"
#include "httpd/httpd.h"

/* Limits of the status server (see httpd_start in httpd.h). */
#define HTTPD__MAX_HEAD (16 * 1024)    /* request line + headers */
#define HTTPD__MAX_BODY (1024 * 1024)  /* request body */
#define HTTPD__MAX_CONNS 256
#define HTTPD__IDLE_MS (60 * 1000)
#define HTTPD__HEADER_MS (10 * 1000)
#define HTTPD__MAX_RESP_BODY ((size_t)64 * 1024 * 1024)

/* Parser state for one connection. Embeddable; one request at a time: after
 * a message completes the parser pauses until httpd__req_next(). */
struct httpd__req {
    http_parser parser;
    struct buf url;     /* raw request target, capped by HTTPD__MAX_HEAD */
    struct buf body;    /* capped by HTTPD__MAX_BODY */
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
#define HTTPD__LEN_CHUNKED ((size_t)-1) /* "Transfer-Encoding: chunked" */
#define HTTPD__LEN_UNTIL_CLOSE ((size_t)-2) /* no length: the body ends at the close */

/* Writes a response head. `keep_alive_10` adds "Connection: keep-alive" for
 * an HTTP/1.0 client that asked for it; `close` adds "Connection: close". */
int httpd__resp_head(struct buf *out, int status, const char *content_type,
                     size_t content_length, bool close, bool keep_alive_10);
/* Whether a completed request is a cross-origin browser request with a
 * state-changing method (anything but GET, HEAD and OPTIONS): its
 * Sec-Fetch-Site says cross-site or same-site, or its Origin's host:port
 * differs from its Host. Requests from non-browser clients (no Origin, no
 * Sec-Fetch-Site) pass. */
bool httpd__req_cross_origin(const struct httpd__req *q);
/* Standard reason phrase for a status ("Unknown" if none). */
const char *httpd__reason(int status);

/* An Authorization header's value, "Basic base64(user:password)" (the
 * scheme in any case, spaces after it), -> *user and *pass, malloc'd (the
 * password is the caller's to cleanse). 0, or -1 with both NULL when it is
 * not Basic, not base64, longer than the server keeps (511 bytes), or
 * decodes to no ':' or to a NUL byte. */
int httpd__basic_parse(const char *value, char **user, char **pass);

/* web.c, for server.c (types spelled as OpenSSL's so that this header
 * needs no OpenSSL include). */
struct ssl_ctx_st;
struct x509_store_ctx_st;
/* The TLS context, or NULL without TLS. */
struct ssl_ctx_st *httpd__web_ssl(const struct httpd_web *w);
/* httpd_web_load from `len` bytes of YAML named `name` (which starts every
 * message), without reading the TLS files it names or building a context
 * (httpd__web_ssl gives NULL): the YAML layer alone, for the fuzz target. */
int httpd__web_load_string(const char *text, size_t len, const char *name,
                           struct httpd_web **out, char *err, size_t errlen);
/* The i-th basic_auth_users name and (in *hash, if not NULL) its hash, or
 * NULL past the last. */
const char *httpd__web_user(const struct httpd_web *w, unsigned i, const char **hash);
/* The bcrypt hash of a user, or NULL. */
const char *httpd__web_hash(const struct httpd_web *w, const char *user);
/* Whether `password` matches `hash` (bcrypt: slow, run off the loop). */
bool httpd__web_verify(const char *password, const char *hash);
/* What an unknown user's password is checked against (auth on only): a
 * bcrypt setting of the configured cost that no password matches. */
const char *httpd__web_dummy_hash(const struct httpd_web *w);
/* Verify callback that accepts any client certificate (RequestClientCert,
 * RequireAnyClientCert). */
int httpd__web_accept_any_cert(int ok, struct x509_store_ctx_st *x);

#endif
