/** proflet's configuration: YAML loaded with libcyaml against a declarative
 * schema, then defaulted, expanded and validated into this immutable tree.
 *
 * Keys are accepted in kebab-case (canonical, as the Pyroscope server) and
 * snake_case (Prometheus/Alloy). `${VAR}` and `${VAR:-default}` expand from
 * the environment. A loaded config is never modified; a reload loads a new
 * one and swaps it in. Loop thread only. */
#ifndef PROFLET_AGENT_CONFIG_H
#define PROFLET_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relabel/relabel.h"

/** A string map entry (labels, headers). */
struct cfg_kv {
    char *key;
    char *value;
};

/** A query parameter with its values (`params: {seconds: ["30"]}`). */
struct cfg_param {
    char *key;
    char **values;
    unsigned n_values;
};

struct cfg_tls {
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *server_name;
    bool insecure_skip_verify;
};

struct cfg_basic_auth {
    char *username;
    char *password;
    char *password_file;
};

/** HTTP client settings shared by scraping, discovery and remote-write. At
 * most one of basic_auth / bearer_token / bearer_token_file is set. */
struct cfg_http {
    struct cfg_basic_auth *basic_auth; /**< NULL if absent */
    char *bearer_token;
    char *bearer_token_file;
    struct cfg_tls tls;
    char *proxy_url;
    bool enable_http2; /**< default true */
    bool follow_redirects; /**< default true */
};

/** Profile type kinds (DESIGN.md "Profile types"). */
enum cfg_profile_kind {
    CFG_KIND_DURATION,   /**< process_cpu, fgprof: `seconds` param, sent as is */
    CFG_KIND_GAUGE,      /**< goroutine: sent as is */
    CFG_KIND_CUMULATIVE_MEMORY,     /**< memory: delta of alloc_* */
    CFG_KIND_CUMULATIVE_CONTENTION, /**< mutex, block: delta of contentions, delay */
    CFG_KIND_DELTA,      /**< godeltaprof_*: already a delta, sent as is */
    CFG_KIND_CUSTOM,     /**< user-declared: sent as is unless delta: true */
};

/** One resolved profile type of a scrape config: built-ins merged with the
 * `profiles:` overrides and `enabled-profiles`. */
struct cfg_profile {
    char *name;          /**< canonical name (process_cpu, memory, ..., or custom) */
    char *path;          /**< URL path, e.g. /debug/pprof/allocs */
    enum cfg_profile_kind kind;
    bool enabled;
    bool delta;          /**< duration profile: add `seconds` (true for cpu/fgprof) */
    char *send_name;     /**< `__name__` sent: memory for godeltaprof_memory, etc. */
    struct cfg_param *params;
    unsigned n_params;
};

struct cfg_static {
    char *application;   /**< sets service_name */
    char *spy_name;      /**< becomes pyroscope_spy */
    char **targets;
    unsigned n_targets;
    struct cfg_kv *labels;
    unsigned n_labels;
};

struct cfg_file_sd {
    char **files;        /**< globs */
    unsigned n_files;
    uint64_t refresh_interval_ms; /**< default 5m */
};

struct cfg_k8s_selector {
    char *role;          /**< pod | node */
    char *label;
    char *field;
};

struct cfg_k8s_sd {
    char *role;          /**< only "pod" */
    char *api_server;
    char *kubeconfig_file;
    bool own_namespace;
    char **namespaces;
    unsigned n_namespaces;
    struct cfg_k8s_selector *selectors;
    unsigned n_selectors;
    bool attach_node;
    bool attach_namespace;
    struct cfg_http http;
    bool http_set;       /**< any HTTP client key was given (needs api_server) */
    char *service_account_dir; /**< default /var/run/secrets/kubernetes.io/serviceaccount */
};

struct cfg_scrape {
    char *job_name;
    uint64_t interval_ms;  /**< default 15s */
    uint64_t timeout_ms;   /**< default 10s */
    char *scheme;          /**< http | https, default http */
    char *path_prefix;     /**< default "" */
    struct cfg_param *params;
    unsigned n_params;
    bool use_delta_profiles;
    struct cfg_profile *profiles; /**< every known type, enabled or not */
    unsigned n_profiles;
    struct cfg_static *static_configs;
    unsigned n_static;
    struct cfg_file_sd *file_sd;
    unsigned n_file_sd;
    struct cfg_k8s_sd *k8s_sd;
    unsigned n_k8s_sd;
    struct relabel_cfg *relabel;
    unsigned n_relabel;
    enum relabel_scheme name_validation;
    struct cfg_http http;
    uint64_t body_size_limit; /**< scraped body cap, bytes; default 64 MiB */
};

