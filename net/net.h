/* SPDX-License-Identifier: Apache-2.0 */
/** HTTP for the loop: the one libcurl-multi <-> libuv bridge (client), its
 * settings, secrets and request-time auth. The status server is httpd/.
 *
 * Loop thread only. Every callback runs on the loop thread, never from
 * inside a libcurl callback. Response bodies are capped while streaming. */
#ifndef PROFLET_NET_H
#define PROFLET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/workq.h"
#include "conf/conf.h"

/* --------------------------------------------------------- configuration
 * The HTTP client settings of Prometheus' common config, shared by every
 * module that talks HTTP (scraping, Kubernetes API, remote-write). Their
 * keys sit directly in the owner's mapping, as in Prometheus. */

/** TLS versions of min-version / max-version; 0 leaves libcurl's default. */
enum { NET_TLS_DEFAULT = 0, NET_TLS10, NET_TLS11, NET_TLS12, NET_TLS13 };

struct net_tls_cfg {
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *ca;   /**< inline PEM, instead of ca-file */
    char *cert; /**< inline PEM, instead of cert-file */
    char *key;  /**< inline PEM, instead of key-file (a secret) */
    char *server_name;
    char *min_version; /**< "TLS10".."TLS13", or NULL */
    char *max_version;
    bool insecure_skip_verify;
};

struct net_basic_auth_cfg {
    char *username;
    char *password;
    char *password_file;
};

/** `authorization`: the Authorization header "TYPE CREDENTIALS". */
struct net_authorization_cfg {
    char *type; /**< default "Bearer" */
    char *credentials;
    char *credentials_file;
};

/** One `http-headers` entry: every value, secret and file content is sent
 * as one more line of header `name`. */
struct net_header_cfg {
    char *name;
    char **values;
    unsigned n_values;
    char **secrets;
    unsigned n_secrets;
    char **files; /**< re-read like every secret file */
    unsigned n_files;
};

/** The proxy settings, also those of oauth2's own client. */
#define NET_PROXY_CFG_MEMBERS                                                             \
    char *proxy_url;                                                                      \
    char *no_proxy;              /**< hosts, domains, CIDRs reached directly */           \
    bool proxy_from_environment; /**< HTTP(S)_PROXY, NO_PROXY (refused with proxy-url) */ \
    struct conf_param *proxy_connect_header; /**< sent to the proxy (CONNECT) */          \
    unsigned n_proxy_connect_header

/** `oauth2`: the client-credentials grant. */
struct net_oauth2_cfg {
    char *client_id;
    char *client_secret;
    char *client_secret_file;
    char *token_url;
    char **scopes;
    unsigned n_scopes;
    struct conf_kv *endpoint_params;
    unsigned n_endpoint_params;
    struct net_tls_cfg tls; /**< for the token endpoint */
    NET_PROXY_CFG_MEMBERS;
};

/** At most one of basic_auth / bearer_token / bearer_token_file /
 * authorization / oauth2 is set (checked at load). */
struct net_http_cfg {
    struct net_basic_auth_cfg *basic_auth; /**< NULL if absent */
    char *bearer_token;
    char *bearer_token_file;
    struct net_authorization_cfg *authorization; /**< NULL if absent */
    struct net_oauth2_cfg *oauth2;               /**< NULL if absent */
    struct net_header_cfg *http_headers;
    unsigned n_http_headers;
    struct net_tls_cfg tls;
    NET_PROXY_CFG_MEMBERS;
    bool enable_http2;     /**< default true */
    bool follow_redirects; /**< default true */
};

extern const cyaml_schema_field_t net__tls_fields[], net__basic_auth_fields[],
    net__authorization_fields[], net__oauth2_fields[];
extern const cyaml_schema_value_t net__header_entry, net__string_seq;

/** The libcyaml fields of a struct net_http_cfg embedded as member `m` of
 * `S`, to list among the owner's own fields. */
