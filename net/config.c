/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP client settings every HTTP-speaking module embeds: their
 * libcyaml fields, defaults and cross-field rules (see net.h), and their
 * deep copy for owners that outlive the document (docs/design.md
 * "Configuration"). Const data and pure checks; any thread.
 *
 * The load-time rules are Prometheus' (common/config): one way to
 * authenticate, the proxy combinations, reserved header names, the TLS
 * pairs. Messages name keys, never values: a value may be a secret.
 *
 * The TLS files are also read here, once: libcurl reads them again for
 * every connection, so one that is missing or unusable would fail every
 * request, and load refuses it at its key instead (Prometheus refuses an
 * unreadable one when it loads too). Secret files (password, token,
 * credentials, client secret, header files) are not: they are re-read at
 * run time and may appear after start (net/secret.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "common/fsutil.h"
#include "net/internal.h"
#include "net/net.h"

#define OPT CYAML_FLAG_OPTIONAL
#define PTR CYAML_FLAG_POINTER
#define UNL CYAML_UNLIMITED
#define STR(k, s, m) CYAML_FIELD_STRING_PTR(k, OPT, s, m, 0, UNL)

const cyaml_schema_value_t net__string_seq = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, UNL),
};

/* ------------------------------------------------------------------ tls */

const cyaml_schema_field_t net__tls_fields[] = {
    STR("ca-file", struct net_tls_cfg, ca_file),
    STR("cert-file", struct net_tls_cfg, cert_file),
    STR("key-file", struct net_tls_cfg, key_file),
    STR("ca", struct net_tls_cfg, ca),
    STR("cert", struct net_tls_cfg, cert),
    STR("key", struct net_tls_cfg, key),
    STR("server-name", struct net_tls_cfg, server_name),
    STR("min-version", struct net_tls_cfg, min_version),
    STR("max-version", struct net_tls_cfg, max_version),
    CYAML_FIELD_BOOL("insecure-skip-verify", OPT, struct net_tls_cfg, insecure_skip_verify),
    CYAML_FIELD_END,
};

static const char *const tls_versions[] = { "TLS10", "TLS11", "TLS12", "TLS13", NULL };
static const struct conf_key tls_keys[] = {
    { .key = "min-version", .choices = tls_versions },
    { .key = "max-version", .choices = tls_versions },
    { 0 },
};
static const struct conf_key *const tls_key_tables[] = { tls_keys, NULL };

int net_tls_version(const char *v)
{
    for (int i = 0; v && tls_versions[i]; i++) {
        if (strcmp(v, tls_versions[i]) == 0)
            return NET_TLS10 + i;
    }
    return NET_TLS_DEFAULT;
}

/* A CA bundle larger than this is refused rather than read whole at load
 * (Debian's bundle of every public root is about 200 KiB). */
#define TLS_CA_MAX (4u << 20)

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return 0; /* an encrypted key in a bundle must not prompt on the terminal */
}

/* The certificates in PEM text, counted as libcurl's OpenSSL backend loads
 * a CA bundle (PEM_X509_INFO_read_bio): with none, or with a damaged one,
 * it fails the handshake of every request. */
static size_t pem_certificates(const char *pem, size_t len)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    STACK_OF(X509_INFO) *infos =
        bio ? PEM_X509_INFO_read_bio(bio, NULL, no_passphrase, NULL) : NULL;
    size_t n = 0;

    for (int i = 0; infos && i < sk_X509_INFO_num(infos); i++)
        n += sk_X509_INFO_value(infos, i)->x509 != NULL;
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    BIO_free(bio);
    /* The loop thread's TLS server reads this thread's error queue. */
    ERR_clear_error();
    return n;
}

/* The files and inline PEM of one tls-config, checked as libcurl will use
 * them. A `finish` hook, so that it runs once every rule of the document
 * held: a file is read only for a configuration that is otherwise valid,
 * and a misplaced tls-config is reported as such, not as a missing file.
 * The position is the key's; the message names the file (a path is not a
 * secret) but never inline text. */
