/* SPDX-License-Identifier: Apache-2.0 */
/* The loop-side index of one endpoint's spool: its segments (oldest
 * first), each one's valid records (file offset, record number, series),
 * which loaded records were acknowledged (a bitmap per segment), the
 * delivered prefix for the cursor file, and how many unloaded records each
 * series has, so that the caller can keep each series in order. The index
 * is the truth about a segment: appends go to its valid end and loads read
 * the records it names (docs/design.md "Modules").
 *
 * Threading: loop thread only; no I/O (the state machine in spool.c does
 * the file work). Ownership: the index owns its arrays; a segment handed
 * to fwd__idx_seg_insert() gives its arrays to the index. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "forward/internal.h"

/* Tokens name a record: segment id above, record number in the low bits. */
#define TOKEN_BITS 24
#define TOKEN_MASK ((1u << TOKEN_BITS) - 1)

/* ------------------------------------------------------------ series map */

static uint32_t *smap_slot(struct fwd__smap *m, uint64_t key, bool create)
{
    size_t i;

    if (create && (m->n + 1) * 2 > m->cap) {
        struct fwd__smap nm = { 0 };

        nm.cap = m->cap ? m->cap * 2 : 256;
        nm.k = calloc(nm.cap, sizeof(*nm.k));
        nm.v = calloc(nm.cap, sizeof(*nm.v));
        if (!nm.k || !nm.v) {
            free(nm.k);
            free(nm.v);
            return NULL;
        }
        for (size_t j = 0; j < m->cap; j++) {
            if (m->v[j]) {
                size_t h = (size_t)(m->k[j] % nm.cap);

                while (nm.v[h])
                    h = (h + 1) % nm.cap;
                nm.k[h] = m->k[j];
                nm.v[h] = m->v[j];
                nm.n++;
            }
        }
        free(m->k);
        free(m->v);
        *m = nm;
    }
    if (!m->cap)
        return NULL;
    i = (size_t)(key % m->cap);
    /* Zero counts stay as tombstones with their key; they are reused. */
    for (size_t probes = 0; probes < m->cap; probes++, i = (i + 1) % m->cap) {
        if (m->k[i] == key && (m->v[i] || create))
            return &m->v[i];
        if (m->k[i] == 0 && m->v[i] == 0) {
            if (!create)
                return NULL;
            m->k[i] = key;
            m->n++;
            return &m->v[i];
        }
    }
    return NULL;
}

void fwd__smap_add(struct fwd__smap *m, uint64_t key, int d)
{
    uint32_t *v;

    key |= 1; /* 0 marks an empty slot */
    v = smap_slot(m, key, d > 0);
    if (!v)
        return;
    if (d > 0)
        *v += (uint32_t)d;
    else if (*v >= (uint32_t)-d)
        *v -= (uint32_t)-d;
    else
        *v = 0;
}

uint32_t fwd__smap_get(const struct fwd__smap *m, uint64_t key)
{
    uint32_t *v = smap_slot((struct fwd__smap *)m, key | 1, false);

    return v ? *v : 0;
}

