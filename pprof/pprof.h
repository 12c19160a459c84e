/* SPDX-License-Identifier: Apache-2.0 */
/** pprof profiles: capped gunzip, decode, delta of cumulative columns,
 * encode, gzip.
 *
 * A pure library: no libuv, no curl, no logging. A `struct pprof_delta` is
 * the per-(target, profile type) state; it is used by one job at a time (the
 * agent serialises jobs of one pair), so it needs no lock, and it may be
 * processed on any thread. */
#ifndef PROFLET_PPROF_H
#define PROFLET_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

struct buf;

/* Defaults of the caps below; the configuration's defaults are these. */
#define PPROF_DEFAULT_MAX_DECOMPRESSED ((uint64_t)256 << 20)
#define PPROF_DEFAULT_MAX_SAMPLES 1000000
#define PPROF_DEFAULT_MAX_LOCATIONS 1000000
#define PPROF_DEFAULT_MAX_FUNCTIONS 1000000
#define PPROF_DEFAULT_MAX_STRINGS 2000000
#define PPROF_DEFAULT_MAX_LABELS 64
#define PPROF_DEFAULT_MAX_STACK_DEPTH 4096

/** How hard the profiles proflet writes are compressed, in an operator's
 * words; each setting maps to the measured gzip encoder and level that
 * serve it best on this build and CPU (docs/design.md "Compression"). The
 * output is a standard gzip stream whatever the setting. */
enum pprof_compression {
    PPROF_COMPRESS_NONE,     /**< plain pprof, no gzip */
    PPROF_COMPRESS_FASTEST,  /**< the least CPU */
    PPROF_COMPRESS_BALANCED, /**< the default: little more CPU, fewer bytes */
    PPROF_COMPRESS_SMALLEST, /**< the fewest bytes at a bounded cost */
    PPROF_COMPRESS_COUNT
};
#define PPROF_DEFAULT_COMPRESSION PPROF_COMPRESS_BALANCED
/** The settings' names ("none", "fastest", ...), for a libcyaml enum field. */
extern const cyaml_strval_t pprof_compression_strings[PPROF_COMPRESS_COUNT];
/** The name of a setting ("balanced"). */
const char *pprof_compression_name(enum pprof_compression c);
/** What a setting runs as on this build and CPU ("igzip level 2",
 * "libdeflate level 6", "none"), for logs and status pages. */
const char *pprof_compression_encoder(enum pprof_compression c);

/** Hard caps applied to every profile. Past a cap a call fails with
 * PPROF_ETOOLARGE and a message such as
 * "profile too large: 1000001 samples > cap 1000000". */
struct pprof_limits {
    size_t max_decompressed; /**< gunzip output, bytes */
    size_t max_samples;
    size_t max_locations;
    size_t max_functions;
    size_t max_strings;
    size_t max_labels;      /**< labels per sample */
    size_t max_stack_depth; /**< locations per sample */
    /** The output's compression. Not a configuration key here: each
     * endpoint chooses its own, and the caller sets the one deltas are
     * written with (docs/design.md "Compression"). */
    enum pprof_compression compression;
    /** Bytes one pprof_delta_process() call may allocate: its grant under
     * the memory budget (0: no limit). Not a configuration key: the caller
     * sets it per job. Every buffer the call grows and every block it
     * allocates counts, by capacity, except the scratch its thread kept
     * from earlier calls (pprof_thread_cleanup()); past it the call fails
     * with PPROF_EOVERBUDGET. */
    size_t max_memory;
};

/** Fills `l` with the PPROF_DEFAULT_* values. */
void pprof_limits_default(struct pprof_limits *l);

/** The `limits:` keys pprof owns, for a struct pprof_limits member `m` of
 * `S`, and their metadata. */
