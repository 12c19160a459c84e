/* SPDX-License-Identifier: Apache-2.0 */
/* The scrape module's settings: scrape jobs (`scrape-configs` entries) and
 * their profile types. The built-in profile types and their aliases live
 * here; a job's `profiles:` overrides and `enabled-profiles` are resolved
 * at load into the complete list of types the job knows, and its relabel
 * rules are compiled once, when the file is loaded (docs/design.md
 * "Configuration").
 *
 * Const data and pure hooks; any thread. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/duration.h"
#include "scrape/internal.h"

#define OPT CYAML_FLAG_OPTIONAL
#define PTR CYAML_FLAG_POINTER
#define UNL CYAML_UNLIMITED
#define STR(k, s, m) CYAML_FIELD_STRING_PTR(k, OPT, s, m, 0, UNL)

/* --- profile types ----------------------------------------------------- */

static const struct builtin {
    const char *name;
    const char *path;
    enum scrape_kind kind;
    bool on;
    bool delta;
    const char *send;
    const char *delta_path; /* with use-delta-profiles */
} builtins[] = {
    { "process_cpu", "/debug/pprof/profile", SCRAPE_KIND_DURATION, true, true, "process_cpu",
      NULL },
    { "memory", "/debug/pprof/allocs", SCRAPE_KIND_CUMULATIVE_MEMORY, true, false, "memory",
      "/debug/pprof/delta_heap" },
    { "goroutine", "/debug/pprof/goroutine", SCRAPE_KIND_GAUGE, true, false, "goroutine", NULL },
    { "mutex", "/debug/pprof/mutex", SCRAPE_KIND_CUMULATIVE_CONTENTION, true, false, "mutex",
      "/debug/pprof/delta_mutex" },
    { "block", "/debug/pprof/block", SCRAPE_KIND_CUMULATIVE_CONTENTION, true, false, "block",
      "/debug/pprof/delta_block" },
    { "fgprof", "/debug/fgprof", SCRAPE_KIND_DURATION, false, true, "fgprof", NULL },
    { "godeltaprof_memory", "/debug/pprof/delta_heap", SCRAPE_KIND_DELTA, false, false, "memory",
      NULL },
    { "godeltaprof_mutex", "/debug/pprof/delta_mutex", SCRAPE_KIND_DELTA, false, false, "mutex",
      NULL },
    { "godeltaprof_block", "/debug/pprof/delta_block", SCRAPE_KIND_DELTA, false, false, "block",
      NULL },
};
#define N_BUILTIN (sizeof(builtins) / sizeof(builtins[0]))

static const cyaml_strval_t kind_strings[] = {
    { ".duration", SCRAPE_KIND_DURATION },
    { ".gauge", SCRAPE_KIND_GAUGE },
    { ".cumulative-memory", SCRAPE_KIND_CUMULATIVE_MEMORY },
    { ".cumulative-contention", SCRAPE_KIND_CUMULATIVE_CONTENTION },
    { ".delta", SCRAPE_KIND_DELTA },
    { ".custom", SCRAPE_KIND_CUSTOM },
};

/* Other names of the profile types, in enabled-profiles, `profiles:` and
 * `__profile_<name>_*` target labels. */
static const char *const aliases[][2] = {
    { "cpu", "process_cpu" },
    { "mem", "memory" },
    { "heap", "memory" },
    { "goroutines", "goroutine" },
    { "godeltaprof_mem", "godeltaprof_memory" },
    { "godeltaprof_heap", "godeltaprof_memory" },
};
#define N_ALIASES (sizeof(aliases) / sizeof(aliases[0]))

const char *scrape_profile_canonical(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < N_BUILTIN; i++) {
        if (strcmp(name, builtins[i].name) == 0)
            return builtins[i].name;
    }
    for (size_t i = 0; i < N_ALIASES; i++) {
        if (strcmp(name, aliases[i][0]) == 0)
            return aliases[i][1];
    }
    return NULL;
}

size_t scrape__profile_aliases(const char *canonical, const char **out, size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < N_ALIASES && n < max; i++) {
        if (strcmp(aliases[i][1], canonical) == 0)
            out[n++] = aliases[i][0];
    }
    return n;
}

