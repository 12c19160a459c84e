/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of scrape/: target building (target.c, pure), the
 * profile type aliases (config.c), and the loop-driven parts shared by the
 * manager and the scrapes. Private to the scrape library and its tests. */
#ifndef PROFLET_SCRAPE_INTERNAL_H
#define PROFLET_SCRAPE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/buf.h"
#include "common/hashmap.h"
#include "common/labels.h"
#include "common/log.h"
#include "common/promtext.h"
#include "scrape/scrape.h"

/* The aliases of a canonical profile type name (at most `max`). */
size_t scrape__profile_aliases(const char *canonical, const char **out, size_t max);

/* ------------------------------------------------------ target building
 * Pure: no libuv, no curl, no logging, so it is tested without a loop and
 * shared by the scrapes, `proflet targets` and /api/v1/targets. */

/* One thing to scrape: a target x an enabled profile type. */
struct target_pair {
    struct labels labels;                     /* labels to send: public target labels, service_name,
                                __name__ (sent name), __delta__="false" where the delta
                                is ours or godeltaprof's, pyroscope_spy; external
                                labels are NOT included */
    char *url;                                /* scheme://address/prefix/path?sorted query */
    const struct scrape_profile_cfg *profile; /* borrowed from the config */
    uint64_t interval_ms;
    uint64_t timeout_ms;  /* scrape-timeout + seconds for duration profiles */
    uint64_t seconds;     /* `seconds` param of duration profiles, else 0 */
    uint64_t key;         /* de-duplication key: hash of public labels + URL */
    uint64_t offset_hash; /* Prometheus thash: fnv64a(%016d of labels_hash(all
                                target labels) + URL) */
};

/* The outcome for one discovered target. */
struct target_result {
    struct labels discovered; /* input labels plus job/__scheme__/... defaults */
    struct labels labels;     /* after relabeling (incl. "__" labels); empty if dropped */
    bool dropped;             /* a rule dropped it (silently, as Prometheus) */
    bool elsewhere;           /* valid, but the owner filter gave it to another process */
    const char *owner;        /* interned name of its owner when the filter names one
                                 (common/intern.h: every target of a peer shares it) */
    char *error;              /* malloc'd message if the target is invalid, else NULL */
    struct target_pair *pairs;
    size_t n_pairs;
    size_t pairs_dropped;  /* profile types profile-relabel-configs dropped */
    size_t pairs_nameless; /* of which they left without __name__ */
    /* Jobs with target-sampling or a target-limit only: */
    bool eligible;    /* built without error and kept by the rules */
    bool sampled_out; /* not among its group's chosen targets */
    bool over_limit;  /* its job has more targets than its target-limit */
    uint64_t id;      /* labels_hash() of its final labels */
    uint64_t group;   /* scrape__sample_group() */
};

/* build_pair()'s result for a pair the profile rules dropped. */
#define PAIR_DROPPED 2
#define PAIR_NAMELESS 3 /* the rules removed __name__: no profile type to send as */

/* Builds one discovered target (`discovered` borrowed) under job `sc`, whose
 * compiled rules it applies. Fills `out` (always target_result_done() it).
 * Returns 0 (even for a dropped or invalid target: see out->dropped and
 * out->error) or -ENOMEM / a relabel error code. */
int target_build(const struct scrape_job_cfg *sc, const struct labels *discovered,
                 struct target_result *out);
/* The labels a target has before its rules run: the discovered ones plus
 * the job's defaults (job, __scheme__, __scrape_interval__, ...). Replaces
 * `out`. Returns 0 or -ENOMEM. */
int target_discovered(const struct scrape_job_cfg *sc, const struct labels *discovered,
                      struct labels *out);
/* Frees what target_build() filled. */
void target_result_done(struct target_result *r);
/* Frees the pairs of a result (a target owned elsewhere yields none). */
void target_pairs_clear(struct target_result *r);

/* Offset of a pair inside its interval: (offset_hash ^ seed) % interval. */
uint64_t target_offset_ns(uint64_t offset_hash, uint64_t seed, uint64_t interval_ns);
/* Nanoseconds from `now_unix_ns` until the first instant t > now with
 * t % interval == offset (docs/design.md "Targets, labels and scheduling"). */
uint64_t target_first_delay_ns(uint64_t offset_ns, uint64_t interval_ns, uint64_t now_unix_ns);

/* The one way bytes from targets (labels, errors, URLs) become JSON here:
 * a json-c string of s[0..len) with each invalid UTF-8 byte replaced by
 * U+FFFD, as Prometheus' encoder writes it; json-c escapes the control
 * characters. NULL on OOM. */
