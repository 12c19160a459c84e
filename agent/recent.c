/* SPDX-License-Identifier: Apache-2.0 */
/* The most recent profile of each (target, profile type), for the web UI:
 * a copy of what was handed to the forwarder, kept in insertion order
 * under a byte cap (the oldest go first), found by the hash of the labels
 * the profile was sent with. A pair that stops takes its profile with it
 * (recent_forget()): under pod churn every new pod is a new target, and
 * the profiles of the departed ones, which no page lists, would otherwise
 * fill the whole cap (docs/design.md "Modules").
 *
 * Loop thread only. The store owns its copies; a profile returned by
 * recent_get() is valid until the next recent_put() or recent_free(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/recent.h"
#include "common/hashmap.h"

struct recent_entry {
    struct recent_profile p;
    uint64_t key;
    struct recent_entry *older, *newer;
};

struct recent {
    size_t max_bytes, bytes;
    struct hashmap by_key; /* key -> entry */
    struct recent_entry *oldest, *newest;
    uint64_t evicted;
};

int recent_new(const struct recent_opts *o, struct recent **out, char *err, size_t errlen)
{
    struct recent *r = calloc(1, sizeof(*r));

    *out = NULL;
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->max_bytes = o->max_bytes;
    hashmap_init(&r->by_key);
    *out = r;
    return 0;
}

static size_t cost(const struct recent_entry *e)
{
    return sizeof(*e) + e->p.len + strlen(e->p.labels) + 1;
}

static void unlink_entry(struct recent *r, struct recent_entry *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        r->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        r->newest = e->older;
    hashmap_del(&r->by_key, e->key);
    r->bytes -= cost(e);
    free(e->p.data);
    free(e->p.labels);
    free(e);
}

void recent_put(struct recent *r, uint64_t key, const char *labels, const uint8_t *data, size_t len,
                int64_t end_ns)
{
    struct recent_entry *e, *old;

    if (!r || !r->max_bytes)
        return;
    if ((old = hashmap_get(&r->by_key, key)) != NULL)
        unlink_entry(r, old);
    if (!(e = calloc(1, sizeof(*e))))
        return;
    e->key = key;
    e->p.len = len;
    e->p.end_ns = end_ns;
    if (!(e->p.data = malloc(len ? len : 1)) || !(e->p.labels = strdup(labels)) ||
        cost(e) > r->max_bytes || hashmap_put(&r->by_key, key, e) < 0) {
        free(e->p.data);
        free(e->p.labels);
        free(e);
        r->evicted++;
        return;
    }
    memcpy(e->p.data, data, len);
    e->older = r->newest;
    if (r->newest)
        r->newest->newer = e;
    else
        r->oldest = e;
    r->newest = e;
    r->bytes += cost(e);
    while (r->bytes > r->max_bytes && r->oldest != e) {
        unlink_entry(r, r->oldest);
        r->evicted++;
    }
}

void recent_forget(struct recent *r, uint64_t key)
{
    struct recent_entry *e = r ? hashmap_get(&r->by_key, key) : NULL;

    if (e)
        unlink_entry(r, e);
}

const struct recent_profile *recent_get(const struct recent *r, uint64_t key)
{
    const struct recent_entry *e = r ? hashmap_get(&r->by_key, key) : NULL;

    return e ? &e->p : NULL;
}

void recent_stats(const struct recent *r, struct recent_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!r)
        return;
    out->max_bytes = r->max_bytes;
    out->bytes = r->bytes;
    out->profiles = r->by_key.n;
    out->evicted = r->evicted;
}

void recent_free(struct recent *r)
{
    if (!r)
        return;
    while (r->oldest)
        unlink_entry(r, r->oldest);
    hashmap_done(&r->by_key);
    free(r);
}
