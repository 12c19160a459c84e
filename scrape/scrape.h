/* SPDX-License-Identifier: Apache-2.0 */
/** Scraping: scrape jobs and their profile types, the targets built from
 * discovered labels, and the per-(target, profile type) scrapes.
 *
 * This header is the scrape module's public interface. The configuration
 * part is pure (any thread); the rest runs on the loop thread. */
#ifndef PROFLET_SCRAPE_H
#define PROFLET_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/labels.h"
#include "common/workq.h"
#include "conf/conf.h"
#include "discovery/discovery.h"
#include "net/net.h"
#include "pprof/pprof.h"
#include "relabel/relabel.h"

/* --------------------------------------------------------- configuration */

/** How a profile type is treated (docs/config.md "Profile types"). */
enum scrape_kind {
    SCRAPE_KIND_DURATION,              /**< process_cpu, fgprof: `seconds` param, sent as is */
    SCRAPE_KIND_GAUGE,                 /**< goroutine: sent as is */
    SCRAPE_KIND_CUMULATIVE_MEMORY,     /**< memory: delta of alloc_* */
    SCRAPE_KIND_CUMULATIVE_CONTENTION, /**< mutex, block: delta of contentions, delay */
    SCRAPE_KIND_DELTA,                 /**< godeltaprof_*: already a delta, sent as is */
    SCRAPE_KIND_CUSTOM,                /**< user-declared: sent as is unless delta: true */
};

/** One resolved profile type of a job: built-ins merged with the
 * `profiles:` overrides and `enabled-profiles`. */
struct scrape_profile_cfg {
    char *name; /**< canonical name (process_cpu, memory, ..., or custom) */
    char *path; /**< URL path, e.g. /debug/pprof/allocs */
    enum scrape_kind kind;
    bool enabled;
    bool delta;      /**< duration profile: add `seconds` (true for cpu/fgprof) */
    char *send_name; /**< `__name__` sent: memory for godeltaprof_memory, etc. */
    struct conf_param *params;
    unsigned n_params;
    /** sample-types: the sample types (by name) to keep, or to drop. */
    struct scrape_name_list_cfg {
        char **keep;
        unsigned n_keep;
        char **drop;
        unsigned n_drop;
    } sample_types;
    /** sample-labels: a regex over pprof label keys to keep, or to drop. */
    struct scrape_label_filter_cfg {
        char *keep;
        char *drop;
    } sample_labels;
    /** Built when the file is loaded (not YAML keys): what the type's
     * profiles keep of themselves, applied on the workers; NULL when they
     * keep everything (then nothing is decoded that need not be). */
    struct pprof_filter *filter;
    struct relabel_regex *label_regex;
};

/** One `scrape-configs` entry. */
/** target-sampling: at most `max_per_group` targets of each group (targets
 * with the same values of `group_by`) are scraped; the others are listed as
 * dropped. 0: no sampling. */
struct scrape_sampling_cfg {
    char **group_by;
    unsigned n_group_by;
    unsigned max_per_group;
};

