/* SPDX-License-Identifier: Apache-2.0 */
/* forward's settings (docs/design.md "Configuration"): the libcyaml fields of
 * `remote-write` endpoints and of the spool, their defaults, the checks made
 * at load (the URL's form, what it implies for the protocol and the name,
 * backoff order, auth, fsync) and the write rules, compiled at load into the
 * loaded settings, which own them (freed with the document). The endpoints
 * use all of it as loaded: nothing is defaulted, checked or compiled again.
 * Const data and functions of a load; any thread. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "forward/internal.h"

/* The defaults of the settings, in loaded form (milliseconds, bytes): the
 * key tables below give them to a configuration file that leaves a key out,
 * so a loaded document is complete; fwd_cfg_remote_init() and
 * fwd_cfg_spool_init() give the same to settings built without a file. */
#define DEF_REMOTE_TIMEOUT_MS 10000
#define DEF_MIN_BACKOFF_MS 500
#define DEF_MAX_BACKOFF_MS (5 * 60 * 1000)
#define DEF_MAX_RETRIES 10
#define DEF_BATCH_MAX_PROFILES 64
#define DEF_BATCH_MAX_BYTES (4ull << 20)
#define DEF_BATCH_MAX_WAIT_MS 1000
#define DEF_QUEUE_MAX_PROFILES 10000
#define DEF_QUEUE_MAX_BYTES (256ull << 20)
#define DEF_MAX_INFLIGHT 4
#define DEF_DIR_MAX_BYTES (1ull << 30)
#define DEF_SPOOL_MAX_BYTES (1ull << 30)
#define DEF_SPOOL_MAX_AGE_MS (24ull * 3600 * 1000)
#define DEF_SPOOL_SEGMENT_BYTES (16ull << 20)
#define DEF_SPOOL_FSYNC "batch"

#define OPT CYAML_FLAG_OPTIONAL
#define PTR CYAML_FLAG_POINTER
#define UNL CYAML_UNLIMITED
#define STR(k, s, m) CYAML_FIELD_STRING_PTR(k, OPT, s, m, 0, UNL)

#define VIRTUAL_MAPPING(k, S, fields)                                                 \
    {                                                                                 \
        .key = k, .data_offset = 0, .value = { CYAML_VALUE_MAPPING(OPT, S, fields) }, \
    }

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
static const struct conf_key batch_keys[] = {
    CONF_KEY_NUM("max-profiles", CONF_UNIT_NONE, DEF_BATCH_MAX_PROFILES),
    CONF_KEY_NUM("max-bytes", CONF_UNIT_BYTES, DEF_BATCH_MAX_BYTES),
    CONF_KEY_NUM("max-wait", CONF_UNIT_DURATION, DEF_BATCH_MAX_WAIT_MS),
    { 0 },
};
static const struct conf_key *const batch_key_tables[] = { batch_keys, NULL };
static const struct conf_section batch_section = {
    .name = "batch",
    .fields = batch_fields,
    .keys = batch_key_tables,
};

static const cyaml_schema_field_t queue_fields[] = {
    CYAML_FIELD_UINT("max-profiles", OPT, struct cfg_remote, queue_max_profiles),
    CYAML_FIELD_UINT("max-bytes", OPT, struct cfg_remote, queue_max_bytes),
    CYAML_FIELD_END,
};
static const struct conf_key queue_keys[] = {
    CONF_KEY_NUM("max-profiles", CONF_UNIT_NONE, DEF_QUEUE_MAX_PROFILES),
    CONF_KEY_NUM("max-bytes", CONF_UNIT_BYTES, DEF_QUEUE_MAX_BYTES),
    { 0 },
};
static const struct conf_key *const queue_key_tables[] = { queue_keys, NULL };
static const struct conf_section queue_section = {
    .name = "queue",
    .fields = queue_fields,
    .keys = queue_key_tables,
};

