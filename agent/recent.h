/* SPDX-License-Identifier: Apache-2.0 */
/** The most recent profile of each (target, profile type), kept for the
 * web UI under a byte cap (agent/recent.c). Loop thread only. */
#ifndef PROFLET_AGENT_RECENT_H
#define PROFLET_AGENT_RECENT_H

#include <stddef.h>
#include <stdint.h>

/** A kept profile: the gzip pprof bytes as sent, and its labels as text. */
struct recent_profile {
    uint8_t *data;
    size_t len;
    char *labels;
    int64_t end_ns;
};

struct recent_stats {
    size_t max_bytes, bytes, profiles;
    uint64_t evicted; /**< profiles dropped to stay under the cap */
};

struct recent;

/** What a store is made with. It has no loop: it holds no handle. */
struct recent_opts {
    size_t max_bytes; /**< the cap (0: keeps nothing) */
};

/** Creates a store. Returns 0 and the store in `*out` (the caller's, for
 * recent_free()), or -ENOMEM with "out of memory" in `err` and NULL in
 * `*out`. */
int recent_new(const struct recent_opts *o, struct recent **out, char *err, size_t errlen);
/** Keeps a copy of `data` as the latest profile of `key` (the hash of its
 * sent labels), replacing the previous one; the oldest go while over the
 * cap. A profile larger than the cap is not kept (counted as evicted). */
void recent_put(struct recent *r, uint64_t key, const char *labels, const uint8_t *data, size_t len,
                int64_t end_ns);
/** The latest profile of `key`, or NULL (never kept, or gone). Valid until
 * the next recent_put() or recent_free(). */
const struct recent_profile *recent_get(const struct recent *r, uint64_t key);

/** Drops the profile kept under `key`, if any: its (target, profile type)
 * is gone, and no page can show it any more. */
void recent_forget(struct recent *r, uint64_t key);
void recent_stats(const struct recent *r, struct recent_stats *out);
/** Frees the store (NULL is fine). */
void recent_free(struct recent *r);

#endif