static int tls_finish(struct conf_load *ld, const struct conf_node *map, void *obj)
{
    static const char *const files[] = { "ca-file", "cert-file", "key-file" };
    static const char *const inline_certs[] = { "ca", "cert" };
    char *text = NULL;
    size_t len = 0;
    int rc;

    for (size_t i = 0; i < 3; i++) {
        const char *path = conf_str(conf_get(map, files[i]));

        if (!conf_get(map, files[i]))
            continue;
        rc = i == 0 ? fsutil_read_small(path, TLS_CA_MAX, &text, &len) : fsutil_readable(path);
        if (rc == -E2BIG)
            return conf_fail(ld, conf_user_key(map, files[i]),
                             "%s \"%.200s\" in tls-config "
                             "is larger than 4MiB",
                             files[i], path);
        if (rc < 0)
            return conf_fail(ld, conf_user_key(map, files[i]),
                             "%s \"%.200s\" in tls-config "
                             "cannot be read: %s",
                             files[i], path, strerror(-rc));
        if (i == 0) {
            size_t n = pem_certificates(text, len);

            free(text);
            if (n == 0)
                return conf_fail(ld, conf_user_key(map, files[i]),
                                 "ca-file \"%.200s\" in "
                                 "tls-config holds no PEM certificate",
                                 path);
        }
    }
    for (size_t i = 0; i < 2; i++) {
        const char *pem = conf_str(conf_get(map, inline_certs[i]));

        if (conf_get(map, inline_certs[i]) && pem_certificates(pem, strlen(pem)) == 0)
            return conf_fail(ld, conf_user_key(map, inline_certs[i]),
                             "%s in tls-config is not "
                             "PEM: expected one or more -----BEGIN CERTIFICATE----- blocks",
                             inline_certs[i]);
    }
    return 0;
}

static int tls_post(struct conf_load *ld, struct conf_node *map)
{
    static const char *const pairs[][2] = { { "ca", "ca-file" },
                                            { "cert", "cert-file" },
                                            { "key", "key-file" } };
    bool cert = conf_get(map, "cert") || conf_get(map, "cert-file");
    bool key = conf_get(map, "key") || conf_get(map, "key-file");
    struct conf_node *minv = conf_get(map, "min-version"), *maxv = conf_get(map, "max-version");

    for (size_t i = 0; i < 3; i++) {
        if (conf_get(map, pairs[i][0]) && conf_get(map, pairs[i][1]))
            return conf_fail(ld, conf_user_key(map, pairs[i][1]),
                             "at most one of %s and %s may be given in tls-config", pairs[i][0],
                             pairs[i][1]);
    }
    if (cert && !key)
        return conf_fail(ld, conf_user_key(map, conf_get(map, "cert") ? "cert" : "cert-file"),
                         "a client certificate needs key or key-file in tls-config");
    if (key && !cert)
        return conf_fail(ld, conf_user_key(map, conf_get(map, "key") ? "key" : "key-file"),
                         "a client key needs cert or cert-file in tls-config");
    if (minv && maxv && net_tls_version(conf_str(maxv)) < net_tls_version(conf_str(minv)))
        return conf_fail(ld, maxv,
                         "max-version (%s) must not be lower than min-version (%s) "
                         "in tls-config",
                         conf_str(maxv), conf_str(minv));
    return 0;
}

const struct conf_section net_tls_cfg_section = {
    .name = "tls-config",
    .fields = net__tls_fields,
    .keys = tls_key_tables,
    .post = tls_post,
    .finish = tls_finish,
};

/* ----------------------------------------------------------- basic auth */

const cyaml_schema_field_t net__basic_auth_fields[] = {
    STR("username", struct net_basic_auth_cfg, username),
    STR("password", struct net_basic_auth_cfg, password),
    STR("password-file", struct net_basic_auth_cfg, password_file),
    CYAML_FIELD_END,
};

static int basic_auth_post(struct conf_load *ld, struct conf_node *map)
{
    if (conf_get(map, "password") && conf_get(map, "password-file"))
        return conf_fail(ld, conf_user_key(map, "password-file"),
                         "basic-auth takes password or password-file, not both");
    return 0;
}

const struct conf_section net_basic_auth_cfg_section = {
    .name = "basic-auth",
    .fields = net__basic_auth_fields,
    .post = basic_auth_post,
};

/* -------------------------------------------------------- authorization */

/* A key whose value goes into a header line must not hold CR or LF (it
 * would end the line and fail every request). */
static int no_crlf(struct conf_load *ld, struct conf_node *map, const char *key, const char *what)
{
    if (net__has_crlf(conf_str(conf_get(map, key))))
        return conf_fail(ld, conf_get(map, key), "%s in %s must not contain CR or LF", key, what);
    return 0;
}