#define PPROF_LIMITS_FIELDS(S, m)                                                     \
    CYAML_FIELD_UINT("max-decompressed", CYAML_FLAG_OPTIONAL, S, m.max_decompressed), \
        CYAML_FIELD_UINT("max-samples", CYAML_FLAG_OPTIONAL, S, m.max_samples),       \
        CYAML_FIELD_UINT("max-locations", CYAML_FLAG_OPTIONAL, S, m.max_locations),   \
        CYAML_FIELD_UINT("max-functions", CYAML_FLAG_OPTIONAL, S, m.max_functions),   \
        CYAML_FIELD_UINT("max-strings", CYAML_FLAG_OPTIONAL, S, m.max_strings),       \
        CYAML_FIELD_UINT("max-labels", CYAML_FLAG_OPTIONAL, S, m.max_labels),         \
        CYAML_FIELD_UINT("max-stack-depth", CYAML_FLAG_OPTIONAL, S, m.max_stack_depth)
extern const struct conf_key pprof_limits_keys[];

/** Error codes (negative; -ENOMEM is also possible). */
enum {
    PPROF_ECORRUPT = -2000,    /**< not gzip/pprof, or malformed */
    PPROF_ETOOLARGE = -2001,   /**< a cap was exceeded */
    PPROF_EFILTER = -2002,     /**< the filter drops every sample type */
    PPROF_EOVERBUDGET = -2003, /**< the call needs more than limits.max_memory */
    PPROF_EMISMATCH = -2004,   /**< profiles of other sample types cannot be merged */
};

/** Human text for an error code. */
const char *pprof_strerror(int err);

/** Which sample columns are cumulative (differenced); every other column
 * passes through unchanged. */
enum pprof_delta_kind {
    PPROF_DELTA_MEMORY,     /**< alloc_objects/count, alloc_space/bytes */
    PPROF_DELTA_CONTENTION, /**< contentions/count, delay/nanoseconds (mutex, block) */
    /** No cumulative column: nothing is differenced and no state is kept;
     * every profile is emitted as it came, through the filter (below).
     * For profiles sent as they came (CPU, goroutine, godeltaprof) when a
     * filter is configured. */
    PPROF_DELTA_NONE,
};

/** What a profile keeps of itself, applied inside the delta pass: the
 * output is a valid pprof whose sample types, values and
 * default_sample_type agree, and samples that became identical (same
 * stack, same remaining labels) are merged by summing their values, so
 * totals per stack stay exact. Dropping every cumulative column of a
 * memory or contention profile leaves nothing to difference: its profiles
 * are then emitted as they came (through the filter), from the first. */
struct pprof_filter {
    /** Sample types by name (ValueType.type, e.g. "alloc_space"): with
     * `types_keep` only those listed stay, else all but those listed.
     * `n_types` 0: every type stays. */
    const char *const *types;
    size_t n_types;
    bool types_keep;
    /** Sample labels by key: a label stays iff `label_keep(key, len, ud)`
     * is true; NULL: every label stays. Called on the worker thread at most
     * once per distinct key per profile; must be thread-safe. */
    bool (*label_keep)(const char *key, size_t len, void *ud);
    void *label_ud;
    /** Equal fingerprints mean the same filter (built again by a reload):
     * setting it keeps the state. */
    uint64_t fingerprint;
};

/** Outcome of pprof_delta_process() when it succeeds. */
enum pprof_delta_result {
    PPROF_DELTA_EMITTED = 0,  /**< `*out` holds the delta profile to send */
    PPROF_DELTA_BASELINE = 1, /**< first profile of the pair: state seeded, nothing to send */
    PPROF_DELTA_RESET = 2,    /**< target restart detected: re-seeded, nothing to send */
};

struct pprof_delta;

/** Creates empty state for one (target, profile type) pair. NULL on OOM. */
struct pprof_delta *pprof_delta_new(enum pprof_delta_kind kind);
/** Frees the state (NULL is fine). */
void pprof_delta_free(struct pprof_delta *d);
/** Sets the filter of every later call (borrowed: it, its strings and its
 * `label_ud` outlive the state or the next set; NULL: none). Another
 * filter (by fingerprint) re-seeds the state, as a new column layout
 * does. */
void pprof_delta_set_filter(struct pprof_delta *d, const struct pprof_filter *f);
/** Bytes of memory the state holds (for metrics). */
size_t pprof_delta_mem(const struct pprof_delta *d);