static const cyaml_schema_field_t name_list_fields[] = {
    CYAML_FIELD_SEQUENCE_COUNT("keep", OPT | PTR, struct scrape_name_list_cfg, keep, n_keep,
                               &conf_string_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("drop", OPT | PTR, struct scrape_name_list_cfg, drop, n_drop,
                               &conf_string_entry, 0, UNL),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t label_filter_fields[] = {
    STR("keep", struct scrape_label_filter_cfg, keep),
    STR("drop", struct scrape_label_filter_cfg, drop),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t profile_fields[] = {
    STR(".name", struct scrape_profile_cfg, name),
    STR("path", struct scrape_profile_cfg, path),
    CYAML_FIELD_ENUM(".kind", OPT, struct scrape_profile_cfg, kind, kind_strings,
                     CYAML_ARRAY_LEN(kind_strings)),
    CYAML_FIELD_BOOL("enabled", OPT, struct scrape_profile_cfg, enabled),
    CYAML_FIELD_BOOL("delta", OPT, struct scrape_profile_cfg, delta),
    STR(".send-name", struct scrape_profile_cfg, send_name),
    CYAML_FIELD_SEQUENCE_COUNT("params", OPT | PTR, struct scrape_profile_cfg, params, n_params,
                               &conf_param_entry, 0, UNL),
    CYAML_FIELD_MAPPING("sample-types", OPT, struct scrape_profile_cfg, sample_types,
                        name_list_fields),
    CYAML_FIELD_MAPPING("sample-labels", OPT, struct scrape_profile_cfg, sample_labels,
                        label_filter_fields),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t profile_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct scrape_profile_cfg, profile_fields),
};
static const struct conf_key profile_keys[] = {
    { .key = "params", .mapkind = CONF_MAP_PARAM },
    { 0 },
};
static const struct conf_key *const profile_key_tables[] = { profile_keys, NULL };
static const struct conf_section profile_section = {
    .name = "profile",
    .fields = profile_fields,
    .keys = profile_key_tables,
};

/* One profile type while a job's types are resolved. */
struct rprof {
    const char *name, *path, *send;
    enum scrape_kind kind;
    bool enabled, delta, declared, enabled_set;
    bool path_set;
    struct conf_node *params, *decl, *sample_types, *sample_labels;
};

static bool name_char(char c, bool first)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (!first && isdigit((unsigned char)c));
}

static bool valid_profile_name(const char *s)
{
    if (!name_char(*s, true))
        return false;
    for (; *s; s++) {
        if (!name_char(*s, false))
            return false;
    }
    return true;
}

static struct conf_node *profile_node(struct conf_load *ld, const struct rprof *r,
                                      const struct conf_node *at)
{
    struct conf_node *e = conf_new_map(ld, at);

    if (!e || conf_set(ld, e, ".name", r->name) < 0 || conf_set(ld, e, "path", r->path) < 0 ||
        conf_set(ld, e, ".kind", kind_strings[r->kind].str) < 0 ||
        conf_set(ld, e, "enabled", r->enabled ? "true" : "false") < 0 ||
        conf_set(ld, e, "delta", r->delta ? "true" : "false") < 0 ||
        conf_set(ld, e, ".send-name", r->send) < 0 ||
        (r->params && conf_set_node(ld, e, "params", r->params) < 0) ||
        (r->sample_types && conf_set_node(ld, e, "sample-types", r->sample_types) < 0) ||
        (r->sample_labels && conf_set_node(ld, e, "sample-labels", r->sample_labels) < 0))
        return NULL;
    return e;
}

/* sample-types and sample-labels each say keep or drop, not both, not
 * neither; a label regex compiles (it is compiled again, once, when the
 * job is built: here only the node knows its position). */
static int check_filters(struct conf_load *ld, struct conf_node *e, const char *name)
{
    static const char *const keys[] = { "sample-types", "sample-labels" };

    for (size_t k = 0; k < 2; k++) {
        struct conf_node *f = conf_get(e, keys[k]), *keep, *drop;

        if (!f || !conf_user_key(e, keys[k]))
            continue;
        keep = conf_get(f, "keep");
        drop = conf_get(f, "drop");
        if (!keep == !drop)
            return conf_fail(ld, f, "%s of profile \"%.80s\" takes keep or drop (one of them)",
                             keys[k], name);
        if (k == 0 && conf_len(keep ? keep : drop) == 0)
            return conf_fail(ld, f, "sample-types of profile \"%.80s\" lists no type", name);
        if (k == 1) {
            struct relabel_regex *re = NULL;
            char msg[300];
            int rc = relabel_regex_new(conf_str(keep ? keep : drop), &re, msg, sizeof(msg));

            relabel_regex_free(re);
            if (rc < 0)
                return conf_fail(ld, keep ? keep : drop, "sample-labels of profile \"%.80s\": %s",
                                 name, rc == -ENOMEM ? "out of memory" : msg);
        }
    }
    return 0;
}

/* Replaces `profiles` and `enabled-profiles` by the complete list of the
 * job's types, built-ins first, each with its final path, kind and state. */
static int resolve_profiles(struct conf_load *ld, struct conf_node *sc)
{
    struct conf_node *decl = conf_get(sc, "profiles"), *ep = conf_get(sc, "enabled-profiles");
    size_t nd = conf_len(decl), np = N_BUILTIN;
    bool use_delta = conf_true(conf_get(sc, "use-delta-profiles"));
    struct rprof *rp = conf_alloc(ld, (N_BUILTIN + nd) * sizeof(*rp));
    struct conf_node *seq;

    if (!rp)
        return conf_oom(ld);
    for (size_t i = 0; i < N_BUILTIN; i++) {
        const struct builtin *b = &builtins[i];

        rp[i] = (struct rprof){ .name = b->name,
                                .path = b->path,
                                .send = b->send,
                                .kind = b->kind,
                                .enabled = b->on,
                                .delta = b->delta };
    }
    for (size_t i = 0; i < nd; i++) {
        struct conf_node *e = conf_at(decl, i), *v;
        const char *name = conf_str(conf_get(e, ".name"));
        const char *canon = scrape_profile_canonical(name);
        struct rprof *r = NULL;

        for (size_t j = 0; j < np; j++) {
            if (strcmp(rp[j].name, canon ? canon : name) == 0)
                r = &rp[j];
        }
        if (r && r->declared)
            return conf_fail(ld, e, "profile \"%s\" declared twice (as \"%s\" and \"%s\")", r->name,
                             conf_str(conf_get(r->decl, ".name")), name);
        if (!r) {
            if (!valid_profile_name(name))
                return conf_fail(ld, e,
                                 "custom profile name \"%.80s\" must match "
                                 "[a-zA-Z_][a-zA-Z0-9_]*",
                                 name);
            if (!conf_get(e, "path"))
                return conf_fail(ld, e,
                                 "profile \"%.80s\" is not a built-in type and needs a "
                                 "path",
                                 name);
            r = &rp[np++];
            *r = (struct rprof){
                .name = name, .send = name, .kind = SCRAPE_KIND_CUSTOM, .enabled = true
            };
        }
        r->declared = true;
        r->decl = e;
        if ((v = conf_get(e, "path"))) {
            r->path = conf_str(v);
            r->path_set = true;
        }
        if ((v = conf_get(e, "delta")))
            r->delta = conf_true(v);
        if ((v = conf_get(e, "enabled"))) {
            r->enabled = conf_true(v);
            r->enabled_set = true;
        }
        r->params = conf_get(e, "params");
        if (check_filters(ld, e, name) < 0)
            return -1;
        r->sample_types = conf_user_key(e, "sample-types") ? conf_get(e, "sample-types") : NULL;
        r->sample_labels = conf_user_key(e, "sample-labels") ? conf_get(e, "sample-labels") : NULL;
    }
    if (ep) {
        for (size_t j = 0; j < N_BUILTIN; j++) {
            if (!rp[j].enabled_set)
                rp[j].enabled = false;
        }
        for (size_t i = 0; i < conf_len(ep); i++) {
            const char *name = conf_str(conf_at(ep, i));
            const char *canon = scrape_profile_canonical(name);
            size_t j;

            for (j = 0; j < np && strcmp(rp[j].name, canon ? canon : name) != 0; j++)
                ;
            if (j == np)
                return conf_fail(ld, conf_at(ep, i),
                                 "unknown profile type \"%.80s\" in "
                                 "enabled-profiles (not a built-in type and not declared under "
                                 "profiles)",
                                 name);
            if (!rp[j].enabled_set)
                rp[j].enabled = true;
        }
    }
    if (!(seq = conf_new_seq(ld, sc)))
        return conf_oom(ld);
    for (size_t j = 0; j < np; j++) {
        struct rprof *r = &rp[j];

        if (use_delta && j < N_BUILTIN && builtins[j].delta_path) {
            r->kind = SCRAPE_KIND_DELTA;
            if (!r->path_set)
                r->path = builtins[j].delta_path;
        }
        if (conf_append(ld, seq, profile_node(ld, r, sc)) < 0)
            return -1;
    }
    conf_del(sc, "enabled-profiles");
    return conf_set_node(ld, sc, "profiles", seq);
}

/* --- jobs -------------------------------------------------------------- */

static const cyaml_strval_t scheme_strings[] = {
    { "utf8", RELABEL_SCHEME_UTF8 },
    { "legacy", RELABEL_SCHEME_LEGACY },
};

static const cyaml_schema_value_t enabled_profiles_shape = {
    CYAML_VALUE_SEQUENCE(CYAML_FLAG_POINTER, char *, &conf_string_entry, 0, CYAML_UNLIMITED),
};

static const cyaml_schema_value_t duration_shape = {
    CYAML_VALUE_UINT(CYAML_FLAG_DEFAULT, uint64_t),
};

static const cyaml_schema_field_t sampling_fields[] = {
    CYAML_FIELD_SEQUENCE_COUNT("group-by", OPT | PTR, struct scrape_sampling_cfg, group_by,
                               n_group_by, &conf_string_entry, 0, UNL),
    CYAML_FIELD_UINT("max-per-group", OPT, struct scrape_sampling_cfg, max_per_group),
    CYAML_FIELD_END,
};

/* The mapping exists in every job (for its defaults); sampling is on when
 * the user gave it, and then needs both keys. */
static int sampling_post(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *by = conf_get(n, "group-by"), *max = conf_get(n, "max-per-group");

    if (!by && !max)
        return 0;
    if (!by || conf_len(by) == 0)
        return conf_fail(ld, by ? by : n, "target-sampling needs a non-empty group-by");
    if (!max)
        return conf_fail(ld, n, "target-sampling needs max-per-group");
    if (conf_uint(max) == 0)
        return conf_fail(ld, max, "max-per-group must be at least 1");
    return 0;
}

static const struct conf_section sampling_section = {
    .name = "target sampling",
    .fields = sampling_fields,
    .post = sampling_post,
};

static const cyaml_schema_field_t job_fields[] = {
    CYAML_FIELD_STRING_PTR("job-name", CYAML_FLAG_DEFAULT, struct scrape_job_cfg, job_name, 0, UNL),
    CYAML_FIELD_UINT("scrape-interval", OPT, struct scrape_job_cfg, interval_ms),
    CYAML_FIELD_UINT("scrape-timeout", OPT, struct scrape_job_cfg, timeout_ms),
    STR("scheme", struct scrape_job_cfg, scheme),
    STR("path-prefix", struct scrape_job_cfg, path_prefix),
    CYAML_FIELD_SEQUENCE_COUNT("params", OPT | PTR, struct scrape_job_cfg, params, n_params,
                               &conf_param_entry, 0, UNL),
    CYAML_FIELD_BOOL("use-delta-profiles", OPT, struct scrape_job_cfg, use_delta_profiles),
    CYAML_FIELD_IGNORE("enabled-profiles", OPT),
    CYAML_FIELD_IGNORE("delta-profiling-duration", OPT),
    CYAML_FIELD_SEQUENCE_COUNT("profiles", OPT | PTR, struct scrape_job_cfg, profiles, n_profiles,
                               &profile_entry, 0, UNL),
    DISC_SD_CFG_FIELDS(struct scrape_job_cfg, sd),
    CYAML_FIELD_SEQUENCE_COUNT("relabel-configs", OPT | PTR, struct scrape_job_cfg, relabel,
                               n_relabel, &relabel_cfg_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("profile-relabel-configs", OPT | PTR, struct scrape_job_cfg,
                               profile_relabel, n_profile_relabel, &relabel_cfg_entry, 0, UNL),
    CYAML_FIELD_ENUM("name-validation-scheme", OPT, struct scrape_job_cfg, name_validation,
                     scheme_strings, CYAML_ARRAY_LEN(scheme_strings)),
    NET_HTTP_CFG_FIELDS(struct scrape_job_cfg, http),
    CYAML_FIELD_UINT("body-size-limit", OPT, struct scrape_job_cfg, body_size_limit),
    CYAML_FIELD_UINT("keep-dropped-targets", OPT, struct scrape_job_cfg, keep_dropped_targets),
    CYAML_FIELD_UINT("target-limit", OPT, struct scrape_job_cfg, target_limit),
    CYAML_FIELD_MAPPING("target-sampling", OPT, struct scrape_job_cfg, sampling, sampling_fields),
    CYAML_FIELD_END,
};
const cyaml_schema_value_t scrape_job_cfg_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct scrape_job_cfg, job_fields),
};

