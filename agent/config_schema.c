/* The declarative libcyaml schema of proflet's configuration, plus the
 * little metadata libcyaml has no slot for (defaults, units, choices, human
 * names of mappings, which fields are YAML maps with user-chosen keys).
 *
 * The schema loads straight into the structs of agent/config.h. Keys here
 * are the canonical kebab-case spellings only: config.c normalises
 * snake_case, converts user maps (labels, headers, params, profiles) into
 * sequences of entries, converts durations and sizes to integers and fills
 * defaults before libcyaml sees the document, walking this very schema to
 * do so. Keys starting with "." are internal: only config.c may write them.
 *
 * Everything here is const data; no state, any thread. */
#include <stddef.h>
#include <string.h>

#include <cyaml/cyaml.h>

#include "agent/config.h"
#include "agent/config_int.h"

#define OPT CYAML_FLAG_OPTIONAL
#define PTR CYAML_FLAG_POINTER
#define UNL CYAML_UNLIMITED

static const cyaml_schema_value_t str_entry = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

#define STR(k, s, m) CYAML_FIELD_STRING_PTR(k, OPT, s, m, 0, UNL)
#define REQ_STR(k, s, m) CYAML_FIELD_STRING_PTR(k, CYAML_FLAG_DEFAULT, s, m, 0, UNL)
#define STRS(k, s, m, n) CYAML_FIELD_SEQUENCE_COUNT(k, OPT | PTR, s, m, n, &str_entry, 0, UNL)

/* --- shared pieces ------------------------------------------------------ */

static const cyaml_schema_field_t kv_fields[] = {
    STR(".key", struct cfg_kv, key),
    STR(".value", struct cfg_kv, value),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t kv_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_kv, kv_fields),
};

static const cyaml_schema_field_t param_fields[] = {
    STR(".key", struct cfg_param, key),
    STRS(".values", struct cfg_param, values, n_values),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t param_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_param, param_fields),
};

static const cyaml_schema_field_t tls_fields[] = {
    STR("ca-file", struct cfg_tls, ca_file),
    STR("cert-file", struct cfg_tls, cert_file),
    STR("key-file", struct cfg_tls, key_file),
    STR("server-name", struct cfg_tls, server_name),
    CYAML_FIELD_BOOL("insecure-skip-verify", OPT, struct cfg_tls, insecure_skip_verify),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t basic_auth_fields[] = {
    STR("username", struct cfg_basic_auth, username),
    STR("password", struct cfg_basic_auth, password),
    STR("password-file", struct cfg_basic_auth, password_file),
    CYAML_FIELD_END,
};

/* The HTTP client keys sit directly in their owner's mapping (as in
 * Prometheus), so they are fields of the owner at offsets inside its
 * embedded struct cfg_http. */
#define HTTP_FIELDS(S)                                                                     \
    CYAML_FIELD_MAPPING_PTR("basic-auth", OPT, S, http.basic_auth, basic_auth_fields),    \
    STR("bearer-token", S, http.bearer_token),                                             \
    STR("bearer-token-file", S, http.bearer_token_file),                                   \
    CYAML_FIELD_MAPPING("tls-config", OPT, S, http.tls, tls_fields),                       \
    STR("proxy-url", S, http.proxy_url),                                                   \
    CYAML_FIELD_BOOL("enable-http2", OPT, S, http.enable_http2),                           \
    CYAML_FIELD_BOOL("follow-redirects", OPT, S, http.follow_redirects)

/* A YAML sub-mapping whose keys land directly in the owner struct: the
 * mapping's data is the owner itself (offset 0) and its fields carry the
 * owner's offsets. */
#define VIRTUAL_MAPPING(k, S, fields)                                                      \
    {                                                                                      \
        .key = k, .data_offset = 0,                                                        \
        .value = { CYAML_VALUE_MAPPING(OPT, S, fields) },                                  \
    }

/* --- scrape configs ----------------------------------------------------- */

static const cyaml_strval_t kind_strings[] = {
    { ".duration", CFG_KIND_DURATION },
    { ".gauge", CFG_KIND_GAUGE },
    { ".cumulative-memory", CFG_KIND_CUMULATIVE_MEMORY },
    { ".cumulative-contention", CFG_KIND_CUMULATIVE_CONTENTION },
    { ".delta", CFG_KIND_DELTA },
    { ".custom", CFG_KIND_CUSTOM },
};

const cyaml_schema_field_t cfg__profile_fields[] = {
    STR(".name", struct cfg_profile, name),
    STR("path", struct cfg_profile, path),
    CYAML_FIELD_ENUM(".kind", OPT, struct cfg_profile, kind, kind_strings,
                     CYAML_ARRAY_LEN(kind_strings)),
    CYAML_FIELD_BOOL("enabled", OPT, struct cfg_profile, enabled),
    CYAML_FIELD_BOOL("delta", OPT, struct cfg_profile, delta),
    STR(".send-name", struct cfg_profile, send_name),
    CYAML_FIELD_SEQUENCE_COUNT("params", OPT | PTR, struct cfg_profile, params, n_params,
                               &param_entry, 0, UNL),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t profile_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_profile, cfg__profile_fields),
};