const cyaml_schema_field_t net__authorization_fields[] = {
    STR("type", struct net_authorization_cfg, type),
    STR("credentials", struct net_authorization_cfg, credentials),
    STR("credentials-file", struct net_authorization_cfg, credentials_file),
    CYAML_FIELD_END,
};

static const struct conf_key authorization_keys[] = {
    { .key = "type", .def = "Bearer" },
    { 0 },
};
static const struct conf_key *const authorization_key_tables[] = { authorization_keys, NULL };

static int authorization_post(struct conf_load *ld, struct conf_node *map)
{
    const char *type = conf_str(conf_get(map, "type"));

    if (conf_get(map, "credentials") && conf_get(map, "credentials-file"))
        return conf_fail(ld, conf_user_key(map, "credentials-file"),
                         "at most one of credentials and credentials-file may be given in "
                         "authorization");
    if (strcasecmp(type, "basic") == 0)
        return conf_fail(ld, conf_get(map, "type"),
                         "authorization type cannot be \"Basic\": "
                         "use basic-auth instead");
    if (!*type || strpbrk(type, " \t\r\n:"))
        return conf_fail(ld, conf_get(map, "type"),
                         "authorization type must be one word, like "
                         "Bearer");
    return no_crlf(ld, map, "credentials", "authorization");
}

static const struct conf_section authorization_section = {
    .name = "authorization",
    .fields = net__authorization_fields,
    .keys = authorization_key_tables,
    .post = authorization_post,
};

/* --------------------------------------------------------- http-headers */

static const cyaml_schema_field_t header_fields[] = {
    CYAML_FIELD_STRING_PTR(".name", CYAML_FLAG_DEFAULT, struct net_header_cfg, name, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("values", OPT | PTR, struct net_header_cfg, values, n_values,
                               &net__string_seq, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("secrets", OPT | PTR, struct net_header_cfg, secrets, n_secrets,
                               &net__string_seq, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("files", OPT | PTR, struct net_header_cfg, files, n_files,
                               &net__string_seq, 0, UNL),
    CYAML_FIELD_END,
};
const cyaml_schema_value_t net__header_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct net_header_cfg, header_fields),
};

/* Headers the client sets itself, or that belong to the connection;
 * Prometheus refuses the same list (common/config/headers.go). */
static const char *const reserved_headers[] = {
    "Authorization",
    "Host",
    "Content-Encoding",
    "Content-Length",
    "Content-Type",
    "User-Agent",
    "Connection",
    "Keep-Alive",
    "Proxy-Authenticate",
    "Proxy-Authorization",
    "Www-Authenticate",
    "Accept-Encoding",
    "X-Prometheus-Remote-Write-Version",
    "X-Prometheus-Remote-Read-Version",
    "X-Prometheus-Scrape-Timeout-Seconds",
    "X-Amz-Date",
    "X-Amz-Security-Token",
    "X-Amz-Content-Sha256",
    NULL,
};

/* An HTTP token (RFC 9110 5.1): what a header name may be. */
static bool header_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        if (!(*s >= '0' && *s <= '9') && !(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
            !strchr("!#$%&'*+-.^_`|~", *s))
            return false;
    }
    return true;
}

static int header_values_ok(struct conf_load *ld, struct conf_node *list, const char *name,
                            const char *key)
{
    for (size_t i = 0; i < conf_len(list); i++) {
        if (net__has_crlf(conf_str(conf_at(list, i))))
            return conf_fail(ld, conf_at(list, i),
                             "%s of header \"%.80s\" must not contain CR "
                             "or LF",
                             key, name);
    }
    return 0;
}

static int header_post(struct conf_load *ld, struct conf_node *map)
{
    struct conf_node *nn = conf_get(map, ".name");
    const char *name = conf_str(nn);

    if (!header_name_ok(name))
        return conf_fail(ld, nn, "\"%.80s\" is not a valid header name", name);
    for (size_t i = 0; reserved_headers[i]; i++) {
        if (strcasecmp(name, reserved_headers[i]) == 0)
            return conf_fail(ld, nn, "setting header \"%s\" is not allowed", name);
    }
    if (header_values_ok(ld, conf_get(map, "values"), name, "values") < 0 ||
        header_values_ok(ld, conf_get(map, "secrets"), name, "secrets") < 0)
        return -1;
    return 0;
}

static const struct conf_section header_section = {
    .name = "http-headers entry",
    .fields = header_fields,
    .post = header_post,
};