#define NET_HTTP_CFG_FIELDS(S, m)                                                                \
    CYAML_FIELD_MAPPING_PTR("basic-auth", CYAML_FLAG_OPTIONAL, S, m.basic_auth,                  \
                            net__basic_auth_fields),                                             \
        CYAML_FIELD_STRING_PTR("bearer-token", CYAML_FLAG_OPTIONAL, S, m.bearer_token, 0,        \
                               CYAML_UNLIMITED),                                                 \
        CYAML_FIELD_STRING_PTR("bearer-token-file", CYAML_FLAG_OPTIONAL, S, m.bearer_token_file, \
                               0, CYAML_UNLIMITED),                                              \
        CYAML_FIELD_MAPPING_PTR("authorization", CYAML_FLAG_OPTIONAL, S, m.authorization,        \
                                net__authorization_fields),                                      \
        CYAML_FIELD_MAPPING_PTR("oauth2", CYAML_FLAG_OPTIONAL, S, m.oauth2, net__oauth2_fields), \
        CYAML_FIELD_SEQUENCE_COUNT("http-headers", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, S,  \
                                   m.http_headers, m.n_http_headers, &net__header_entry, 0,      \
                                   CYAML_UNLIMITED),                                             \
        CYAML_FIELD_MAPPING("tls-config", CYAML_FLAG_OPTIONAL, S, m.tls, net__tls_fields),       \
        NET__PROXY_CFG_FIELDS(S, m.),                                                            \
        CYAML_FIELD_BOOL("enable-http2", CYAML_FLAG_OPTIONAL, S, m.enable_http2),                \
        CYAML_FIELD_BOOL("follow-redirects", CYAML_FLAG_OPTIONAL, S, m.follow_redirects)

#define NET__PROXY_CFG_FIELDS(S, p)                                                               \
    CYAML_FIELD_STRING_PTR("proxy-url", CYAML_FLAG_OPTIONAL, S, p proxy_url, 0, CYAML_UNLIMITED), \
        CYAML_FIELD_STRING_PTR("no-proxy", CYAML_FLAG_OPTIONAL, S, p no_proxy, 0,                 \
                               CYAML_UNLIMITED),                                                  \
        CYAML_FIELD_BOOL("proxy-from-environment", CYAML_FLAG_OPTIONAL, S,                        \
                         p proxy_from_environment),                                               \
        CYAML_FIELD_SEQUENCE_COUNT("proxy-connect-header",                                        \
                                   CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, S,                   \
                                   p proxy_connect_header, p n_proxy_connect_header,              \
                                   &conf_param_entry, 0, CYAML_UNLIMITED)

/** Key metadata of the fields above, for the owner section's `keys`. */
extern const struct conf_key net_http_cfg_keys[];
/** Sections of the nested mappings (tls-config, basic-auth, authorization,
 * oauth2, http-headers entries), NULL-terminated, for the schema. */
extern const struct conf_section *const net_cfg_sections[];
extern const struct conf_section net_tls_cfg_section, net_basic_auth_cfg_section;
/** The HTTP keys a user wrote in `map`, NULL-terminated in `keys` order. */
extern const char *const net_http_cfg_key_names[];
/** Accepts Alloy's form of http_headers (name -> list of secrets) besides
 * Prometheus' (name -> {values, secrets, files}). For the owner section's
 * pre hook. */
int net_http_cfg_pre(struct conf_load *ld, struct conf_node *map);
/** Cross-field rules of the HTTP keys in `map`, as Prometheus makes them
 * (one way to authenticate, proxy combinations, reserved headers, no CR
 * or LF in a header value); `what` names the owner in messages, which
 * never quote a secret. For the owner section's post hook. */
int net_http_cfg_check(struct conf_load *ld, struct conf_node *map, const char *what);

/** Deep copy of `src` into `dst` (for owners that keep settings beyond the
 * document). Returns 0 or -ENOMEM (then `dst` is half-built: free it with
 * net_http_cfg_done). */
int net_http_cfg_copy(struct net_http_cfg *dst, const struct net_http_cfg *src);
/** Frees what net_http_cfg_copy allocated and zeroes `h`. */
void net_http_cfg_done(struct net_http_cfg *h);

/* ---------------------------------------------------------------- client */

/** Error codes (negative) in net_response.result. */
enum {
    NET_ETIMEDOUT = -3000, /**< the request's timeout elapsed */
    NET_ETOOLARGE = -3001, /**< the response body passed max_response */
    NET_ECONNECT = -3002,  /**< could not connect (refused, unreachable, DNS) */
    NET_EABORTED = -3003,  /**< on_data asked to stop */
    NET_ETLS = -3004,      /**< TLS handshake or certificate problem */
    NET_EIO = -3005,       /**< any other transfer error (reset, bad HTTP, ...) */
    NET_ECANCELED = -3006, /**< cancelled (only seen by net_client_close) */
    NET_EAUTH = -3007,     /**< no credentials to send (the oauth2 token request failed) */
};

/** Human text for a NET_E* code. */
const char *net_strerror(int err);