static const cyaml_schema_field_t static_fields[] = {
    STR("application", struct cfg_static, application),
    STR("spy-name", struct cfg_static, spy_name),
    CYAML_FIELD_SEQUENCE_COUNT("targets", PTR, struct cfg_static, targets, n_targets, &str_entry,
                               0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("labels", OPT | PTR, struct cfg_static, labels, n_labels,
                               &kv_entry, 0, UNL),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t static_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_static, static_fields),
};

static const cyaml_schema_field_t file_sd_fields[] = {
    CYAML_FIELD_SEQUENCE_COUNT("files", PTR, struct cfg_file_sd, files, n_files, &str_entry, 0,
                               UNL),
    CYAML_FIELD_UINT("refresh-interval", OPT, struct cfg_file_sd, refresh_interval_ms),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t file_sd_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_file_sd, file_sd_fields),
};

static const cyaml_schema_field_t selector_fields[] = {
    STR("role", struct cfg_k8s_selector, role),
    STR("label", struct cfg_k8s_selector, label),
    STR("field", struct cfg_k8s_selector, field),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t selector_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_k8s_selector, selector_fields),
};

static const cyaml_schema_field_t k8s_ns_fields[] = {
    CYAML_FIELD_BOOL("own-namespace", OPT, struct cfg_k8s_sd, own_namespace),
    STRS("names", struct cfg_k8s_sd, namespaces, n_namespaces),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t k8s_attach_fields[] = {
    CYAML_FIELD_BOOL("node", OPT, struct cfg_k8s_sd, attach_node),
    CYAML_FIELD_BOOL("namespace", OPT, struct cfg_k8s_sd, attach_namespace),
    CYAML_FIELD_END,
};

const cyaml_schema_field_t cfg__k8s_fields[] = {
    STR("role", struct cfg_k8s_sd, role),
    STR("api-server", struct cfg_k8s_sd, api_server),
    STR("kubeconfig-file", struct cfg_k8s_sd, kubeconfig_file),
    VIRTUAL_MAPPING("namespaces", struct cfg_k8s_sd, k8s_ns_fields),
    CYAML_FIELD_SEQUENCE_COUNT("selectors", OPT | PTR, struct cfg_k8s_sd, selectors, n_selectors,
                               &selector_entry, 0, UNL),
    VIRTUAL_MAPPING("attach-metadata", struct cfg_k8s_sd, k8s_attach_fields),
    HTTP_FIELDS(struct cfg_k8s_sd),
    CYAML_FIELD_BOOL(".http-set", OPT, struct cfg_k8s_sd, http_set),
    STR("service-account-dir", struct cfg_k8s_sd, service_account_dir),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t k8s_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_k8s_sd, cfg__k8s_fields),
};