void fwd__smap_done(struct fwd__smap *m)
{
    free(m->k);
    free(m->v);
    memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------- segments */

static void ackmap_set(struct fwd__seg *g, size_t i)
{
    g->ackmap[i / 8] |= (uint8_t)(1u << (i % 8));
}

static bool ackmap_get(const struct fwd__seg *g, size_t i)
{
    return i / 8 < g->ackmap_len && (g->ackmap[i / 8] & (1u << (i % 8)));
}

static struct fwd__seg *seg_slot(struct fwd__spool_index *x)
{
    if (x->n_segs == x->cap_segs) {
        struct fwd__seg *v = array_grow(x->segs, &x->cap_segs, x->n_segs, sizeof(*v), 16);

        if (!v)
            return NULL;
        x->segs = v;
    }
    return &x->segs[x->n_segs];
}

struct fwd__seg *fwd__idx_seg_add(struct fwd__spool_index *x, uint64_t id)
{
    struct fwd__seg *g = seg_slot(x);

    if (!g)
        return NULL;
    memset(g, 0, sizeof(*g));
    g->id = id;
    g->version = 2;
    x->n_segs++;
    return g;
}

int fwd__idx_seg_insert(struct fwd__spool_index *x, const struct fwd__seg *from)
{
    struct fwd__seg *g = seg_slot(x);

    if (!g)
        return -ENOMEM;
    *g = *from;
    g->ackmap_len = g->n / 8 + 1;
    g->ackmap = calloc(g->ackmap_len, 1);
    if (!g->ackmap)
        return -ENOMEM;
    for (size_t k = 0; k < g->loaded; k++)
        ackmap_set(g, k);
    g->acked = g->loaded;
    for (size_t k = g->loaded; k < g->n; k++)
        fwd__smap_add(&x->series, g->recs[k].series, 1);
    x->n_segs++;
    return 0;
}

struct fwd__seg *fwd__idx_seg_find(struct fwd__spool_index *x, uint64_t id)
{
    for (size_t i = 0; i < x->n_segs; i++) {
        if (x->segs[i].id == id)
            return &x->segs[i];
    }
    return NULL;
}

uint64_t fwd__idx_seg_remove(struct fwd__spool_index *x, size_t i)
{
    struct fwd__seg *g = &x->segs[i];
    uint64_t unloaded = g->n - g->loaded;

    for (size_t k = g->loaded; k < g->n; k++)
        fwd__smap_add(&x->series, g->recs[k].series, -1);
    free(g->ackmap);
    free(g->recs);
    memmove(&x->segs[i], &x->segs[i + 1], (x->n_segs - i - 1) * sizeof(*g));
    x->n_segs--;
    return unloaded;
}

/* -------------------------------------------------------------- records */

int fwd__idx_rec_add(struct fwd__seg *g, const struct fwd__srec *r, uint64_t wall_ms)
{
    if (g->n == g->cap) {
        struct fwd__srec *v = array_grow(g->recs, &g->cap, g->n, sizeof(*v), 64);

        if (!v)
            return -ENOMEM;
        g->recs = v;
    }
    if (g->n / 8 >= g->ackmap_len) {
        size_t len = g->ackmap_len ? g->ackmap_len * 2 : 16;
        uint8_t *m = realloc(g->ackmap, len);

        if (!m)
            return -ENOMEM;
        memset(m + g->ackmap_len, 0, len - g->ackmap_len);
        g->ackmap = m;
        g->ackmap_len = len;
    }
    g->recs[g->n++] = *r;
    g->next_seq = r->seq + 1;
    g->newest_ms = wall_ms;
    return 0;
}

void fwd__idx_load(struct fwd__spool_index *x, struct fwd__seg *g, size_t n, uint64_t *tokens)
{
    for (size_t i = 0; i < n && g->loaded < g->n; i++) {
        tokens[i] = (g->id << TOKEN_BITS) | (g->loaded & TOKEN_MASK);
        fwd__smap_add(&x->series, g->recs[g->loaded].series, -1);
        g->loaded++;
    }
}

bool fwd__idx_ack(struct fwd__spool_index *x, uint64_t token)
{
    struct fwd__seg *g = fwd__idx_seg_find(x, token >> TOKEN_BITS);
    size_t i = (size_t)(token & TOKEN_MASK);

    if (!g || i >= g->loaded || ackmap_get(g, i))
        return false; /* deleted by a cap meanwhile, or acknowledged */
    ackmap_set(g, i);
    g->acked++;
    return true;
}

void fwd__idx_cursor(const struct fwd__spool_index *x, uint64_t *seg, uint64_t *seq)
{
    const struct fwd__seg *g = x->n_segs ? &x->segs[0] : NULL;
    size_t i = 0;

    if (!g) {
        *seg = *seq = 0;
        return;
    }
    while (i < g->loaded && ackmap_get(g, i))
        i++;
    *seg = g->id;
    *seq = i < g->n ? g->recs[i].seq : g->next_seq;
}

uint64_t fwd__idx_unloaded(const struct fwd__spool_index *x)
{
    uint64_t n = 0;

    for (size_t i = 0; i < x->n_segs; i++)
        n += x->segs[i].n - x->segs[i].loaded;
    return n;
}

void fwd__idx_done(struct fwd__spool_index *x)
{
    for (size_t i = 0; i < x->n_segs; i++) {
        free(x->segs[i].ackmap);
        free(x->segs[i].recs);
    }
    free(x->segs);
    fwd__smap_done(&x->series);
    memset(x, 0, sizeof(*x));
}