/* ---------------------------------------------------------------- proxy */

/* proxy-connect-header entries: names as for http-headers, values one
 * line each. */
static int connect_headers_ok(struct conf_load *ld, struct conf_node *list)
{
    for (size_t i = 0; i < conf_len(list); i++) {
        struct conf_node *e = conf_at(list, i);
        const char *name = conf_str(conf_get(e, ".key"));

        if (!header_name_ok(name))
            return conf_fail(ld, e, "\"%.80s\" is not a valid header name", name);
        if (header_values_ok(ld, conf_get(e, ".values"), name, "values") < 0)
            return -1;
    }
    return 0;
}

/* Prometheus' ProxyConfig rules, for the client's and oauth2's keys. */
static int proxy_check(struct conf_load *ld, struct conf_node *map, const char *what)
{
    struct conf_node *url = conf_get(map, "proxy-url"), *no = conf_user_key(map, "no-proxy");
    struct conf_node *env = conf_get(map, "proxy-from-environment");
    struct conf_node *hdr = conf_user_key(map, "proxy-connect-header");
    bool from_env = conf_true(env);
    char why[128];

    if (url && net_url_check(conf_str(url), NULL, 0, why, sizeof(why)) < 0 &&
        strncmp(conf_str(url), "socks", 5) != 0)
        return conf_fail(ld, url, "invalid proxy-url in %s: %s", what, why);
    if (from_env && url)
        return conf_fail(ld, conf_user_key(map, "proxy-from-environment"),
                         "proxy-from-environment and proxy-url cannot both be given in %s", what);
    if (from_env && no)
        return conf_fail(ld, no,
                         "no-proxy cannot be given with proxy-from-environment in %s "
                         "(the environment's NO_PROXY applies)",
                         what);
    if (no && !url)
        return conf_fail(ld, no, "no-proxy needs proxy-url in %s", what);
    if (hdr && !url && !from_env)
        return conf_fail(ld, hdr,
                         "proxy-connect-header needs proxy-url or "
                         "proxy-from-environment in %s",
                         what);
    return connect_headers_ok(ld, conf_get(map, "proxy-connect-header"));
}

/* --------------------------------------------------------------- oauth2 */

