/* SPDX-License-Identifier: Apache-2.0 */
/* The request-time side of the HTTP client settings (see net.h "auth"):
 * the `authorization` header, the `http-headers` and the oauth2
 * client-credentials token (docs/design.md "The libcurl-libuv bridge").
 *
 * Threading. Loop thread only. Files are net_secrets, re-read on the workq;
 * the token comes from a request of its own in the libcurl multi, so
 * nothing here blocks the loop.
 *
 * The token. Requests that find no valid token are parked until the token
 * request completes; a valid token nearing its end is refreshed in the
 * background while requests go on using it.
 *
 * Ownership. The owner holds one reference; the token request and each
 * parked request hold one more, so an owner may let go (a reload) while
 * requests still wait: they need only the token, which this object owns.
 * The settings are borrowed from the owner and used only while it holds
 * on. Secrets (credentials, header secrets, the client secret, the token)
 * never go into an error message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "common/clock.h"
#include "net/internal.h"
#include "net/net.h"

#define TOKEN_TIMEOUT_MS 10000
#define TOKEN_MAX_RESPONSE (64 * 1024)
#define TOKEN_RETRY_MS 1000

struct net_auth {
    const struct net__auth_ops *ops; /* first: see internal.h */
    uv_loop_t *loop;
    struct workq *q;
    const struct net_http_cfg *h; /* NULL once the owner let go */
    unsigned refs;
    struct net_secret *credentials; /* authorization */
    struct net_secret **files;      /* http-headers files, in config order */
    size_t n_files;
    struct net_secret *client_secret; /* oauth2 */
    /* the token */
    char *token_line;        /* "Authorization: TYPE TOKEN", or NULL */
    uint64_t valid_until_ms; /* monotonic; 0: no expiry */
    uint64_t refresh_at_ms;  /* background refresh from here; 0: never */
    struct net_request *fetch;
    struct buf form;   /* the token request's body, borrowed by libcurl */
    char *user, *pass; /* its client authentication, form-encoded */
    struct net__park parked;
    char error[256];
};

static void auth_destroy(struct net_auth *a)
{
    net_secret_free(a->credentials);
    for (size_t i = 0; i < a->n_files; i++)
        net_secret_free(a->files[i]);
    free(a->files);
    net_secret_free(a->client_secret);
    free(a->token_line);
    buf_done(&a->form);
    free(a->user);
    free(a->pass);
    free(a);
}

static void auth_unref(struct net_auth *a)
{
    if (a && --a->refs == 0)
        auth_destroy(a);
}

static int auth_apply(struct net_auth *a, struct net_request *r);
static void auth_fetch_gone(struct net_auth *a);

static const struct net__auth_ops auth_ops = {
    .apply = auth_apply,
    .unref = auth_unref,
    .fetch_gone = auth_fetch_gone,
};

struct net_auth *net_auth_new(uv_loop_t *loop, struct workq *q, const struct net_http_cfg *h)
{
    struct net_auth *a = calloc(1, sizeof(*a));
    size_t nf = 0, k = 0;

    if (!a)
        return NULL;
    a->ops = &auth_ops;
    a->loop = loop;
    a->q = q;
    a->h = h;
    a->refs = 1;
    buf_init(&a->form, 64 * 1024);
    if (h->authorization && (h->authorization->credentials || h->authorization->credentials_file) &&
        !(a->credentials = net_secret_new(loop, q, h->authorization->credentials,
                                          h->authorization->credentials_file, 0)))
        goto oom;
    for (unsigned i = 0; i < h->n_http_headers; i++)
        nf += h->http_headers[i].n_files;
    if (nf && !(a->files = calloc(nf, sizeof(*a->files))))
        goto oom;
    for (unsigned i = 0; i < h->n_http_headers; i++) {
        for (unsigned j = 0; j < h->http_headers[i].n_files; j++) {
            if (!(a->files[k++] = net_secret_new(loop, q, NULL, h->http_headers[i].files[j], 0)))
                goto oom;
            a->n_files = k;
        }
    }
    if (h->oauth2 && (h->oauth2->client_secret || h->oauth2->client_secret_file) &&
        !(a->client_secret =
              net_secret_new(loop, q, h->oauth2->client_secret, h->oauth2->client_secret_file, 0)))
        goto oom;
    return a;
oom:
    auth_destroy(a);
    return NULL;
}

