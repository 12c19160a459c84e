/* SPDX-License-Identifier: Apache-2.0 */
/** Forwarding: every profile the scraper produces goes to every configured
 * endpoint (Pyroscope push, legacy /ingest, or a local directory), each with
 * its own bounded queue, batching, retries and disk spool.
 *
 * Loop thread only; compression and disk work run on the agent's work
 * queue (common/workq.h).
 * fwd_submit() never blocks and never waits for a push. */
#ifndef PROFLET_FORWARD_H
#define PROFLET_FORWARD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/labels.h"
#include "conf/conf.h"
#include "net/net.h"
#include "pprof/pprof.h"
#include "relabel/relabel.h"

struct net_client;

/* --------------------------------------------------------- configuration */

enum cfg_protocol { CFG_PROTO_PUSH, CFG_PROTO_INGEST, CFG_PROTO_DIR };

/** One `remote-write` endpoint. */
struct cfg_remote {
    char *name; /**< default: host of url, or "dir" */
    char *url;  /**< http(s)://host[:port][/path] or file:///DIR */
    enum cfg_protocol protocol;
    struct conf_kv *headers;
    unsigned n_headers;
    char *tenant_id; /**< X-Scope-OrgID */
    struct net_http_cfg http;
    uint64_t remote_timeout_ms; /**< default 10s */
    uint64_t min_backoff_ms;    /**< default 500ms */
    uint64_t max_backoff_ms;    /**< default 5m */
    unsigned max_retries;       /**< default 10; 0 = retry for ever (spool) */
    bool gzip_request;          /**< gzip the PushRequest body; default false */
    /** How the profiles sent here are compressed (and the PushRequest body
     * with `gzip`); default balanced. A profile written with another
     * setting is compressed again for this endpoint as it is sent; one
     * sent as it came is sent unchanged (docs/design.md "Compression"). */
    enum pprof_compression compression;
    bool retry_on_http_429; /**< default true; false: a 429 drops the batch (Alloy's
                                     retry_on_http_429) */
    struct conf_kv *external_labels;
    unsigned n_external_labels;
    unsigned batch_max_profiles; /**< default 64 */
    uint64_t batch_max_bytes;    /**< default 4 MiB */
    uint64_t batch_max_wait_ms;  /**< default 1s */
    unsigned queue_max_profiles; /**< default 10000 */
    uint64_t queue_max_bytes;    /**< default 256 MiB */
    unsigned max_inflight;       /**< default 4 requests */
    uint64_t dir_max_bytes;      /**< directory sink cap, default 1 GiB */
    /** write-relabel-configs (Prometheus' write_relabel_configs): rules over
     * the labels a profile is sent with here, external labels included;
     * a profile they drop is not sent to this endpoint (counted, reason
     * write_relabel). */
    struct relabel_cfg *write_relabel;
    unsigned n_write_relabel;
    /** write_relabel compiled, once, when the file is loaded (the section's
     * finish hook); owned by the document, freed with it. NULL: no rules.
     * The endpoint applies these; it compiles nothing itself. */
    struct relabel_rules *write_rules;
};

/** The disk spool shared by the endpoints (`spool:`). */
struct cfg_spool {
    char *dir;              /**< NULL: no spool */
    uint64_t max_bytes;     /**< default 1 GiB */
    uint64_t max_age_ms;    /**< default 24h */
    uint64_t segment_bytes; /**< default 16 MiB */
    char *fsync;            /**< always | batch | never, default batch */
};

/** The libcyaml values of one endpoint and of the spool mapping, and the
 * sections of forward's mappings (NULL-terminated). */
extern const cyaml_schema_value_t fwd_remote_cfg_entry;
extern const cyaml_schema_field_t fwd__spool_fields[];
#define FWD_SPOOL_CFG_FIELD(S, m) \
    CYAML_FIELD_MAPPING("spool", CYAML_FLAG_OPTIONAL, S, m, fwd__spool_fields)
extern const struct conf_section *const fwd_cfg_sections[];
/** Refuses two endpoints with the same name in a `remote-write` list. */
int fwd_cfg_check_names(struct conf_load *ld, struct conf_node *remotes);
/** The settings a configuration file gets for every key it leaves out, for
 * a caller that builds them without a file (tests, tools): a loaded
 * document is complete, and fwd_apply() fills in nothing. The name, url
 * and protocol are the caller's to set. */
void fwd_cfg_remote_init(struct cfg_remote *c);
void fwd_cfg_spool_init(struct cfg_spool *s);