struct scrape_job_cfg {
    char *job_name;
    uint64_t interval_ms; /**< default 15s */
    uint64_t timeout_ms;  /**< default min(10s, interval) */
    char *scheme;         /**< http | https, default http */
    char *path_prefix;    /**< default "" */
    struct conf_param *params;
    unsigned n_params;
    bool use_delta_profiles;
    struct scrape_profile_cfg *profiles; /**< every known type, enabled or not */
    unsigned n_profiles;
    struct disc_sd_cfg sd;
    struct relabel_cfg *relabel;
    unsigned n_relabel;
    enum relabel_scheme name_validation; /**< inherited from the top level when unset */
    struct net_http_cfg http;
    uint64_t body_size_limit;      /**< scraped body cap, bytes; 0: limits.max-body-bytes */
    unsigned keep_dropped_targets; /**< dropped targets /api/v1/targets lists (all are
                                        counted); 0: all (Prometheus' keep_dropped_targets) */
    unsigned target_limit;         /**< more targets than this after relabeling and sampling:
                                 none is scraped (Prometheus' target_limit); 0: none */
    struct scrape_sampling_cfg sampling;
    /** profile-relabel-configs: rules over the labels a profile is sent
     * with (__name__, __delta__, service_name, job, instance, the public
     * target labels; not the external labels, which are added later, as
     * Prometheus adds them after metric relabeling). */
    struct relabel_cfg *profile_relabel;
    unsigned n_profile_relabel;
    /** The relabel rules, compiled once when the file is loaded (not YAML
     * keys). */
    struct relabel_rules *rules;
    struct relabel_rules *profile_rules;
    /** A hash (XXH3, 128 bits) of conf_signature() of every key above,
     * taken when the file is loaded: a reload keeps what was built for a
     * job whose signature did not change. */
    uint64_t signature[2];
};

/** Default of a job's keep-dropped-targets: enough to see what the rules
 * drop, bounded so a cluster-wide job does not list every pod it drops. */
#define SCRAPE_DEFAULT_KEEP_DROPPED 100

/** Default of `limits.max-body-bytes`. */
#define SCRAPE_DEFAULT_MAX_BODY_BYTES ((uint64_t)64 << 20)

/** The libcyaml value of one job, and the sections of the scrape
 * module's mappings (NULL-terminated). */
extern const cyaml_schema_value_t scrape_job_cfg_entry;
extern const struct conf_section *const scrape_cfg_sections[];
/** Refuses two jobs with the same name in a `scrape-configs` list, and
 * gives jobs without a name-validation-scheme the top level's `scheme`
 * ("utf8" or "legacy"). For the post hook of the mapping that holds the
 * list. */
int scrape_cfg_check_jobs(struct conf_load *ld, struct conf_node *jobs, const char *scheme);

/** The canonical name of a profile type or alias (cpu, mem, heap,
 * goroutines, ...), or NULL if unknown. */
const char *scrape_profile_canonical(const char *name);

/* ------------------------------------------------------------- scraping
 * The scrape manager, in the shape of Prometheus' scrape manager: apply a
 * configuration, sync target groups from discovery, report targets. It
 * owns one timer per (target, profile type) at its Prometheus offset, one
 * request in flight per pair, response checks, and the delta state of
 * cumulative types (computed on the work queue). Loop thread only. */

/** A profile ready to send: `labels` (borrowed for the call: the target's
 * labels, service_name, __name__...; no external labels) and the pprof
 * `data` (ownership passes to the callee), for the window [start_ns,
 * end_ns]. `compression` is the enum pprof_compression a delta was written
 * with (the settings' limits), or -1 for a profile sent as it came. */
typedef void (*scrape_profile_cb)(const struct labels *labels, uint8_t *data, size_t len,
                                  int64_t start_ns, int64_t end_ns, int compression, void *ud);

/** A failed scrape, reported at most once a minute per pair (`suppressed`
 * counts the ones not reported since); strings borrowed for the call. */
struct scrape_error {
    const char *job, *instance, *type, *url;
    const char *reason; /**< connect, timeout, too_large, http_status, ... */
    const char *message;
    unsigned suppressed;
};
typedef void (*scrape_error_cb)(const struct scrape_error *e, void *ud);

struct net_request;

/** How scrapes reach their targets; the default is libcurl through
 * net_client. Tests substitute a fake. Same contract as
 * net_request_start() / net_request_cancel(). */
struct scrape_transport {
    int (*start)(void *ctx, const struct net_request_opts *o, net_done_cb cb, void *ud,
                 struct net_request **out);
    void (*cancel)(void *ctx, struct net_request *r);
    size_t (*inflight)(void *ctx);
    void *ctx;
};