enum cfg_protocol { CFG_PROTO_PUSH, CFG_PROTO_INGEST, CFG_PROTO_DIR };

struct cfg_remote {
    char *name;            /**< default: host of url, or "dir" */
    char *url;             /**< http(s)://host[:port][/path] or file:///DIR */
    enum cfg_protocol protocol;
    struct cfg_kv *headers;
    unsigned n_headers;
    char *tenant_id;       /**< X-Scope-OrgID */
    struct cfg_http http;
    uint64_t remote_timeout_ms; /**< default 10s */
    uint64_t min_backoff_ms;    /**< default 500ms */
    uint64_t max_backoff_ms;    /**< default 5m */
    unsigned max_retries;       /**< default 10; 0 = retry for ever (spool) */
    bool gzip_request;          /**< gzip the PushRequest body; default false */
    struct cfg_kv *external_labels;
    unsigned n_external_labels;
    unsigned batch_max_profiles; /**< default 64 */
    uint64_t batch_max_bytes;    /**< default 4 MiB */
    uint64_t batch_max_wait_ms;  /**< default 1s */
    unsigned queue_max_profiles; /**< default 10000 */
    uint64_t queue_max_bytes;    /**< default 256 MiB */
    unsigned max_inflight;       /**< default 4 requests */
    uint64_t dir_max_bytes;      /**< directory sink cap, default 1 GiB */
};

struct cfg_spool {
    char *dir;                 /**< NULL: no spool */
    uint64_t max_bytes;        /**< default 1 GiB */
    uint64_t max_age_ms;       /**< default 24h */
    uint64_t segment_bytes;    /**< default 16 MiB */
    char *fsync;               /**< always | batch | never, default batch */
};

/** Caps on untrusted input (DESIGN.md "Untrusted input and limits"). */
struct cfg_limits {
    uint64_t max_body_bytes;       /**< scraped body, default 64 MiB */
    uint64_t max_decompressed;     /**< gunzip output, default 256 MiB */
    uint64_t max_samples;          /**< default 1,000,000 */
    uint64_t max_locations;
    uint64_t max_functions;
    uint64_t max_strings;
    uint64_t max_stack_depth;      /**< default 4096 */
    uint64_t max_watch_line;       /**< k8s watch line / list page, default 16 MiB */
    unsigned workers;              /**< worker threads, default 2 */
    unsigned max_jobs_backlog;     /**< queued CPU jobs, default 1024 */
    int gzip_level;                /**< output gzip level, default 1 */
};

struct cfg {
    char *source;               /**< file name, or "<default>" */
    char *log_level;            /**< debug|info|warn|error */
    char *listen_address;       /**< server.listen-address, default 127.0.0.1:4100 */
    struct cfg_kv *external_labels;
    unsigned n_external_labels;
    struct cfg_scrape *scrape;
    unsigned n_scrape;
    struct cfg_remote *remote;
    unsigned n_remote;
    struct cfg_spool spool;
    struct cfg_limits limits;
    uint64_t discovery_coalesce_ms; /**< default 1s */
    enum relabel_scheme name_validation; /**< global, default utf8 */
};

/** The embedded default: scrape 127.0.0.1:6060 with the default Go
 * profiles and write to ./proflet-data. */
extern const char cfg_default_yaml[];

/** Loads and validates a file. On error returns a negative code and writes
 * "FILE:LINE:COL: what was expected" into err. */
int cfg_load_file(const char *path, struct cfg **out, char *err, size_t errlen);
/** Same, from memory; `name` is used in messages. */
int cfg_load_string(const char *yaml, size_t len, const char *name, struct cfg **out, char *err,
                    size_t errlen);
/** Frees a config (NULL is fine). */
void cfg_free(struct cfg *c);

/** Looks up a profile type by canonical name or alias (cpu, mem, heap,
 * goroutines, ...). Returns the canonical name or NULL if unknown. */
const char *cfg_profile_canonical(const char *name);

struct buf;
/** Appends `key`=`value` to a settings signature in a form that cannot be
 * confused with another key or value (length-prefixed; NULL differs from
 * ""). Signatures are compared, never parsed. */
void cfg_sig_str(struct buf *out, const char *key, const char *value);
/** Appends a signature of every field of `h` (auth, bearer token, TLS,
 * proxy, HTTP/2, redirects) to `out`. Modules that keep running objects
 * across reloads compare these to tell whether the client settings changed. */
void cfg_http_signature(const struct cfg_http *h, struct buf *out);

#endif