/** TLS options for one request; every field may be NULL/false. Borrowed. */
struct net_tls {
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
    const char *ca_pem;      /**< inline PEM instead of ca_file */
    const char *cert_pem;    /**< inline PEM instead of cert_file */
    const char *key_pem;     /**< inline PEM instead of key_file */
    const char *server_name; /**< SNI and verification name */
    int min_version;         /**< NET_TLS10..NET_TLS13, 0: libcurl's default */
    int max_version;         /**< NET_TLS10..NET_TLS13, 0: no maximum */
    bool insecure_skip_verify;
};

struct net_auth;

/** One request. Everything is borrowed and must stay valid until the done
 * callback runs (or net_request_cancel returns). */
struct net_request_opts {
    const char *method; /**< NULL: GET */
    const char *url;
    const char *const *headers; /**< "Name: value" strings */
    size_t n_headers;
    const void *body; /**< request body (POST) */
    size_t body_len;
    size_t max_response;         /**< response body cap in bytes (0: 64 MiB) */
    uint64_t timeout_ms;         /**< whole-transfer timeout (0: none) */
    uint64_t connect_timeout_ms; /**< 0: 10 s */
    const char *user_agent;      /**< NULL: "proflet/<version>" */
    const char *bearer_token;    /**< Authorization: Bearer */
    const char *username;        /**< basic auth when non-NULL */
    const char *password;
    const struct net_tls *tls;
    const char *proxy_url;
    const char *no_proxy; /**< with proxy_url: hosts reached directly (CURLOPT_NOPROXY) */
    /** Use the environment's http_proxy, https_proxy and no_proxy (as
     * libcurl reads them) when proxy_url is NULL; false: no proxy then. */
    bool proxy_from_environment;
    const struct conf_param *proxy_headers; /**< headers for the proxy only (CONNECT) */
    size_t n_proxy_headers;
    /** The runtime side of the client settings (authorization, http-headers,
     * oauth2), or NULL. With oauth2 a request waits for the first token
     * before it goes out. */
    struct net_auth *auth;
    bool http2;            /**< offer HTTP/2 (ALPN over TLS); HTTP/1.1 otherwise */
    bool accept_gzip;      /**< send Accept-Encoding: gzip and decode transparently */
    bool follow_redirects; /**< follow up to 10 redirects (http/https only), keeping
                                      the method and body (a POST stays a POST) */
    /** Resolve the host afresh instead of through the client's DNS cache.
     * For scrapes: thousands of targets each visited once per interval
     * would fill the cache, and libcurl 7.88 scans the whole cache on every
     * lookup (measured: half of proflet's CPU at 5000 targets). */
    bool no_dns_cache;
    /** Streaming mode: when set, each chunk of the response body is passed
     * here instead of being buffered (max_response still applies to the
     * total). Return 0 to go on, <0 to abort (result NET_EABORTED). `ud` is
     * the one given to net_request_start. Runs on the loop thread, but from
     * inside libcurl: it must not start (refused with -EDEADLK) or cancel
     * requests; net_client_close is deferred until libcurl returns. */
    int (*on_data)(const char *p, size_t n, void *ud);
};

/** The outcome of a request, valid during the done callback only. */
struct net_response {
    int result;               /**< 0: got an HTTP response (any status); else NET_E* */
    long status;              /**< HTTP status, 0 without a response */
    const char *error;        /**< message when result < 0 */
    struct buf body;          /**< body (not in streaming mode); buf_steal() to keep it */
    const char *content_type; /**< NULL if absent */
    uint64_t duration_us;     /**< from start to completion */
    uint64_t retry_after_s;   /**< the Retry-After header (seconds or a date), 0 if none */
};

struct net_client;
struct net_request;

/** Completion callback; `resp` is only valid during the call. */
typedef void (*net_done_cb)(struct net_request *req, struct net_response *resp, void *ud);

/** What a client is made with. */
struct net_client_opts {
    uv_loop_t *loop;     /**< the client's loop; every callback runs on it */
    size_t max_connects; /**< sizes the keep-alive cache (0: 1024) */
};

/** Creates a client. Returns 0 and the client in `*out` (the caller's, for
 * net_client_close()), or a negative code with the reason in `err` and NULL
 * in `*out`: -ENOTSUP if libcurl lacks an asynchronous resolver (a blocking
 * lookup would stall the loop), -EIO if libcurl cannot be initialised,
 * -ENOMEM. */
int net_client_new(const struct net_client_opts *o, struct net_client **out, char *err,
                   size_t errlen);
/** Resizes the keep-alive cache (e.g. to the number of targets). */
void net_client_set_max_connects(struct net_client *c, size_t max_connects);
/** Cancels every request (their callbacks are not called), closes all
 * handles and calls `cb` once the last libuv close callback has run. */
