/* SPDX-License-Identifier: Apache-2.0 */
/** Interned strings: one reference-counted copy of each distinct string, so
 * the many label sets that hold the same names and values (every pod's
 * `__meta_kubernetes_namespace`, the copies of a target's labels that
 * discovery, target building and the API each keep) share their bytes.
 *
 * Thread-safe: the table is guarded by a mutex and the counts are atomic, so
 * a label set built on the loop may be freed on a worker. */
#ifndef PROFLET_COMMON_INTERN_H
#define PROFLET_COMMON_INTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/** The interned copy of `s[0..len)` (NUL-terminated), with one more
 * reference; NULL on OOM. Equal strings give the same pointer. */
const char *intern(const char *s, size_t len);
/** One more reference to an interned string (one the caller holds). */
const char *intern_ref(const char *s);
/** Drops a reference; the copy goes with the last one (NULL is fine). */
void intern_unref(const char *s);
/** The length of an interned string, without reading its bytes: it is
 * stored just before them (intern.c checks the layout). */
static inline size_t intern_len(const char *s)
{
    uint32_t len;

    memcpy(&len, s - sizeof(len), sizeof(len));
    return len;
}
/** Distinct strings and their bytes (for metrics and benchmarks). */
void intern_stats(size_t *strings, size_t *bytes);

#endif
