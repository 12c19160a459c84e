/* SPDX-License-Identifier: Apache-2.0 */
/* The status server's web configuration (--web.config.file), in the format
 * of Prometheus' exporter-toolkit: `tls_server_config` (cert_file,
 * key_file, client_ca_file, client_auth_type, min_version, max_version,
 * cipher_suites, prefer_server_cipher_suites, curve_preferences) and
 * `basic_auth_users` (user: bcrypt hash) (docs/design.md "HTTP server").
 *
 * Purpose. Loads the file with conf/ (so errors name FILE:LINE:COL), builds
 * the OpenSSL server context and checks the hashes (a password is checked
 * against its hash by auth.c). Go's names of cipher suites and curves are
 * translated to OpenSSL's here.
 *
 * Costs. A hash's cost is refused outside WEB_COST_MIN..WEB_COST_MAX: one
 * check doubles with each step (0.24 s of CPU at 12 on the reference
 * machine, 0.95 s at 14), and a login may wait for one check before its
 * own: at 12 that stays inside the 10 s header timeout with a twentieth of
 * a core (a pod's CPU request can be that small, and a shared node's
 * load made a cost-14 login miss it here); at 18 one check alone would not. Unknown users are checked against a dummy hash
 * made at load with the cost most users have, so that a wrong password
 * takes as long for a user that does not exist as for one that does.
 *
 * Threading and ownership. Loading runs on any thread. A loaded web config
 * is immutable and reference counted: the server holds one reference, and
 * each connection one from its accept. auth.c's checks read the hashes on
 * the loop and copy what their threads need. */
#include <crypt.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "conf/conf.h"
#include "httpd/internal.h"

/* The bcrypt costs taken: bcrypt's own minimum, and the highest whose
 * check stays well inside the header timeout (see the top comment). */
#define WEB_COST_MIN 4
#define WEB_COST_MAX 12

struct web_tls_cfg {
    char *cert_file;
    char *key_file;
    char *client_ca_file;
    char *client_auth_type;
    char *min_version;
    char *max_version;
    char **cipher_suites;
    unsigned n_cipher_suites;
    bool prefer_server_cipher_suites;
    char **curve_preferences;
    unsigned n_curve_preferences;
};

struct web_cfg {
    struct web_tls_cfg *tls;
    struct conf_kv *users;
    unsigned n_users;
};

#define OPT CYAML_FLAG_OPTIONAL
#define STR(k, s, f) CYAML_FIELD_STRING_PTR(k, OPT, s, f, 0, CYAML_UNLIMITED)
#define STRS(k, s, f, n)                                                                    \
    CYAML_FIELD_SEQUENCE_COUNT(k, OPT | CYAML_FLAG_POINTER, s, f, n, &conf_string_entry, 0, \
                               CYAML_UNLIMITED)

static const cyaml_schema_field_t tls_fields[] = {
    STR("cert-file", struct web_tls_cfg, cert_file),
    STR("key-file", struct web_tls_cfg, key_file),
    STR("client-ca-file", struct web_tls_cfg, client_ca_file),
    STR("client-auth-type", struct web_tls_cfg, client_auth_type),
    STR("min-version", struct web_tls_cfg, min_version),
    STR("max-version", struct web_tls_cfg, max_version),
    STRS("cipher-suites", struct web_tls_cfg, cipher_suites, n_cipher_suites),
    CYAML_FIELD_BOOL("prefer-server-cipher-suites", OPT, struct web_tls_cfg,
                     prefer_server_cipher_suites),
    STRS("curve-preferences", struct web_tls_cfg, curve_preferences, n_curve_preferences),
    CYAML_FIELD_END,
};

static const char *const auth_types[] = {
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
    NULL,
};
static const char *const tls_versions[] = { "TLS10", "TLS11", "TLS12", "TLS13", NULL };

static const struct conf_key tls_keys[] = {
    { .key = "cert-file" },
    { .key = "key-file" },
    { .key = "client-ca-file" },
    { .key = "client-auth-type", .def = "NoClientCert", .choices = auth_types },
    { .key = "min-version", .def = "TLS12", .choices = tls_versions },
    { .key = "max-version", .def = "TLS13", .choices = tls_versions },
    { .key = "cipher-suites" },
    { .key = "prefer-server-cipher-suites", .def = "true" },
    { .key = "curve-preferences" },
    { 0 },
};

