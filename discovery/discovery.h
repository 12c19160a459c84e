/* SPDX-License-Identifier: Apache-2.0 */
/** Target discovery: providers (static, file, kubernetes) behind const
 * vtables, and a manager that coalesces their target groups per job.
 *
 * Loop thread only. Providers emit target groups keyed by source
 * ("static/<job>/<i>", a file path, "pod/<ns>/<name>"); an empty group
 * deletes its source. The manager hands changed groups to the agent at most
 * once per coalescing delay. */
#ifndef PROFLET_DISCOVERY_H
#define PROFLET_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/labels.h"
#include "common/workq.h"
#include "conf/conf.h"
#include "net/net.h"

struct net_client;

/* --------------------------------------------------------- configuration */

/** `static-configs` entry. */
struct disc_static_cfg {
    char *application; /**< sets service_name */
    char *spy_name;    /**< becomes __spy_name__ (sent as pyroscope_spy) */
    char **targets;
    unsigned n_targets;
    struct conf_kv *labels;
    unsigned n_labels;
};

/** `file-sd-configs` entry. */
struct disc_file_cfg {
    char **files; /**< globs ending in .json, .yml or .yaml */
    unsigned n_files;
    uint64_t refresh_interval_ms; /**< default 5m */
};

struct disc_k8s_selector_cfg {
    char *role; /**< pod | node */
    char *label;
    char *field;
};

/** `kubernetes-sd-configs` entry (role pod). */
struct disc_k8s_cfg {
    char *role; /**< only "pod" */
    char *api_server;
    char *kubeconfig_file;
    bool own_namespace;
    char **namespaces;
    unsigned n_namespaces;
    struct disc_k8s_selector_cfg *selectors;
    unsigned n_selectors;
    bool attach_node;
    bool attach_namespace;
    struct net_http_cfg http;
    bool http_set;             /**< any HTTP client key was given (needs api_server) */
    char *service_account_dir; /**< default /var/run/secrets/kubernetes.io/serviceaccount */
    /** Not a configuration key: set by clustering's own watch of its peers.
     * A pod being deleted (metadata.deletionTimestamp set) then carries
     * DISC_K8S_TERMINATING_LABEL="true", which Prometheus' pod role has no
     * label for; scrape jobs never see it. */
    bool mark_terminating;
};

#define DISC_K8S_TERMINATING_LABEL "__proflet_pod_terminating"

/** The discovery settings of one scrape job. */
struct disc_sd_cfg {
    struct disc_static_cfg *static_configs;
    unsigned n_static;
    struct disc_file_cfg *file_sd;
    unsigned n_file_sd;
    struct disc_k8s_cfg *k8s_sd;
    unsigned n_k8s_sd;
};

/** Settings of the discovery manager itself. */
struct disc_cfg {
    uint64_t coalesce_ms;    /**< `discovery.coalesce-delay`, default 1s */
    uint64_t max_watch_line; /**< `limits.max-watch-line`: k8s line / list page /
                                  file_sd file cap, default 16 MiB */
};

#define DISC_DEFAULT_MAX_WATCH_LINE ((uint64_t)16 << 20)

extern const cyaml_schema_value_t disc__static_entry, disc__file_entry, disc__k8s_entry;

/** The libcyaml fields of a struct disc_sd_cfg embedded as member `m` of
 * `S` (a scrape job's mapping). */
#define DISC_SD_CFG_FIELDS(S, m)                                                                   \
    CYAML_FIELD_SEQUENCE_COUNT("static-configs", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, S,      \
                               m.static_configs, m.n_static, &disc__static_entry, 0,               \
                               CYAML_UNLIMITED),                                                   \
        CYAML_FIELD_SEQUENCE_COUNT("file-sd-configs", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, S, \
                                   m.file_sd, m.n_file_sd, &disc__file_entry, 0, CYAML_UNLIMITED), \
        CYAML_FIELD_SEQUENCE_COUNT("kubernetes-sd-configs",                                        \
                                   CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER, S, m.k8s_sd,          \
                                   m.n_k8s_sd, &disc__k8s_entry, 0, CYAML_UNLIMITED)

/** The field of `discovery:` (coalesce-delay) and the one discovery adds
 * to `limits:` (max-watch-line), for a struct disc_cfg member `m` of `S`. */
#define DISC_CFG_FIELDS(S, m) \
    CYAML_FIELD_UINT("coalesce-delay", CYAML_FLAG_OPTIONAL, S, m.coalesce_ms)
#define DISC_CFG_LIMIT_FIELDS(S, m) \
    CYAML_FIELD_UINT("max-watch-line", CYAML_FLAG_OPTIONAL, S, m.max_watch_line)

