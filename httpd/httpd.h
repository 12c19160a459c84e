/* SPDX-License-Identifier: Apache-2.0 */
/** httpd: a small HTTP/1.1 server for the loop (the status server), on
 * http-parser, with TLS and basic auth from a web configuration file in
 * exporter-toolkit's format (docs/design.md "HTTP server").
 *
 * Loop thread only: the handler, stream producers and every call here run
 * on the loop thread (password checks run on threads of their own, inside
 * the module). The server and the web configuration are opaque. */
#ifndef PROFLET_HTTPD_H
#define PROFLET_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"

/* ------------------------------------------------------------- requests */

/** A parsed request, valid during the handler call only. */
struct httpd_request {
    const char *method;
    const char *path;  /**< decoded path without query */
    const char *query; /**< raw query string ("" if none) */
    const char *body;
    size_t body_len;
    const char *user; /**< the basic-auth user the web config accepted, or NULL */
};

/** Produces the next part of a streamed answer: appends about `chunk`
 * bytes to `out` (its hard cap is 1 MiB) and returns 1 if more follows, 0
 * when this was the last part, HTTPD_STREAM_PARKED when the next part is
 * not ready (work on the pool is making it: the producer calls
 * httpd_resume() once it is), or a negative errno to abort (the connection
 * is then closed, as the head is already sent). Called on the loop
 * thread, one call per turn of the server, only while the client keeps
 * reading. */
typedef int (*httpd_stream_fn)(struct buf *out, size_t chunk, void *state);
#define HTTPD_STREAM_PARKED 2

/** The handler fills this. `body` is pre-initialised (cap 64 MiB). A
 * handler whose answer may be large sets `stream` instead of filling the
 * body: the server then sends the head (chunked transfer encoding) and
 * calls `stream` whenever the connection has room, never building the
 * answer whole. `stream_free` (may be NULL) gets `stream_state` once the
 * stream ends or its connection closes, whichever comes first. */
struct httpd_response {
    int status;               /**< default 200 */
    const char *content_type; /**< default "text/plain; charset=utf-8"; static string */
    struct buf body;
    httpd_stream_fn stream;
    void *stream_state;
    void (*stream_free)(void *state);
    /** Set by a handler that answers later, with httpd_finish(s, later,
     * ...): nothing is written now (status, body and stream are ignored),
     * and the connection is neither read nor served until then; the idle
     * timeout still closes it. The server gives `later` back through
     * `later_free` exactly once: after httpd_finish has written the
     * answer, or when the connection closes first (the handler must then
     * forget it). */
    void *later;
    void (*later_free)(void *later);
};

/** The value of the first `key` in a raw query string, percent-decoded
 * with '+' as a space, as Go's url.ParseQuery reads it (a bare key gives
 * ""; a pair whose name or value has a bad escape or a %00 is skipped).
 * Returns 1 and the value in `val`, 0 when absent, -E2BIG when the value
 * does not fit in `vlen` bytes with its NUL (`val` untouched). */
int httpd_query_get(const char *query, const char *key, char *val, size_t vlen);
/** Keys httpd_query_get() looks up are shorter than this. */
#define HTTPD_QUERY_MAX_KEY 64

/** Called once per request on the loop thread; answers synchronously. */
typedef void (*httpd_handler)(const struct httpd_request *req, struct httpd_response *resp,
                              void *ud);

/* ------------------------------------------------------------ web config */

/** The web configuration of a status server (--web.config.file, in
 * exporter-toolkit's format): TLS and basic-auth users. Immutable,
 * reference counted. */
struct httpd_web;
/** Loads and checks a web configuration file: builds the TLS context
 * (certificate, key, client CA, client_auth_type, min/max_version, cipher
 * suites, curves) and checks that every password is a bcrypt hash of a
 * cost from 4 to 12. 0 or a negative errno with
 * "FILE:LINE:COL: ..." or the TLS error in `err`. */
int httpd_web_load(const char *path, struct httpd_web **out, char *err, size_t errlen);
/** Takes a reference (NULL is fine); returns `w`. */
struct httpd_web *httpd_web_ref(struct httpd_web *w);
/** Drops a reference (NULL is fine). */
void httpd_web_unref(struct httpd_web *w);
/** Whether it asks for TLS / for basic auth. */
bool httpd_web_tls(const struct httpd_web *w);
bool httpd_web_auth(const struct httpd_web *w);

