/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of forward/, its only private header: the endpoint
 * object shared by the sinks, the pure wire helpers (push/ingest encoding,
 * error attribution, label validation), the remote queue and batching, and
 * the spool's parts (record format, segment files, index, state machine).
 * Loop thread only unless a function says otherwise. */
#ifndef PROFLET_FORWARD_INTERNAL_H
#define PROFLET_FORWARD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/macros.h"
#include "common/promtext.h"
#include "forward/forward.h"

#define FWD__ERRLEN 256

/* Reasons a profile is dropped (metric label `reason`). */
enum fwd__drop {
    FWD_DROP_INVALID,       /* labels fail the server's limits */
    FWD_DROP_REJECTED,      /* non-retryable 4xx (or 501) */
    FWD_DROP_TOO_LARGE,     /* a single profile the server says is too large */
    FWD_DROP_RETRIES,       /* max retries exhausted (no spool) */
    FWD_DROP_QUEUE_FULL,    /* queue full and no spool */
    FWD_DROP_SPOOL_FULL,    /* spool byte cap: oldest segment deleted */
    FWD_DROP_SPOOL_AGE,     /* spool age cap */
    FWD_DROP_SPOOL_CORRUPT, /* torn or corrupt spool records */
    FWD_DROP_IO,            /* disk write failed */
    FWD_DROP_SHUTDOWN,      /* still queued at close with nowhere to go */
    FWD_DROP_WRITE_RELABEL, /* a write-relabel rule of the endpoint dropped it */
    FWD_DROP__N
};

const char *fwd__drop_name(enum fwd__drop r);

/* Per-endpoint counters, rendered by fwd_metrics(). */
struct fwd__stats {
    uint64_t sent_profiles, sent_bytes;
    uint64_t retried_profiles, retried_bytes;
    uint64_t failed_requests;
    uint64_t requests;
    uint64_t ambiguous_profiles;    /* resent after an outcome nobody reported */
    uint64_t recompressed_profiles; /* written with another setting than this endpoint's */
    uint64_t dropped_profiles[FWD_DROP__N], dropped_bytes[FWD_DROP__N];
    uint64_t queue_len, queue_bytes;
    uint64_t inflight_profiles; /* in requests on the wire or being encoded */
    uint64_t spool_bytes, spool_segments, spool_records;
    uint64_t spool_oldest_ms; /* wall-clock ms of the oldest spooled record, 0 if none */
    uint64_t spool_written_profiles, spool_replayed_profiles;
    struct prom_hist lat;   /* request latency, seconds, over prom_latency_bounds */
    uint64_t files;         /* directory sink: profiles in the index */
    uint64_t files_deleted; /* directory sink: profiles deleted by the size cap */
    uint64_t dir_bytes;     /* directory sink: bytes in the index */
};

struct fwd_ep;

/* A sink kind: directory or remote (push / ingest). */
struct fwd__sink_ops {
    const char *kind;
    /* Starts the endpoint, whose settings are `ep->cfg` and `ep->spool`. */
    int (*start)(struct fwd_ep *ep, char *err, size_t errlen);
    /* Takes a reference of its own when it keeps `p`. */
    void (*submit)(struct fwd_ep *ep, struct fwd_profile *p);
    /* Flushes until the absolute loop time `deadline` then calls
     * fwd__ep_closed(ep) exactly once (never from inside this call once
     * started). May be called again while closing: an earlier deadline
     * then wins. The deadline holds whatever the sink's timers say. */
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
    const char *name; /* cfg->name */
    char *signature;  /* config fingerprint: unchanged endpoints keep their queues */
    /* The settings as loaded, read in place (complete and checked; the
     * write rules compiled, cfg->write_rules): `doc` is a reference on the
     * document they live in, so an endpoint kept across reloads keeps the
     * settings it started with. NULL: the caller of fwd_apply() keeps them. */
    struct conf_doc *doc;
    const struct cfg_remote *cfg;
    const struct cfg_spool *spool; /* dir NULL: no spool */
    /* The external labels the endpoint adds: the global ones, then its own
     * (which win). The array is the endpoint's; the strings are borrowed
     * from the settings. */
    struct conf_kv *ext;
    unsigned n_ext;
    struct fwd__stats st;
    void *sink; /* sink-private state */
    bool closing;
    char last_error[FWD__ERRLEN];
    uint64_t last_error_ms; /* wall clock of last_error, 0 if none */
};

