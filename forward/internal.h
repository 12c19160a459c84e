/* Internal interfaces of forward/: the endpoint object shared by the sinks,
 * the pure wire helpers (push/ingest encoding, error attribution, label
 * validation), and the spool. Loop thread only unless a function says
 * otherwise. */
#ifndef PROFLET_FORWARD_INTERNAL_H
#define PROFLET_FORWARD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "forward/forward.h"

#define FWD__ERRLEN 256

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* Reasons a profile is dropped (metric label `reason`). */
enum fwd__drop {
    FWD_DROP_INVALID,      /* labels fail the server's limits */
    FWD_DROP_REJECTED,     /* non-retryable 4xx (or 501) */
    FWD_DROP_TOO_LARGE,    /* a single profile the server says is too large */
    FWD_DROP_RETRIES,      /* max retries exhausted (no spool) */
    FWD_DROP_QUEUE_FULL,   /* queue full and no spool */
    FWD_DROP_SPOOL_FULL,   /* spool byte cap: oldest segment deleted */
    FWD_DROP_SPOOL_AGE,    /* spool age cap */
    FWD_DROP_SPOOL_CORRUPT,/* torn or corrupt spool records */
    FWD_DROP_IO,           /* disk write failed */
    FWD_DROP_SHUTDOWN,     /* still queued at close with nowhere to go */
    FWD_DROP__N
};

const char *fwd__drop_name(enum fwd__drop r);

/* Latency histogram buckets (seconds). */
#define FWD__LAT_N 12
extern const double fwd__lat_bounds[FWD__LAT_N];

/* Per-endpoint counters, rendered by fwd_metrics(). */
struct fwd__stats {
    uint64_t sent_profiles, sent_bytes;
    uint64_t retried_profiles, retried_bytes;
    uint64_t failed_requests;
    uint64_t requests;
    uint64_t ambiguous_profiles; /* resent after an outcome nobody reported */
    uint64_t dropped_profiles[FWD_DROP__N], dropped_bytes[FWD_DROP__N];
    uint64_t queue_len, queue_bytes;
    uint64_t inflight_profiles;   /* in requests on the wire or being encoded */
    uint64_t spool_bytes, spool_segments, spool_records;
    uint64_t spool_oldest_ms; /* wall-clock ms of the oldest spooled record, 0 if none */
    uint64_t spool_written_profiles, spool_replayed_profiles;
    uint64_t lat_buckets[FWD__LAT_N];
    uint64_t lat_count;
    double lat_sum;
    uint64_t files;         /* directory sink: profiles in the index */
    uint64_t files_deleted; /* directory sink: profiles deleted by the size cap */
    uint64_t dir_bytes;     /* directory sink: bytes in the index */
};

struct fwd_ep;

/* A sink kind: directory or remote (push / ingest). */
struct fwd__sink_ops {
    const char *kind;
    /* Starts the endpoint; `ep->cfg` is its private copy of the config. */
    int (*start)(struct fwd_ep *ep, char *err, size_t errlen);
    /* Takes a reference of its own when it keeps `p`. */
    void (*submit)(struct fwd_ep *ep, struct fwd_profile *p);
    /* Flushes until the absolute loop time `deadline` then calls
     * fwd__ep_closed(ep) exactly once. */
    void (*close)(struct fwd_ep *ep, uint64_t deadline);
    /* Frees the sink's private state (after close completed). */
    void (*free)(struct fwd_ep *ep);
};

extern const struct fwd__sink_ops fwd__dir_ops;
extern const struct fwd__sink_ops fwd__remote_ops;

/* One configured endpoint. */
struct fwd_ep {
    struct fwd *f;
    uv_loop_t *loop;
    struct fwd_ep *next;
    const struct fwd__sink_ops *ops;
    char *name;
    char *signature;         /* config fingerprint: unchanged endpoints keep their queues */
    struct cfg_remote cfg;   /* deep copy */
    struct cfg_spool spool;  /* deep copy (dir NULL: no spool) */
    struct fwd__stats st;
    void *sink;              /* sink-private state */
    bool closing;
    char last_error[FWD__ERRLEN];
};

/* Reports an endpoint error to the agent's callback and keeps it as the
 * last error. */
