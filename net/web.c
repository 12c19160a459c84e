/* The status server's web configuration (--web.config.file), in the format
 * of Prometheus' exporter-toolkit: `tls_server_config` (cert_file,
 * key_file, client_ca_file, client_auth_type, min_version) and
 * `basic_auth_users` (user: bcrypt hash).
 *
 * Purpose. Loads the file with conf/ (so errors name FILE:LINE:COL), builds
 * the OpenSSL server context and checks the hashes; verifies a password
 * against its hash (libxcrypt's bcrypt, $2a$/$2b$/$2y$).
 *
 * Threading and ownership. Loading runs on any thread. A loaded web config
 * is immutable and reference counted: the server holds one reference.
 * net__web_verify() is pure and runs on a libuv pool thread (a bcrypt hash
 * costs tens of milliseconds: never on the loop). */
#include <crypt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "net/internal.h"

struct web_tls_cfg {
    char *cert_file;
    char *key_file;
    char *client_ca_file;
    char *client_auth_type;
    char *min_version;
};

struct web_cfg {
    struct web_tls_cfg *tls;
    struct conf_kv *users;
    unsigned n_users;
};

#define OPT CYAML_FLAG_OPTIONAL
#define STR(k, s, f) CYAML_FIELD_STRING_PTR(k, OPT, s, f, 0, CYAML_UNLIMITED)

static const cyaml_schema_field_t tls_fields[] = {
    STR("cert-file", struct web_tls_cfg, cert_file),
    STR("key-file", struct web_tls_cfg, key_file),
    STR("client-ca-file", struct web_tls_cfg, client_ca_file),
    STR("client-auth-type", struct web_tls_cfg, client_auth_type),
    STR("min-version", struct web_tls_cfg, min_version),
    CYAML_FIELD_END,
};

static const char *const auth_types[] = {
    "NoClientCert", "RequestClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert", NULL,
};
static const char *const tls_versions[] = { "TLS10", "TLS11", "TLS12", "TLS13", NULL };

static const struct conf_key tls_keys[] = {
    { .key = "cert-file" },
    { .key = "key-file" },
    { .key = "client-ca-file" },
    { .key = "client-auth-type", .def = "NoClientCert", .choices = auth_types },
    { .key = "min-version", .def = "TLS12", .choices = tls_versions },
    { 0 },
};
static const struct conf_key *const tls_key_tables[] = { tls_keys, NULL };

static int tls_post(struct conf_load *ld, struct conf_node *n)
{
    const char *type = conf_str(conf_get(n, "client-auth-type"));

    if (!conf_get(n, "cert-file") || !conf_get(n, "key-file"))
        return conf_fail(ld, n, "tls_server_config needs cert_file and key_file");
    if (strstr(type, "Verify") && !conf_get(n, "client-ca-file"))
        return conf_fail(ld, conf_get(n, "client-auth-type"),
                         "client_auth_type %s needs client_ca_file", type);
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
    CYAML_FIELD_SEQUENCE_COUNT("basic-auth-users", OPT | CYAML_FLAG_POINTER, struct web_cfg,
                               users, n_users, &conf_kv_entry, 0, CYAML_UNLIMITED),
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
                             "($2a$, $2b$ or $2y$; e.g. from htpasswd -nbB)", name);
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

struct net_web {
    unsigned refs;
    struct conf_doc *doc;
    SSL_CTX *ssl; /* NULL without tls_server_config */
};

static int tls_error(char *err, size_t errlen, const char *what, const char *file)
{
    char e[256];

    ERR_error_string_n(ERR_get_error(), e, sizeof(e));
    snprintf(err, errlen, "%s %s: %s", what, file, e);
    ERR_clear_error();
    return -EINVAL;
}

static int make_ctx(const struct web_tls_cfg *t, SSL_CTX **out, char *err, size_t errlen)
{
    static const int versions[] = { TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION,
                                    TLS1_3_VERSION };
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    int mode = SSL_VERIFY_NONE;
    int rc = -EINVAL;

    if (!ctx) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int i = 0; tls_versions[i]; i++)
        if (strcmp(t->min_version, tls_versions[i]) == 0)
            SSL_CTX_set_min_proto_version(ctx, versions[i]);
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
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (mode == -2 ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                           net__web_accept_any_cert);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    *out = ctx;
    return 0;
fail:
    SSL_CTX_free(ctx);
    return rc;
}

int net__web_accept_any_cert(int ok, X509_STORE_CTX *x)
{
    (void)ok;
    (void)x;
    return 1;
}

/* Wraps a loaded document; with `tls`, builds the TLS context its
 * tls_server_config names (reading the files). Takes `doc`'s reference. */
static int web_new(struct conf_doc *doc, bool tls, struct net_web **out, char *err,
                   size_t errlen)
{
    struct net_web *w = calloc(1, sizeof(*w));
    const struct web_cfg *c = conf_doc_data(doc);
    int rc;

    if (!w) {
        conf_doc_unref(doc);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    w->refs = 1;
    w->doc = doc;
    if (tls && c->tls && (rc = make_ctx(c->tls, &w->ssl, err, errlen)) < 0) {
        net_web_unref(w);
        return rc;
    }
    *out = w;
    return 0;
}

int net_web_load(const char *path, struct net_web **out, char *err, size_t errlen)
{
    struct conf_doc *doc;
    int rc;

    *out = NULL;
    rc = conf_load_file(&web_schema, path, 0, &doc, err, errlen);
    if (rc < 0)
        return rc;
    return web_new(doc, true, out, err, errlen);
}

int net__web_load_string(const char *text, size_t len, const char *name, struct net_web **out,
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

struct net_web *net_web_ref(struct net_web *w)
{
    if (w)
        w->refs++;
    return w;
}

void net_web_unref(struct net_web *w)
{
    if (!w || --w->refs > 0)
        return;
    SSL_CTX_free(w->ssl);
    conf_doc_unref(w->doc);
    free(w);
}

bool net_web_tls(const struct net_web *w)
{
    return w && w->ssl;
}

bool net_web_auth(const struct net_web *w)
{
    return w && ((const struct web_cfg *)conf_doc_data(w->doc))->n_users > 0;
}

SSL_CTX *net__web_ssl(const struct net_web *w)
{
    return w ? w->ssl : NULL;
}

const char *net__web_user(const struct net_web *w, unsigned i, const char **hash)
{
    const struct web_cfg *c = conf_doc_data(w->doc);

    if (i >= c->n_users)
        return NULL;
    if (hash)
        *hash = c->users[i].value;
    return c->users[i].key;
}

const char *net__web_hash(const struct net_web *w, const char *user)
{
    const struct web_cfg *c = conf_doc_data(w->doc);

    for (unsigned i = 0; i < c->n_users; i++)
        if (strcmp(c->users[i].key, user) == 0)
            return c->users[i].value;
    return NULL;
}

bool net__web_verify(const char *password, const char *hash)
{
    struct crypt_data cd;
    const char *h;
    size_t n = strlen(hash);

    /* crypt_rn: libxcrypt's crypt_r that returns NULL on failure (and that
     * sanitizers do not intercept: their crypt_r hook breaks with it). */
    memset(&cd, 0, sizeof(cd));
    h = crypt_rn(password, hash, &cd, (int)sizeof(cd));
    return h && strlen(h) == n && CRYPTO_memcmp(h, hash, n) == 0;
}