/* A job of forward/ on the agent's work queue: embed one in each job
 * struct (container_of gets the job back). `fn` runs on a pool thread and
 * touches only its job; `after` runs on the loop thread, once, for a job
 * that ran. A job the queue cancels before it starts is queued again from
 * a later loop turn (forward's work must still be done: the encode of an
 * accepted profile, a spool write), so `after` never sees a cancellation
 * and the owner keeps counting the job as running until then. */
struct fwd__job {
    struct fwd *f;
    void (*fn)(struct fwd__job *j);
    void (*after)(struct fwd__job *j);
    uint64_t cost;
    struct fwd__job *next; /* in the forwarder's list of cancelled jobs */
};

/* Queues a job. `cost`: the bytes it will use at its peak (0: bounded by
 * its owner); a cost over the queue's whole budget claims the whole budget.
 * Returns 0, or -ENOMEM (then nothing runs). Never WORKQ_SKIPPABLE. */
int fwd__job_submit(struct fwd *f, struct fwd__job *j, uint64_t cost,
                    void (*fn)(struct fwd__job *j), void (*after)(struct fwd__job *j));

/* The forwarder's HTTP client and the agent's work queue, for its sinks. */
struct net_client *fwd__http(const struct fwd *f);
struct workq *fwd__workq(const struct fwd *f);

/* Reports an endpoint error to the agent's callback and keeps it as the
 * last error. */