/* Go's crypto/tls names (tls.CipherSuites() and InsecureCipherSuites())
 * and OpenSSL's for the same TLS 1.0-1.2 suite. The TLS 1.3 suites are
 * accepted and ignored, as Go ignores them: neither lets them be chosen.
 * RC4 is gone from OpenSSL 3: named, so that the message says so. */
static const struct {
    const char *go, *ossl; /* ossl NULL: TLS 1.3, ""; not available */
} cipher_names[] = {
    { "TLS_AES_128_GCM_SHA256", NULL },
    { "TLS_AES_256_GCM_SHA384", NULL },
    { "TLS_CHACHA20_POLY1305_SHA256", NULL },
    { "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA" },
    { "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA" },
    { "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA" },
    { "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA" },
    { "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256" },
    { "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384" },
    { "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256" },
    { "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384" },
    { "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305" },
    { "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305" },
    { "TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA" },
    { "TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA" },
    { "TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA" },
    { "TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256" },
    { "TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256" },
    { "TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384" },
    { "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA-DES-CBC3-SHA" },
    { "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256" },
    { "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256" },
    { "TLS_RSA_WITH_RC4_128_SHA", "" },
    { "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "" },
    { "TLS_ECDHE_RSA_WITH_RC4_128_SHA", "" },
};

/* exporter-toolkit's curve names (Go's tls.CurveID) and OpenSSL's groups. */
static const struct {
    const char *go, *ossl;
} curve_names[] = {
    { "CurveP256", "P-256" },
    { "CurveP384", "P-384" },
    { "CurveP521", "P-521" },
    { "X25519", "X25519" },
};

static int version_index(const char *v)
{
    for (int i = 0; tls_versions[i]; i++)
        if (strcmp(v, tls_versions[i]) == 0)
            return i;
    return -1;
}

static const char *cipher_ossl(const char *go)
{
    for (size_t i = 0; i < sizeof(cipher_names) / sizeof(cipher_names[0]); i++)
        if (strcmp(go, cipher_names[i].go) == 0)
            return cipher_names[i].ossl ? cipher_names[i].ossl : "tls13";
    return NULL;
}

static const char *curve_ossl(const char *go)
{
    for (size_t i = 0; i < sizeof(curve_names) / sizeof(curve_names[0]); i++)
        if (strcmp(go, curve_names[i].go) == 0)
            return curve_names[i].ossl;
    return NULL;
}
static const struct conf_key *const tls_key_tables[] = { tls_keys, NULL };

static int tls_post(struct conf_load *ld, struct conf_node *n)
{
    const char *type = conf_str(conf_get(n, "client-auth-type"));

    if (!conf_get(n, "cert-file") || !conf_get(n, "key-file"))
        return conf_fail(ld, n, "tls_server_config needs cert_file and key_file");
    struct conf_node *cs = conf_get(n, "cipher-suites"), *cp = conf_get(n, "curve-preferences");

    if (strstr(type, "Verify") && !conf_get(n, "client-ca-file"))
        return conf_fail(ld, conf_get(n, "client-auth-type"),
                         "client_auth_type %s needs client_ca_file", type);
    if (version_index(conf_str(conf_get(n, "max-version"))) <
        version_index(conf_str(conf_get(n, "min-version"))))
        return conf_fail(ld, conf_get(n, "max-version"), "max_version is below min_version");
    for (size_t i = 0; cs && i < conf_len(cs); i++) {
        const char *name = conf_str(conf_at(cs, i)), *o = name ? cipher_ossl(name) : NULL;

        if (!o)
            return conf_fail(ld, conf_at(cs, i),
                             "cipher_suites: %s is not one of Go's cipher suite names "
                             "(e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)",
                             name ? name : "");
        if (!*o)
            return conf_fail(ld, conf_at(cs, i),
                             "cipher_suites: %s (RC4) is not available in OpenSSL 3", name);
    }
    for (size_t i = 0; cp && i < conf_len(cp); i++) {
        const char *name = conf_str(conf_at(cp, i));

        if (!name || !curve_ossl(name))
            return conf_fail(ld, conf_at(cp, i),
                             "curve_preferences: %s is not one of CurveP256, CurveP384, "
                             "CurveP521, X25519",
                             name ? name : "");
    }
    return 0;
}

static const struct conf_section tls_section = {
    .name = "tls_server_config",
    .fields = tls_fields,
    .keys = tls_key_tables,
    .post = tls_post,
};

static const cyaml_schema_field_t top_fields[] = {
    CYAML_FIELD_MAPPING_PTR("tls-server-config", OPT | CYAML_FLAG_POINTER, struct web_cfg, tls,
                            tls_fields),
    CYAML_FIELD_SEQUENCE_COUNT("basic-auth-users", OPT | CYAML_FLAG_POINTER, struct web_cfg, users,
                               n_users, &conf_kv_entry, 0, CYAML_UNLIMITED),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t top_value = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct web_cfg, top_fields),
};
static const struct conf_key top_keys[] = {
    { .key = "tls-server-config" },
    { .key = "basic-auth-users", .mapkind = CONF_MAP_KV },
    { 0 },
};
static const struct conf_key *const top_key_tables[] = { top_keys, NULL };

