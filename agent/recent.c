/* SPDX-License-Identifier: Apache-2.0 */
/* The recent profiles of each (target, profile type), for the web UI's
 * profile pages, time ranges and diffs: copies of what was handed to the
 * forwarder, a series per key (the hash of the labels the profiles were
 * sent with) in the order they came, under one byte cap for all.
 *
 * Eviction keeps every series' newest profile as long as it can: while
 * over the cap, the oldest profile that has a newer one in its series goes
 * (a min-heap of the series by their oldest profile's arrival), and only
 * when no series has more than one, the oldest of the newest ones (a list
 * in arrival order). So a target scraped every minute keeps its profile
 * beside targets scraped every second, and history fills what is left.
 * A pair that stops takes its series with it (recent_forget()): under pod
 * churn every new pod is a new target, and the profiles of the departed
 * ones, which no page lists, would otherwise fill the cap. Every block is
 * counted as the allocator sized it (malloc_usable_size() and its header),
 * with the indexes, so the cap bounds the heap the store holds
 * (docs/design.md "Modules").
 *
 * Loop thread only. The store owns its series and entries; the bytes of a
 * profile are a reference-counted blob that a page's job may hold past the
 * profile's eviction (recent_ref()), counted against the work queue's
 * budget by that job, not here. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/recent.h"
#include "common/hashmap.h"

/* What the allocator keeps beside each block (glibc: one size word). */
#define MALLOC_HEADER sizeof(size_t)
/* A series' share of the key index (at most 70% full, doubling: 16-byte
 * slots). */
#define INDEX_BYTES 48

struct recent_blob {
    unsigned refs;
    size_t len;
    uint8_t data[];
};

struct recent_series;

struct recent_entry {
    struct recent_profile p; /* first: recent_older() casts back */
    struct recent_blob *blob;
    struct recent_series *s;
    uint64_t seq;
    struct recent_entry *older, *newer;   /* in the series */
    struct recent_entry *lolder, *lnewer; /* in the store's list of newest ones */
    size_t cost;
};

struct recent_series {
    uint64_t key;
    struct labels labels;
    struct recent_entry *oldest, *newest;
    size_t n;
    size_t heap_at; /* in the heap while n >= 2, else SIZE_MAX */
    size_t cost;
};

struct recent {
    size_t max_bytes, bytes;
    struct hashmap by_key;       /* key -> series */
    struct recent_series **heap; /* series with n >= 2, by oldest->seq */
    size_t heap_n, heap_cap;
    struct recent_entry *latest_old, *latest_new; /* every series' newest, by seq */
    uint64_t seq, evicted;
    size_t profiles;
};

static size_t block(const void *p)
{
    return p ? malloc_usable_size((void *)p) + MALLOC_HEADER : 0;
}

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

/* ------------------------------------------------------------------ heap */

static uint64_t head_seq(const struct recent_series *s)
{
    return s->oldest->seq;
}

static void heap_swap(struct recent *r, size_t i, size_t j)
{
    struct recent_series *t = r->heap[i];

    r->heap[i] = r->heap[j];
    r->heap[j] = t;
    r->heap[i]->heap_at = i;
    r->heap[j]->heap_at = j;
}

