/* SPDX-License-Identifier: Apache-2.0 */
/* Discovery's settings (docs/design.md "Configuration"): the libcyaml fields
 * of static, file and Kubernetes discovery, their defaults, and the checks
 * Prometheus makes when it loads them, so a piece that would fail when
 * applied is refused at load with its position. Const data and checks; any
 * thread. The checks are pure but for one: a kubeconfig-file is read and
 * parsed at load (discovery reads it again when it applies the job), so
 * --check-config, start-up and a reload refuse a missing or broken one at its
 * key. In-cluster access is not checked: a configuration meant for a pod must
 * check anywhere. */
#include <stdio.h>
#include <string.h>

#include "discovery/discovery.h"
#include "discovery/internal.h"

#define OPT CYAML_FLAG_OPTIONAL
#define PTR CYAML_FLAG_POINTER
#define UNL CYAML_UNLIMITED
#define STR(k, s, m) CYAML_FIELD_STRING_PTR(k, OPT, s, m, 0, UNL)
#define STRS(k, s, m, n) \
    CYAML_FIELD_SEQUENCE_COUNT(k, OPT | PTR, s, m, n, &conf_string_entry, 0, UNL)

/* A YAML sub-mapping whose keys land directly in the owner struct: the
 * mapping's data is the owner itself (offset 0) and its fields carry the
 * owner's offsets. */
#define VIRTUAL_MAPPING(k, S, fields)                                                 \
    {                                                                                 \
        .key = k, .data_offset = 0, .value = { CYAML_VALUE_MAPPING(OPT, S, fields) }, \
    }

/* --- static ------------------------------------------------------------ */

static const cyaml_schema_field_t static_fields[] = {
    STR("application", struct disc_static_cfg, application),
    STR("spy-name", struct disc_static_cfg, spy_name),
    CYAML_FIELD_SEQUENCE_COUNT("targets", PTR, struct disc_static_cfg, targets, n_targets,
                               &conf_string_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("labels", OPT | PTR, struct disc_static_cfg, labels, n_labels,
                               &conf_kv_entry, 0, UNL),
    CYAML_FIELD_END,
};
const cyaml_schema_value_t disc__static_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct disc_static_cfg, static_fields),
};
static const struct conf_key static_keys[] = {
    { .key = "labels", .mapkind = CONF_MAP_KV },
    { 0 },
};
static const struct conf_key *const static_key_tables[] = { static_keys, NULL };
static const struct conf_section static_section = {
    .name = "static config",
    .fields = static_fields,
    .keys = static_key_tables,
};

/* --- file -------------------------------------------------------------- */

static const cyaml_schema_field_t file_fields[] = {
    CYAML_FIELD_SEQUENCE_COUNT("files", PTR, struct disc_file_cfg, files, n_files,
                               &conf_string_entry, 0, UNL),
    CYAML_FIELD_UINT("refresh-interval", OPT, struct disc_file_cfg, refresh_interval_ms),
    CYAML_FIELD_END,
};
const cyaml_schema_value_t disc__file_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct disc_file_cfg, file_fields),
};
static const struct conf_key file_keys[] = {
    { .key = "refresh-interval", .unit = CONF_UNIT_DURATION, .def = "5m" },
    { 0 },
};
static const struct conf_key *const file_key_tables[] = { file_keys, NULL };

/* Prometheus' rule for file_sd paths, ^[^*]*(\*[^/]*)?\.(json|yml|yaml)$
 * (either case): a glob only in the last path element, and a file type
 * the provider can read. */
static bool valid_sd_path(const char *p)
{
    static const char *const exts[] = { ".json", ".yml", ".yaml", ".JSON", ".YML", ".YAML" };
    const char *star = strchr(p, '*');
    size_t len = strlen(p);

    if (star && strchr(star, '/'))
        return false;
    for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
        size_t el = strlen(exts[i]);

        if (len >= el && strcmp(p + len - el, exts[i]) == 0 && (!star || star < p + len - el))
            return true;
    }
    return false;
}