/* A bcrypt hash as crypt(3) takes it: $2a$, $2b$ or $2y$, a two-digit cost,
 * 53 characters of salt and hash. */
static bool is_bcrypt(const char *h)
{
    size_t n = strlen(h);

    return n == 60 && h[0] == '$' && h[1] == '2' && strchr("aby", h[2]) && h[3] == '$' &&
           h[4] >= '0' && h[4] <= '3' && h[5] >= '0' && h[5] <= '9' && h[6] == '$';
}

static int bcrypt_cost(const char *h)
{
    return (h[4] - '0') * 10 + (h[5] - '0');
}

static int top_post(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *u = conf_get(n, "basic-auth-users");

    /* By now a sequence of {.key: user, .value: hash} (CONF_MAP_KV). */
    for (size_t i = 0; u && i < conf_len(u); i++) {
        struct conf_node *e = conf_at(u, i);
        struct conf_node *k = conf_get(e, ".key"), *v = conf_get(e, ".value");
        const char *name = conf_str(k), *hash = conf_str(v);

        if (!name || !*name || strchr(name, ':'))
            return conf_fail(ld, k, "a basic_auth_users name must be non-empty, without ':'");
        if (!hash || !is_bcrypt(hash))
            return conf_fail(ld, v,
                             "basic_auth_users: the password of %s must be a bcrypt hash "
                             "($2a$, $2b$ or $2y$; e.g. from htpasswd -nbB)",
                             name);
        if (bcrypt_cost(hash) < WEB_COST_MIN || bcrypt_cost(hash) > WEB_COST_MAX)
            return conf_fail(
                ld, v,
                "basic_auth_users: the bcrypt cost of %s is %d; proflet takes %d to "
                "%d (each step doubles a check: 0.24 s of CPU at 12, 1 s at 14, 15 s at 18, "
                "and a login may wait for one check before its own within the "
                "header timeout)",
                name, bcrypt_cost(hash), WEB_COST_MIN, WEB_COST_MAX);
    }
    return 0;
}

static const struct conf_section top_section = {
    .name = "web config",
    .fields = top_fields,
    .keys = top_key_tables,
    .post = top_post,
};

static const struct conf_section *const own_sections[] = { &top_section, &tls_section, NULL };
static const struct conf_section *const *const all_sections[] = { own_sections, NULL };
static const struct conf_schema web_schema = {
    .top = &top_value,
    .sections = all_sections,
};

struct httpd_web {
    unsigned refs;
    struct conf_doc *doc;
    SSL_CTX *ssl;                          /* NULL without tls_server_config */
    char dummy[CRYPT_GENSALT_OUTPUT_SIZE]; /* a salt and cost, never a match */
};