const cyaml_schema_field_t net__oauth2_fields[] = {
    STR("client-id", struct net_oauth2_cfg, client_id),
    STR("client-secret", struct net_oauth2_cfg, client_secret),
    STR("client-secret-file", struct net_oauth2_cfg, client_secret_file),
    STR("token-url", struct net_oauth2_cfg, token_url),
    CYAML_FIELD_SEQUENCE_COUNT("scopes", OPT | PTR, struct net_oauth2_cfg, scopes, n_scopes,
                               &net__string_seq, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("endpoint-params", OPT | PTR, struct net_oauth2_cfg, endpoint_params,
                               n_endpoint_params, &conf_kv_entry, 0, UNL),
    CYAML_FIELD_MAPPING("tls-config", OPT, struct net_oauth2_cfg, tls, net__tls_fields),
    NET__PROXY_CFG_FIELDS(struct net_oauth2_cfg, ),
    CYAML_FIELD_END,
};

static const struct conf_key oauth2_keys[] = {
    { .key = "endpoint-params", .mapkind = CONF_MAP_KV },
    { .key = "proxy-connect-header", .mapkind = CONF_MAP_PARAM },
    { 0 },
};
static const struct conf_key *const oauth2_key_tables[] = { oauth2_keys, NULL };

static int oauth2_post(struct conf_load *ld, struct conf_node *map)
{
    struct conf_node *url = conf_get(map, "token-url");
    char why[128];

    if (!conf_get(map, "client-id"))
        return conf_fail(ld, map, "oauth2 needs client-id");
    if (!url)
        return conf_fail(ld, map, "oauth2 needs token-url");
    if (net_url_check(conf_str(url), NULL, 0, why, sizeof(why)) < 0)
        return conf_fail(ld, url, "invalid token-url in oauth2: %s", why);
    if (conf_get(map, "client-secret") && conf_get(map, "client-secret-file"))
        return conf_fail(ld, conf_user_key(map, "client-secret-file"),
                         "at most one of client-secret and client-secret-file may be given in "
                         "oauth2");
    return proxy_check(ld, map, "oauth2");
}

static const struct conf_section oauth2_section = {
    .name = "oauth2",
    .fields = net__oauth2_fields,
    .keys = oauth2_key_tables,
    .post = oauth2_post,
};

/* ---------------------------------------------------------- the client */

const struct conf_key net_http_cfg_keys[] = {
    { .key = "enable-http2", .def = "true" },
    { .key = "follow-redirects", .def = "true" },
    { .key = "http-headers", .mapkind = CONF_MAP_NAMED },
    { .key = "proxy-connect-header", .mapkind = CONF_MAP_PARAM },
    { 0 },
};

const char *const net_http_cfg_key_names[] = {
    "basic-auth",
    "bearer-token",
    "bearer-token-file",
    "authorization",
    "oauth2",
    "http-headers",
    "tls-config",
    "proxy-url",
    "no-proxy",
    "proxy-from-environment",
    "proxy-connect-header",
    "enable-http2",
    "follow-redirects",
    NULL,
};

const struct conf_section *const net_cfg_sections[] = {
    &net_tls_cfg_section,   &net_basic_auth_cfg_section,
    &authorization_section, &oauth2_section,
    &header_section,        NULL,
};

/* Alloy writes http_headers as name -> list of secrets; Prometheus as
 * name -> {values, secrets, files}. The Alloy form becomes the second with
 * the list as `secrets`. */
static int alloy_headers(struct conf_load *ld, struct conf_node *hdrs)
{
    const char *names[64];
    size_t n = 0;

    if (!conf_is_map(hdrs))
        return 0; /* the walk reports the shape */
    for (size_t i = 0; i + 1 < conf_len(hdrs) && n < 64; i += 2) {
        struct conf_node *v = conf_at(hdrs, i + 1);

        if (!conf_is_map(v) && !conf_null(v))
            names[n++] = conf_str(conf_at(hdrs, i));
    }
    for (size_t i = 0; i < n; i++) {
        struct conf_node *v = conf_get(hdrs, names[i]), *m = conf_new_map(ld, v), *l = v;

        if (!m)
            return conf_oom(ld);
        if (!conf_is_seq(v) && (!(l = conf_new_seq(ld, v)) || conf_append(ld, l, v) < 0))
            return conf_oom(ld);
        if (conf_set_node(ld, m, "secrets", l) < 0)
            return -1;
        conf_replace_value(hdrs, names[i], m);
    }
    return 0;
}

int net_http_cfg_pre(struct conf_load *ld, struct conf_node *map)
{
    int rc = alloy_headers(ld, conf_get(map, "http-headers"));

    return rc < 0 ? rc : alloy_headers(ld, conf_get(map, "http_headers"));
}

int net_http_cfg_check(struct conf_load *ld, struct conf_node *map, const char *what)
{
    static const char *const auth[] = { "basic-auth", "bearer-token", "bearer-token-file",
                                        "authorization", "oauth2" };
    struct conf_node *first = NULL;

    for (size_t i = 0; i < sizeof(auth) / sizeof(auth[0]); i++) {
        struct conf_node *k = conf_user_key(map, auth[i]);

        if (k && first)
            return conf_fail(ld, k,
                             "at most one of basic-auth, bearer-token, "
                             "bearer-token-file, authorization and oauth2 may be given in %s "
                             "(\"%s\" conflicts with \"%s\")",
                             what, auth[i], conf_str(first));
        if (k)
            first = k;
    }
    if (no_crlf(ld, map, "bearer-token", what) < 0)
        return -1;
    return proxy_check(ld, map, what);
}

/* ----------------------------------------------------------------- copy */

static int dup_str(char **d, const char *s)
{
    *d = NULL;
    if (s && !(*d = strdup(s)))
        return -ENOMEM;
    return 0;
}

static int dup_strv(char ***d, const char *const *s, unsigned n)
{
    int rc = 0;

    *d = NULL;
    if (!n)
        return 0;
    if (!(*d = calloc(n, sizeof(**d))))
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++)
        rc |= dup_str(&(*d)[i], s[i]);
    return rc;
}