static const char *const schemes[] = { "http", "https", NULL };
static const char *const use_delta_aliases[] = { "use-delta-endpoints", NULL };
static const struct conf_key job_keys[] = {
    { .key = "scrape-interval", .unit = CONF_UNIT_DURATION, .def = "15s" },
    { .key = "scrape-timeout", .unit = CONF_UNIT_DURATION },
    { .key = "scheme", .def = "http", .choices = schemes },
    { .key = "path-prefix", .def = "" },
    { .key = "params", .mapkind = CONF_MAP_PARAM },
    { .key = "use-delta-profiles", .def = "false", .aliases = use_delta_aliases },
    { .key = "enabled-profiles", .shape = &enabled_profiles_shape },
    { .key = "delta-profiling-duration", .unit = CONF_UNIT_DURATION, .shape = &duration_shape },
    { .key = "profiles", .mapkind = CONF_MAP_NAMED },
    { .key = "body-size-limit", .unit = CONF_UNIT_BYTES },
    CONF_KEY_NUM("keep-dropped-targets", CONF_UNIT_NONE, SCRAPE_DEFAULT_KEEP_DROPPED),
    { 0 },
};
static const struct conf_key *const job_key_tables[] = { job_keys, net_http_cfg_keys, NULL };

/* The `seconds` a param list gives, or NULL. */
static struct conf_node *seconds_param(const struct conf_node *params)
{
    for (size_t i = 0; i < conf_len(params); i++) {
        struct conf_node *p = conf_at(params, i);

        if (strcmp(conf_str(conf_get(p, ".key")), "seconds") == 0)
            return conf_at(conf_get(p, ".values"), 0);
    }
    return NULL;
}