/** Takes one scraped profile (gzip or plain pprof bytes, borrowed), updates
 * the state and, when it returns PPROF_DELTA_EMITTED, sets `*out`/`*out_len`
 * to a malloc'd pprof, compressed as lim->compression says, that the
 * caller frees. On error returns a negative code, writes a message into
 * `err`, and poisons the state so the next profile re-seeds it. */
int pprof_delta_process(struct pprof_delta *d, const uint8_t *in, size_t in_len,
                        const struct pprof_limits *lim, uint8_t **out, size_t *out_len, char *err,
                        size_t errlen);

/** Gunzips `in` into a malloc'd buffer of at most `max` bytes (the gzip
 * trailer's size is only a hint). Plain (non-gzip) input is copied. Returns
 * 0, PPROF_ETOOLARGE, PPROF_ECORRUPT or -ENOMEM. */
int pprof_gunzip(const uint8_t *in, size_t in_len, size_t max, uint8_t **out, size_t *out_len);

/** Checks a body sent as it came: gzip framing, every member's CRC and
 * size, and at most `max` bytes inflated (plain input: its length). The
 * inflated bytes land in the calling thread's scratch and are dropped, so
 * a check maps no fresh buffer. Returns 0, PPROF_ETOOLARGE,
 * PPROF_ECORRUPT or -ENOMEM. */
int pprof_gzip_check(const uint8_t *in, size_t in_len, size_t max);

/** The memory a delta (or, with !delta, a pass-through check) of the body
 * `in` needs at its peak, for admission under a memory budget: from the
 * decompressed size the gzip trailer announces, stored in `*raw`. The job
 * must then be run with max_decompressed = *raw, so that a trailer that
 * understates the size (a lie, or a multi-member stream) fails as
 * PPROF_ETOOLARGE instead of overcommitting. Also PPROF_ETOOLARGE when the
 * announced size exceeds `max_decompressed`, before anything is inflated,
 * and PPROF_ECORRUPT when no deflate stream of this length could inflate to
 * it (more than 1032:1: a truncated or corrupt stream). */
int pprof_job_cost(const uint8_t *in, size_t in_len, size_t max_decompressed, bool delta,
                   size_t *raw, uint64_t *cost);

/** Checks that `in` (gzip or plain) decodes as a pprof profile within the
 * limits, without keeping it. Returns 0 or a negative code with a message. */
int pprof_validate(const uint8_t *in, size_t in_len, const struct pprof_limits *lim, char *err,
                   size_t errlen);

/** The grant a delta of a profile of `raw` decompressed bytes needs, from
 * the structure (samples, columns, locations, functions, strings) of the
 * last profile the state saw, scaled to `raw`, plus an eighth: 0 before
 * any. For admission:
 * the first profile is admitted from its size alone (pprof_job_cost()), a
 * call finds its structure's need before its per-sample buffers, and one
 * over its grant (PPROF_EOVERBUDGET) leaves here what the next profile of
 * the pair should be admitted with. */
uint64_t pprof_delta_need(const struct pprof_delta *d, size_t raw);

/** Number of keys (unique stacks with their labels) the state holds. */
size_t pprof_delta_keys(const struct pprof_delta *d);

/** Compresses `in` (borrowed) as `c` says into a malloc'd buffer that the
 * caller frees (PPROF_COMPRESS_NONE: a copy), with the calling thread's
 * cached encoder (one per thread, kept between calls). Returns 0, -EINVAL
 * for an unknown setting, or -ENOMEM. Any thread. */
int pprof_compress(const uint8_t *in, size_t in_len, enum pprof_compression c, uint8_t **out,
                   size_t *out_len);
/** Gunzips `in` (gzip or plain) within `max` bytes and compresses the result
 * as `c` says, into a malloc'd buffer. Returns 0 or pprof_gunzip()'s and
 * pprof_compress()'s codes. Any thread. */
int pprof_recompress(const uint8_t *in, size_t in_len, size_t max, enum pprof_compression c,
                     uint8_t **out, size_t *out_len);