/** Key metadata of DISC_CFG_FIELDS and DISC_CFG_LIMIT_FIELDS. */
extern const struct conf_key disc_cfg_keys[];
/** Sections of discovery's own mappings; NULL-terminated. */
extern const struct conf_section *const disc_cfg_sections[];

/** One scrape job's discovery, as disc_manager_apply() takes it. */
struct disc_job {
    const char *name;
    const struct disc_sd_cfg *sd;
};

/** The discovered targets of one source: immutable once delivered and
 * shared by reference, so a consumer that keeps them (the scrape manager)
 * holds the very sets discovery holds instead of a copy. Loop thread only. */
struct disc_targets {
    unsigned _refs;
    size_t n;
    struct labels t[];
};

/** Takes a reference (NULL is fine). */
struct disc_targets *disc_targets_ref(struct disc_targets *d);
/** Drops a reference; the sets go with the last one (NULL is fine). */
void disc_targets_unref(struct disc_targets *d);

/** One target group, borrowed for the duration of the update callback.
 * Each target's labels already include the group's labels (target labels
 * win), as Prometheus merges them; they are the *discovered* labels. */
struct disc_group {
    const char *source;
    struct disc_targets *targets; /**< NULL: the source is gone; take a reference to keep it */
};

/** Called with the groups of `job` that changed since the last call. */
typedef void (*disc_update_cb)(const char *job, const struct disc_group *groups, size_t n,
                               void *ud);

/** Error report: `job` and `provider` ("static", "file", "kubernetes") name
 * the source (for a provider shared by several jobs, `job` lists them,
 * joined by ','); `msg` is borrowed for the call. Runs on the loop thread. */
typedef void (*disc_error_cb)(const char *job, const char *provider, const char *msg, void *ud);

struct disc_manager;

/** What a manager is made with. */
struct disc_manager_opts {
    uv_loop_t *loop;         /**< the manager's loop; every callback runs on it */
    struct net_client *http; /**< borrowed: the Kubernetes providers' client */
    struct workq *work;      /**< borrowed: the file providers' reads */
    /** Bounds how often updates are delivered (0: at once, as `proflet
     * targets` wants). */
    uint64_t coalesce_ms;
    disc_update_cb on_update;
    void *update_ud;
    /** May be NULL. Receives every provider error as it happens, for the
     * agent to log; errors are counted in the metrics either way. */
    disc_error_cb on_error;
    void *error_ud;
};

/** Creates a manager. Returns 0 and the manager in `*out` (the caller's,
 * for disc_manager_close()), or a negative code with the reason in `err`
 * ("out of memory") and NULL in `*out`. */
int disc_manager_new(const struct disc_manager_opts *o, struct disc_manager **out, char *err,
                     size_t errlen);
/** Starts, keeps or stops providers so they match `jobs` (borrowed only
 * during the call: providers copy what they keep). Kubernetes and file
 * providers run once per distinct settings and feed every job using them;
 * static ones are per job. Providers whose settings did not change keep
 * running and emit nothing new; a job that starts using a running provider
 * gets its current groups. Jobs that disappear get empty groups for all
 * their sources; a provider stops when no job uses it any more. Returns 0,
 * or a negative code with a message, in which case nothing changed: the
 * jobs keep the providers they had. */
int disc_manager_apply(struct disc_manager *m, const struct disc_job *jobs, size_t n_jobs,
                       const struct disc_cfg *settings, char *err, size_t errlen);
/** True once every provider has completed its first sync. */
bool disc_manager_ready(const struct disc_manager *m);
/** Appends the discovery metrics in Prometheus text format. */
void disc_manager_metrics(const struct disc_manager *m, struct buf *out);
/** Where a part-by-part rendering of the discovery metrics stands; zeroed
 * to start. Holds pointers into the manager, which must outlive it. */
struct disc_metrics_cursor {
    bool begun;
    unsigned family;
    bool started;
    const void *at;
};
/** Appends the next part of the discovery metrics: whole series until
 * `out` holds at least `chunk` bytes or the metrics end. Returns 1 if more
 * follows, 0 at the end. Each series is written once; a (job, provider)
 * that appears between parts shows 0 targets in that rendering. */
int disc_manager_metrics_next(const struct disc_manager *m, struct disc_metrics_cursor *c,
                              struct buf *out, size_t chunk);
/** Stops every provider; `cb` runs once all handles are closed. */
void disc_manager_close(struct disc_manager *m, void (*cb)(void *ud), void *ud);

/** The last error message ("" if none); valid until the next error. */
const char *disc_manager_last_error(const struct disc_manager *m);
/** Number of providers running: one per static job, one per distinct file
 * or kubernetes settings however many jobs share it. */
size_t disc_manager_providers(const struct disc_manager *m);

#endif
