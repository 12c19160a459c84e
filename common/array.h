/* SPDX-License-Identifier: Apache-2.0 */
/** Growth of heap arrays, in one place: room for element `n` of an array
 * of `*cap` elements of `size` bytes, doubling from `first`, with the
 * multiplication checked, so that no array of the tree can wrap its size.
 *
 *     struct item *v = array_grow(x->v, &x->cap, x->n, sizeof(*v), 16);
 *     if (!v)
 *         return -ENOMEM;
 *     x->v = v;
 *
 * Returns the array to use (moved or not), or NULL on overflow or OOM, in
 * which case the old array and `*cap` are unchanged. Any thread. */
#ifndef PROFLET_COMMON_ARRAY_H
#define PROFLET_COMMON_ARRAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline void *array_grow(void *v, size_t *cap, size_t n, size_t size, size_t first)
{
    size_t nc;
    void *nv;

    if (n < *cap)
        return v;
    nc = *cap ? *cap : first ? first : 1;
    while (nc <= n) {
        if (nc > SIZE_MAX / 2)
            return NULL;
        nc *= 2;
    }
    if (size && nc > SIZE_MAX / size)
        return NULL;
    if (!(nv = realloc(v, nc * size)))
        return NULL;
    *cap = nc;
    return nv;
}

#endif