void net_auth_free(struct net_auth *a)
{
    if (!a)
        return;
    a->h = NULL;
    /* A background refresh nobody waits for is not worth finishing. */
    if (a->fetch && !a->parked.head)
        net_request_cancel(a->fetch);
    auth_unref(a);
}

const char *net_auth_error(const struct net_auth *a)
{
    const char *e;

    if (!a)
        return NULL;
    if (a->error[0])
        return a->error;
    if ((e = net_secret_error(a->credentials)) || (e = net_secret_error(a->client_secret)))
        return e;
    for (size_t i = 0; i < a->n_files; i++) {
        if ((e = net_secret_error(a->files[i])))
            return e;
    }
    return NULL;
}

void net_auth_expire(struct net_auth *a)
{
    if (!a)
        return;
    free(a->token_line);
    a->token_line = NULL;
    net_secret_expire(a->credentials);
    net_secret_expire(a->client_secret);
    for (size_t i = 0; i < a->n_files; i++)
        net_secret_expire(a->files[i]);
}

/* ----------------------------------------------------------- the token */

static void set_error(struct net_auth *a, const char *fmt, const char *arg)
{
    snprintf(a->error, sizeof(a->error), fmt, arg);
}

/* Takes the token out of the answer. Returns 0, or -1 with a->error set. */
static int take_token(struct net_auth *a, const struct net_response *resp)
{
    uint64_t now = clock_mono_ms(), life;
    int64_t expires_in;
    char *line;

    if (net__oauth2_token_parse(resp->body.data, resp->body.len, &line, &expires_in) < 0) {
        set_error(a, "oauth2: the token endpoint's answer has no usable access_token%s", "");
        return -1;
    }
    free(a->token_line);
    a->token_line = line;
    a->error[0] = '\0';
    if (expires_in > 0 && expires_in < INT32_MAX) {
        life = (uint64_t)expires_in * 1000;
        a->valid_until_ms = now + life - (life / 4 < 10000 ? life / 4 : 10000);
        a->refresh_at_ms = now + life - (life / 2 < 60000 ? life / 2 : 60000);
    } else {
        a->valid_until_ms = a->refresh_at_ms = 0; /* never expires */
    }
    return 0;
}

static void token_done(struct net_request *req, struct net_response *resp, void *ud)
{
    struct net_auth *a = ud;
    char what[64];

    (void)req;
    a->fetch = NULL;
    if (resp->result < 0) {
        /* The transfer's own message names hosts and errors, no secret. */
        set_error(a, "oauth2: token request failed: %.200s", resp->error);
    } else if (resp->status != 200) {
        snprintf(what, sizeof(what), "%ld", resp->status);
        set_error(a, "oauth2: the token endpoint answered HTTP %s", what);
    } else {
        take_token(a, resp);
    }
    if (a->error[0] && a->token_line) {
        /* The token in hand is still good: retry the refresh later. */
        a->refresh_at_ms = clock_mono_ms() + TOKEN_RETRY_MS;
    }
    net__park_release(&a->parked, a->error[0] ? NULL : a->token_line, a->error);
    auth_unref(a); /* the token request's reference */
}

static void auth_fetch_gone(struct net_auth *a)
{
    a->fetch = NULL;
    auth_unref(a);
}

static char *form_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s ? s : "", 0), *out;

    if (!e)
        return NULL;
    out = strdup(e);
    curl_free(e);
    return out;
}

static int form_add(struct buf *b, const char *k, const char *v)
{
    char *ek = form_escape(k), *ev = form_escape(v);
    int rc = ek && ev ? buf_printf(b, "%s%s=%s", b->len ? "&" : "", ek, ev) : -ENOMEM;

    free(ek);
    free(ev);
    return rc;
}

/* Starts the token request on `c` (client credentials grant, RFC 6749
 * 4.4; the client authenticates with HTTP Basic, 2.3.1). */
