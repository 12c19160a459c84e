/* SPDX-License-Identifier: Apache-2.0 */
/** The recent profiles of each (target, profile type), kept for the web UI
 * under a byte cap (agent/recent.c): its latest, and as many older ones as
 * the cap leaves room for. Loop thread only, but for the bytes of a blob
 * (recent_blob_data()), which any thread may read while it holds a
 * reference. */
#ifndef PROFLET_AGENT_RECENT_H
#define PROFLET_AGENT_RECENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/labels.h"

/** A kept profile: the gzip pprof bytes as sent, its target's labels (the
 * series', shared by all its profiles) and when it was taken. */
struct recent_profile {
    const uint8_t *data;
    size_t len;
    const struct labels *labels;
    int64_t start_ns, end_ns;
};

struct recent_stats {
    size_t max_bytes, bytes, profiles;
    size_t series;    /**< (target, profile type) pairs with a profile kept */
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
/** Keeps a copy of `data` as the newest profile of `key` (the hash of its
 * sent labels `labels`, copied with the first profile of the key). While
 * over the cap, the oldest profile that is not the newest of its key goes
 * first; once none is left, the oldest newest one. A profile larger than
 * the cap is not kept (counted as evicted). */
void recent_put(struct recent *r, uint64_t key, const struct labels *labels, const uint8_t *data,
                size_t len, int64_t start_ns, int64_t end_ns);
/** The newest profile of `key`, or NULL (never kept, or gone). Valid, as
 * are the ones below, until the next recent_put(), recent_forget() or
 * recent_free(). */
const struct recent_profile *recent_get(const struct recent *r, uint64_t key);
/** The profile of the same key taken before `p`, or NULL. */
const struct recent_profile *recent_older(const struct recent_profile *p);
/** The profile of the same key taken after `p`, or NULL. */
const struct recent_profile *recent_newer(const struct recent_profile *p);
/** How many profiles of `key` are kept. */
size_t recent_count(const struct recent *r, uint64_t key);
/** Calls `fn` with the key and the newest profile of every key kept (in no
 * particular order); the store must not change meanwhile. */
void recent_visit(const struct recent *r,
                  void (*fn)(uint64_t key, const struct recent_profile *newest, void *ud),
                  void *ud);

/** The bytes of a kept profile, shared: a page's job takes a reference on
 * the loop, reads them on the pool and gives it back on the loop, so
 * they outlive the profile's eviction meanwhile. */
struct recent_blob;
/** A reference to the bytes of `p` (loop thread). */
struct recent_blob *recent_ref(const struct recent_profile *p);
/** Gives a reference back (loop thread; NULL is fine). */
void recent_unref(struct recent_blob *b);
/** The bytes, immutable (any thread, while a reference is held). */
const uint8_t *recent_blob_data(const struct recent_blob *b, size_t *len);

/** Drops every profile kept under `key`, if any: its (target, profile
 * type) is gone, and no page can show it any more. */
void recent_forget(struct recent *r, uint64_t key);
void recent_stats(const struct recent *r, struct recent_stats *out);
/** Frees the store (NULL is fine); blobs still referenced live on until
 * their last recent_unref(). */
void recent_free(struct recent *r);

#endif