/* Each enabled duration profile (process_cpu, fgprof) lasts `seconds`: its
 * own param, else the job's, else delta-profiling-duration, else one second
 * less than the interval. As Alloy requires, it must be at least 1 s and at
 * least 1 s below the interval, so a profile ends before the next scrape. */
static int check_durations(struct conf_load *ld, struct conf_node *job, uint64_t interval)
{
    struct conf_node *profiles = conf_get(job, "profiles");
    struct conf_node *job_secs = seconds_param(conf_get(job, "params"));
    struct conf_node *dpd = conf_get(job, "delta-profiling-duration");
    char iv[32];

    duration_format(interval, iv, sizeof(iv));
    if (dpd && (conf_uint(dpd) < 1000 || conf_uint(dpd) % 1000))
        return conf_fail(ld, dpd,
                         "delta-profiling-duration must be a whole number of seconds, "
                         "at least 1s");
    for (size_t i = 0; i < conf_len(profiles); i++) {
        struct conf_node *p = conf_at(profiles, i), *at = NULL;
        uint64_t secs;
        char *end;

        if (strcmp(conf_str(conf_get(p, ".kind")), ".duration") != 0 ||
            !conf_true(conf_get(p, "enabled")) || !conf_true(conf_get(p, "delta")))
            continue;
        if ((at = seconds_param(conf_get(p, "params"))) || (at = job_secs)) {
            secs = strtoull(conf_str(at), &end, 10);
            if (*end || !*conf_str(at))
                return conf_fail(ld, at, "seconds must be a whole number, got \"%.40s\"",
                                 conf_str(at));
        } else if ((at = dpd)) {
            secs = conf_uint(dpd) / 1000;
        } else {
            at = conf_get(job, "scrape-interval");
            secs = interval / 1000 > 1 ? interval / 1000 - 1 : 1;
        }
        if (secs < 1 || secs * 1000 + 1000 > interval)
            return conf_fail(ld, at,
                             "%s lasts %" PRIu64 "s, which must be at least 1s and at "
                             "least 1s below scrape-interval (%s)",
                             conf_str(conf_get(p, ".name")), secs, iv);
    }
    return 0;
}