static int file_post(struct conf_load *ld, struct conf_node *map)
{
    struct conf_node *files = conf_get(map, "files");

    for (size_t i = 0; i < conf_len(files); i++) {
        struct conf_node *f = conf_at(files, i);

        if (!valid_sd_path(conf_str(f)))
            return conf_fail(ld, f,
                             "path name \"%.200s\" is not valid for file discovery "
                             "(a glob only in the file name, ending in .json, .yml or .yaml)",
                             conf_str(f));
    }
    return 0;
}

static const struct conf_section file_section = {
    .name = "file-sd config",
    .fields = file_fields,
    .keys = file_key_tables,
    .post = file_post,
};

/* --- Kubernetes selectors, as the API server parses them ---------------- */

static bool alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A label name or value part: at most 63 characters of [A-Za-z0-9_.-],
 * beginning and ending with an alphanumeric (empty allowed for values). */
static bool qualified_part(const char *s, size_t n, bool may_be_empty)
{
    if (n == 0)
        return may_be_empty;
    if (n > 63 || !alnum(s[0]) || !alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    }
    return true;
}

/* [prefix/]name, the prefix a DNS subdomain of at most 253 characters. */
static bool label_key(const char *s, size_t n)
{
    const char *slash = memchr(s, '/', n);

    if (!slash)
        return qualified_part(s, n, false);
    if (slash == s || (size_t)(slash - s) > 253)
        return false;
    for (const char *c = s; c < slash; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
            return false;
    }
    return qualified_part(slash + 1, n - (size_t)(slash + 1 - s), false);
}

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* One token of [A-Za-z0-9_./-]: a key or a value. */
static const char *token(const char *s, size_t *n)
{
    const char *e = s;

    while (*e && (alnum(*e) || strchr("-_./", *e)))
        e++;
    *n = (size_t)(e - s);
    return e;
}

/* labels.Parse: key, !key, key=v, key==v, key!=v, key in (v,...), key notin
 * (v,...), key>N, key<N; requirements separated by commas. */
static bool label_selector_ok(const char *s, char *why, size_t whylen)
{
    for (;;) {
        const char *k;
        size_t kn, vn;
        bool not = false;

        s = skip_space(s);
        if (*s == '!') {
            not = true;
            s = skip_space(s + 1);
        }
        k = s;
        s = token(s, &kn);
        if (!label_key(k, kn)) {
            snprintf(why, whylen, "invalid label key \"%.*s\"", (int)(kn ? kn : 1), k);
            return false;
        }
        s = skip_space(s);
        if (not || *s == ',' || !*s) {
            /* existence */
        } else if (s[0] == '=' || (s[0] == '!' && s[1] == '=')) {
            const char *v;

            s += s[0] == '!' || s[1] == '=' ? 2 : 1;
            v = s = skip_space(s);
            s = token(s, &vn);
            if (!qualified_part(v, vn, true)) {
                snprintf(why, whylen, "invalid label value \"%.*s\"", (int)(vn ? vn : 1), v);
                return false;
            }
        } else if (s[0] == '>' || s[0] == '<') {
            const char *v = s = skip_space(s + 1);

            while (*s >= '0' && *s <= '9')
                s++;
            if (s == v) {
                snprintf(why, whylen, "%c needs an integer", v[-1] == ' ' ? '>' : v[-1]);
                return false;
            }
        } else if (strncmp(s, "in", 2) == 0 || strncmp(s, "notin", 5) == 0) {
            s = skip_space(s + (s[0] == 'i' ? 2 : 5));
            if (*s != '(') {
                snprintf(why, whylen, "expected \"(\" after in/notin");
                return false;
            }
            if (*skip_space(s + 1) == ')') {
                snprintf(why, whylen, "the set of values of in/notin cannot be empty");
                return false;
            }
            do {
                const char *v = s = skip_space(s + 1);

                s = skip_space(token(s, &vn));
                if (!qualified_part(v, vn, true)) {
                    snprintf(why, whylen, "invalid label value \"%.*s\"", (int)(vn ? vn : 1), v);
                    return false;
                }
            } while (*s == ',');
            if (*s != ')') {
                snprintf(why, whylen, "expected \")\" to close the set");
                return false;
            }
            s++;
        } else {
            snprintf(why, whylen, "unexpected \"%.20s\"", s);
            return false;
        }
        s = skip_space(s);
        if (!*s)
            return true;
        if (*s != ',') {
            snprintf(why, whylen, "unexpected \"%.20s\"", s);
            return false;
        }
        s++;
    }
}

