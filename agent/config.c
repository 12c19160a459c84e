/* SPDX-License-Identifier: Apache-2.0 */
/* The top level of proflet's configuration file: the few keys the agent
 * itself owns (log level, status server, external labels, worker pool) and
 * the assembly of every module's settings into one schema. Loading is
 * conf/'s; checking a module's settings is that module's (docs/design.md
 * "Configuration").
 *
 * Const data and pure hooks; any thread. */
#include <string.h>

#include "agent/config.h"
#include "httpd/httpd.h"

#define OPT CYAML_FLAG_OPTIONAL
#define PTR CYAML_FLAG_POINTER
#define UNL CYAML_UNLIMITED

#define VIRTUAL_MAPPING(k, S, fields)                                                 \
    {                                                                                 \
        .key = k, .data_offset = 0, .value = { CYAML_VALUE_MAPPING(OPT, S, fields) }, \
    }

const char agent_default_config[] =
    "# proflet embedded default configuration (see docs/config.md)\n"
    "log-level: info\n"
    "server:\n"
    "  listen-address: 127.0.0.1:4100\n"
    "scrape-configs:\n"
    "  - job-name: default\n"
    "    scrape-interval: 15s\n"
    "    static-configs:\n"
    "      - application: demoapp\n"
    "        targets: [127.0.0.1:6060]\n"
    "remote-write:\n"
    "  - url: file://./proflet-data\n";

static const cyaml_schema_field_t limits_fields[] = {
    PPROF_LIMITS_FIELDS(struct agent_config, limits.pprof),
    CYAML_FIELD_UINT("max-body-bytes", OPT, struct agent_config, limits.max_body_bytes),
    DISC_CFG_LIMIT_FIELDS(struct agent_config, discovery),
    CYAML_FIELD_UINT("workers", OPT, struct agent_config, limits.workers),
    CYAML_FIELD_UINT("max-jobs-backlog", OPT, struct agent_config, limits.max_jobs_backlog),
    CYAML_FIELD_UINT("memory-budget", OPT, struct agent_config, limits.memory_budget),
    CYAML_FIELD_END,
};
static const struct conf_key limits_keys[] = {
    CONF_KEY_NUM("max-body-bytes", CONF_UNIT_BYTES, SCRAPE_DEFAULT_MAX_BODY_BYTES),
    { .key = "workers", .def = "2" },
    { .key = "max-jobs-backlog", .def = "1024" },
    /* Fits the chart's memory limit beside the rest of the process
     * (docs/limits.md "The bound" derives one from the other). */
    CONF_KEY_NUM("memory-budget", CONF_UNIT_BYTES, 96ull << 20),
    { 0 },
};
static const struct conf_key *const limits_key_tables[] = { limits_keys, pprof_limits_keys,
                                                            disc_cfg_keys, NULL };

static int limits_post(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *w = conf_get(n, "workers");

    struct conf_node *budget = conf_get(n, "memory-budget");

    if (conf_uint(w) == 0)
        return conf_fail(ld, w, "workers must be at least 1");
    if (conf_uint(budget) < (1u << 20))
        return conf_fail(ld, budget, "memory-budget must be at least 1MiB");
    return 0;
}

static const struct conf_section limits_section = {
    .name = "limits",
    .fields = limits_fields,
    .keys = limits_key_tables,
    .post = limits_post,
};

static const cyaml_schema_field_t server_fields[] = {
    CYAML_FIELD_STRING_PTR("listen-address", OPT, struct agent_config, listen_address, 0, UNL),
    CYAML_FIELD_UINT("header-timeout", OPT, struct agent_config, header_timeout_ms),
    CYAML_FIELD_UINT("recent-profiles-bytes", OPT, struct agent_config, recent_profiles_bytes),
    CYAML_FIELD_END,
};
static const struct conf_key server_keys[] = {
    { .key = "listen-address", .def = "127.0.0.1:4100" },
    { .key = "header-timeout", .unit = CONF_UNIT_DURATION, .def = "10s" },
    CONF_KEY_NUM("recent-profiles-bytes", CONF_UNIT_BYTES, 32ull << 20),
    { 0 },
};
static const struct conf_key *const server_key_tables[] = { server_keys, NULL };

/* The status server would refuse the address at start-up: refuse it here
 * (httpd/ owns the syntax). */
static int server_post(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *a = conf_get(n, "listen-address"), *t = conf_get(n, "header-timeout");
    char err[256];

    if (a && httpd_check_addr(conf_str(a), err, sizeof(err)) < 0)
        return conf_fail(ld, a, "%s", err);
    if (t && conf_uint(t) == 0)
        return conf_fail(ld, t, "header-timeout must be positive");
    return 0;
}

static const struct conf_section server_section = {
    .name = "server",
    .fields = server_fields,
    .keys = server_key_tables,
    .post = server_post,
};

static const cyaml_schema_field_t discovery_fields[] = {
    DISC_CFG_FIELDS(struct agent_config, discovery),
    CYAML_FIELD_END,
};
static const struct conf_key *const discovery_key_tables[] = { disc_cfg_keys, NULL };
static const struct conf_section discovery_section = {
    .name = "discovery",
    .fields = discovery_fields,
    .keys = discovery_key_tables,
};

