/* SPDX-License-Identifier: Apache-2.0 */
/* The string intern pool (see intern.h; docs/design.md "Modules"). A chained
 * hash table of entries that hold their text inline; lookups and inserts take
 * the mutex, taking another reference to an entry one already holds, or
 * dropping one that is not the last, does not. The last reference is dropped
 * under the mutex, so an entry is removed exactly when no lookup can find it
 * any more. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/intern.h"
#include "common/macros.h"

struct entry {
    struct entry *next;
    uint64_t hash;
    atomic_uint refs;
    uint32_t len;
    char s[];
};

/* intern_len() reads the length just before the text. */
_Static_assert(offsetof(struct entry, s) == offsetof(struct entry, len) + sizeof(uint32_t),
               "the length must sit right before the text");

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry **buckets;
static size_t n_buckets, n_entries, n_bytes;

static struct entry *entry_of(const char *s)
{
    return container_of(s, struct entry, s);
}

static void grow(void)
{
    size_t nb = n_buckets ? n_buckets * 2 : 1024;
    struct entry **b = calloc(nb, sizeof(*b));

    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < n_buckets; i++) {
        struct entry *e, *n;

        for (e = buckets[i]; e; e = n) {
            n = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    }
    free(buckets);
    buckets = b;
    n_buckets = nb;
}

const char *intern(const char *s, size_t len)
{
    uint64_t h = XXH3_64bits(s, len);
    struct entry *e;

    if (len > UINT32_MAX)
        return NULL;
    pthread_mutex_lock(&lock);
    if (n_entries >= n_buckets)
        grow();
    if (!n_buckets) {
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    for (e = buckets[h & (n_buckets - 1)]; e; e = e->next) {
        if (e->hash == h && e->len == len && memcmp(e->s, s, len) == 0) {
            atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
            pthread_mutex_unlock(&lock);
            return e->s;
        }
    }
    if ((e = malloc(sizeof(*e) + len + 1))) {
        e->hash = h;
        e->len = (uint32_t)len;
        atomic_init(&e->refs, 1);
        memcpy(e->s, s, len);
        e->s[len] = '\0';
        e->next = buckets[h & (n_buckets - 1)];
        buckets[h & (n_buckets - 1)] = e;
        n_entries++;
        n_bytes += len + 1;
    }
    pthread_mutex_unlock(&lock);
    return e ? e->s : NULL;
}

const char *intern_ref(const char *s)
{
    atomic_fetch_add_explicit(&entry_of(s)->refs, 1, memory_order_relaxed);
    return s;
}

void intern_unref(const char *s)
{
    struct entry *e, **pp;
    unsigned r;

    if (!s)
        return;
    e = entry_of(s);
    /* Above one, a plain decrement; the last reference is dropped under the
     * mutex, where lookups take theirs, so an entry is never found again
     * once its count reached zero. */
    r = atomic_load_explicit(&e->refs, memory_order_relaxed);
    while (r > 1) {
        if (atomic_compare_exchange_weak_explicit(&e->refs, &r, r - 1, memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
    pthread_mutex_lock(&lock);
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) {
        for (pp = &buckets[e->hash & (n_buckets - 1)]; *pp; pp = &(*pp)->next) {
            if (*pp == e) {
                *pp = e->next;
                n_entries--;
                n_bytes -= e->len + 1;
                free(e);
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
}

void intern_stats(size_t *strings, size_t *bytes)
{
    pthread_mutex_lock(&lock);
    *strings = n_entries;
    *bytes = n_bytes;
    pthread_mutex_unlock(&lock);
}