static int tls_error(char *err, size_t errlen, const char *what, const char *file)
{
    char e[256];

    ERR_error_string_n(ERR_get_error(), e, sizeof(e));
    snprintf(err, errlen, "%s %s: %s", what, file, e);
    ERR_clear_error();
    return -EINVAL;
}

/* cipher_suites (TLS 1.0-1.2 only: TLS 1.3 keeps OpenSSL's suites, as Go
 * keeps its own), prefer_server_cipher_suites and curve_preferences. */
static int set_ciphers(SSL_CTX *ctx, const struct web_tls_cfg *t, char *err, size_t errlen)
{
    struct buf list;
    int rc = 0;

    buf_init(&list, 4096);
    for (unsigned i = 0; i < t->n_cipher_suites; i++) {
        const char *o = cipher_ossl(t->cipher_suites[i]);

        if (o && strcmp(o, "tls13") != 0)
            buf_printf(&list, "%s%s", list.len ? ":" : "", o);
    }
    if (t->n_cipher_suites && list.len == 0) {
        /* Only TLS 1.3 suites named: Go then offers no TLS 1.2 suite at
         * all; the closest here is TLS 1.2 with none, i.e. TLS 1.3 only. */
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    } else if (t->n_cipher_suites && (!list.data || SSL_CTX_set_cipher_list(ctx, list.data) != 1)) {
        rc = tls_error(err, errlen, "cipher_suites:", "none of them is usable here");
        goto out;
    }
    if (t->prefer_server_cipher_suites)
        SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    else
        SSL_CTX_clear_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (t->n_curve_preferences) {
        buf_reset(&list);
        for (unsigned i = 0; i < t->n_curve_preferences; i++)
            buf_printf(&list, "%s%s", list.len ? ":" : "", curve_ossl(t->curve_preferences[i]));
        if (!list.data || SSL_CTX_set1_groups_list(ctx, list.data) != 1)
            rc = tls_error(err, errlen, "curve_preferences:", "not usable here");
    }
out:
    buf_done(&list);
    return rc;
}

static int make_ctx(const struct web_tls_cfg *t, SSL_CTX **out, char *err, size_t errlen)
{
    static const int versions[] = { TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION, TLS1_3_VERSION };
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    int mode = SSL_VERIFY_NONE;
    int rc = -EINVAL;

    if (!ctx) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    SSL_CTX_set_min_proto_version(ctx, versions[version_index(t->min_version)]);
    SSL_CTX_set_max_proto_version(ctx, versions[version_index(t->max_version)]);
    if ((rc = set_ciphers(ctx, t, err, errlen)) < 0)
        goto fail;
    rc = -EINVAL;
    if (SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1) {
        rc = tls_error(err, errlen, "cert_file", t->cert_file);
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) != 1) {
        rc = tls_error(err, errlen, "key_file", t->key_file);
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        rc = tls_error(err, errlen, "key_file does not match cert_file:", t->key_file);
        goto fail;
    }
    if (t->client_ca_file && SSL_CTX_load_verify_locations(ctx, t->client_ca_file, NULL) != 1) {
        rc = tls_error(err, errlen, "client_ca_file", t->client_ca_file);
        goto fail;
    }
    /* exporter-toolkit's client_auth_type, as Go's tls.ClientAuthType. A
     * client certificate that is "requested" but not verified would fail
     * OpenSSL's verification: accept it then (verify callback). */
    if (strcmp(t->client_auth_type, "RequireAndVerifyClientCert") == 0)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    else if (strcmp(t->client_auth_type, "VerifyClientCertIfGiven") == 0)
        mode = SSL_VERIFY_PEER;
    else if (strcmp(t->client_auth_type, "RequireAnyClientCert") == 0)
        mode = -2;
    else if (strcmp(t->client_auth_type, "RequestClientCert") == 0)
        mode = -1;
    if (mode >= 0)
        SSL_CTX_set_verify(ctx, mode, NULL);
    else
        SSL_CTX_set_verify(ctx,
                           SSL_VERIFY_PEER | (mode == -2 ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                           httpd__web_accept_any_cert);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    *out = ctx;
    return 0;
fail:
    SSL_CTX_free(ctx);
    return rc;
}