struct json_object;
struct json_object *scrape__json_string(const char *s, size_t len);
/* Adds `v` (owned) to object `o` under `key`, made valid UTF-8 as above. */
void scrape__json_add(struct json_object *o, const char *key, struct json_object *v);
/* A label set as a JSON object of strings, made valid as above. */
struct json_object *scrape__labels_json(const struct labels *ls);

/* Appends `{"discoveredLabels": {...}, "labels": {...}}` for one result to
 * `out` as JSON (as `promtool check service-discovery` prints it). With
 * `show_dropped`, a dropped target is printed with "dropped": true and
 * "labels": {}. Returns 0 or -ENOMEM. */
int target_result_json(const struct target_result *r, bool show_dropped, struct buf *out);

/* ----------------------------------------------------------- the manager
 * Loop thread only. */

/* Scrapes are spread over several clients by target address: libcurl 7.88
 * walks a multi handle's whole connection cache about once a second, so one
 * cache of thousands of kept-alive connections stalls the loop in one long
 * burst; eight caches make eight short ones. */
#define SCRAPE_CLIENTS 8
/* Idle connections a scrape client keeps beyond one per pair. */
#define SCRAPE_SPARE_CONNECTS 4

/* Why a scrape failed (label `reason` of proflet_scrape_failures_total). */
enum scrape_fail {
    FAIL_CONNECT,
    FAIL_TIMEOUT,
    FAIL_TOO_LARGE,
    FAIL_HTTP_STATUS,
    FAIL_EMPTY,
    FAIL_NOT_PPROF,
    FAIL_IO,
    FAIL_DECODE,
    FAIL_BACKLOG,
    FAIL_OVER_BUDGET,
    FAIL_N,
};

/* Counters of one (job, profile type); kept for the life of the manager
 * (bounded by the configurations loaded). */
struct scrape_stats {
    char *job;
    char *type;
    uint64_t scrapes;
    uint64_t failures[FAIL_N];
    uint64_t body_bytes;
    uint64_t skipped_ticks;
    uint64_t profiles_out;
    uint64_t delta_baselines;
    uint64_t delta_resets;
    struct prom_hist duration;
    struct scrape_stats *next;
};

/* One job of the current configuration. */
struct scrape_job {
    char *name;
    struct conf_doc *doc;            /* the configuration it belongs to (ref held) */
    const struct scrape_job_cfg *sc; /* inside doc */
    struct hashmap sources;          /* xxhash(source) -> struct source_entry */
    struct net_secret *bearer;       /* bearer-token(-file), or NULL */
    struct net_secret *password;     /* basic-auth password(-file), or NULL */
    struct net_auth *auth;           /* authorization, http-headers, oauth2 */
    uint64_t max_body;               /* body cap */
    size_t dropped;                  /* targets its rules dropped */
    size_t pairs_dropped;            /* pairs its profile rules dropped */
    size_t pairs_nameless;           /* of which left without __name__ */
    size_t kept;                     /* valid targets with pairs here */
    size_t elsewhere;                /* valid targets owned by another process */
    size_t sampled_out;              /* valid targets target-sampling left out */
    struct hashmap chosen;           /* target-sampling: ids chosen (sticky) */
    size_t selected;                 /* targets after sampling, for target-limit */
    bool over_limit;                 /* more than target-limit: none is scraped */
    uint64_t limit_exceeded;         /* times it went over its target-limit */
    struct pprof_limits limits;      /* caps of its deltas */
    struct hashmap pending;          /* source key -> struct pending_build (manager.c) */
    struct scrape_job *next;
};

/* The targets one discovery source currently yields for a job. */
struct source_entry {
    char *source;
    struct disc_targets *discovered; /* discovery's own sets (a reference held) */
    struct target_result *results;   /* one per discovered target */
    size_t n;
};

/* One (target, profile type): its timer, request, delta state and status. */
struct scrape_pair {
    uint64_t key;
    struct scrape_manager *m;
    struct target_pair tp; /* labels, url, profile (borrowed from the config) */
    struct scrape_job *job;
    struct scrape_stats *stats;
    unsigned refs;   /* sources yielding this pair */
    unsigned client; /* its scrape client + 1 (0: no URL) */
    uint64_t gen;    /* rebuild generation that last saw it */
    uv_timer_t timer;
    uint64_t offset_ns;
    uint64_t planned_ns;      /* wall-clock time of the next tick */
    struct net_request *req;  /* scrape in flight, or NULL */
    struct conf_doc *req_doc; /* configuration ref held by the request */
    uint64_t req_start_ns;
    bool busy;    /* a CPU job of this pair is pending */
    bool closing; /* removed; freed when idle and closed */
    bool timer_closed;
    struct pprof_delta *delta; /* cumulative types only */
    /* status for /api/v1/targets */
    uint64_t last_scrape_ns;
    uint64_t last_duration_us;
    char *last_error;
    struct log_ratelimit log_rl;
};

