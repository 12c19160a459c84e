/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of net/ shared between its sources, its tests and its
 * fuzz target (the oauth2 token parser). Not for other modules: use
 * net/net.h. */
#ifndef PROFLET_NET_INTERNAL_H
#define PROFLET_NET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "net/net.h"

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