/* fields.ParseSelector: key=value, key==value, key!=value separated by
 * commas; \, \= \! and \\ escape. */
static bool field_selector_ok(const char *s, char *why, size_t whylen)
{
    const char *term = s;

    for (;;) {
        const char *op = NULL, *end = term;

        for (; *end && *end != ','; end++) {
            if (*end == '\\') {
                if (!end[1] || !strchr(",=!\\", end[1])) {
                    snprintf(why, whylen, "invalid escape in \"%.40s\"", term);
                    return false;
                }
                end++;
            } else if (!op && (*end == '=' || (*end == '!' && end[1] == '='))) {
                op = end;
            }
        }
        if (!op || op == term) {
            snprintf(why, whylen, "can't understand \"%.*s\"", (int)(end - term), term);
            return false;
        }
        if (!*end)
            return true;
        term = end + 1;
    }
}

static int selector_post(struct conf_load *ld, struct conf_node *map)
{
    struct conf_node *label = conf_get(map, "label"), *field = conf_get(map, "field");
    char why[160];

    if (label && *conf_str(label) && !label_selector_ok(conf_str(label), why, sizeof(why)))
        return conf_fail(ld, label, "invalid label selector \"%.80s\": %s", conf_str(label), why);
    if (field && *conf_str(field) && !field_selector_ok(conf_str(field), why, sizeof(why)))
        return conf_fail(ld, field, "invalid field selector \"%.80s\": %s", conf_str(field), why);
    return 0;
}

/* --- kubernetes -------------------------------------------------------- */

static const cyaml_schema_field_t selector_fields[] = {
    CYAML_FIELD_STRING_PTR("role", CYAML_FLAG_DEFAULT, struct disc_k8s_selector_cfg, role, 0, UNL),
    STR("label", struct disc_k8s_selector_cfg, label),
    STR("field", struct disc_k8s_selector_cfg, field),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t selector_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct disc_k8s_selector_cfg, selector_fields),
};
static const char *const selector_roles[] = { "pod", "node", NULL };
static const struct conf_key selector_keys[] = {
    { .key = "role", .choices = selector_roles },
    { 0 },
};
static const struct conf_key *const selector_key_tables[] = { selector_keys, NULL };
static const struct conf_section selector_section = {
    .name = "selector",
    .fields = selector_fields,
    .keys = selector_key_tables,
    .post = selector_post,
};

static const cyaml_schema_field_t k8s_ns_fields[] = {
    CYAML_FIELD_BOOL("own-namespace", OPT, struct disc_k8s_cfg, own_namespace),
    STRS("names", struct disc_k8s_cfg, namespaces, n_namespaces),
    CYAML_FIELD_END,
};
static const struct conf_section k8s_ns_section = {
    .name = "namespaces",
    .fields = k8s_ns_fields,
};

static const cyaml_schema_field_t k8s_attach_fields[] = {
    CYAML_FIELD_BOOL("node", OPT, struct disc_k8s_cfg, attach_node),
    CYAML_FIELD_BOOL("namespace", OPT, struct disc_k8s_cfg, attach_namespace),
    CYAML_FIELD_END,
};
static const struct conf_section k8s_attach_section = {
    .name = "attach-metadata",
    .fields = k8s_attach_fields,
};

static const cyaml_schema_field_t k8s_fields[] = {
    STR("role", struct disc_k8s_cfg, role),
    STR("api-server", struct disc_k8s_cfg, api_server),
    STR("kubeconfig-file", struct disc_k8s_cfg, kubeconfig_file),
    VIRTUAL_MAPPING("namespaces", struct disc_k8s_cfg, k8s_ns_fields),
    CYAML_FIELD_SEQUENCE_COUNT("selectors", OPT | PTR, struct disc_k8s_cfg, selectors, n_selectors,
                               &selector_entry, 0, UNL),
    VIRTUAL_MAPPING("attach-metadata", struct disc_k8s_cfg, k8s_attach_fields),
    NET_HTTP_CFG_FIELDS(struct disc_k8s_cfg, http),
    CYAML_FIELD_BOOL(".http-set", OPT, struct disc_k8s_cfg, http_set),
    STR("service-account-dir", struct disc_k8s_cfg, service_account_dir),
    CYAML_FIELD_END,
};
const cyaml_schema_value_t disc__k8s_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct disc_k8s_cfg, k8s_fields),
};
static const char *const k8s_roles[] = { "pod", NULL };
static const struct conf_key k8s_keys[] = {
    { .key = "role", .def = "pod", .choices = k8s_roles },
    { .key = "service-account-dir", .def = "/var/run/secrets/kubernetes.io/serviceaccount" },
    { 0 },
};
static const struct conf_key *const k8s_key_tables[] = { k8s_keys, net_http_cfg_keys, NULL };

