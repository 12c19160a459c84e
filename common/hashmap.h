/* SPDX-License-Identifier: Apache-2.0 */
/** An open-addressing hash map from uint64 keys (already well mixed, e.g.
 * xxhash or the scrape-pair key) to pointers. Not thread-safe. */
#ifndef PROFLET_COMMON_HASHMAP_H
#define PROFLET_COMMON_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

/** Embeddable. Fields prefixed `_` are private. */
struct hashmap {
    uint64_t *_keys;
    void **_vals;
    size_t _cap; /* power of two, or 0 */
    size_t n;
    size_t _tombs;
};

/** Initialises an empty map. */
void hashmap_init(struct hashmap *m);
/** Frees the table (not the values). */
void hashmap_done(struct hashmap *m);
/** Returns the value for `key` or NULL. */
void *hashmap_get(const struct hashmap *m, uint64_t key);
/** Inserts or replaces. `val` must not be NULL. Returns 0 or -ENOMEM. */
int hashmap_put(struct hashmap *m, uint64_t key, void *val);
/** Removes `key`; returns its value or NULL. */
void *hashmap_del(struct hashmap *m, uint64_t key);
/** Iterates: start with *pos = 0; returns 1 and fills key/val while entries
 * remain, 0 at the end. The map must not change during iteration, except
 * through hashmap_del() of the entry just returned. */
int hashmap_next(const struct hashmap *m, size_t *pos, uint64_t *key, void **val);

#endif