/* delta-profiling-duration (Alloy's name) gives the duration profiles that
 * set no `seconds` of their own the job's seconds. */
static int apply_delta_duration(struct conf_load *ld, struct conf_node *job)
{
    struct conf_node *dpd = conf_get(job, "delta-profiling-duration"), *params, *e, *vals;
    char secs[32];

    if (!dpd || seconds_param(conf_get(job, "params")))
        return 0;
    snprintf(secs, sizeof(secs), "%" PRIu64, conf_uint(dpd) / 1000);
    if (!(params = conf_get(job, "params")) &&
        (!(params = conf_new_seq(ld, job)) || conf_set_node(ld, job, "params", params) < 0))
        return conf_oom(ld);
    if (!(e = conf_new_map(ld, dpd)) || !(vals = conf_new_seq(ld, dpd)) ||
        conf_append(ld, vals, conf_new_str(ld, secs, dpd)) < 0 ||
        conf_set(ld, e, ".key", "seconds") < 0 || conf_set_node(ld, e, ".values", vals) < 0 ||
        conf_append(ld, params, e) < 0)
        return conf_oom(ld);
    return 0;
}

static int job_post(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *iv = conf_get(n, "scrape-interval"), *to = conf_get(n, "scrape-timeout");
    struct conf_node *name = conf_get(n, "job-name");
    uint64_t interval = conf_uint(iv);
    char a[32], b[32];

    if (!*conf_str(name))
        return conf_fail(ld, name, "job-name cannot be empty");
    if (interval == 0)
        return conf_fail(ld, iv, "scrape-interval must be greater than 0");
    if (!to) {
        /* Prometheus: the default timeout, capped at the interval. */
        snprintf(a, sizeof(a), "%" PRIu64, interval < 10000 ? interval : 10000);
        if (conf_set(ld, n, "scrape-timeout", a) < 0)
            return -1;
    } else if (conf_uint(to) == 0) {
        return conf_fail(ld, to, "scrape-timeout must be greater than 0");
    } else if (conf_uint(to) > interval) {
        /* Alloy accepts it (its documentation prints 15s / 18s); a pair
         * still never has two scrapes in flight: a tick that finds the
         * previous one running is skipped and counted. */
        duration_format(conf_uint(to), a, sizeof(a));
        duration_format(interval, b, sizeof(b));
        conf_warn(ld, to,
                  "scrape-timeout (%s) is greater than scrape-interval (%s): a scrape "
                  "still running at the next tick makes that tick skip",
                  a, b);
    }
    if (net_http_cfg_check(ld, n, "scrape config") < 0 || resolve_profiles(ld, n) < 0 ||
        check_durations(ld, n, interval) < 0 || apply_delta_duration(ld, n) < 0)
        return -1;
    conf_del(n, "delta-profiling-duration");
    return 0;
}