void fwd__ep_error(struct fwd_ep *ep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Called by a sink once its close has finished. */
void fwd__ep_closed(struct fwd_ep *ep);
/* Counts a drop. */
void fwd__ep_drop(struct fwd_ep *ep, enum fwd__drop r, uint64_t profiles, uint64_t bytes);
/* Records a request latency. */
void fwd__ep_latency(struct fwd_ep *ep, uint64_t us);

/* Creates a profile with a given id (spool replay). Takes `labels` (moved) and
 * `data`. Thread-safe (touches no shared state). */
struct fwd_profile *fwd__profile_new_id(struct labels *labels, uint8_t *data, size_t len,
                                        int64_t start_ns, int64_t end_ns, const char *id);
/* Wall-clock milliseconds since the epoch. */
uint64_t fwd__wall_ms(void);
/* Turns an untrusted string into one safe path component: no '/', no NUL or
 * control characters, no leading dot, never empty, at most `outlen - 1`
 * bytes (cut on a UTF-8 boundary). */
void fwd__path_component(const char *in, char *out, size_t outlen);
/* The directory of a file:// url ("file:///abs", "file://./rel"), malloc'd,
 * or NULL if `url` is not a file url. */
char *fwd__file_url_path(const char *url);
/* Writes a random version-4 UUID (36 chars + NUL). */
void fwd__uuid(char out[37]);

/* ------------------------------------------------------------ wire helpers */

/* Server limits (pyroscope.md §2). */
#define FWD_MAX_LABELS 30
#define FWD_MAX_NAME_LEN 1024
#define FWD_MAX_VALUE_LEN 2048

/* Validates labels (after external labels are merged) against the server's
 * limits. Returns 0 or -EINVAL with a reason. */
int fwd__labels_validate(const struct labels *ls, char *err, size_t errlen);
/* True if `s[0..n)` is valid UTF-8. */
bool fwd__utf8_valid(const char *s, size_t n);

/* Builds a PushRequest for `n` profiles (one series each, labels merged
 * with `ext` external labels, which win). Returns 0 and a malloc'd body. */
int fwd__push_encode(struct fwd_profile *const *p, size_t n, const struct conf_kv *ext,
                     unsigned n_ext, uint8_t **out, size_t *out_len);
/* Merges external labels into a copy of `src`. */
int fwd__labels_merge(struct labels *dst, const struct labels *src, const struct conf_kv *ext,
                      unsigned n_ext);
/* gzip with libdeflate. Thread-safe. Returns 0 and a malloc'd buffer. */
int fwd__gzip(const uint8_t *in, size_t n, int level, uint8_t **out, size_t *out_len);

/* Builds the push URL: url without trailing '/' + "/push.v1.PusherService/Push". */
char *fwd__push_url(const char *base);
/* Builds the /ingest URL for one profile (name=<service>{labels}, from, until,
 * format=pprof, spyName). Returns malloc'd or NULL. */
char *fwd__ingest_url(const char *base, const struct labels *ls, int64_t start_ns,
                      int64_t end_ns);

/* What a response means for a request of `n` profiles. */
enum fwd__verdict {
    FWD_V_OK,          /* all accepted */
    FWD_V_PARTIAL,     /* attributed: `failed[i]` says which were refused */
    FWD_V_RETRY,       /* refused as a whole before ingest, retryable: resend all */
    FWD_V_SPLIT,       /* refused as a whole, not retryable: split (or drop at n==1) */
    FWD_V_TOO_LARGE,   /* 429/413 "too large": split (or drop at n==1) */
    FWD_V_AMBIGUOUS,   /* no answer (timeout, reset) or unattributed 5xx: unknown */
    FWD_V_UNREACHED,   /* the request never reached the server (connect, TLS) */
};

/* Per-profile outcome inside a FWD_V_PARTIAL verdict. */
enum fwd__pstate { FWD_P_OK = 0, FWD_P_RETRY = 1, FWD_P_DROP = 2 };

/* Classifies an HTTP outcome. `result` is the net result (0 or NET_E*),
 * `status` the HTTP status; `body` the error body (untrusted, may be
 * non-JSON). For FWD_V_PARTIAL `states[0..n)` is filled. `ids` are the
 * profiles' ids in request order. Pure; fuzzed. */
enum fwd__verdict fwd__classify(int result, long status, const char *body, size_t body_len,
                                const char *const *ids, size_t n, uint8_t *states,
                                char *msg, size_t msglen);
/* True if an HTTP status is retryable (5xx except 501, 408, 429). */
bool fwd__status_retryable(long status);

/* ------------------------------------------------------------------ spool */

/* On-disk record: header (32 bytes, little-endian) then payload.
 *   u32 magic 'PRC1' | u32 payload length | u64 series hash | u64 wall ms |
 *   u64 XXH64(series hash, wall ms, payload)
 * payload = zstd( u32 version | i64 start | i64 end | 36 id | u32 nlabels |
 *                 (u32 len, name, u32 len, value)* | u32 len, data ) */
#define FWD_SPOOL_HDR 32
#define FWD_SPOOL_MAGIC 0x31435250u /* "PRC1" */
#define FWD_SPOOL_MAX_RECORD (80u << 20) /* payload cap, compressed and raw */
#define FWD_SPOOL_SEG_MAGIC "PFLSPL01"

struct fwd__rec_hdr {
    uint32_t len;
    uint64_t series;
    uint64_t wall_ms;
    uint64_t sum;
};

/* Encodes one record (header + zstd payload). Thread-safe. */
int fwd__spool_encode(const struct fwd_profile *p, uint64_t wall_ms, int level,
                      uint8_t **out, size_t *out_len);
/* Parses a record header; returns 0, or -EINVAL if not a record. */
int fwd__spool_hdr_parse(const uint8_t *b, struct fwd__rec_hdr *h);
/* Verifies the checksum of a record. */
bool fwd__spool_hdr_check(const struct fwd__rec_hdr *h, const uint8_t *payload);
/* Decodes a record's payload (checksum already verified) into a new profile.
 * Every length is checked against the buffer; raw size is capped. */
int fwd__spool_decode(const uint8_t *payload, size_t len, struct fwd_profile **out);
/* Hash of a series (its labels) for ordering. */
uint64_t fwd__series_hash(const struct labels *ls);

struct fwd__spool;

/* Loop-side spool of one endpoint. */
struct fwd__spool_ops_cb {
    /* Records loaded by fwd__spool_load(); the callee takes the profiles
     * (array of `n`, each with its record token). */
    void (*loaded)(void *ud, struct fwd_profile **p, uint64_t *tokens, size_t n);
    /* A write job finished (space may now be available) or the scan finished. */
    void (*changed)(void *ud);
};

int fwd__spool_open(struct fwd_ep *ep, const struct fwd__spool_ops_cb *cb, void *ud,
                    struct fwd__spool **out, char *err, size_t errlen);
/* Appends a profile (a reference is taken). */
void fwd__spool_append(struct fwd__spool *s, struct fwd_profile *p);
/* Number of records not yet loaded back (pending writes included). */
uint64_t fwd__spool_pending(const struct fwd__spool *s);
/* Count of unloaded records of a series (for per-series order). */
uint32_t fwd__spool_series_count(const struct fwd__spool *s, uint64_t series);
/* Starts loading up to `max` records if no load is running and records are
 * available; results arrive through cb->loaded. Returns true if started. */
bool fwd__spool_load(struct fwd__spool *s, size_t max, uint64_t max_bytes);
/* Acknowledges a loaded record (delivered or dropped). */
void fwd__spool_ack(struct fwd__spool *s, uint64_t token);
/* True while a scan, write, load or cursor job is running. */
bool fwd__spool_busy(const struct fwd__spool *s);
/* True once the start-up scan has finished. */
bool fwd__spool_ready(const struct fwd__spool *s);
/* Enforces the age cap (call periodically). */
void fwd__spool_expire(struct fwd__spool *s);
/* Closes: waits for running jobs, syncs, then calls `cb`. */
void fwd__spool_close(struct fwd__spool *s, void (*cb)(void *ud), void *ud);
void fwd__spool_free(struct fwd__spool *s);

/* Synchronous helpers for tests, fuzzing and benchmarks: scans a segment
 * file, truncating a torn or corrupt tail. Returns records kept. */
int fwd__spool_scan_file(const char *path, uint64_t *records, uint64_t *bytes_kept,
                         uint64_t *corrupt, uint64_t *oldest_ms);

#endif