/* ---------------------------------------------------------------- server */

struct httpd;

/** Checks a listen address without binding it: "host:port", "[v6]:port"
 * or ":port" with a numeric host (or "localhost") and a port in 0..65535.
 * Returns 0, or -EINVAL with a message in `err`. */
int httpd_check_addr(const char *addr, char *err, size_t errlen);

/** What a server is made of. Borrowed for the httpd_new call only, except
 * `ud` (given to every handler call) and `web` (of which the server takes
 * a reference). */
struct httpd_opts {
    uv_loop_t *loop;       /**< the loop it runs on; required */
    const char *addr;      /**< where to listen (see httpd_check_addr) */
    httpd_handler handler; /**< called once per request; required */
    void *ud;              /**< the handler's */
    /** A request must be received whole within this time of its first
     * byte (or of the accept); 0: 10 s. */
    uint64_t header_timeout_ms;
    /** An idle keep-alive connection, or one whose answer is not being
     * read, closes after this; 0: 60 s. */
    uint64_t idle_timeout_ms;
    /** TLS and basic auth (NULL: plain HTTP, no auth). With basic-auth
     * users every request needs valid credentials (else 401); passwords
     * are checked on threads of their own, fairly across client addresses
     * (429 past a few waiting per address), a verified (user, password) is
     * remembered, and closing the server does not wait for a check still
     * running. */
    struct httpd_web *web;
};

/** Makes a server on `o->loop` listening on `o->addr`. Requests larger than
 * 1 MiB (headers 16 KiB) get 413/431. A request must arrive whole within
 * the header timeout of its first byte or of the accept; an idle
 * keep-alive connection, or one whose answer makes no progress, closes after
 * the idle timeout. At most 256 connections: at the limit a new one
 * evicts the oldest connection that is idle or still sending its request.
 * While a connection has more than 64 KiB of answers unsent it is neither
 * read nor answered. Requests and stream parts are served in turns of at
 * most about 2 ms so the rest of the loop keeps its timing. Cross-origin
 * browser requests with a method other than GET, HEAD or OPTIONS get 403.
 * Returns 0 and the server in `*out` (closed with httpd_close), or a
 * negative errno with `*out` NULL and, in `err`, what went wrong, the
 * address included ("listen on 127.0.0.1:4100: address already in use"). */
int httpd_new(const struct httpd_opts *o, struct httpd **out, char *err, size_t errlen);
/** The bound port (useful with port 0). */
int httpd_port(const struct httpd *s);
/** Answers the request deferred with `later` (struct httpd_response):
 * `status` and `text` (copied; "text/plain; charset=utf-8" unless
 * `content_type`), then `later` goes back through its free function. A
 * token whose connection has closed is no longer known: nothing happens. */
void httpd_finish(struct httpd *s, void *later, int status, const char *content_type,
                  const char *text);
/** Wakes the parked stream whose state is `stream_state`: its function is
 * called again in a coming turn. Nothing happens if no connection streams
 * it any more (its stream_free has run then). Loop thread. */
void httpd_resume(struct httpd *s, const void *stream_state);
/** Why a connection of the status server was closed. */
enum httpd_close_reason {
    HTTPD_CLOSE_DONE,          /**< by the server after its last answer, or at shutdown */
    HTTPD_CLOSE_CLIENT_CLOSED, /**< the client closed or half-closed its side */
    HTTPD_CLOSE_RESET,         /**< a read or write failed (reset, broken pipe) */
    HTTPD_CLOSE_TIMEOUT,       /**< header or idle timeout */
    HTTPD_CLOSE_EVICTED,       /**< made room for a new connection at the limit */
    HTTPD_CLOSE_ERROR,         /**< TLS failure or out of memory */
    HTTPD_CLOSE_N
};
/** The label value of a reason ("done", "client_closed"...). */
const char *httpd_close_reason_name(enum httpd_close_reason r);
/** Connections of a status server since it started. */
struct httpd_stats {
    uint64_t accepted;
    uint64_t open; /**< accepted and not closing yet */
    uint64_t closed[HTTPD_CLOSE_N];
};
/** Fills `out`. Loop thread. */
void httpd_get_stats(const struct httpd *s, struct httpd_stats *out);
/** Closes the listener and every connection; `cb` runs when all are closed. */
void httpd_close(struct httpd *s, void (*cb)(void *ud), void *ud);

#endif