static const cyaml_strval_t scheme_strings[] = {
    { "utf8", RELABEL_SCHEME_UTF8 },
    { "legacy", RELABEL_SCHEME_LEGACY },
};

static const cyaml_schema_field_t top_fields[] = {
    CYAML_FIELD_STRING_PTR("log-level", OPT, struct agent_config, log_level, 0, UNL),
    VIRTUAL_MAPPING("server", struct agent_config, server_fields),
    CYAML_FIELD_SEQUENCE_COUNT("external-labels", OPT | PTR, struct agent_config, external_labels,
                               n_external_labels, &conf_kv_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("scrape-configs", OPT | PTR, struct agent_config, scrape, n_scrape,
                               &scrape_job_cfg_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("remote-write", OPT | PTR, struct agent_config, remote, n_remote,
                               &fwd_remote_cfg_entry, 0, UNL),
    FWD_SPOOL_CFG_FIELD(struct agent_config, spool),
    VIRTUAL_MAPPING("limits", struct agent_config, limits_fields),
    VIRTUAL_MAPPING("discovery", struct agent_config, discovery_fields),
    CLUSTER_CFG_FIELD(struct agent_config, cluster),
    CYAML_FIELD_ENUM("name-validation-scheme", OPT, struct agent_config, name_validation,
                     scheme_strings, CYAML_ARRAY_LEN(scheme_strings)),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t top_value = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct agent_config, top_fields),
};

static const char *const log_levels[] = { "debug", "info", "warn", "error", NULL };
static const struct conf_key top_keys[] = {
    { .key = "log-level", .def = "info", .choices = log_levels },
    { .key = "external-labels", .mapkind = CONF_MAP_KV },
    { .key = "name-validation-scheme", .def = "utf8" },
    { 0 },
};
static const struct conf_key *const top_key_tables[] = { top_keys, NULL };

/* `workers:` at the top level is short for limits.workers. */
static int top_pre(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *w = conf_get(n, "workers"), *lim = conf_get(n, "limits");

    if (!w)
        return 0;
    if (conf_is_map(lim) && conf_get(lim, "workers"))
        return conf_fail(ld, conf_user_key(n, "workers"),
                         "workers given both at the top level and under limits");
    if (!conf_is_map(lim)) {
        if (!(lim = conf_new_map(ld, w)) || conf_set_node(ld, n, "limits", lim) < 0)
            return conf_oom(ld);
    }
    if (conf_set_node(ld, lim, "workers", w) < 0)
        return -1;
    conf_del(n, "workers");
    return 0;
}

static int top_post(struct conf_load *ld, struct conf_node *n)
{
    const char *scheme = conf_str(conf_get(n, "name-validation-scheme"));

    if (scrape_cfg_check_jobs(ld, conf_get(n, "scrape-configs"), scheme) < 0)
        return -1;
    return fwd_cfg_check_names(ld, conf_get(n, "remote-write"));
}

/* Deltas are compressed once, as they are made, with the first endpoint's
 * setting; an endpoint that asks for another compresses them again as it
 * sends (docs/design.md "Compression"). */
static int top_finish(struct conf_load *ld, const struct conf_node *n, void *obj)
{
    struct agent_config *c = obj;

    (void)ld, (void)n;
    c->limits.pprof.compression =
        c->n_remote ? c->remote[0].compression : PPROF_DEFAULT_COMPRESSION;
    return 0;
}

static const struct conf_section top_section = {
    .name = "top level",
    .fields = top_fields,
    .keys = top_key_tables,
    .pre = top_pre,
    .post = top_post,
    .finish = top_finish,
};

static const struct conf_section *const own_sections[] = {
    &top_section, &server_section, &limits_section, &discovery_section, NULL,
};

static const struct conf_section *const *const all_sections[] = {
    own_sections,
    net_cfg_sections,
    scrape_cfg_sections,
    disc_cfg_sections,
    fwd_cfg_sections,
    cluster_cfg_sections,
    NULL,
};

static const struct conf_schema agent_schema = {
    .top = &top_value,
    .sections = all_sections,
    .envelope = "pyroscopeConfigs",
};

int agent_config_load_string(const char *yaml, size_t len, const char *name, unsigned flags,
                             struct conf_doc **out, char *err, size_t errlen)
{
    return conf_load_string(&agent_schema, yaml, len, name, flags, out, err, errlen);
}

int agent_config_load(const char *path, unsigned flags, struct conf_doc **out, char *err,
                      size_t errlen)
{
    if (!path)
        return conf_load_string(&agent_schema, agent_default_config, strlen(agent_default_config),
                                "<default>", flags, out, err, errlen);
    return conf_load_file(&agent_schema, path, flags, out, err, errlen);
}

const struct agent_config *agent_config(const struct conf_doc *doc)
{
    return conf_doc_data(doc);
}

/* Keys whose values are secrets wherever they appear (Prometheus' Secret
 * fields and Alloy's secret attributes); file names are not secrets. */
static bool secret_key(const char *key)
{
    static const char *const secret[] = {
        "password", "bearer-token", "credentials", "client-secret", "secrets", "key", "headers",
    };

    for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++)
        if (strcmp(key, secret[i]) == 0)
            return true;
    return false;
}

void agent_config_dump(const struct conf_doc *doc, struct buf *out)
{
    conf_dump(&top_value, conf_doc_data(doc), secret_key, out);
}