const cyaml_schema_field_t cfg__relabel_fields[] = {
    STRS("source-labels", struct relabel_cfg, source_labels, n_source_labels),
    STR("separator", struct relabel_cfg, separator),
    STR("regex", struct relabel_cfg, regex),
    CYAML_FIELD_BOOL(".regex-null", OPT, struct relabel_cfg, regex_null),
    CYAML_FIELD_UINT("modulus", OPT, struct relabel_cfg, modulus),
    STR("target-label", struct relabel_cfg, target_label),
    STR("replacement", struct relabel_cfg, replacement),
    STR("action", struct relabel_cfg, action),
    STR("name-validation-scheme", struct relabel_cfg, name_validation_scheme),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t relabel_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct relabel_cfg, cfg__relabel_fields),
};

static const cyaml_strval_t scheme_strings[] = {
    { "utf8", RELABEL_SCHEME_UTF8 },
    { "legacy", RELABEL_SCHEME_LEGACY },
};

static const cyaml_schema_value_t enabled_profiles_check = {
    CYAML_VALUE_SEQUENCE(CYAML_FLAG_POINTER, char *, &str_entry, 0, CYAML_UNLIMITED),
};

const cyaml_schema_field_t cfg__scrape_fields[] = {
    REQ_STR("job-name", struct cfg_scrape, job_name),
    CYAML_FIELD_UINT("scrape-interval", OPT, struct cfg_scrape, interval_ms),
    CYAML_FIELD_UINT("scrape-timeout", OPT, struct cfg_scrape, timeout_ms),
    STR("scheme", struct cfg_scrape, scheme),
    STR("path-prefix", struct cfg_scrape, path_prefix),
    CYAML_FIELD_SEQUENCE_COUNT("params", OPT | PTR, struct cfg_scrape, params, n_params,
                               &param_entry, 0, UNL),
    CYAML_FIELD_BOOL("use-delta-profiles", OPT, struct cfg_scrape, use_delta_profiles),
    CYAML_FIELD_IGNORE("enabled-profiles", OPT),
    CYAML_FIELD_SEQUENCE_COUNT("profiles", OPT | PTR, struct cfg_scrape, profiles, n_profiles,
                               &profile_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("static-configs", OPT | PTR, struct cfg_scrape, static_configs,
                               n_static, &static_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("file-sd-configs", OPT | PTR, struct cfg_scrape, file_sd,
                               n_file_sd, &file_sd_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("kubernetes-sd-configs", OPT | PTR, struct cfg_scrape, k8s_sd,
                               n_k8s_sd, &k8s_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("relabel-configs", OPT | PTR, struct cfg_scrape, relabel,
                               n_relabel, &relabel_entry, 0, UNL),
    CYAML_FIELD_ENUM("name-validation-scheme", OPT, struct cfg_scrape, name_validation,
                     scheme_strings, CYAML_ARRAY_LEN(scheme_strings)),
    HTTP_FIELDS(struct cfg_scrape),
    CYAML_FIELD_UINT("body-size-limit", OPT, struct cfg_scrape, body_size_limit),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t scrape_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_scrape, cfg__scrape_fields),
};

/* --- remote-write ------------------------------------------------------- */

static const cyaml_strval_t proto_strings[] = {
    { "push", CFG_PROTO_PUSH },
    { "ingest", CFG_PROTO_INGEST },
    { ".dir", CFG_PROTO_DIR },
};

static const cyaml_schema_field_t batch_fields[] = {
    CYAML_FIELD_UINT("max-profiles", OPT, struct cfg_remote, batch_max_profiles),
    CYAML_FIELD_UINT("max-bytes", OPT, struct cfg_remote, batch_max_bytes),
    CYAML_FIELD_UINT("max-wait", OPT, struct cfg_remote, batch_max_wait_ms),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t queue_fields[] = {
    CYAML_FIELD_UINT("max-profiles", OPT, struct cfg_remote, queue_max_profiles),
    CYAML_FIELD_UINT("max-bytes", OPT, struct cfg_remote, queue_max_bytes),
    CYAML_FIELD_END,
};

const cyaml_schema_field_t cfg__remote_fields[] = {
    REQ_STR("url", struct cfg_remote, url),
    STR("name", struct cfg_remote, name),
    CYAML_FIELD_ENUM("protocol", OPT, struct cfg_remote, protocol, proto_strings,
                     CYAML_ARRAY_LEN(proto_strings)),
    CYAML_FIELD_SEQUENCE_COUNT("headers", OPT | PTR, struct cfg_remote, headers, n_headers,
                               &kv_entry, 0, UNL),
    STR("tenant-id", struct cfg_remote, tenant_id),
    HTTP_FIELDS(struct cfg_remote),
    CYAML_FIELD_UINT("remote-timeout", OPT, struct cfg_remote, remote_timeout_ms),
    CYAML_FIELD_UINT("min-backoff", OPT, struct cfg_remote, min_backoff_ms),
    CYAML_FIELD_UINT("max-backoff", OPT, struct cfg_remote, max_backoff_ms),
    CYAML_FIELD_UINT("max-retries", OPT, struct cfg_remote, max_retries),
    CYAML_FIELD_BOOL("gzip", OPT, struct cfg_remote, gzip_request),
    CYAML_FIELD_SEQUENCE_COUNT("external-labels", OPT | PTR, struct cfg_remote, external_labels,
                               n_external_labels, &kv_entry, 0, UNL),
    VIRTUAL_MAPPING("batch", struct cfg_remote, batch_fields),
    VIRTUAL_MAPPING("queue", struct cfg_remote, queue_fields),
    CYAML_FIELD_UINT("max-inflight", OPT, struct cfg_remote, max_inflight),
    CYAML_FIELD_UINT("max-dir-bytes", OPT, struct cfg_remote, dir_max_bytes),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t remote_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_remote, cfg__remote_fields),
};

/* --- top level ---------------------------------------------------------- */

static const cyaml_schema_field_t spool_fields[] = {
    STR("dir", struct cfg_spool, dir),
    CYAML_FIELD_UINT("max-bytes", OPT, struct cfg_spool, max_bytes),
    CYAML_FIELD_UINT("max-age", OPT, struct cfg_spool, max_age_ms),
    CYAML_FIELD_UINT("segment-bytes", OPT, struct cfg_spool, segment_bytes),
    STR("fsync", struct cfg_spool, fsync),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t limits_fields[] = {
    CYAML_FIELD_UINT("max-body-bytes", OPT, struct cfg_limits, max_body_bytes),
    CYAML_FIELD_UINT("max-decompressed", OPT, struct cfg_limits, max_decompressed),
    CYAML_FIELD_UINT("max-samples", OPT, struct cfg_limits, max_samples),
    CYAML_FIELD_UINT("max-locations", OPT, struct cfg_limits, max_locations),
    CYAML_FIELD_UINT("max-functions", OPT, struct cfg_limits, max_functions),
    CYAML_FIELD_UINT("max-strings", OPT, struct cfg_limits, max_strings),
    CYAML_FIELD_UINT("max-stack-depth", OPT, struct cfg_limits, max_stack_depth),
    CYAML_FIELD_UINT("max-watch-line", OPT, struct cfg_limits, max_watch_line),
    CYAML_FIELD_UINT("workers", OPT, struct cfg_limits, workers),
    CYAML_FIELD_UINT("max-jobs-backlog", OPT, struct cfg_limits, max_jobs_backlog),
    CYAML_FIELD_INT("gzip-level", OPT, struct cfg_limits, gzip_level),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t server_fields[] = {
    STR("listen-address", struct cfg, listen_address),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t discovery_fields[] = {
    CYAML_FIELD_UINT("coalesce-delay", OPT, struct cfg, discovery_coalesce_ms),
    CYAML_FIELD_END,
};

const cyaml_schema_field_t cfg__top_fields[] = {
    STR("log-level", struct cfg, log_level),
    VIRTUAL_MAPPING("server", struct cfg, server_fields),
    CYAML_FIELD_SEQUENCE_COUNT("external-labels", OPT | PTR, struct cfg, external_labels,
                               n_external_labels, &kv_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("scrape-configs", OPT | PTR, struct cfg, scrape, n_scrape,
                               &scrape_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("remote-write", OPT | PTR, struct cfg, remote, n_remote,
                               &remote_entry, 0, UNL),
    CYAML_FIELD_MAPPING("spool", OPT, struct cfg, spool, spool_fields),
    CYAML_FIELD_MAPPING("limits", OPT, struct cfg, limits, limits_fields),
    VIRTUAL_MAPPING("discovery", struct cfg, discovery_fields),
    CYAML_FIELD_ENUM("name-validation-scheme", OPT, struct cfg, name_validation, scheme_strings,
                     CYAML_ARRAY_LEN(scheme_strings)),
    CYAML_FIELD_END,
};

const cyaml_schema_value_t cfg__top_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct cfg, cfg__top_fields),
};

/* --- metadata ----------------------------------------------------------- */

static const char *const log_levels[] = { "debug", "info", "warn", "error", NULL };
static const char *const schemes[] = { "http", "https", NULL };
static const char *const fsyncs[] = { "always", "batch", "never", NULL };
static const char *const k8s_roles[] = { "pod", NULL };
static const char *const selector_roles[] = { "pod", "node", NULL };

#define D CFG__UNIT_DURATION
#define B CFG__UNIT_BYTES
#define N CFG__UNIT_NONE

/* Defaults are those documented in agent/config.h and docs/config.md. */
static const struct cfg__meta metas[] = {
    { cfg__top_fields, "log-level", N, "info", log_levels, 0, NULL },
    { cfg__top_fields, "external-labels", N, NULL, NULL, CFG__MAP_KV, NULL },
    { cfg__top_fields, "name-validation-scheme", N, "utf8", NULL, 0, NULL },
    { server_fields, "listen-address", N, "127.0.0.1:4100", NULL, 0, NULL },
    { discovery_fields, "coalesce-delay", D, "1s", NULL, 0, NULL },

    { cfg__scrape_fields, "scrape-interval", D, "15s", NULL, 0, NULL },
    { cfg__scrape_fields, "scrape-timeout", D, NULL, NULL, 0, NULL },
    { cfg__scrape_fields, "scheme", N, "http", schemes, 0, NULL },
    { cfg__scrape_fields, "path-prefix", N, "", NULL, 0, NULL },
    { cfg__scrape_fields, "params", N, NULL, NULL, CFG__MAP_PARAM, NULL },
    { cfg__scrape_fields, "use-delta-profiles", N, "false", NULL, 0, NULL },
    { cfg__scrape_fields, "enabled-profiles", N, NULL, NULL, 0, &enabled_profiles_check },
    { cfg__scrape_fields, "profiles", N, NULL, NULL, CFG__MAP_PROFILE, NULL },
    { cfg__scrape_fields, "body-size-limit", B, "64MiB", NULL, 0, NULL },
    { cfg__profile_fields, "params", N, NULL, NULL, CFG__MAP_PARAM, NULL },
    { static_fields, "labels", N, NULL, NULL, CFG__MAP_KV, NULL },
    { file_sd_fields, "refresh-interval", D, "5m", NULL, 0, NULL },
    { cfg__k8s_fields, "role", N, "pod", k8s_roles, 0, NULL },
    { cfg__k8s_fields, "service-account-dir", N, "/var/run/secrets/kubernetes.io/serviceaccount",
      NULL, 0, NULL },
    { selector_fields, "role", N, NULL, selector_roles, 0, NULL },

    { cfg__remote_fields, "headers", N, NULL, NULL, CFG__MAP_KV, NULL },
    { cfg__remote_fields, "external-labels", N, NULL, NULL, CFG__MAP_KV, NULL },
    { cfg__remote_fields, "remote-timeout", D, "10s", NULL, 0, NULL },
    { cfg__remote_fields, "min-backoff", D, "500ms", NULL, 0, NULL },
    { cfg__remote_fields, "max-backoff", D, "5m", NULL, 0, NULL },
    { cfg__remote_fields, "max-retries", N, "10", NULL, 0, NULL },
    { cfg__remote_fields, "max-inflight", N, "4", NULL, 0, NULL },
    { cfg__remote_fields, "max-dir-bytes", B, "1GiB", NULL, 0, NULL },
    { batch_fields, "max-profiles", N, "64", NULL, 0, NULL },
    { batch_fields, "max-bytes", B, "4MiB", NULL, 0, NULL },
    { batch_fields, "max-wait", D, "1s", NULL, 0, NULL },
    { queue_fields, "max-profiles", N, "10000", NULL, 0, NULL },
    { queue_fields, "max-bytes", B, "256MiB", NULL, 0, NULL },

    { spool_fields, "max-bytes", B, "1GiB", NULL, 0, NULL },
    { spool_fields, "max-age", D, "24h", NULL, 0, NULL },
    { spool_fields, "segment-bytes", B, "16MiB", NULL, 0, NULL },
    { spool_fields, "fsync", N, "batch", fsyncs, 0, NULL },

    { limits_fields, "max-body-bytes", B, "64MiB", NULL, 0, NULL },
    { limits_fields, "max-decompressed", B, "256MiB", NULL, 0, NULL },
    { limits_fields, "max-samples", N, "1000000", NULL, 0, NULL },
    { limits_fields, "max-locations", N, "1000000", NULL, 0, NULL },
    { limits_fields, "max-functions", N, "1000000", NULL, 0, NULL },
    { limits_fields, "max-strings", N, "1000000", NULL, 0, NULL },
    { limits_fields, "max-stack-depth", N, "4096", NULL, 0, NULL },
    { limits_fields, "max-watch-line", B, "16MiB", NULL, 0, NULL },
    { limits_fields, "workers", N, "2", NULL, 0, NULL },
    { limits_fields, "max-jobs-backlog", N, "1024", NULL, 0, NULL },
    { limits_fields, "gzip-level", N, "1", NULL, 0, NULL },

    /* HTTP client keys, wherever they appear. */
    { NULL, "enable-http2", N, "true", NULL, 0, NULL },
    { NULL, "follow-redirects", N, "true", NULL, 0, NULL },
};

static const struct cfg__meta no_meta = { NULL, NULL, N, NULL, NULL, 0, NULL };

const struct cfg__meta *cfg__meta_find(const cyaml_schema_field_t *fields, const char *key)
{
    const struct cfg__meta *any = &no_meta;

    for (size_t i = 0; i < sizeof(metas) / sizeof(metas[0]); i++) {
        if (strcmp(metas[i].key, key) != 0)
            continue;
        if (metas[i].fields == fields)
            return &metas[i];
        if (metas[i].fields == NULL)
            any = &metas[i];
    }
    return any;
}

static const struct {
    const cyaml_schema_field_t *fields;
    const char *name;
} names[] = {
    { cfg__top_fields, "top level" },
    { server_fields, "server" },
    { discovery_fields, "discovery" },
    { cfg__scrape_fields, "scrape config" },
    { cfg__profile_fields, "profile" },
    { static_fields, "static config" },
    { file_sd_fields, "file-sd config" },
    { cfg__k8s_fields, "kubernetes-sd config" },
    { k8s_ns_fields, "namespaces" },
    { k8s_attach_fields, "attach-metadata" },
    { selector_fields, "selector" },
    { cfg__relabel_fields, "relabel config" },
    { cfg__remote_fields, "remote-write" },
    { batch_fields, "batch" },
    { queue_fields, "queue" },
    { spool_fields, "spool" },
    { limits_fields, "limits" },
    { tls_fields, "tls-config" },
    { basic_auth_fields, "basic-auth" },
};

const char *cfg__mapping_name(const cyaml_schema_field_t *fields)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (names[i].fields == fields)
            return names[i].name;
    }
    return "mapping";
}

/* Alternative spellings beyond the snake_case rule. */
const char *cfg__key_alias(const char *key)
{
    if (strcmp(key, "use-delta-endpoints") == 0)
        return "use-delta-profiles";
    return key;
}
