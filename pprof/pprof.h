/** pprof profiles: capped gunzip, decode, delta of cumulative columns,
 * encode, gzip.
 *
 * A pure library: no libuv, no curl, no logging. A `struct pprof_delta` is
 * the per-(target, profile type) state; it is used by one job at a time (the
 * agent serialises jobs of one pair), so it needs no lock, and it may be
 * processed on any thread. */
#ifndef PROFLET_PPROF_H
#define PROFLET_PPROF_H

#include <stddef.h>
#include <stdint.h>

/** Hard caps applied to every profile. Past a cap a call fails with
 * PPROF_ETOOLARGE and a message such as
 * "profile too large: 1000001 samples > cap 1000000". */
struct pprof_limits {
    size_t max_decompressed;  /**< gunzip output, bytes (default 256 MiB) */
    size_t max_samples;       /**< default 1,000,000 */
    size_t max_locations;     /**< default 1,000,000 */
    size_t max_functions;     /**< default 1,000,000 */
    size_t max_strings;       /**< default 2,000,000 */
    size_t max_labels;        /**< labels per sample, default 64 */
    size_t max_stack_depth;   /**< locations per sample, default 4096 */
    int gzip_level;           /**< output gzip level 0..12 (0: no compression), default 1 */
};

/** Fills `l` with the defaults above. */
void pprof_limits_default(struct pprof_limits *l);

/** Error codes (negative; -ENOMEM is also possible). */
enum {
    PPROF_ECORRUPT = -2000,  /**< not gzip/pprof, or malformed */
    PPROF_ETOOLARGE = -2001, /**< a cap was exceeded */
};

/** Human text for an error code. */
const char *pprof_strerror(int err);

/** Which sample columns are cumulative (differenced); every other column
 * passes through unchanged. */
enum pprof_delta_kind {
    PPROF_DELTA_MEMORY,     /**< alloc_objects/count, alloc_space/bytes */
    PPROF_DELTA_CONTENTION, /**< contentions/count, delay/nanoseconds (mutex, block) */
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
/** Bytes of memory the state holds (for metrics). */
size_t pprof_delta_mem(const struct pprof_delta *d);

/** Takes one scraped profile (gzip or plain pprof bytes, borrowed), updates
 * the state and, when it returns PPROF_DELTA_EMITTED, sets `*out`/`*out_len`
 * to a malloc'd gzip-compressed pprof (plain when gzip_level is 0) that the
 * caller frees. On error returns a negative code, writes a message into
 * `err`, and poisons the state so the next profile re-seeds it. */
int pprof_delta_process(struct pprof_delta *d, const uint8_t *in, size_t in_len,
                        const struct pprof_limits *lim, uint8_t **out, size_t *out_len,
                        char *err, size_t errlen);

/** Gunzips `in` into a malloc'd buffer of at most `max` bytes (the gzip
 * trailer's size is only a hint). Plain (non-gzip) input is copied. Returns
 * 0, PPROF_ETOOLARGE, PPROF_ECORRUPT or -ENOMEM. */
int pprof_gunzip(const uint8_t *in, size_t in_len, size_t max, uint8_t **out, size_t *out_len);

/** Checks that `in` (gzip or plain) decodes as a pprof profile within the
 * limits, without keeping it. Returns 0 or a negative code with a message. */
int pprof_validate(const uint8_t *in, size_t in_len, const struct pprof_limits *lim, char *err,
                   size_t errlen);

/** Number of keys (unique stacks with their labels) the state holds. */
size_t pprof_delta_keys(const struct pprof_delta *d);

/** Gzips `in` (borrowed) at libdeflate level 1..12 into a malloc'd buffer
 * that the caller frees. Returns 0, -EINVAL for a bad level, or -ENOMEM. */
int pprof_gzip(const uint8_t *in, size_t in_len, int level, uint8_t **out, size_t *out_len);

/** Frees the calling thread's cached delta scratch memory. A thread keeps
 * up to 64 MiB of buffers (about 3x the raw size of the largest recent
 * profile) and one libdeflate compressor between pprof_delta_process()
 * calls, so that their pages stay mapped; they are also freed when the
 * thread exits. Optional. */
void pprof_thread_cleanup(void);

#endif