/** Whether this process owns the target whose final labels hash to `id`
 * (labels_hash() of the labels after relabeling, PopulateLabels done).
 * `*owner` gets the owner's name to show (borrowed for the call; NULL:
 * none to show). The agent passes the cluster's filter (docs/clustering.md);
 * scrape does not know who answers. */
typedef bool (*scrape_owner_cb)(uint64_t id, const char **owner, void *ud);

struct scrape_manager_opts {
    uv_loop_t *loop;    /**< the manager's loop; every callback runs on it */
    struct workq *work; /**< CPU work (gunzip checks, deltas) */
    /** `proflet targets`: build targets only; no pair, timer or request. */
    bool dry_run;
    /** Prometheus' per-instance offset seed (scrape_offset_seed()). */
    uint64_t offset_seed;
    scrape_profile_cb on_profile;
    scrape_error_cb on_error; /**< may be NULL */
    /** May be NULL. A pair stopped (its target left, or no longer has
     * that profile type): no profile comes with these labels (borrowed
     * for the call) until a pair has them again. */
    void (*on_pair_gone)(const struct labels *labels, void *ud);
    void *ud; /**< for the callbacks */
    /** NULL: scrape through libcurl. Borrowed for the manager's life. */
    const struct scrape_transport *transport;
    /** NULL: the real wall clock (nanoseconds since the epoch). */
    uint64_t (*now_ns)(void);
    /** NULL: every target is kept. Else only the targets it owns get
     * pairs; the others are listed as owned elsewhere. */
    scrape_owner_cb owner;
    void *owner_ud;
};

/** What every job of one configuration shares. */
struct scrape_settings {
    const struct pprof_limits *pprof; /**< caps and gzip level of deltas */
    uint64_t max_body_bytes;          /**< body cap of jobs without body-size-limit */
};

struct scrape_manager;

/** Creates a manager. Returns 0 and the manager in `*out` (the caller's,
 * for scrape_manager_close()), or a negative code with the reason in `err`
 * (the libcurl client's, or "out of memory") and NULL in `*out`; the
 * handles it had opened then close on the loop's next run. */
int scrape_manager_new(const struct scrape_manager_opts *o, struct scrape_manager **out, char *err,
                       size_t errlen);
/** Makes the jobs match `jobs[0..n)` (inside `doc`, which the manager
 * references while anything uses it) and rebuilds every known target
 * under them. Pairs whose labels and URL did not change keep their timers
 * and delta state. Returns 0 or -ENOMEM with a message. */
int scrape_manager_apply(struct scrape_manager *m, struct conf_doc *doc,
                         const struct scrape_job_cfg *jobs, size_t n,
                         const struct scrape_settings *s, char *err, size_t errlen);
/** Takes changed target groups of `job` (a disc_update_cb; `ud` is the
 * manager). */
void scrape_manager_sync(const char *job, const struct disc_group *groups, size_t n, void *ud);
/** Asks the owner filter again for every target (the owners changed):
 * targets that stay keep their pairs, timers and delta state; targets this
 * process lost stop; targets it gained start with a new baseline. */
void scrape_manager_refilter(struct scrape_manager *m);
/** Targets with pairs here (`*owned`) and targets the owner filter gave to
 * someone else (`*elsewhere`), over every job. */
void scrape_manager_target_counts(const struct scrape_manager *m, size_t *owned, size_t *elsewhere);
/** Stops every timer and cancels queued CPU work: no scrape starts after
 * this; requests and jobs in flight finish. */
void scrape_manager_stop(struct scrape_manager *m);
/** Requests and CPU jobs still in flight. */
size_t scrape_manager_busy(const struct scrape_manager *m);
/** Closes every handle; `cb` runs once all are closed. */
void scrape_manager_close(struct scrape_manager *m, void (*cb)(void *ud), void *ud);

/** Appends the targets as `promtool check service-discovery` prints them
 * (JSON list of discovered and final labels), for `proflet targets`. */