/** An immutable, reference-counted profile ready to send. */
struct fwd_profile {
    struct labels labels; /**< final labels: service_name, __name__, job, instance, ... */
    uint8_t *data;        /**< pprof bytes, gzip or plain */
    size_t len;
    /** The enum pprof_compression `data` was written with, or -1 (what
     * fwd_profile_new() sets): sent as it came, to every endpoint. The
     * creator may set it before the first fwd_submit(). */
    int compression;
    int64_t start_ns; /**< scrape window (used by /ingest from/until) */
    int64_t end_ns;
    char id[37]; /**< random UUID, the RawSample ID */
    unsigned _refs;
};

/** Creates a profile taking ownership of `labels` (moved) and `data`
 * (malloc'd). Generates its UUID. Returns NULL on OOM (data is then freed). */
struct fwd_profile *fwd_profile_new(struct labels *labels, uint8_t *data, size_t len,
                                    int64_t start_ns, int64_t end_ns);
/** Adds a reference. */
struct fwd_profile *fwd_profile_ref(struct fwd_profile *p);
/** Drops a reference; frees at zero (NULL is fine). */
void fwd_profile_unref(struct fwd_profile *p);

struct fwd;
struct workq;

/** Endpoint errors (a failed request, a disk error...), called on the loop
 * thread with the endpoint name and a message (both borrowed for the
 * call). The library never logs; the agent may, rate limited. */
typedef void (*fwd_error_cb)(const char *endpoint, const char *msg, void *ud);

/** What a forwarder is made with. */
struct fwd_opts {
    uv_loop_t *loop;         /**< the forwarder's loop; the callback runs on it */
    struct net_client *http; /**< borrowed: the remote endpoints' client */
    /** Borrowed (it must outlive the forwarder): the agent's one bounded
     * work queue, for the pool work (PushRequest encoding, gzip, the
     * spool's and the directory sink's file jobs). A job the queue cancels
     * before it starts is submitted again, so nothing is lost. */
    struct workq *work;
    fwd_error_cb on_error; /**< may be NULL */
    void *ud;              /**< for on_error */
};

/** Creates the forwarder. Returns 0 and the forwarder in `*out` (the
 * caller's, for fwd_close()), or -ENOMEM with "out of memory" in `err` and
 * NULL in `*out`. */
int fwd_new(const struct fwd_opts *o, struct fwd **out, char *err, size_t errlen);
/** Makes the endpoints match `remotes` and `spool`, with the global
 * `external` labels under each endpoint's own. Endpoints whose settings did
 * not change keep their queues (and the settings they started with).
 * An endpoint reads its settings in place, as loaded (complete, checked,
 * write rules compiled): `doc` is the document they live in, and each
 * endpoint holds a reference on it for as long as it runs. With a NULL
 * `doc` the caller keeps every argument alive until fwd_close() has
 * finished. Returns 0 or a negative code with a message (nothing changed
 * then). */
int fwd_apply(struct fwd *f, struct conf_doc *doc, const struct cfg_remote *remotes,
              size_t n_remotes, const struct cfg_spool *spool, const struct conf_kv *external,
              size_t n_external, char *err, size_t errlen);
/** Hands a profile to every endpoint (each takes its own reference; the
 * caller keeps its own). Its labels are the target's: each endpoint adds
 * the external labels (the global ones, then its own) as it sends, so the
 * caller adds none. Never blocks. */
void fwd_submit(struct fwd *f, struct fwd_profile *p);
/** Appends the forwarding metrics in Prometheus text format. */
void fwd_metrics(const struct fwd *f, struct buf *out);
/** One endpoint as the status pages show it (borrowed for the call). */
struct fwd_endpoint_view {
    const char *name, *url;
    uint64_t queue_profiles, queue_bytes, inflight_profiles;
    uint64_t spool_bytes, spool_records, spool_oldest_ms; /**< wall ms, 0 if empty */
    uint64_t sent_profiles, sent_bytes, retried_profiles, failed_requests;
    uint64_t dropped_profiles; /**< for every reason */
    const char *last_error;    /**< "" if none */
    uint64_t last_error_ms;    /**< wall ms, 0 if none */
    const char *compression;   /**< the setting ("balanced") */
    const char *encoder;       /**< what it runs as ("igzip level 2") */
};
/** Calls `fn` for each active endpoint, in configuration order. */
void fwd_endpoints_visit(const struct fwd *f,
                         void (*fn)(const struct fwd_endpoint_view *e, void *ud), void *ud);
/** Flushes: tries to deliver what is queued until `deadline_ms` from now,
 * spools the rest, then closes everything and calls `cb`. */
void fwd_close(struct fwd *f, uint64_t deadline_ms, void (*cb)(void *ud), void *ud);

/** The last endpoint error ("name: message"), "" if none. Valid until the
 * next call into the forwarder. */
const char *fwd_last_error(const struct fwd *f);

#endif