/* ------------------------------------------------------------------ fold */

/** A fold has one side (a profile, or the merge of a range of them) or two
 * (a diff: side 0 the comparison, side 1 its baseline). */
#define PPROF_FOLD_SIDES 2

/** Profiles of one kind folded into stacks of function names, each stack
 * with the sum of its samples' values per sample type and side: the merge
 * of a range of profiles, as `go tool pprof` merges them (samples summed;
 * totals per function equal), at function granularity (inlined frames
 * expanded, a location without lines named by its address, names cut to
 * PPROF_FLAME_NAME_MAX bytes, sample labels dropped). Pure; one thread at
 * a time. */
struct pprof_fold;

/** Creates an empty fold of `sides` sides (1 or 2) that may hold at most
 * `max_bytes` of stacks, names and indexes (past it pprof_fold_add()
 * fails with PPROF_ETOOLARGE). NULL on OOM or a bad `sides`. */
struct pprof_fold *pprof_fold_new(int sides, size_t max_bytes);
/** Frees a fold (NULL is fine). */
void pprof_fold_free(struct pprof_fold *fd);

/** Adds the samples of the profile `in` (gzip or plain, borrowed, within
 * `lim`) to side `side`. The first profile sets the sample types; a later
 * one with other types (names, units or order) is refused with
 * PPROF_EMISMATCH, as `go tool pprof` refuses to merge it, and leaves the
 * fold as it was. On any other error the fold may hold part of the
 * profile: only pprof_fold_free() is meaningful then. Returns 0 or a
 * negative code with a message in `err`. */
int pprof_fold_add(struct pprof_fold *fd, int side, const uint8_t *in, size_t in_len,
                   const struct pprof_limits *lim, char *err, size_t errlen);

/** What a fold holds. */
struct pprof_fold_info {
    size_t n_types;
    int default_type; /**< the first profile's default, else its last type */
    size_t profiles[PPROF_FOLD_SIDES];
    int64_t duration_nanos[PPROF_FOLD_SIDES]; /**< summed */
    size_t stacks, names;
    size_t bytes; /**< what it holds, all its blocks */
};
void pprof_fold_info(const struct pprof_fold *fd, struct pprof_fold_info *out);
/** Sample type `i` as "type/unit" (valid while the fold lives). */
const char *pprof_fold_type(const struct pprof_fold *fd, size_t i);
/** The index of the sample type named `name` ("alloc_space" or
 * "alloc_space/bytes"), or -1. */
int pprof_fold_find_type(const struct pprof_fold *fd, const char *name);
/** Function name `i` (0 <= i < names; valid while the fold lives). */
const char *pprof_fold_name(const struct pprof_fold *fd, size_t i);
/** The index of the function named `name`, or -1. */
long pprof_fold_find_name(const struct pprof_fold *fd, const char *name);

/** One function's values in one sample type, per side: `self` of the
 * samples whose leaf it is, `total` of the samples whose stack holds it
 * (once per sample, however often it recurs), as `go tool pprof -top`
 * counts flat and cum. */
struct pprof_fold_fn {
    uint32_t name;
    int64_t self[PPROF_FOLD_SIDES], total[PPROF_FOLD_SIDES];
};
/** Every function of the fold with its values in sample type `type`,
 * indexed by name, in a malloc'd array of `*n` (the caller frees).
 * Returns 0 or -ENOMEM. */
int pprof_fold_functions(const struct pprof_fold *fd, int type, struct pprof_fold_fn **out,
                         size_t *n);

/** Writes the stacks of side `side` whose value in `type` is not zero in
 * collapsed form ("root;caller;leaf value", one a line, as flamegraph.pl
 * and speedscope read it; a ';' or a control character in a name becomes
 * '_'), from stack `*pos` on, until `out` holds `chunk` bytes. Returns 1
 * when stacks are left (`*pos` says where), 0 when done, or the buffer's
 * negative code. */
int pprof_fold_collapsed(const struct pprof_fold *fd, int type, int side, size_t *pos,
                         struct buf *out, size_t chunk);