void scrape_manager_print(const struct scrape_manager *m, const char *job, bool show_dropped,
                          struct buf *out);
struct scrape_targets_iter;
/** Starts /api/v1/targets (Prometheus' API shape: one active target per
 * (target, profile type) with its last scrape; dropped ones with their
 * discovered labels; the dropped counts per job), to be produced in parts.
 * `job` (copied; NULL for all) keeps one job. The iterator holds no
 * pointer into the manager's targets: between parts the targets may
 * change; each target is reported consistently, and one that comes or goes
 * meanwhile may be missed or seen twice. The manager must outlive it.
 * NULL on OOM. */
struct scrape_targets_iter *scrape_targets_iter_new(const struct scrape_manager *m,
                                                    const char *job);
/** Appends the next part: whole targets until `out` holds at least `chunk`
 * bytes or the answer ends. Returns 1 if more follows, 0 at the end, or
 * -ENOMEM / -E2BIG (`out` reached its cap). */
int scrape_targets_iter_next(struct scrape_targets_iter *it, struct buf *out, size_t chunk);
/** One target as the status pages show it; everything borrowed for the
 * call. An active view is one (target, profile type) pair; a dropped view
 * is a target with no pair here, and `drop_reason` says why. */
struct scrape_target_view {
    const char *job;
    const struct labels *discovered; /**< with the job's defaults */
    const struct labels *labels;     /**< sent labels; NULL for a dropped view */
    const char *url, *profile_type;  /**< NULL for a dropped view */
    const char *last_error;          /**< NULL: none */
    const char *error;               /**< a dropped target's own error, or NULL */
    const char *drop_reason;         /**< NULL for an active view */
    const char *owner;               /**< clustering: the owner, or NULL */
    uint64_t last_scrape_ns, last_duration_us, interval_ms;
    uint64_t pair_key; /**< the pair, to find its latest profile */
};
/** Returns 0 to go on, 1 when this part has enough, or a negative code. */
typedef int (*scrape_target_fn)(const struct scrape_target_view *t, void *ud);
/** "up", "down" or "unknown" (never scraped). */
const char *scrape_target_health(const struct scrape_target_view *t);
/** For pages of a new iterator: visits active views (or, with `dropped`,
 * dropped ones) until `fn` returns 1; the iterator's consistency rules
 * hold. Returns 1 if more follows, 0 at the end, or a negative code. */
int scrape_targets_iter_visit(struct scrape_targets_iter *it, bool dropped, scrape_target_fn fn,
                              void *ud);
/** Frees the iterator (NULL is fine). */
void scrape_targets_iter_free(struct scrape_targets_iter *it);
/** Appends the same as a text table. */
void scrape_manager_targets_text(const struct scrape_manager *m, struct buf *out);
/** Appends the scrape metrics in Prometheus text format. */
void scrape_manager_metrics(const struct scrape_manager *m, struct buf *out);
/** Where a part-by-part rendering of the scrape metrics stands; zeroed to
 * start. Holds pointers into the manager, which must outlive it. */
struct scrape_metrics_cursor {
    unsigned family;
    bool started;
    const void *at;
    uint64_t gen;
};
/** Appends the next part of the scrape metrics: whole series until `out`
 * holds at least `chunk` bytes or the metrics end. Returns 1 if more
 * follows, 0 at the end. Between parts the manager may change: counters of
 * a (job, type) that appears meanwhile may be left out of this rendering,
 * and the per-job gauges of a family a reload interrupted end early; no
 * series is ever written twice. */
int scrape_manager_metrics_next(const struct scrape_manager *m, struct scrape_metrics_cursor *c,
                                struct buf *out, size_t chunk);

/** Prometheus' per-instance offset seed: fnv64a(hostname + external labels
 * as Labels.String(), "{}" when none). */
uint64_t scrape_offset_seed(const char *hostname, const struct labels *external);

#endif