void net_client_close(struct net_client *c, void (*cb)(void *ud), void *ud);
/** Number of requests in flight. */
size_t net_client_inflight(const struct net_client *c);

/** Starts a request. Returns 0 and sets `*out` (may be NULL), or a negative
 * errno if it could not start, in which case `cb` is never called. */
int net_request_start(struct net_client *c, const struct net_request_opts *o, net_done_cb cb,
                      void *ud, struct net_request **out);
/** Cancels a request in flight; its callback is not called. Not from inside
 * the request's own callbacks. */
void net_request_cancel(struct net_request *r);

/** Fills `o` (and `tls`, which `o` then points to) from the settings `h`
 * and the current secrets (`bearer`, `password`: NULL if none). Strings
 * are borrowed: they must outlive the request. `o->auth` is left to the
 * caller (see net_auth_new). */
void net_request_opts_from_cfg(struct net_request_opts *o, struct net_tls *tls,
                               const struct net_http_cfg *h, const char *bearer,
                               const char *password);
/** Fills `tls` from the settings `t` (borrowed strings). */
void net_tls_from_cfg(struct net_tls *tls, const struct net_tls_cfg *t);
/** NET_TLS10..NET_TLS13 for "TLS10".."TLS13"; 0 for NULL or anything else. */
int net_tls_version(const char *v);

/* ------------------------------------------------------------------ auth */

/** The request-time side of a struct net_http_cfg: the Authorization
 * header of `authorization` (credentials inline or from a file), the
 * `http-headers` (values, secrets, files) and the `oauth2` token. Files are
 * secrets (re-read off the loop through the workq). The oauth2 token is
 * fetched with a request of its own on the client of the first request that
 * needs it, used until shortly before it expires (a quarter of its life,
 * at most 10 s) and refreshed in the background from half its life, at most
 * 60 s, before that; requests made while there is no valid token wait for
 * it (never the loop) and fail with NET_EAUTH if it cannot be had. Loop
 * thread only. */

/** Creates the runtime side of `h`, which is borrowed: it must outlive the
 * owner's hold (requests waiting for a token do not need it). Reads the
 * files now, re-reads them through `q` (NULL: libuv's pool). Returns NULL
 * on OOM. */
struct net_auth *net_auth_new(uv_loop_t *loop, struct workq *q, const struct net_http_cfg *h);
/** Releases the owner's hold: a token request in flight or requests waiting
 * for a token keep the object until they are done (NULL is fine). */
void net_auth_free(struct net_auth *a);
/** The last problem getting credentials ("reading FILE: ...", "oauth2: ..."),
 * or NULL. Never contains a secret. */
const char *net_auth_error(const struct net_auth *a);
/** Forgets the oauth2 token and re-reads the files at the next request
 * (e.g. after a 401). */
void net_auth_expire(struct net_auth *a);

/** Checks an http(s) URL with libcurl's parser (a scheme of http or https,
 * a host, a valid port, closed brackets...). Returns 0 and, when `host` is
 * not NULL, its host and port as written (without user info); or -EINVAL
 * with what is wrong. */
int net_url_check(const char *url, char *host, size_t hostlen, char *err, size_t errlen);

/* --------------------------------------------------------------- secrets */

/** A credential given inline or as a file. A file is read when the secret
 * is made (so the first request has it) and then re-read, off the loop
 * thread, when it is asked for and older than the refresh interval, so
 * rotated tokens and passwords are picked up. */
struct net_secret;

/** Creates a secret from an inline `value` (used as is) or a `file`
 * (`value` NULL), re-read every `refresh_ms` (0: a minute) through `q`
 * (NULL: libuv's pool of `loop`).
 * Reads the file now; a failed read is kept as the secret's error (the
 * secret then has no value until a later read succeeds). Returns NULL on
 * OOM, or when both `value` and `file` are NULL. */
struct net_secret *net_secret_new(uv_loop_t *loop, struct workq *q, const char *value,
                                  const char *file, uint64_t refresh_ms);
/** The current value (NULL if none could be read yet); starts a re-read
 * when it is due. Valid until the next call into this secret. */
const char *net_secret_get(struct net_secret *s);
/** Asks for a re-read at the next get (e.g. after a 401). */
void net_secret_expire(struct net_secret *s);
/** The last read error ("reading FILE: ..."), or NULL. */
const char *net_secret_error(const struct net_secret *s);
/** Frees the secret; a re-read in flight finishes on its own first (NULL
 * is fine). */
void net_secret_free(struct net_secret *s);

#endif
