/** The agent: one libuv loop that owns the configuration, the target set,
 * one timer per (target, profile type), the HTTP client, the worker-pool
 * jobs, the forwarder and the status server.
 *
 * Internal to agent/. Everything here is touched by the loop thread only;
 * worker jobs (work.c) receive owned inputs and hand results back through
 * their after-work callback. */
#ifndef PROFLET_AGENT_AGENT_H
#define PROFLET_AGENT_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/config.h"
#include "agent/target.h"
#include "common/buf.h"
#include "common/hashmap.h"
#include "common/labels.h"
#include "common/log.h"
#include "discovery/discovery.h"
#include "net/net.h"
#include "pprof/pprof.h"

struct net_client;
struct net_request;
struct net_server;
struct disc_manager;
struct fwd;

#define AGENT_SCRAPE_CLIENTS 8

/** Latency histogram with fixed bucket bounds (seconds). */
#define AGENT_HIST_BUCKETS 12
struct agent_hist {
    uint64_t counts[AGENT_HIST_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t count;
};
extern const double agent_hist_bounds[AGENT_HIST_BUCKETS];
void agent__hist_observe(struct agent_hist *h, double v);

/** Why a scrape failed (a label of proflet_scrape_failures_total). */
enum agent_fail {
    FAIL_CONNECT, FAIL_TIMEOUT, FAIL_TOO_LARGE, FAIL_HTTP_STATUS, FAIL_EMPTY,
    FAIL_NOT_PPROF, FAIL_IO, FAIL_DECODE, FAIL_BACKLOG, FAIL_N,
};
extern const char *const agent_fail_names[FAIL_N];

/** Counters of one (job, profile type); kept for the life of the process
 * (bounded by the configs loaded). */
struct agent_stats {
    char *job;
    char *type;
    uint64_t scrapes;
    uint64_t failures[FAIL_N];
    uint64_t body_bytes;
    uint64_t skipped_ticks;
    uint64_t profiles_out;
    uint64_t delta_baselines;
    uint64_t delta_resets;
    struct agent_hist duration;
    struct agent_stats *next;
};

/** A reference-counted config, so in-flight scrapes keep the strings they
 * borrowed alive across a reload. */
struct agent_cfg {
    struct cfg *cfg;
    unsigned refs;
};

/** One scrape job of the current config. */
struct scrape_job {
    char *name;
    struct agent_cfg *acfg;            /**< config it belongs to (ref held) */
    const struct cfg_scrape *sc;       /**< inside acfg->cfg */
    struct relabel_rules *rules;       /**< compiled relabel-configs (may be NULL) */
    struct hashmap sources;            /**< xxhash(source) -> struct source_entry */
    char *bearer_token;                /**< cached bearer-token(-file) contents */
    uint64_t bearer_read_ms;
    char *password;                    /**< cached basic-auth password(-file) */
    struct scrape_job *next;
};

/** The targets one discovery source currently yields for a job. */
struct source_entry {
    char *source;
    struct labels *discovered;         /**< raw discovered labels, as delivered */
    struct target_result *results;     /**< one per discovered target */
    size_t n;
};

/** One (target, profile type): its timer, request, delta state and status. */
struct scrape_pair {
    uint64_t key;
    struct target_pair tp;             /**< labels, url, profile (borrowed from cfg) */
    struct scrape_job *job;
    struct agent_stats *stats;
    unsigned refs;                     /**< sources yielding this pair */
    uint64_t gen;                      /**< rebuild generation that last saw it */
    uv_timer_t timer;
    uint64_t offset_ns;
    uint64_t planned_ns;               /**< wall-clock time of the next tick */
    struct net_request *req;           /**< scrape in flight, or NULL */
    struct agent_cfg *req_cfg;         /**< config ref held by the request */
    uint64_t req_start_ns;
    bool busy;                         /**< a worker job of this pair is pending */
    bool closing;                      /**< removed; freed when idle and closed */
    bool timer_closed;
    struct pprof_delta *delta;         /**< cumulative types only */
    /* status for /api/v1/targets */
    uint64_t last_scrape_ns;
    uint64_t last_duration_us;
    char *last_error;
    struct log_ratelimit log_rl;
};

/** Bounded queue of CPU jobs for the libuv pool. */
struct work_item;
struct work_pool {
    unsigned max_inflight;
    unsigned inflight;
    unsigned max_backlog;
    unsigned backlog_len;
    struct work_item *head, *tail;
    uint64_t completed;
    uint64_t rejected;
};

struct agent {
    uv_loop_t *loop;
    struct agent_cfg *acfg;            /**< current config */
    char *config_path;                 /**< NULL: embedded default */
    struct net_client *http;           /**< discovery and remote-write */
    /** Scrapes are spread over several clients by target address: libcurl
     * 7.88 walks a multi handle's whole connection cache about once a
     * second, so one cache of thousands of kept-alive connections stalls the
     * loop in one long burst; eight caches make eight short ones. */
    struct net_client *scrapers[AGENT_SCRAPE_CLIENTS];
    struct net_server *status;
    struct disc_manager *disc;
    struct fwd *fwd;
    struct scrape_job *jobs;
    struct hashmap pairs;              /**< key -> struct scrape_pair */
    struct agent_stats *stats;
    struct work_pool pool;
    struct pprof_limits pprof_limits;
    struct labels external;            /**< global external labels */
    uint64_t offset_seed;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t shutdown_timer;
    bool stopping;
    uint64_t shutdown_deadline_ms;
    bool log_level_fixed;              /**< --log-level (or `targets`) overrides the file */
    bool targets_mode;                 /**< `proflet targets`: discover, print, exit */
    bool targets_printed;
    uint64_t last_update_ms;
    bool started;
    uint64_t start_time_ns;
    /* metrics */
    struct agent_hist lateness;
    uint64_t reloads_ok, reloads_failed;
    uint64_t last_reload_ns;
    bool last_reload_ok;
    uint64_t pairs_created, pairs_removed;
    uint64_t gen;
    uint64_t target_errors;
    int exit_code;
};

/* main.c */
size_t agent__inflight(const struct agent *a);
uint64_t agent__now_ns(void);
uint64_t agent__now_ms(void);

/* targets.c: the target manager */
int agent__apply_config(struct agent *a, struct agent_cfg *acfg, char *err, size_t errlen);
void agent__on_discovery(const char *job, const struct disc_group *groups, size_t n, void *ud);
void agent__targets_json(struct agent *a, const char *job, bool show_dropped, struct buf *out);
void agent__targets_text(struct agent *a, struct buf *out);
void agent__free_jobs(struct agent *a);
struct agent_cfg *agent__cfg_ref(struct agent_cfg *c);
void agent__cfg_unref(struct agent_cfg *c);

/* scrape.c */
struct scrape_pair *agent__pair_new(struct agent *a, struct scrape_job *job,
                                    struct target_pair *tp);
void agent__pair_update(struct agent *a, struct scrape_pair *p, struct scrape_job *job,
                        struct target_pair *tp);
void agent__pair_remove(struct agent *a, struct scrape_pair *p);
struct agent_stats *agent__stats_for(struct agent *a, const char *job, const char *type);

/* work.c */
typedef void (*agent_work_fn)(void *arg);
typedef void (*agent_after_fn)(void *arg, int status);
void agent__pool_init(struct work_pool *p, unsigned max_inflight, unsigned max_backlog);
/** Queues `fn(arg)` on the pool, then `after(arg, status)` on the loop.
 * Returns 0, or -EAGAIN if the backlog is full (nothing queued). */
int agent__pool_submit(struct agent *a, agent_work_fn fn, agent_after_fn after, void *arg);
/** Cancels queued (not started) items: their `after` runs with UV_ECANCELED. */
void agent__pool_cancel_backlog(struct agent *a);

/* status.c */
void agent__status_handler(const struct net_http_request *req, struct net_http_response *resp,
                           void *ud);
int agent__reload(struct agent *a, const char *why);
bool agent__ready(const struct agent *a);

#endif