static int start_fetch(struct net_auth *a, struct net_client *c)
{
    const struct net_oauth2_cfg *o = a->h->oauth2;
    const char *secret = net_secret_get(a->client_secret);
    static const char *const hdrs[] = { "Content-Type: application/x-www-form-urlencoded",
                                        "Accept: application/json" };
    struct net_request_opts ro;
    struct net_tls tls;
    struct buf scope;
    int rc = 0;

    if (a->client_secret && !secret) {
        set_error(a, "oauth2: no client secret: %.200s", net_secret_error(a->client_secret));
        return -EACCES;
    }
    buf_reset(&a->form);
    buf_init(&scope, 64 * 1024);
    rc = form_add(&a->form, "grant_type", "client_credentials");
    for (unsigned i = 0; rc == 0 && i < o->n_scopes; i++)
        rc = buf_printf(&scope, "%s%s", i ? " " : "", o->scopes[i]);
    if (rc == 0 && o->n_scopes)
        rc = form_add(&a->form, "scope", scope.data);
    for (unsigned i = 0; rc == 0 && i < o->n_endpoint_params; i++)
        rc = form_add(&a->form, o->endpoint_params[i].key, o->endpoint_params[i].value);
    buf_done(&scope);
    free(a->user);
    free(a->pass);
    a->user = form_escape(o->client_id);
    a->pass = form_escape(secret);
    if (rc < 0 || !a->user || !a->pass)
        return rc < 0 ? rc : -ENOMEM;

    memset(&ro, 0, sizeof(ro));
    net_tls_from_cfg(&tls, &o->tls);
    ro.method = "POST";
    ro.url = o->token_url;
    ro.headers = hdrs;
    ro.n_headers = 2;
    ro.body = a->form.data;
    ro.body_len = a->form.len;
    ro.max_response = TOKEN_MAX_RESPONSE;
    ro.timeout_ms = TOKEN_TIMEOUT_MS;
    ro.username = a->user;
    ro.password = a->pass;
    ro.tls = &tls;
    ro.proxy_url = o->proxy_url;
    ro.no_proxy = o->no_proxy;
    ro.proxy_from_environment = o->proxy_from_environment;
    ro.proxy_headers = o->proxy_connect_header;
    ro.n_proxy_headers = o->n_proxy_connect_header;
    ro.follow_redirects = false;
    rc = net_request_start(c, &ro, token_done, a, &a->fetch);
    if (rc < 0) {
        set_error(a, "oauth2: cannot start the token request: %s", strerror(-rc));
        return rc;
    }
    a->refs++;
    net__request_set_token_for(a->fetch, a);
    return 0;
}

/* ------------------------------------------------------------- headers */

static int add_line(struct net_request *r, struct buf *b, const char *name, const char *sep,
                    const char *value)
{
    int rc;

    buf_reset(b);
    rc = buf_printf(b, "%s%s%s", name, sep, value);
    if (rc == 0)
        rc = net__request_add_header(r, b->data);
    return rc == -E2BIG ? -EINVAL : rc;
}

static int auth_apply(struct net_auth *a, struct net_request *r)
{
    const struct net_http_cfg *h = a->h;
    struct buf b;
    size_t f = 0;
    int rc = 0;

    if (!h)
        return 0;
    buf_init(&b, 64 * 1024);
    if (a->credentials) {
        const char *cred = net_secret_get(a->credentials);

        /* An unreadable file: no header, as with bearer-token-file; the
         * server's 401 and net_auth_error() tell. */
        if (cred) {
            buf_reset(&b);
            rc = buf_printf(&b, "Authorization: %s %s", h->authorization->type, cred);
            if (rc == 0)
                rc = net__request_add_header(r, b.data);
        }
    }
    for (unsigned i = 0; rc == 0 && i < h->n_http_headers; i++) {
        const struct net_header_cfg *hc = &h->http_headers[i];

        for (unsigned j = 0; rc == 0 && j < hc->n_values; j++)
            rc = add_line(r, &b, hc->name, ": ", hc->values[j]);
        for (unsigned j = 0; rc == 0 && j < hc->n_secrets; j++)
            rc = add_line(r, &b, hc->name, ": ", hc->secrets[j]);
        for (unsigned j = 0; rc == 0 && j < hc->n_files; j++) {
            const char *v = net_secret_get(a->files[f++]);

            if (v)
                rc = add_line(r, &b, hc->name, ": ", v);
        }
    }
    buf_done(&b);
    if (rc < 0 || !h->oauth2)
        return rc == -E2BIG ? -EINVAL : rc;

    uint64_t now = clock_mono_ms();

    if (a->token_line && (!a->valid_until_ms || now < a->valid_until_ms)) {
        if (a->refresh_at_ms && now >= a->refresh_at_ms && !a->fetch)
            start_fetch(a, net__request_client(r)); /* its error shows in net_auth_error */
        return net__request_add_header(r, a->token_line);
    }
    if (!a->fetch && (rc = start_fetch(a, net__request_client(r))) < 0)
        return rc;
    a->refs++;
    net__park_add(&a->parked, r, a);
    return 1;
}