static int k8s_post(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *api = conf_user_key(n, "api-server"),
                     *kc = conf_user_key(n, "kubeconfig-file");
    struct conf_node *ns = conf_get(n, "namespaces"), *own = conf_user_key(ns, "own-namespace");
    struct conf_node *sels = conf_get(n, "selectors"), *http = NULL;
    char why[128];

    if (api && kc)
        return conf_fail(ld, kc,
                         "api-server and kubeconfig-file cannot both be given in "
                         "kubernetes-sd config");
    if (api && net_url_check(conf_str(conf_get(n, "api-server")), NULL, 0, why, sizeof(why)) < 0)
        return conf_fail(ld, conf_get(n, "api-server"),
                         "expected a URL like https://host:6443, "
                         "got \"%.80s\" (%s)",
                         conf_str(conf_get(n, "api-server")), why);
    if (own && conf_true(conf_get(ns, "own-namespace")) && (api || kc))
        return conf_fail(ld, own,
                         "namespaces.own-namespace needs in-cluster access and cannot "
                         "be used with %s",
                         api ? "api-server" : "kubeconfig-file");
    for (size_t i = 0; net_http_cfg_key_names[i] && !http; i++)
        http = conf_user_key(n, net_http_cfg_key_names[i]);
    if (http && kc)
        return conf_fail(ld, http,
                         "\"%s\" cannot be combined with kubeconfig-file (the "
                         "kubeconfig holds the client settings)",
                         conf_str(http));
    if (http && !api)
        return conf_fail(ld, http,
                         "\"%s\" needs api-server in kubernetes-sd config (in-cluster "
                         "access uses the service account)",
                         conf_str(http));
    if (http && conf_set(ld, n, ".http-set", "true") < 0)
        return -1;
    for (size_t i = 0; i < conf_len(sels); i++) {
        const char *role = conf_str(conf_get(conf_at(sels, i), "role"));

        for (size_t k = 0; k < i; k++) {
            if (strcmp(conf_str(conf_get(conf_at(sels, k), "role")), role) == 0)
                return conf_fail(ld, conf_at(sels, i), "duplicated selector role: %s", role);
        }
    }
    return net_http_cfg_check(ld, n, "kubernetes-sd config");
}

/* Once every rule of the document held (so a file is read only for a
 * configuration that is otherwise valid): the kubeconfig, as discovery
 * will read it when it applies the job. */
static int k8s_finish(struct conf_load *ld, const struct conf_node *n, void *obj)
{
    const struct disc_k8s_cfg *k = obj;
    char why[512];

    if (k->kubeconfig_file && disc__kubeconfig_check(k->kubeconfig_file, why, sizeof(why)) < 0)
        return conf_fail(ld, conf_user_key(n, "kubeconfig-file"), "%s", why);
    return 0;
}

static const struct conf_section k8s_section = {
    .name = "kubernetes-sd config",
    .fields = k8s_fields,
    .keys = k8s_key_tables,
    .pre = net_http_cfg_pre,
    .post = k8s_post,
    .finish = k8s_finish,
};

/* --- manager ----------------------------------------------------------- */

const struct conf_key disc_cfg_keys[] = {
    { .key = "coalesce-delay", .unit = CONF_UNIT_DURATION, .def = "1s" },
    CONF_KEY_NUM("max-watch-line", CONF_UNIT_BYTES, DISC_DEFAULT_MAX_WATCH_LINE),
    { 0 },
};

const struct conf_section *const disc_cfg_sections[] = {
    &static_section, &file_section, &selector_section, &k8s_ns_section, &k8s_attach_section,
    &k8s_section,    NULL,
};