static const cyaml_schema_field_t remote_fields[] = {
    CYAML_FIELD_STRING_PTR("url", CYAML_FLAG_DEFAULT, struct cfg_remote, url, 0, UNL),
    STR("name", struct cfg_remote, name),
    CYAML_FIELD_ENUM("protocol", OPT, struct cfg_remote, protocol, proto_strings,
                     CYAML_ARRAY_LEN(proto_strings)),
    CYAML_FIELD_SEQUENCE_COUNT("headers", OPT | PTR, struct cfg_remote, headers, n_headers,
                               &conf_kv_entry, 0, UNL),
    STR("tenant-id", struct cfg_remote, tenant_id),
    NET_HTTP_CFG_FIELDS(struct cfg_remote, http),
    CYAML_FIELD_UINT("remote-timeout", OPT, struct cfg_remote, remote_timeout_ms),
    CYAML_FIELD_UINT("min-backoff", OPT, struct cfg_remote, min_backoff_ms),
    CYAML_FIELD_UINT("max-backoff", OPT, struct cfg_remote, max_backoff_ms),
    CYAML_FIELD_UINT("max-retries", OPT, struct cfg_remote, max_retries),
    CYAML_FIELD_BOOL("gzip", OPT, struct cfg_remote, gzip_request),
    CYAML_FIELD_ENUM("compression", OPT, struct cfg_remote, compression, pprof_compression_strings,
                     PPROF_COMPRESS_COUNT),
    CYAML_FIELD_BOOL("retry-on-http-429", OPT, struct cfg_remote, retry_on_http_429),
    CYAML_FIELD_SEQUENCE_COUNT("external-labels", OPT | PTR, struct cfg_remote, external_labels,
                               n_external_labels, &conf_kv_entry, 0, UNL),
    VIRTUAL_MAPPING("batch", struct cfg_remote, batch_fields),
    VIRTUAL_MAPPING("queue", struct cfg_remote, queue_fields),
    CYAML_FIELD_UINT("max-inflight", OPT, struct cfg_remote, max_inflight),
    CYAML_FIELD_UINT("max-dir-bytes", OPT, struct cfg_remote, dir_max_bytes),
    CYAML_FIELD_SEQUENCE_COUNT("write-relabel-configs", OPT | PTR, struct cfg_remote, write_relabel,
                               n_write_relabel, &relabel_cfg_entry, 0, UNL),
    CYAML_FIELD_END,
};
const cyaml_schema_value_t fwd_remote_cfg_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct cfg_remote, remote_fields),
};
/* Alloy's pyroscope.write endpoint spells some of these differently. */
static const char *const min_backoff_aliases[] = { "min-backoff-period", NULL };
static const char *const max_backoff_aliases[] = { "max-backoff-period", NULL };
static const char *const max_retries_aliases[] = { "max-backoff-retries", NULL };

static const char *const compressions[] = { "none", "fastest", "balanced", "smallest", NULL };

static const struct conf_key remote_keys[] = {
    { .key = "headers", .mapkind = CONF_MAP_KV },
    { .key = "external-labels", .mapkind = CONF_MAP_KV },
    CONF_KEY_NUM("remote-timeout", CONF_UNIT_DURATION, DEF_REMOTE_TIMEOUT_MS),
    { .key = "min-backoff",
      .unit = CONF_UNIT_DURATION,
      .has_num = true,
      .num = DEF_MIN_BACKOFF_MS,
      .aliases = min_backoff_aliases },
    { .key = "max-backoff",
      .unit = CONF_UNIT_DURATION,
      .has_num = true,
      .num = DEF_MAX_BACKOFF_MS,
      .aliases = max_backoff_aliases },
    { .key = "max-retries",
      .has_num = true,
      .num = DEF_MAX_RETRIES,
      .aliases = max_retries_aliases },
    CONF_KEY_NUM("max-inflight", CONF_UNIT_NONE, DEF_MAX_INFLIGHT),
    { .key = "retry-on-http-429", .def = "true" },
    { .key = "compression", .def = "balanced", .choices = compressions },
    CONF_KEY_NUM("max-dir-bytes", CONF_UNIT_BYTES, DEF_DIR_MAX_BYTES),
    { 0 },
};
static const struct conf_key *const remote_key_tables[] = { remote_keys, net_http_cfg_keys, NULL };