static void heap_up(struct recent *r, size_t i)
{
    while (i > 0 && head_seq(r->heap[(i - 1) / 2]) > head_seq(r->heap[i])) {
        heap_swap(r, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(struct recent *r, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;

        if (l < r->heap_n && head_seq(r->heap[l]) < head_seq(r->heap[m]))
            m = l;
        if (l + 1 < r->heap_n && head_seq(r->heap[l + 1]) < head_seq(r->heap[m]))
            m = l + 1;
        if (m == i)
            return;
        heap_swap(r, i, m);
        i = m;
    }
}

static size_t heap_bytes(const struct recent *r)
{
    return r->heap ? block(r->heap) : 0;
}

static int heap_add(struct recent *r, struct recent_series *s)
{
    if (r->heap_n == r->heap_cap) {
        size_t nc = r->heap_cap ? r->heap_cap * 2 : 64, before = heap_bytes(r);
        struct recent_series **nh = realloc(r->heap, nc * sizeof(*nh));

        if (!nh)
            return -ENOMEM;
        r->heap = nh;
        r->heap_cap = nc;
        r->bytes += heap_bytes(r) - before;
    }
    s->heap_at = r->heap_n;
    r->heap[r->heap_n++] = s;
    heap_up(r, s->heap_at);
    return 0;
}

static void heap_remove(struct recent *r, struct recent_series *s)
{
    size_t i = s->heap_at;

    if (i == SIZE_MAX)
        return;
    s->heap_at = SIZE_MAX;
    if (i != --r->heap_n) {
        r->heap[i] = r->heap[r->heap_n];
        r->heap[i]->heap_at = i;
        heap_down(r, i);
        heap_up(r, i);
    }
    if (r->heap_n == 0) { /* no history left: its bytes go back */
        r->bytes -= heap_bytes(r);
        free(r->heap);
        r->heap = NULL;
        r->heap_cap = 0;
    }
}

/* ------------------------------------------------------------- entries */

static void latest_unlink(struct recent *r, struct recent_entry *e)
{
    if (e->lolder)
        e->lolder->lnewer = e->lnewer;
    else if (r->latest_old == e)
        r->latest_old = e->lnewer;
    if (e->lnewer)
        e->lnewer->lolder = e->lolder;
    else if (r->latest_new == e)
        r->latest_new = e->lolder;
    e->lolder = e->lnewer = NULL;
}

static void latest_append(struct recent *r, struct recent_entry *e)
{
    e->lolder = r->latest_new;
    e->lnewer = NULL;
    if (r->latest_new)
        r->latest_new->lnewer = e;
    else
        r->latest_old = e;
    r->latest_new = e;
}

static void series_free(struct recent *r, struct recent_series *s)
{
    heap_remove(r, s);
    hashmap_del(&r->by_key, s->key);
    r->bytes -= s->cost;
    labels_done(&s->labels);
    free(s);
}

/* Puts `n` among the newest ones at its arrival, walking back from the
 * end: the newest of a series whose newest went (only recent_forget()
 * drops a newest profile that has older ones, and it drops those first,
 * so this is a safety net). */
static void latest_insert(struct recent *r, struct recent_entry *n)
{
    struct recent_entry *at = r->latest_new;

    while (at && at->seq > n->seq)
        at = at->lolder;
    n->lolder = at;
    n->lnewer = at ? at->lnewer : r->latest_old;
    if (n->lnewer)
        n->lnewer->lolder = n;
    else
        r->latest_new = n;
    if (at)
        at->lnewer = n;
    else
        r->latest_old = n;
}

/* Unlinks and frees `e`, and its series once empty. */
static void drop_entry(struct recent *r, struct recent_entry *e)
{
    struct recent_series *s = e->s;

    if (e == s->newest) {
        latest_unlink(r, e);
        if ((s->newest = e->older) != NULL)
            latest_insert(r, s->newest);
    }
    if (e->older)
        e->older->newer = e->newer;
    else
        s->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    s->n--;
    r->profiles--;
    r->bytes -= e->cost;
    recent_unref(e->blob);
    free(e);
    if (s->n == 0)
        series_free(r, s);
    else if (s->n < 2)
        heap_remove(r, s);
    else if (s->heap_at != SIZE_MAX)
        heap_down(r, s->heap_at); /* its oldest is newer now */
}

/* One profile out: the oldest that has a newer one in its series, else the
 * oldest newest one, never `keep`. False when nothing else is left. */
static bool evict_one(struct recent *r, const struct recent_entry *keep)
{
    struct recent_entry *e;

    if (r->heap_n)
        e = r->heap[0]->oldest;
    else if ((e = r->latest_old) == keep)
        e = NULL;
    if (!e)
        return false;
    drop_entry(r, e);
    r->evicted++;
    return true;
}

static struct recent_series *series_get(struct recent *r, uint64_t key, const struct labels *labels)
{
    struct recent_series *s = hashmap_get(&r->by_key, key);

    if (s)
        return s;
    if (!(s = calloc(1, sizeof(*s))))
        return NULL;
    s->key = key;
    s->heap_at = SIZE_MAX;
    if (labels_copy(&s->labels, labels) < 0 || hashmap_put(&r->by_key, key, s) < 0) {
        labels_done(&s->labels);
        free(s);
        return NULL;
    }
    s->cost = block(s) + block(s->labels.v) + INDEX_BYTES;
    r->bytes += s->cost;
    return s;
}

void recent_put(struct recent *r, uint64_t key, const struct labels *labels, const uint8_t *data,
                size_t len, int64_t start_ns, int64_t end_ns)
{
    struct recent_series *s;
    struct recent_entry *e;
    struct recent_blob *b;
    bool fresh;

    if (!r || !r->max_bytes)
        return;
    if (sizeof(*b) + len > r->max_bytes) {
        r->evicted++;
        return;
    }
    fresh = !hashmap_get(&r->by_key, key);
    if (!(s = series_get(r, key, labels)))
        goto fail;
    e = calloc(1, sizeof(*e));
    b = malloc(sizeof(*b) + (len ? len : 1));
    if (!e || !b) {
        free(e);
        free(b);
        if (fresh)
            series_free(r, s);
        goto fail;
    }
    b->refs = 1;
    b->len = len;
    memcpy(b->data, data, len);
    e->blob = b;
    e->s = s;
    e->seq = ++r->seq;
    e->p = (struct recent_profile){ b->data, len, &s->labels, start_ns, end_ns };
    e->cost = block(e) + block(b);
    if (e->cost + s->cost > r->max_bytes ||
        (s->n == 1 && heap_add(r, s) < 0)) { /* its second: into the heap */
        recent_unref(b);
        free(e);
        if (fresh)
            series_free(r, s);
        goto fail;
    }
    e->older = s->newest;
    if (s->newest) {
        s->newest->newer = e;
        latest_unlink(r, s->newest);
    } else {
        s->oldest = e;
    }
    s->newest = e;
    s->n++;
    latest_append(r, e);
    r->profiles++;
    r->bytes += e->cost;
    while (r->bytes > r->max_bytes && evict_one(r, e))
        ;
    return;
fail:
    r->evicted++;
}

void recent_forget(struct recent *r, uint64_t key)
{
    struct recent_series *s = r ? hashmap_get(&r->by_key, key) : NULL;

    while (s && s->n > 1)
        drop_entry(r, s->oldest);
    if (s)
        drop_entry(r, s->newest); /* the last: the series goes with it */
}

const struct recent_profile *recent_get(const struct recent *r, uint64_t key)
{
    const struct recent_series *s = r ? hashmap_get(&r->by_key, key) : NULL;

    return s ? &s->newest->p : NULL;
}

const struct recent_profile *recent_older(const struct recent_profile *p)
{
    const struct recent_entry *e = (const struct recent_entry *)p;

    return e->older ? &e->older->p : NULL;
}

const struct recent_profile *recent_newer(const struct recent_profile *p)
{
    const struct recent_entry *e = (const struct recent_entry *)p;

    return e->newer ? &e->newer->p : NULL;
}

size_t recent_count(const struct recent *r, uint64_t key)
{
    const struct recent_series *s = r ? hashmap_get(&r->by_key, key) : NULL;

    return s ? s->n : 0;
}

void recent_visit(const struct recent *r,
                  void (*fn)(uint64_t key, const struct recent_profile *newest, void *ud), void *ud)
{
    size_t pos = 0;
    uint64_t key;
    void *v;

    while (r && hashmap_next(&r->by_key, &pos, &key, &v))
        fn(key, &((struct recent_series *)v)->newest->p, ud);
}

struct recent_blob *recent_ref(const struct recent_profile *p)
{
    struct recent_blob *b = ((const struct recent_entry *)p)->blob;

    b->refs++;
    return b;
}

void recent_unref(struct recent_blob *b)
{
    if (b && --b->refs == 0)
        free(b);
}

const uint8_t *recent_blob_data(const struct recent_blob *b, size_t *len)
{
    *len = b->len;
    return b->data;
}

void recent_stats(const struct recent *r, struct recent_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!r)
        return;
    out->max_bytes = r->max_bytes;
    out->bytes = r->bytes;
    out->profiles = r->profiles;
    out->series = r->by_key.n;
    out->evicted = r->evicted;
}

void recent_free(struct recent *r)
{
    size_t pos = 0;
    uint64_t key;
    void *v;

    if (!r)
        return;
    while (hashmap_next(&r->by_key, &pos, &key, &v))
        recent_forget(r, key); /* deletes the entry just returned: allowed */
    hashmap_done(&r->by_key);
    free(r->heap);
    free(r);
}