int httpd__web_accept_any_cert(int ok, X509_STORE_CTX *x)
{
    (void)ok;
    (void)x;
    return 1;
}

/* The setting (salt and cost) that unknown users are checked against: the
 * cost most users have (the highest of those tied), so that a wrong
 * password costs the same whether the user exists or not. A setting alone
 * never equals a full hash, so nothing matches it. */
static int make_dummy(const struct web_cfg *c, char *out, size_t len, char *err, size_t errlen)
{
    unsigned count[WEB_COST_MAX + 1] = { 0 };
    int best = WEB_COST_MIN;

    for (unsigned i = 0; i < c->n_users; i++)
        count[bcrypt_cost(c->users[i].value)]++;
    for (int k = WEB_COST_MIN; k <= WEB_COST_MAX; k++)
        if (count[k] >= count[best])
            best = k;
    if (!crypt_gensalt_rn("$2b$", (unsigned long)best, NULL, 0, out, (int)len)) {
        snprintf(err, errlen, "cannot make a bcrypt salt: %s", strerror(errno));
        return -EIO;
    }
    return 0;
}

/* Wraps a loaded document; with `tls`, builds the TLS context its
 * tls_server_config names (reading the files). Takes `doc`'s reference. */
static int web_new(struct conf_doc *doc, bool tls, struct httpd_web **out, char *err, size_t errlen)
{
    struct httpd_web *w = calloc(1, sizeof(*w));
    const struct web_cfg *c = conf_doc_data(doc);
    int rc;

    if (!w) {
        conf_doc_unref(doc);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    w->refs = 1;
    w->doc = doc;
    if (c->n_users && (rc = make_dummy(c, w->dummy, sizeof(w->dummy), err, errlen)) < 0) {
        httpd_web_unref(w);
        return rc;
    }
    if (tls && c->tls && (rc = make_ctx(c->tls, &w->ssl, err, errlen)) < 0) {
        httpd_web_unref(w);
        return rc;
    }
    *out = w;
    return 0;
}

int httpd_web_load(const char *path, struct httpd_web **out, char *err, size_t errlen)
{
    struct conf_doc *doc;
    int rc;

    *out = NULL;
    rc = conf_load_file(&web_schema, path, 0, &doc, err, errlen);
    if (rc < 0)
        return rc;
    return web_new(doc, true, out, err, errlen);
}

int httpd__web_load_string(const char *text, size_t len, const char *name, struct httpd_web **out,
                           char *err, size_t errlen)
{
    struct conf_doc *doc;
    int rc;

    *out = NULL;
    rc = conf_load_string(&web_schema, text, len, name, 0, &doc, err, errlen);
    if (rc < 0)
        return rc;
    return web_new(doc, false, out, err, errlen);
}

struct httpd_web *httpd_web_ref(struct httpd_web *w)
{
    if (w)
        w->refs++;
    return w;
}

void httpd_web_unref(struct httpd_web *w)
{
    if (!w || --w->refs > 0)
        return;
    SSL_CTX_free(w->ssl);
    conf_doc_unref(w->doc);
    free(w);
}

bool httpd_web_tls(const struct httpd_web *w)
{
    return w && w->ssl;
}

bool httpd_web_auth(const struct httpd_web *w)
{
    return w && ((const struct web_cfg *)conf_doc_data(w->doc))->n_users > 0;
}

SSL_CTX *httpd__web_ssl(const struct httpd_web *w)
{
    return w ? w->ssl : NULL;
}

const char *httpd__web_user(const struct httpd_web *w, unsigned i, const char **hash)
{
    const struct web_cfg *c = conf_doc_data(w->doc);

    if (i >= c->n_users)
        return NULL;
    if (hash)
        *hash = c->users[i].value;
    return c->users[i].key;
}

const char *httpd__web_hash(const struct httpd_web *w, const char *user)
{
    const struct web_cfg *c = conf_doc_data(w->doc);

    for (unsigned i = 0; i < c->n_users; i++)
        if (strcmp(c->users[i].key, user) == 0)
            return c->users[i].value;
    return NULL;
}

const char *httpd__web_dummy_hash(const struct httpd_web *w)
{
    return w->dummy;
}