/* Compiles one rule list, once; a bad rule is reported at its own position
 * (found by compiling the rules one by one, on failure only). */
static int compile_rules(struct conf_load *ld, const struct conf_node *n, const char *key,
                         const char *what, const struct scrape_job_cfg *job,
                         const struct relabel_cfg *cfgs, unsigned count, struct relabel_rules **out)
{
    struct conf_node *rules = conf_get(n, key);
    char msg[512];

    if (relabel_rules_new(cfgs, count, job->name_validation, out, msg, sizeof(msg)) == 0)
        return 0;
    for (unsigned j = 0; j < count; j++) {
        struct relabel_rules *one = NULL;
        int rc = relabel_rules_new(&cfgs[j], 1, job->name_validation, &one, msg, sizeof(msg));

        relabel_rules_free(one);
        if (rc < 0)
            return conf_fail(ld, conf_at(rules, j), "%s %u of job \"%s\": %s", what, j + 1,
                             job->job_name, msg);
    }
    return conf_fail(ld, rules, "%s of job \"%s\": %s", key, job->job_name, msg);
}

/* A target rule that reads __name__ or __delta__ before any rule of the list
 * set it reads nothing: those are labels of profiles, not targets. Said at
 * the rule, with where such a rule belongs. */
static void warn_profile_labels(struct conf_load *ld, const struct conf_node *n,
                                const struct scrape_job_cfg *job)
{
    static const char *const profile_only[] = { "__name__", "__delta__" };
    struct conf_node *rules = conf_get(n, "relabel-configs");

    for (size_t k = 0; k < sizeof(profile_only) / sizeof(profile_only[0]); k++) {
        for (unsigned j = 0; j < job->n_relabel; j++) {
            const struct relabel_cfg *r = &job->relabel[j];
            bool reads = false;

            if (r->target_label && strcmp(r->target_label, profile_only[k]) == 0)
                break; /* set here: later rules may read it */
            for (unsigned i = 0; i < r->n_source_labels; i++)
                reads |= strcmp(r->source_labels[i], profile_only[k]) == 0;
            if (reads) {
                conf_warn(ld, conf_at(rules, j),
                          "relabel config %u of job \"%s\" reads %s, which targets do not "
                          "have: rules over the labels profiles are sent with go in "
                          "profile-relabel-configs",
                          j + 1, job->job_name, profile_only[k]);
                break;
            }
        }
    }
}

