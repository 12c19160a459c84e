/* The HTTP client settings every HTTP-speaking module embeds: their
 * libcyaml fields, defaults and cross-field rules (see net.h). Const data
 * and pure checks; any thread. */
#include <stddef.h>
#include <string.h>

#include "net/net.h"

#define OPT CYAML_FLAG_OPTIONAL
#define STR(k, s, m) CYAML_FIELD_STRING_PTR(k, OPT, s, m, 0, CYAML_UNLIMITED)

const cyaml_schema_field_t net__tls_fields[] = {
    STR("ca-file", struct net_tls_cfg, ca_file),
    STR("cert-file", struct net_tls_cfg, cert_file),
    STR("key-file", struct net_tls_cfg, key_file),
    STR("server-name", struct net_tls_cfg, server_name),
    CYAML_FIELD_BOOL("insecure-skip-verify", OPT, struct net_tls_cfg, insecure_skip_verify),
    CYAML_FIELD_END,
};

const cyaml_schema_field_t net__basic_auth_fields[] = {
    STR("username", struct net_basic_auth_cfg, username),
    STR("password", struct net_basic_auth_cfg, password),
    STR("password-file", struct net_basic_auth_cfg, password_file),
    CYAML_FIELD_END,
};

const struct conf_key net_http_cfg_keys[] = {
    { .key = "enable-http2", .def = "true" },
    { .key = "follow-redirects", .def = "true" },
    { 0 },
};

const char *const net_http_cfg_key_names[] = {
    "basic-auth", "bearer-token", "bearer-token-file", "tls-config", "proxy-url",
    "enable-http2", "follow-redirects", NULL,
};

const struct conf_section net_tls_cfg_section = {
    .name = "tls-config",
    .fields = net__tls_fields,
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

int net_http_cfg_check(struct conf_load *ld, struct conf_node *map, const char *what)
{
    static const char *const auth[] = { "basic-auth", "bearer-token", "bearer-token-file" };
    struct conf_node *first = NULL;

    for (size_t i = 0; i < sizeof(auth) / sizeof(auth[0]); i++) {
        struct conf_node *k = conf_user_key(map, auth[i]);

        if (k && first)
            return conf_fail(ld, k, "at most one of basic-auth, bearer-token and "
                             "bearer-token-file may be given in %s (\"%s\" conflicts with "
                             "\"%s\")", what, auth[i], conf_str(first));
        if (k)
            first = k;
    }
    return 0;
}

void net_request_opts_from_cfg(struct net_request_opts *o, struct net_tls *tls,
                               const struct net_http_cfg *h, const char *bearer,
                               const char *password)
{
    memset(tls, 0, sizeof(*tls));
    tls->ca_file = h->tls.ca_file;
    tls->cert_file = h->tls.cert_file;
    tls->key_file = h->tls.key_file;
    tls->server_name = h->tls.server_name;
    tls->insecure_skip_verify = h->tls.insecure_skip_verify;
    o->tls = tls;
    o->proxy_url = h->proxy_url;
    o->http2 = h->enable_http2;
    o->follow_redirects = h->follow_redirects;
    o->bearer_token = bearer;
    o->username = h->basic_auth ? h->basic_auth->username : NULL;
    o->password = h->basic_auth ? password : NULL;
}