static bool prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int remote_post(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *url = conf_get(n, "url"), *proto = conf_get(n, "protocol");
    struct conf_node *minb = conf_get(n, "min-backoff"), *maxb = conf_get(n, "max-backoff");
    const char *u = conf_str(url);
    char host[256];

    if (prefix(u, "file://")) {
        const char *d = u + 7;

        if (!(d[0] == '/' || (d[0] == '.' && (d[1] == '/' || d[1] == '\0')) || prefix(d, "../")))
            return conf_fail(ld, url,
                             "expected file:///absolute/dir or file://./relative/dir, "
                             "got \"%.80s\"",
                             u);
        if (conf_user_key(n, "protocol") && strcmp(conf_str(proto), "ingest") == 0)
            return conf_fail(ld, proto, "protocol ingest does not apply to a file:// url");
        if (conf_set(ld, n, "protocol", ".dir") < 0)
            return -1;
        snprintf(host, sizeof(host), "dir");
    } else if (prefix(u, "http://") || prefix(u, "https://")) {
        char why[128];

        if (net_url_check(u, host, sizeof(host), why, sizeof(why)) < 0)
            return conf_fail(ld, url, "invalid URL \"%.80s\": %s", u, why);
    } else {
        return conf_fail(ld, url,
                         "expected a URL starting with http://, https:// or file://, "
                         "got \"%.80s\"",
                         u);
    }
    if (!conf_get(n, "name") && conf_set(ld, n, "name", host) < 0)
        return -1;
    if (conf_uint(minb) > conf_uint(maxb))
        return conf_fail(ld, conf_user_key(n, "min-backoff") ? minb : maxb,
                         "min-backoff cannot be greater than max-backoff");
    return net_http_cfg_check(ld, n, "remote-write");
}

/* The write rules are compiled here, once, and kept with the endpoint's
 * settings (the endpoint applies them as they are). A bad rule is reported
 * at its position: on failure they are compiled one by one to find it. */
static int remote_finish(struct conf_load *ld, const struct conf_node *n, void *obj)
{
    struct cfg_remote *r = obj;
    struct conf_node *rules = conf_get(n, "write-relabel-configs");
    char msg[512];

    if (!r->n_write_relabel ||
        relabel_rules_new(r->write_relabel, r->n_write_relabel, RELABEL_SCHEME_UNSET,
                          &r->write_rules, msg, sizeof(msg)) == 0)
        return 0;
    for (unsigned j = 0; j < r->n_write_relabel; j++) {
        struct relabel_rules *one = NULL;
        int rc = relabel_rules_new(&r->write_relabel[j], 1, RELABEL_SCHEME_UNSET, &one, msg,
                                   sizeof(msg));

        relabel_rules_free(one);
        if (rc < 0)
            return conf_fail(ld, conf_at(rules, j),
                             "write relabel config %u of remote-write "
                             "\"%s\": %s",
                             j + 1, r->name ? r->name : "", msg);
    }
    return conf_fail(ld, rules, "write-relabel-configs of remote-write \"%s\": %s",
                     r->name ? r->name : "", msg);
}

static void remote_release(void *obj)
{
    struct cfg_remote *r = obj;

    relabel_rules_free(r->write_rules);
    r->write_rules = NULL;
}

static const struct conf_section remote_section = {
    .name = "remote-write",
    .fields = remote_fields,
    .keys = remote_key_tables,
    .pre = net_http_cfg_pre,
    .post = remote_post,
    .finish = remote_finish,
    .release = remote_release,
};

/* A hash of an endpoint's settings, every key and value but its name, in
 * the order written: the same settings give the same hash on every start. */
static uint64_t settings_hash(const struct conf_node *n, uint64_t h)
{
    if (conf_is_map(n) || conf_is_seq(n)) {
        for (size_t i = 0; i < conf_len(n); i++) {
            if (conf_is_map(n) && i % 2 == 0 && strcmp(conf_str(conf_at(n, i)), "name") == 0) {
                i++;
                continue;
            }
            h = settings_hash(conf_at(n, i), h ^ (conf_is_map(n) ? 0x6d : 0x73));
        }
        return XXH64("}", 1, h);
    }
    return XXH64(conf_str(n), strlen(conf_str(n)) + 1, h);
}

static bool same_name(struct conf_node *remotes, size_t i, size_t j)
{
    return strcmp(conf_str(conf_get(conf_at(remotes, i), "name")),
                  conf_str(conf_get(conf_at(remotes, j), "name"))) == 0;
}

/* A name the user did not write comes from the URL's host ("dir" for a
 * directory), which endpoints of one host share; those get the hash of
 * their settings appended, as Prometheus names its remote writes, so that
 * only endpoints with the very same settings, or names the user gave twice,
 * are refused. */