static bool label_kept(const char *key, size_t len, void *ud)
{
    const struct scrape_profile_cfg *prof = ud;
    int m = relabel_regex_match(prof->label_regex, key, len);

    if (m < 0)
        return true; /* out of memory: the label stays, nothing is lost */
    return prof->sample_labels.keep ? m == 1 : m == 0;
}

/* The filter of each profile type that has one, built once; positions
 * were checked by check_filters(). */
static int build_filters(struct conf_load *ld, const struct conf_node *n,
                         struct scrape_job_cfg *job)
{
    for (unsigned i = 0; i < job->n_profiles; i++) {
        struct scrape_profile_cfg *prof = &job->profiles[i];
        const struct scrape_name_list_cfg *t = &prof->sample_types;
        const char *re =
            prof->sample_labels.keep ? prof->sample_labels.keep : prof->sample_labels.drop;
        struct pprof_filter *f;
        char msg[300];

        if (!t->n_keep && !t->n_drop && !re)
            continue;
        if (!(f = calloc(1, sizeof(*f))))
            return conf_oom(ld);
        prof->filter = f;
        f->types = (const char *const *)(t->n_keep ? t->keep : t->drop);
        f->n_types = t->n_keep ? t->n_keep : t->n_drop;
        f->types_keep = t->n_keep > 0;
        f->fingerprint = XXH3_64bits_withSeed(re ? re : "", re ? strlen(re) + 1 : 0,
                                              (uint64_t)f->types_keep << 1 |
                                                  (uint64_t)(prof->sample_labels.keep != NULL));
        for (size_t k = 0; k < f->n_types; k++)
            f->fingerprint =
                XXH3_64bits_withSeed(f->types[k], strlen(f->types[k]) + 1, f->fingerprint);
        if (re) {
            if (relabel_regex_new(re, &prof->label_regex, msg, sizeof(msg)) < 0)
                return conf_fail(ld, n, "sample-labels of profile \"%.80s\": %s", prof->name, msg);
            f->label_keep = label_kept;
            f->label_ud = prof;
        }
    }
    return 0;
}