static void free_strv(char **v, unsigned n)
{
    for (unsigned i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static int tls_copy(struct net_tls_cfg *d, const struct net_tls_cfg *s)
{
    *d = *s;
    return dup_str(&d->ca_file, s->ca_file) | dup_str(&d->cert_file, s->cert_file) |
           dup_str(&d->key_file, s->key_file) | dup_str(&d->ca, s->ca) |
           dup_str(&d->cert, s->cert) | dup_str(&d->key, s->key) |
           dup_str(&d->server_name, s->server_name) | dup_str(&d->min_version, s->min_version) |
           dup_str(&d->max_version, s->max_version);
}

static void tls_done(struct net_tls_cfg *t)
{
    free(t->ca_file);
    free(t->cert_file);
    free(t->key_file);
    free(t->ca);
    free(t->cert);
    free(t->key);
    free(t->server_name);
    free(t->min_version);
    free(t->max_version);
}

static int params_copy(struct conf_param **d, const struct conf_param *s, unsigned n)
{
    int rc = 0;

    *d = NULL;
    if (!n)
        return 0;
    if (!(*d = calloc(n, sizeof(**d))))
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        rc |= dup_str(&(*d)[i].key, s[i].key);
        rc |= dup_strv(&(*d)[i].values, (const char *const *)s[i].values, s[i].n_values);
        (*d)[i].n_values = (*d)[i].values ? s[i].n_values : 0;
    }
    return rc;
}

static void params_free(struct conf_param *p, unsigned n)
{
    for (unsigned i = 0; p && i < n; i++) {
        free(p[i].key);
        free_strv(p[i].values, p[i].n_values);
    }
    free(p);
}

#define COPY_PROXY(d, s)                                                                 \
    (dup_str(&(d)->proxy_url, (s)->proxy_url) | dup_str(&(d)->no_proxy, (s)->no_proxy) | \
     params_copy(&(d)->proxy_connect_header, (s)->proxy_connect_header,                  \
                 (s)->n_proxy_connect_header))

static int oauth2_copy(struct net_oauth2_cfg **dp, const struct net_oauth2_cfg *s)
{
    struct net_oauth2_cfg *d;
    int rc;

    if (!s)
        return 0;
    if (!(d = *dp = calloc(1, sizeof(*d))))
        return -ENOMEM;
    d->n_scopes = s->n_scopes;
    d->n_endpoint_params = s->n_endpoint_params;
    d->n_proxy_connect_header = s->n_proxy_connect_header;
    d->proxy_from_environment = s->proxy_from_environment;
    rc = dup_str(&d->client_id, s->client_id) | dup_str(&d->client_secret, s->client_secret) |
         dup_str(&d->client_secret_file, s->client_secret_file) |
         dup_str(&d->token_url, s->token_url) |
         dup_strv(&d->scopes, (const char *const *)s->scopes, s->n_scopes) |
         tls_copy(&d->tls, &s->tls) | COPY_PROXY(d, s);
    d->endpoint_params =
        s->n_endpoint_params ? calloc(s->n_endpoint_params, sizeof(*d->endpoint_params)) : NULL;
    if (s->n_endpoint_params && !d->endpoint_params)
        rc = -ENOMEM;
    for (unsigned i = 0; d->endpoint_params && i < s->n_endpoint_params; i++)
        rc |= dup_str(&d->endpoint_params[i].key, s->endpoint_params[i].key) |
              dup_str(&d->endpoint_params[i].value, s->endpoint_params[i].value);
    return rc ? -ENOMEM : 0;
}

static void oauth2_free(struct net_oauth2_cfg *o)
{
    if (!o)
        return;
    free(o->client_id);
    free(o->client_secret);
    free(o->client_secret_file);
    free(o->token_url);
    free_strv(o->scopes, o->n_scopes);
    for (unsigned i = 0; o->endpoint_params && i < o->n_endpoint_params; i++) {
        free(o->endpoint_params[i].key);
        free(o->endpoint_params[i].value);
    }
    free(o->endpoint_params);
    tls_done(&o->tls);
    free(o->proxy_url);
    free(o->no_proxy);
    params_free(o->proxy_connect_header, o->n_proxy_connect_header);
    free(o);
}

int net_http_cfg_copy(struct net_http_cfg *d, const struct net_http_cfg *s)
{
    int rc;

    /* Every pointer is NULL or owned from here on, so a failure part way
     * leaves something net_http_cfg_done can free. */
    memset(d, 0, sizeof(*d));
    d->proxy_from_environment = s->proxy_from_environment;
    d->enable_http2 = s->enable_http2;
    d->follow_redirects = s->follow_redirects;
    rc = dup_str(&d->bearer_token, s->bearer_token) |
         dup_str(&d->bearer_token_file, s->bearer_token_file) | tls_copy(&d->tls, &s->tls) |
         COPY_PROXY(d, s);
    d->n_proxy_connect_header = d->proxy_connect_header ? s->n_proxy_connect_header : 0;
    if (s->basic_auth) {
        if (!(d->basic_auth = calloc(1, sizeof(*d->basic_auth))))
            return -ENOMEM;
        rc |= dup_str(&d->basic_auth->username, s->basic_auth->username) |
              dup_str(&d->basic_auth->password, s->basic_auth->password) |
              dup_str(&d->basic_auth->password_file, s->basic_auth->password_file);
    }
    if (s->authorization) {
        if (!(d->authorization = calloc(1, sizeof(*d->authorization))))
            return -ENOMEM;
        rc |= dup_str(&d->authorization->type, s->authorization->type) |
              dup_str(&d->authorization->credentials, s->authorization->credentials) |
              dup_str(&d->authorization->credentials_file, s->authorization->credentials_file);
    }
    rc |= oauth2_copy(&d->oauth2, s->oauth2);
    if (s->n_http_headers) {
        if (!(d->http_headers = calloc(s->n_http_headers, sizeof(*d->http_headers))))
            return -ENOMEM;
        d->n_http_headers = s->n_http_headers;
        for (unsigned i = 0; i < s->n_http_headers; i++) {
            const struct net_header_cfg *sh = &s->http_headers[i];
            struct net_header_cfg *dh = &d->http_headers[i];

            *dh = *sh;
            rc |= dup_str(&dh->name, sh->name) |
                  dup_strv(&dh->values, (const char *const *)sh->values, sh->n_values) |
                  dup_strv(&dh->secrets, (const char *const *)sh->secrets, sh->n_secrets) |
                  dup_strv(&dh->files, (const char *const *)sh->files, sh->n_files);
        }
    }
    return rc ? -ENOMEM : 0;
}

void net_http_cfg_done(struct net_http_cfg *h)
{
    if (h->basic_auth) {
        free(h->basic_auth->username);
        free(h->basic_auth->password);
        free(h->basic_auth->password_file);
        free(h->basic_auth);
    }
    if (h->authorization) {
        free(h->authorization->type);
        free(h->authorization->credentials);
        free(h->authorization->credentials_file);
        free(h->authorization);
    }
    oauth2_free(h->oauth2);
    for (unsigned i = 0; h->http_headers && i < h->n_http_headers; i++) {
        free(h->http_headers[i].name);
        free_strv(h->http_headers[i].values, h->http_headers[i].n_values);
        free_strv(h->http_headers[i].secrets, h->http_headers[i].n_secrets);
        free_strv(h->http_headers[i].files, h->http_headers[i].n_files);
    }
    free(h->http_headers);
    free(h->bearer_token);
    free(h->bearer_token_file);
    tls_done(&h->tls);
    free(h->proxy_url);
    free(h->no_proxy);
    params_free(h->proxy_connect_header, h->n_proxy_connect_header);
    memset(h, 0, sizeof(*h));
}

/* ------------------------------------------------------------- requests */

void net_request_opts_from_cfg(struct net_request_opts *o, struct net_tls *tls,
                               const struct net_http_cfg *h, const char *bearer,
                               const char *password)
{
    net_tls_from_cfg(tls, &h->tls);
    o->tls = tls;
    o->proxy_url = h->proxy_url;
    o->no_proxy = h->no_proxy;
    o->proxy_from_environment = h->proxy_from_environment;
    o->proxy_headers = h->proxy_connect_header;
    o->n_proxy_headers = h->n_proxy_connect_header;
    o->http2 = h->enable_http2;
    o->follow_redirects = h->follow_redirects;
    o->bearer_token = bearer;
    o->username = h->basic_auth ? h->basic_auth->username : NULL;
    o->password = h->basic_auth ? password : NULL;
}

void net_tls_from_cfg(struct net_tls *tls, const struct net_tls_cfg *t)
{
    memset(tls, 0, sizeof(*tls));
    tls->ca_file = t->ca_file;
    tls->cert_file = t->cert_file;
    tls->key_file = t->key_file;
    tls->ca_pem = t->ca;
    tls->cert_pem = t->cert;
    tls->key_pem = t->key;
    tls->server_name = t->server_name;
    tls->insecure_skip_verify = t->insecure_skip_verify;
    tls->min_version = net_tls_version(t->min_version);
    tls->max_version = net_tls_version(t->max_version);
}