int fwd_cfg_check_names(struct conf_load *ld, struct conf_node *remotes)
{
    size_t n = conf_len(remotes);
    uint64_t *hash = calloc(n ? n : 1, sizeof(*hash)); /* 0: keeps its name */

    if (!hash)
        return conf_fail(ld, remotes, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (conf_user_key(conf_at(remotes, i), "name"))
            continue;
        for (size_t j = 0; j < n && !hash[i]; j++) {
            if (j != i && same_name(remotes, i, j))
                hash[i] = settings_hash(conf_at(remotes, i), 0) | 1ull << 63;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct conf_node *ri = conf_at(remotes, i);
        char name[320];

        if (!hash[i])
            continue;
        snprintf(name, sizeof(name), "%.256s-%06" PRIx64, conf_str(conf_get(ri, "name")),
                 hash[i] & 0xffffff);
        if (conf_set(ld, ri, "name", name) < 0) {
            free(hash);
            return -1;
        }
    }
    free(hash);
    for (size_t i = 0; i < n; i++) {
        struct conf_node *ri = conf_at(remotes, i);

        for (size_t j = 0; j < i; j++) {
            if (!same_name(remotes, i, j))
                continue;
            if (conf_user_key(ri, "name"))
                return conf_fail(ld, conf_get(ri, "name"),
                                 "duplicate remote-write name "
                                 "\"%.80s\"; set name: to tell them apart",
                                 conf_str(conf_get(ri, "name")));
            return conf_fail(ld, ri,
                             "remote-write endpoint %zu has the same settings as "
                             "endpoint %zu",
                             i + 1, j + 1);
        }
    }
    return 0;
}

/* --- spool ------------------------------------------------------------- */

const cyaml_schema_field_t fwd__spool_fields[] = {
    STR("dir", struct cfg_spool, dir),
    CYAML_FIELD_UINT("max-bytes", OPT, struct cfg_spool, max_bytes),
    CYAML_FIELD_UINT("max-age", OPT, struct cfg_spool, max_age_ms),
    CYAML_FIELD_UINT("segment-bytes", OPT, struct cfg_spool, segment_bytes),
    STR("fsync", struct cfg_spool, fsync),
    CYAML_FIELD_END,
};
static const char *const fsyncs[] = { "always", "batch", "never", NULL };
static const struct conf_key spool_keys[] = {
    CONF_KEY_NUM("max-bytes", CONF_UNIT_BYTES, DEF_SPOOL_MAX_BYTES),
    CONF_KEY_NUM("max-age", CONF_UNIT_DURATION, DEF_SPOOL_MAX_AGE_MS),
    CONF_KEY_NUM("segment-bytes", CONF_UNIT_BYTES, DEF_SPOOL_SEGMENT_BYTES),
    { .key = "fsync", .def = DEF_SPOOL_FSYNC, .choices = fsyncs },
    { 0 },
};
static const struct conf_key *const spool_key_tables[] = { spool_keys, NULL };
static const struct conf_section spool_section = {
    .name = "spool",
    .fields = fwd__spool_fields,
    .keys = spool_key_tables,
};

const struct conf_section *const fwd_cfg_sections[] = {
    &remote_section, &batch_section, &queue_section, &spool_section, NULL,
};

/* --- settings built without a file ------------------------------------ */

/* The same constants the key tables give a file: written once, above. */
void fwd_cfg_remote_init(struct cfg_remote *c)
{
    memset(c, 0, sizeof(*c));
    c->remote_timeout_ms = DEF_REMOTE_TIMEOUT_MS;
    c->min_backoff_ms = DEF_MIN_BACKOFF_MS;
    c->max_backoff_ms = DEF_MAX_BACKOFF_MS;
    c->max_retries = DEF_MAX_RETRIES;
    c->retry_on_http_429 = true;
    c->compression = PPROF_DEFAULT_COMPRESSION;
    c->batch_max_profiles = DEF_BATCH_MAX_PROFILES;
    c->batch_max_bytes = DEF_BATCH_MAX_BYTES;
    c->batch_max_wait_ms = DEF_BATCH_MAX_WAIT_MS;
    c->queue_max_profiles = DEF_QUEUE_MAX_PROFILES;
    c->queue_max_bytes = DEF_QUEUE_MAX_BYTES;
    c->max_inflight = DEF_MAX_INFLIGHT;
    c->dir_max_bytes = DEF_DIR_MAX_BYTES;
}

void fwd_cfg_spool_init(struct cfg_spool *s)
{
    memset(s, 0, sizeof(*s));
    s->max_bytes = DEF_SPOOL_MAX_BYTES;
    s->max_age_ms = DEF_SPOOL_MAX_AGE_MS;
    s->segment_bytes = DEF_SPOOL_SEGMENT_BYTES;
    s->fsync = (char *)DEF_SPOOL_FSYNC;
}