/* A hash of every setting of the job, taken here (on the loading thread)
 * so that a reload compares jobs without walking them on the loop. */
static int job_sign(struct conf_load *ld, struct scrape_job_cfg *job)
{
    struct buf b;
    XXH128_hash_t h;

    buf_init(&b, 4 * CONF_MAX_FILE); /* far above what a job of one file holds */
    conf_signature(&scrape_job_cfg_entry, job, &b);
    if (!b.data)
        return conf_oom(ld);
    h = XXH3_128bits(b.data, b.len);
    job->signature[0] = h.low64;
    job->signature[1] = h.high64;
    buf_done(&b);
    return 0;
}

static int job_finish(struct conf_load *ld, const struct conf_node *n, void *obj)
{
    struct scrape_job_cfg *job = obj;
    int rc;

    if ((rc = job_sign(ld, job)) < 0 || (rc = build_filters(ld, n, job)) < 0)
        return rc;

    if ((rc = compile_rules(ld, n, "relabel-configs", "relabel config", job, job->relabel,
                            job->n_relabel, &job->rules)) < 0 ||
        (rc = compile_rules(ld, n, "profile-relabel-configs", "profile relabel config", job,
                            job->profile_relabel, job->n_profile_relabel, &job->profile_rules)) < 0)
        return rc;
    warn_profile_labels(ld, n, job);
    return 0;
}

static void job_release(void *obj)
{
    struct scrape_job_cfg *job = obj;

    relabel_rules_free(job->rules);
    job->rules = NULL;
    relabel_rules_free(job->profile_rules);
    job->profile_rules = NULL;
    for (unsigned i = 0; i < job->n_profiles; i++) {
        free(job->profiles[i].filter);
        job->profiles[i].filter = NULL;
        relabel_regex_free(job->profiles[i].label_regex);
        job->profiles[i].label_regex = NULL;
    }
}

static const struct conf_section job_section = {
    .name = "scrape config",
    .fields = job_fields,
    .keys = job_key_tables,
    .pre = net_http_cfg_pre,
    .post = job_post,
    .finish = job_finish,
    .release = job_release,
};

/* Finds the earlier job of the same name, by a hash of the names seen so
 * far: a file of ten thousand jobs compared pairwise took a second. */
static struct conf_node *earlier_job(struct hashmap *seen, struct conf_node *jobs, size_t i,
                                     const char *name, int *rc)
{
    uint64_t key = XXH64(name, strlen(name), 0);
    struct conf_node *b = hashmap_get(seen, key);

    *rc = 0;
    if (b && strcmp(conf_str(b), name) == 0)
        return b;
    if (b) { /* two names of one hash: compare with every earlier one */
        for (size_t j = 0; j < i; j++) {
            b = conf_get(conf_at(jobs, j), "job-name");
            if (strcmp(conf_str(b), name) == 0)
                return b;
        }
        return NULL;
    }
    *rc = hashmap_put(seen, key, conf_get(conf_at(jobs, i), "job-name"));
    return NULL;
}

int scrape_cfg_check_jobs(struct conf_load *ld, struct conf_node *jobs, const char *scheme)
{
    struct hashmap seen;
    int rc = 0;

    hashmap_init(&seen);
    for (size_t i = 0; i < conf_len(jobs) && rc == 0; i++) {
        struct conf_node *job = conf_at(jobs, i), *a = conf_get(job, "job-name"), *b;

        b = earlier_job(&seen, jobs, i, conf_str(a), &rc);
        if (rc < 0) {
            rc = conf_oom(ld);
        } else if (b) {
            rc = conf_fail(ld, a, "duplicate job-name \"%.80s\" (also at line %u)", conf_str(a),
                           conf_line(b));
        } else if (!conf_get(job, "name-validation-scheme") &&
                   conf_set(ld, job, "name-validation-scheme", scheme) < 0) {
            rc = -1;
        }
    }
    hashmap_done(&seen);
    return rc;
}

const struct conf_section *const scrape_cfg_sections[] = {
    &job_section, &profile_section, &sampling_section, &relabel_cfg_section, NULL,
};