void fwd__ep_error(struct fwd_ep *ep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Called by a sink once its close has finished. */
void fwd__ep_closed(struct fwd_ep *ep);
/* Counts a drop. */
void fwd__ep_drop(struct fwd_ep *ep, enum fwd__drop r, uint64_t profiles, uint64_t bytes);

/* Creates a profile with a given id (spool replay). Takes `labels` (moved) and
 * `data`. Thread-safe (touches no shared state). */
struct fwd_profile *fwd__profile_new_id(struct labels *labels, uint8_t *data, size_t len,
                                        int64_t start_ns, int64_t end_ns, const char *id);
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

/* Decompressed size past which a profile is not compressed again for an
 * endpoint (sent as it is): pprof's default max-decompressed. */
#define FWD_RECOMPRESS_MAX PPROF_DEFAULT_MAX_DECOMPRESSED
/* Whether endpoint compression `c` wants other bytes than `p`'s. */
bool fwd__recompress_needed(const struct fwd_profile *p, enum pprof_compression c);
/* The bytes of `p` as an endpoint with compression `c` sends them: `p`'s
 * own, borrowed, or compressed again into `*owned` (malloc'd, the
 * caller's; NULL when borrowed). A profile that cannot be compressed
 * again (damaged, too large) is sent as it is. Returns 0 or -ENOMEM. Any
 * thread. */
int fwd__profile_body(const struct fwd_profile *p, enum pprof_compression c, const uint8_t **data,
                      size_t *len, uint8_t **owned);
/* Builds a PushRequest for `n` profiles, one series each, labelled
 * `ls[i]` (the profile's labels already merged with the endpoint's
 * external labels), each profile's bytes as compression `c` wants them.
 * Returns 0 and a malloc'd body. */
int fwd__push_encode(struct fwd_profile *const *p, const struct labels *const *ls, size_t n,
                     enum pprof_compression c, uint8_t **out, size_t *out_len);
/* Merges external labels into a copy of `src`. */
int fwd__labels_merge(struct labels *dst, const struct labels *src, const struct conf_kv *ext,
                      unsigned n_ext);
/* The labels endpoint `ep` sends `src` with, into `dst` (initialised):
 * its external labels merged in, then its write-relabel rules. Returns 1,
 * 0 when a rule dropped the profile (dst is then emptied), or -ENOMEM. */
int fwd__labels_final(const struct fwd_ep *ep, struct labels *dst, const struct labels *src);

/* Builds the push URL: url without trailing '/' + "/push.v1.PusherService/Push". */
char *fwd__push_url(const char *base);
/* Builds the /ingest URL for one profile (name=<service>{labels}, from, until,
 * format=pprof, spyName). Returns malloc'd or NULL. */
char *fwd__ingest_url(const char *base, const struct labels *ls, int64_t start_ns, int64_t end_ns);

/* What a response means for a request of `n` profiles. */
enum fwd__verdict {
    FWD_V_OK,        /* all accepted */
    FWD_V_PARTIAL,   /* attributed: `failed[i]` says which were refused */
    FWD_V_RETRY,     /* refused as a whole before ingest, retryable: resend all */
    FWD_V_SPLIT,     /* refused as a whole, not retryable: split (or drop at n==1) */
    FWD_V_TOO_LARGE, /* 429/413 "too large": split (or drop at n==1) */
    FWD_V_AMBIGUOUS, /* no answer (timeout, reset) or unattributed 5xx: unknown */
    FWD_V_UNREACHED, /* the request never reached the server (connect, TLS) */
    FWD_V_REFUSED,   /* a 429 with retry-on-http-429 off: dropped, as rejected */
};

/* Per-profile outcome inside a FWD_V_PARTIAL verdict. */
enum fwd__pstate { FWD_P_OK = 0, FWD_P_RETRY = 1, FWD_P_DROP = 2 };

/* Classifies an HTTP outcome. `result` is the net result (0 or NET_E*),
 * `status` the HTTP status; `body` the error body (untrusted, may be
 * non-JSON). For FWD_V_PARTIAL `states[0..n)` is filled. `ids` are the
 * profiles' ids in request order. Pure; fuzzed. */
enum fwd__verdict fwd__classify(int result, long status, const char *body, size_t body_len,
                                const char *const *ids, size_t n, uint8_t *states, char *msg,
                                size_t msglen);
/* True if an HTTP status is retryable (5xx except 501, 408, 429). */
bool fwd__status_retryable(long status);

/* ---------------------------------------------- remote: queue, batching */

/* A profile in a remote endpoint's memory queue (or in a request). */
struct fwd__qent {
    struct fwd__qent *prev, *next;
    struct fwd_profile *p;
    struct labels labels; /* p's merged with the external labels, once: what is sent */
    uint64_t seq;         /* submission order */
    uint64_t series;
    uint64_t token; /* spool record, 0 if fresh */
    uint64_t queued_at;
    unsigned attempts;
    unsigned max_batch; /* after a split: at most this many per request */
    bool keep;          /* spill(): stays in memory */
};

/* The memory queue: submission order, kept in `st` (queue_len/bytes). */
struct fwd__queue {
    struct fwd__qent *head, *tail;
    uint64_t next_seq;
    struct fwd__stats *st;
};

void fwd__queue_append(struct fwd__queue *q, struct fwd__qent *e);
void fwd__queue_unlink(struct fwd__queue *q, struct fwd__qent *e);
/* Puts a refused entry back in submission order. */
void fwd__queue_insert_sorted(struct fwd__queue *q, struct fwd__qent *e);
/* True if `add` more bytes (one more profile) would pass the queue caps. */
bool fwd__queue_full(const struct fwd__queue *q, const struct cfg_remote *c, size_t add);

/* The entries of the next request, still linked in the queue. */
struct fwd__batch {
    struct fwd__qent **e; /* room for max_n */
    size_t n;
    uint64_t bytes;
    bool full; /* a limit was reached: no point in waiting */
};

/* Picks the next request from the head of the queue: at most `max_n`
 * profiles (fewer after a split) and `max_bytes`, one profile per series,
 * none of a series `busy()` says is in flight. */
void fwd__queue_pick(const struct fwd__queue *q, struct fwd__batch *b, size_t max_n,
                     uint64_t max_bytes, bool (*busy)(const void *ud, uint64_t series),
                     const void *ud);
/* The loop time a picked batch may leave at: now (0) if it is full, if
 * `may_wait` is false or after a split; else when its oldest profile has
 * waited `wait_ms`. */
uint64_t fwd__batch_due(const struct fwd__batch *b, uint64_t wait_ms, bool may_wait);

/* ------------------------------------------------- spool: record format */

/* Little-endian field access for the on-disk formats. */
static inline void fwd__put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static inline void fwd__put64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t fwd__get32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t fwd__get64(const uint8_t *b)
{
    return (uint64_t)fwd__get32(b) | (uint64_t)fwd__get32(b + 4) << 32;
}

/* On-disk record (docs/forwarding.md): a header, then the payload.
 *
 * Version 2 header, 40 bytes, little-endian:
 *   u32 magic "PRC2" | u32 payload length | u32 record number in its segment |
 *   u64 series hash | u64 wall ms | u64 XXH64(payload) |
 *   u32 low half of XXH64(the 36 header bytes before it)
 * The header check lets a reader trust a header found by scanning forward
 * after damage; the record numbers say exactly how many records the damage
 * took.
 *
 * Version 1 (read only, the previous format), 32 bytes:
 *   u32 magic "PRC1" | u32 payload length | u64 series hash | u64 wall ms |
 *   u64 XXH64(series hash, wall ms, payload)
 *
 * payload = zstd( u32 version=1 | i64 start | i64 end | 36 id | u32 nlabels |
 *                 (u32 len, name, u32 len, value)* | u32 len, data ) */
#define FWD_REC_HDR 40 /* version 2 */
#define FWD_REC_HDR_V1 32
#define FWD_REC_MAGIC 0x32435250u    /* "PRC2" */
#define FWD_REC_MAGIC_V1 0x31435250u /* "PRC1" */
#define FWD_REC_MAX (80u << 20)      /* payload cap, compressed and raw */

struct fwd__rec_hdr {
    unsigned version; /* 1 or 2 */
    uint32_t hdr_len; /* FWD_REC_HDR or FWD_REC_HDR_V1 */
    uint32_t len;     /* payload bytes */
    uint32_t seq;     /* record number in the segment (version 2) */
    uint64_t series;
    uint64_t wall_ms;
    uint64_t sum;
};

/* Encodes one version 2 record (header + zstd payload), malloc'd, numbered
 * `seq` in its segment. Thread-safe. */
int fwd__rec_encode(const struct fwd_profile *p, uint64_t wall_ms, uint32_t seq, int level,
                    uint8_t **out, size_t *out_len);
/* Parses the record header at `b` (`n` bytes available): the magic, the
 * length cap, and for version 2 the header check. Returns 0, or -EINVAL if
 * no record header starts here (or it is cut short). */
int fwd__rec_hdr_parse(const uint8_t *b, size_t n, struct fwd__rec_hdr *h);
/* Verifies a record's payload against its header. */
bool fwd__rec_check(const struct fwd__rec_hdr *h, const uint8_t *payload);
/* Decodes a record's payload (checksum already verified) into a new profile.
 * Every length is checked against the buffer; raw size is capped. */
int fwd__rec_decode(const uint8_t *payload, size_t len, struct fwd_profile **out);
/* Hash of a series (its labels) for ordering. */
uint64_t fwd__series_hash(const struct labels *ls);

/* -------------------------------------------------- spool: segment files */

/* A segment file: 16-byte header (magic, creation ms), then records. Only
 * version 2 segments are appended to; version 1 ones are read and deleted. */
#define FWD_SEG_HDR 16
#define FWD_SEG_MAGIC "PFLSPL02"
#define FWD_SEG_MAGIC_V1 "PFLSPL01"

/* A profile waiting to be appended. */
struct fwd__pend {
    struct fwd_profile *p;
    uint64_t series, wall_ms;
};

/* A record of a segment, as the index knows it. */
struct fwd__srec {
    uint64_t off; /* file offset of its header */
    uint64_t series;
    uint32_t seq;
};

/* What a scan found in one segment file. */
struct fwd__seg_scan {
    unsigned version; /* of the segment header; 0 if it is damaged */
    uint64_t created_ms, oldest_ms, newest_ms;
    struct fwd__srec *recs; /* the valid records, in file order (malloc'd) */
    size_t n, cap;
    uint64_t end;      /* offset after the last valid record */
    uint32_t next_seq; /* number of the next record appended */
    uint64_t lost;     /* damaged records numbered >= the scan's `delivered` */
};

/* Scans a segment file: every record header and payload is verified; after
 * damage the scan resynchronises at the next valid record header. The
 * records lost to damage are counted exactly from the gap in the record
 * numbers (version 2); a damaged region with no valid record after it
 * counts one, as does each damaged region of a version 1 segment. Records
 * numbered below `delivered` were delivered before (the cursor): their
 * loss is not counted. The file is truncated after its last valid record.
 * Pool thread (or tests). */
int fwd__seg_scan_fd(int fd, struct fwd__seg_scan *s, uint32_t delivered);
/* The same on a path, for tests, fuzzing and benchmarks. Returns the
 * number of valid records, or a negative errno. */
int fwd__seg_scan_file(const char *path, struct fwd__seg_scan *s);
void fwd__seg_scan_done(struct fwd__seg_scan *s);

/* Per-record outcome of an append: > 0 bytes written, 0 not written (the
 * disk refused: try again later), < 0 dropped (cannot be encoded). */
struct fwd__seg_append {
    char path[4096];
    bool create; /* write the segment header first (at offset 0) */
    uint64_t created_ms;
    uint64_t off;           /* where the first record goes (the valid end) */
    uint32_t seq;           /* number of the first record */
    int fsync_mode;         /* 0 never, 1 batch, 2 always */
    struct fwd__pend *pend; /* borrowed */
    size_t n;
    int64_t *res; /* out, n entries */
    uint64_t end; /* out: the valid end after the job */
    int err;      /* out: the first error */
};

/* Appends at `off` (not at the end of the file: the index is the truth). A
 * failed write is rolled back (the file truncated to the last whole
 * record) and ends the job; what was not written is left for a retry. Pool
 * thread. */
void fwd__seg_append(struct fwd__seg_append *a);

/* One load job: the records at `recs` (offsets and numbers from the index). */
struct fwd__seg_load {
    char path[4096];
    const struct fwd__srec *recs; /* borrowed */
    size_t max;
    uint64_t max_bytes;       /* stop once this many profile bytes are read */
    struct fwd_profile **out; /* out: owned, NULL for a record found damaged */
    size_t n;                 /* out: records read (a prefix of recs) */
    int err;
};

/* Reads records back; a record no longer valid comes back as NULL. Pool
 * thread. */
void fwd__seg_load(struct fwd__seg_load *l);

/* ------------------------------------------------------ spool: the index */

/* Counts per series hash (open addressing; zero counts stay as reusable
 * tombstones). */
struct fwd__smap {
    uint64_t *k;
    uint32_t *v;
    size_t cap, n;
};

/* Adds `d` (may be negative, floored at zero) to the count of `key`. */
void fwd__smap_add(struct fwd__smap *m, uint64_t key, int d);
/* The count of `key`. */
uint32_t fwd__smap_get(const struct fwd__smap *m, uint64_t key);
void fwd__smap_done(struct fwd__smap *m);

/* One segment in the index. */
struct fwd__seg {
    uint64_t id;
    unsigned version;       /* 1: the previous format, never appended to */
    uint64_t size;          /* valid bytes (the next append goes there) */
    struct fwd__srec *recs; /* its records in file order */
    size_t n, cap;
    size_t loaded; /* recs[0, loaded) were handed out (or delivered before) */
    size_t acked;
    uint8_t *ackmap; /* bit per loaded record */
    size_t ackmap_len;
    uint32_t next_seq; /* number of the next record appended */
    uint64_t created_ms, newest_ms;
};

/* The loop-side index of one spool: segments oldest first, and the count of
 * unloaded records of each series. */
struct fwd__spool_index {
    struct fwd__seg *segs;
    size_t n_segs, cap_segs;
    struct fwd__smap series;
};

/* The most records a segment holds (record tokens carry the index). */
#define FWD_SEG_MAX_RECORDS ((1u << 24) - 1)

/* Adds an empty version 2 segment at the end; NULL on OOM. The pointer is
 * valid until the next add, insert or remove. */
struct fwd__seg *fwd__idx_seg_add(struct fwd__spool_index *x, uint64_t id);
/* Adds a segment found by the start-up scan (oldest first), taking its
 * records array; its first `loaded` records count as delivered. */
int fwd__idx_seg_insert(struct fwd__spool_index *x, const struct fwd__seg *from);
struct fwd__seg *fwd__idx_seg_find(struct fwd__spool_index *x, uint64_t id);
/* Removes segment `i`; returns how many of its records were never loaded. */
uint64_t fwd__idx_seg_remove(struct fwd__spool_index *x, size_t i);
/* Appends a written record to segment `g`. */
int fwd__idx_rec_add(struct fwd__seg *g, const struct fwd__srec *r, uint64_t wall_ms);
/* Marks the next `n` records of `g` as loaded; writes their tokens (a token
 * names a record for fwd__idx_ack). */
void fwd__idx_load(struct fwd__spool_index *x, struct fwd__seg *g, size_t n, uint64_t *tokens);
/* Acknowledges a loaded record; false if unknown or already acknowledged. */
bool fwd__idx_ack(struct fwd__spool_index *x, uint64_t token);
/* The delivered prefix: the oldest segment's id and the number of its
 * first record not yet delivered (records numbered below are). */
void fwd__idx_cursor(const struct fwd__spool_index *x, uint64_t *seg, uint64_t *seq);
/* Unloaded records in all segments. */
uint64_t fwd__idx_unloaded(const struct fwd__spool_index *x);
void fwd__idx_done(struct fwd__spool_index *x);

/* ------------------------------------------------ spool: the state machine */

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
/* Enforces the age cap and retries a refused write (call every second). */
void fwd__spool_expire(struct fwd__spool *s);
/* Closes: waits for running jobs, syncs, then calls `cb`. */
void fwd__spool_close(struct fwd__spool *s, void (*cb)(void *ud), void *ud);
void fwd__spool_free(struct fwd__spool *s);

#endif