/** Encodes side `side` as a pprof profile (one function and one location
 * per name, the location's address its id, one sample per stack with
 * every type's value; the summed
 * duration, the earliest time, the first period), compressed as `c` says,
 * into a malloc'd buffer the caller frees. Returns 0 or a negative code. */
int pprof_fold_encode(const struct pprof_fold *fd, int side, enum pprof_compression c,
                      uint8_t **out, size_t *out_len);

/* ----------------------------------------------------------------- flame */

/** One frame of a flame graph: a function called from its parent's. */
struct pprof_flame_node {
    uint32_t name;         /**< index into pprof_flame.names */
    uint32_t parent;       /**< UINT32_MAX for the root */
    uint32_t first_child;  /**< UINT32_MAX: none */
    uint32_t next_sibling; /**< UINT32_MAX: none */
    int64_t total;         /**< value of the samples through this frame */
    int64_t self;          /**< value of the samples that end here */
    int64_t base_total;    /**< the same, of the baseline (side 1; 0 with one side) */
    int64_t base_self;
};

/** A flame graph's function names are cut to this many bytes (at a
 * character boundary, the last one then U+2026). */
#define PPROF_FLAME_NAME_MAX 256

/** The call tree of one sample type of a profile, root ("total") first. */
struct pprof_flame {
    char **types; /**< every sample type, "type/unit" */
    size_t n_types;
    int sample_type; /**< the index the tree sums */
    struct pprof_flame_node *nodes;
    size_t n_nodes, cap_nodes;
    char **names; /**< function names, no more than nodes; names[0] = "total" */
    size_t n_names, cap_names;
    char *name_data; /**< the names' storage (names[] point into it) */
    size_t bytes;    /**< the heap the tree holds, all its blocks */
    bool truncated;  /**< max_nodes reached: deeper values stay as self */
};

/** Which stacks a tree is made of. */
enum pprof_flame_mode {
    PPROF_FLAME_ALL,     /**< every stack, root first */
    PPROF_FLAME_CALLEES, /**< from the focus function's outermost frame to the leaf */
    PPROF_FLAME_CALLERS, /**< from the focus function's outermost frame to the root, inverted */
};

/** What pprof_flame_from_fold() builds. */
struct pprof_flame_opts {
    int type;                   /**< sample type index */
    size_t max_nodes;           /**< past it, deeper values stay with the parent, as self */
    enum pprof_flame_mode mode; /**< with a focus: only the stacks that hold it */
    const char *focus;          /**< a function name, for CALLERS and CALLEES */
};

/** Builds a tree from a fold (borrowed; the tree keeps copies of the names
 * it uses, so it outlives the fold). Returns 0, or -ENOMEM or -EINVAL (a
 * bad type). Free with pprof_flame_free(). */
int pprof_flame_from_fold(const struct pprof_fold *fd, const struct pprof_flame_opts *o,
                          struct pprof_flame **out);

/** Builds the flame graph of `in` (gzip or plain, borrowed) for the sample
 * type named `sample_type` ("alloc_space" or "alloc_space/bytes"; NULL:
 * the profile's default one, else its last), with at most `max_nodes`
 * nodes, within the decode limits `lim`: a fold of one profile, then its
 * tree. Returns 0, or a negative code with a message. Free with
 * pprof_flame_free(). */
int pprof_flame_build(const uint8_t *in, size_t in_len, const struct pprof_limits *lim,
                      const char *sample_type, size_t max_nodes, struct pprof_flame **out,
                      char *err, size_t errlen);
/** Frees a flame graph (NULL is fine). */
void pprof_flame_free(struct pprof_flame *f);

/** Frees the calling thread's cached delta scratch memory. The threads
 * keep up to 48 MiB of buffers in all (what that holds: docs/benchmarks.md
 * "Delta memory") and one gzip encoder each between
 * pprof_delta_process() calls, so that their pages stay mapped; they are
 * also freed when the thread exits. Optional. */
void pprof_thread_cleanup(void);

#endif