struct scrape_manager {
    uv_loop_t *loop;
    struct workq *work;
    bool dry_run;
    bool stopping;
    uint64_t offset_seed;
    scrape_profile_cb on_profile;
    void (*on_pair_gone)(const struct labels *labels, void *ud);
    scrape_error_cb on_error;
    void *ud;
    uint64_t (*now_ns)(void);
    scrape_owner_cb owner;
    void *owner_ud;
    struct scrape_transport transport;
    struct net_client *clients[SCRAPE_CLIENTS]; /* the default transport */
    struct conf_doc *doc;                       /* current configuration (ref held) */
    struct scrape_job *jobs;
    struct hashmap jobs_by_name; /* scrape__name_key(name) -> struct scrape_job */
    bool jobs_unindexed;         /* an index insert failed: look up by the list */
    uint64_t jobs_gen;           /* bumped whenever `jobs` is replaced */
    struct hashmap pairs;        /* key -> struct scrape_pair */
    struct scrape_stats *stats;
    struct hashmap stats_by_name; /* scrape__name_key(job, type) -> struct scrape_stats */
    bool stats_unindexed;         /* an index insert failed: look up by the list */
    struct prom_hist lateness;
    uint64_t gen;
    /* Discovery updates built a slice per loop turn (manager.c). */
    struct pending_build *pend_head, *pend_tail;
    uv_idle_t build_idle;
    size_t budget;      /* targets this turn may still build */
    uint64_t budget_at; /* uv_now() of the turn it belongs to */
    uint64_t pairs_created, pairs_removed;
    uint64_t owner_gained, owner_lost; /* targets whose owner filter answer flipped */
    uint64_t target_errors;
    size_t live_pairs;                   /* allocated, including closing ones */
    size_t client_pairs[SCRAPE_CLIENTS]; /* pairs in m->pairs per scrape client */
    /* Called by pair.c once a pair is freed: the manager drives its pairs,
     * pairs only report back through this, never by calling it. */
    void (*pair_freed)(struct scrape_manager *m);
    unsigned pending_closes;
    bool closing;
    void (*close_cb)(void *ud);
    void *close_ud;
};

/** The scrape client (0 .. SCRAPE_CLIENTS - 1) of a URL, by its scheme and
 * authority, so every profile type of one target shares its connection. */
unsigned scrape__client_of(const char *url);

/* pair.c */
struct scrape_pair *scrape__pair_new(struct scrape_manager *m, struct scrape_job *job,
                                     struct target_pair *tp);
void scrape__pair_update(struct scrape_manager *m, struct scrape_pair *p, struct scrape_job *job,
                         struct target_pair *tp);
void scrape__pair_remove(struct scrape_manager *m, struct scrape_pair *p);
/* The counters of (job, type), created on first use; NULL on OOM. Constant
 * time: a reload asks once per pair. */
struct scrape_stats *scrape__stats_for(struct scrape_manager *m, const char *job, const char *type);
/* The key of a name in the manager's indexes: xxhash of `a`, and of `b`
 * after it when not NULL. */
uint64_t scrape__name_key(const char *a, const char *b);
extern const char *const scrape__fail_names[FAIL_N];

/* sample.c: stable target sampling (pure). */
struct scrape_sample_cand {
    uint64_t group;  /* scrape__sample_group() of the target */
    uint64_t id;     /* its identity: labels_hash() of its final labels */
    bool was_chosen; /* chosen by the previous pass */
    bool chosen;     /* out */
};
/* The group of a target: a hash of the values of `s->group_by`, each read
 * from the final labels, else from the discovered ones (so __meta_* labels
 * can group). */
uint64_t scrape__sample_group(const struct scrape_sampling_cfg *s, const struct labels *final,
                              const struct labels *discovered);
/* Sets c[i].chosen: per group, up to `max_per_group`, those chosen before
 * first, then by identity hash, highest first. -1 on OOM. */
int scrape__sample_choose(struct scrape_sample_cand *c, size_t n, unsigned max_per_group);

#endif
