/* SPDX-License-Identifier: Apache-2.0 */
/* Linear-probing map with tombstones (docs/design.md "Modules"). Slot states:
 * value NULL and key 0 is empty; value NULL and key 1 is a tombstone. The
 * table grows at 70 % load (counting tombstones), so probes stay short.
 * Single owner, no threads. */
#include "hashmap.h"

#include <errno.h>
#include <stdlib.h>

#define TOMB 1

void hashmap_init(struct hashmap *m)
{
    m->_keys = NULL;
    m->_vals = NULL;
    m->_cap = 0;
    m->n = 0;
    m->_tombs = 0;
}

void hashmap_done(struct hashmap *m)
{
    free(m->_keys);
    free(m->_vals);
    hashmap_init(m);
}

static size_t slot_of(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

void *hashmap_get(const struct hashmap *m, uint64_t key)
{
    if (!m->_cap)
        return NULL;
    for (size_t i = slot_of(key, m->_cap);; i = (i + 1) & (m->_cap - 1)) {
        if (m->_vals[i]) {
            if (m->_keys[i] == key)
                return m->_vals[i];
        } else if (m->_keys[i] != TOMB) {
            return NULL;
        }
    }
}

static int grow(struct hashmap *m)
{
    size_t cap = m->_cap ? m->_cap * 2 : 16;
    struct hashmap nm;

    if (m->n * 2 < m->_cap)
        cap = m->_cap; /* mostly tombstones: rehash at the same size */
    nm._keys = calloc(cap, sizeof(uint64_t));
    nm._vals = calloc(cap, sizeof(void *));
    if (!nm._keys || !nm._vals) {
        free(nm._keys);
        free(nm._vals);
        return -ENOMEM;
    }
    nm._cap = cap;
    nm.n = 0;
    nm._tombs = 0;
    for (size_t i = 0; i < m->_cap; i++)
        if (m->_vals[i])
            hashmap_put(&nm, m->_keys[i], m->_vals[i]);
    free(m->_keys);
    free(m->_vals);
    *m = nm;
    return 0;
}

int hashmap_put(struct hashmap *m, uint64_t key, void *val)
{
    size_t tomb = SIZE_MAX;

    if ((m->n + m->_tombs + 1) * 10 > m->_cap * 7) {
        int r = grow(m);

        if (r < 0)
            return r;
    }
    for (size_t i = slot_of(key, m->_cap);; i = (i + 1) & (m->_cap - 1)) {
        if (m->_vals[i]) {
            if (m->_keys[i] == key) {
                m->_vals[i] = val;
                return 0;
            }
        } else if (m->_keys[i] == TOMB) {
            if (tomb == SIZE_MAX)
                tomb = i;
        } else {
            if (tomb != SIZE_MAX) {
                i = tomb;
                m->_tombs--;
            }
            m->_keys[i] = key;
            m->_vals[i] = val;
            m->n++;
            return 0;
        }
    }
}

void *hashmap_del(struct hashmap *m, uint64_t key)
{
    if (!m->_cap)
        return NULL;
    for (size_t i = slot_of(key, m->_cap);; i = (i + 1) & (m->_cap - 1)) {
        if (m->_vals[i]) {
            if (m->_keys[i] == key) {
                void *v = m->_vals[i];

                m->_vals[i] = NULL;
                m->_keys[i] = TOMB;
                m->n--;
                m->_tombs++;
                return v;
            }
        } else if (m->_keys[i] != TOMB) {
            return NULL;
        }
    }
}

int hashmap_next(const struct hashmap *m, size_t *pos, uint64_t *key, void **val)
{
    for (size_t i = *pos; i < m->_cap; i++) {
        if (m->_vals[i]) {
            *key = m->_keys[i];
            *val = m->_vals[i];
            *pos = i + 1;
            return 1;
        }
    }
    *pos = m->_cap;
    return 0;
}
