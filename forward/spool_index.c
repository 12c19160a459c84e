/* The loop-side index of one endpoint's spool: its segments (oldest
 * first), how many records each holds, which loaded records were
 * acknowledged (a bitmap per segment), and how many unloaded records each
 * series has, so that the caller can keep each series in order.
 *
 * Threading: loop thread only; no I/O (the state machine in spool.c does
 * the file work). Ownership: the index owns its arrays; a segment handed
 * to fwd__idx_seg_insert() gives its arrays to the index. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "forward/internal.h"

/* Tokens name a record: segment id above, record number in the low bits. */
#define TOKEN_BITS 24
#define TOKEN_MASK ((1u << TOKEN_BITS) - 1)

/* ------------------------------------------------------------ series map */

static uint32_t *smap_slot(struct fwd__smap *m, uint64_t key, bool create)
{
    size_t i;

    if (create && (m->n + 1) * 2 > m->cap) {
        struct fwd__smap nm = {0};

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

struct fwd__seg *fwd__idx_seg_add(struct fwd__spool_index *x, uint64_t id)
{
    struct fwd__seg *g;

    if (x->n_segs == x->cap_segs) {
        size_t cap = x->cap_segs ? x->cap_segs * 2 : 16;
        struct fwd__seg *v = realloc(x->segs, cap * sizeof(*v));

        if (!v)
            return NULL;
        x->segs = v;
        x->cap_segs = cap;
    }
    g = &x->segs[x->n_segs++];
    memset(g, 0, sizeof(*g));
    g->id = id;
    g->read_off = FWD_SEG_HDR;
    return g;
}

int fwd__idx_seg_insert(struct fwd__spool_index *x, const struct fwd__seg *from)
{
    struct fwd__seg *d = fwd__idx_seg_add(x, from->id);

    if (!d)
        return -ENOMEM;
    *d = *from;
    d->ackmap_len = (size_t)(d->records / 8 + 1);
    d->ackmap = calloc(d->ackmap_len, 1);
    for (uint64_t k = 0; d->ackmap && k < d->acked; k++)
        d->ackmap[k / 8] |= (uint8_t)(1u << (k % 8));
    for (size_t k = 0; k < d->series_n; k++)
        fwd__smap_add(&x->series, d->series[d->series_head + k], 1);
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

uint64_t fwd__idx_drop_unloaded(struct fwd__spool_index *x, struct fwd__seg *g)
{
    uint64_t lost = g->records - g->loaded;

    for (size_t k = 0; k < g->series_n; k++)
        fwd__smap_add(&x->series, g->series[g->series_head + k], -1);
    g->series_n = 0;
    g->records = g->loaded;
    g->read_off = g->size;
    return lost;
}

uint64_t fwd__idx_seg_remove(struct fwd__spool_index *x, size_t i)
{
    struct fwd__seg *g = &x->segs[i];
    uint64_t unloaded = fwd__idx_drop_unloaded(x, g);

    free(g->ackmap);
    free(g->series);
    memmove(&x->segs[i], &x->segs[i + 1], (x->n_segs - i - 1) * sizeof(*g));
    x->n_segs--;
    return unloaded;
}

/* -------------------------------------------------------------- records */

int fwd__idx_rec_add(struct fwd__spool_index *x, struct fwd__seg *g, uint64_t series,
                     uint64_t wall_ms)
{
    (void)x;
    g->records++;
    g->newest_ms = wall_ms;
    if (g->series_head + g->series_n == g->series_cap) {
        if (g->series_head > 0) {
            memmove(g->series, g->series + g->series_head, g->series_n * sizeof(*g->series));
            g->series_head = 0;
        }
        if (g->series_n == g->series_cap) {
            size_t cap = g->series_cap ? g->series_cap * 2 : 64;
            uint64_t *v = realloc(g->series, cap * sizeof(*v));

            if (!v)
                return -ENOMEM;
            g->series = v;
            g->series_cap = cap;
        }
    }
    g->series[g->series_head + g->series_n++] = series;
    return 0;
}

size_t fwd__idx_load(struct fwd__spool_index *x, struct fwd__seg *g, size_t n, uint64_t *tokens)
{
    size_t need = (size_t)((g->loaded + n) / 8 + 1), done = 0;

    if (need > g->ackmap_len) {
        uint8_t *m = realloc(g->ackmap, need * 2);

        if (m) {
            memset(m + g->ackmap_len, 0, need * 2 - g->ackmap_len);
            g->ackmap = m;
            g->ackmap_len = need * 2;
        }
    }
    for (; done < n && tokens && g->ackmap && g->series_n > 0; done++) {
        tokens[done] = (g->id << TOKEN_BITS) | (g->loaded & TOKEN_MASK);
        g->loaded++;
        fwd__smap_add(&x->series, g->series[g->series_head], -1);
        g->series_head++;
        g->series_n--;
    }
    return done;
}

bool fwd__idx_ack(struct fwd__spool_index *x, uint64_t token)
{
    struct fwd__seg *g = fwd__idx_seg_find(x, token >> TOKEN_BITS);
    uint64_t idx = token & TOKEN_MASK;

    if (!g)
        return false; /* deleted by a cap meanwhile */
    if (idx / 8 >= g->ackmap_len || (g->ackmap[idx / 8] & (1u << (idx % 8))))
        return false;
    g->ackmap[idx / 8] |= (uint8_t)(1u << (idx % 8));
    g->acked++;
    return true;
}

void fwd__idx_cursor(const struct fwd__spool_index *x, uint64_t *seg, uint64_t *records)
{
    const struct fwd__seg *g = x->n_segs ? &x->segs[0] : NULL;
    uint64_t recs = 0;

    if (g) {
        while (recs < g->loaded && (g->ackmap[recs / 8] & (1u << (recs % 8))))
            recs++;
    }
    *seg = g ? g->id : 0;
    *records = recs;
}

uint64_t fwd__idx_unloaded(const struct fwd__spool_index *x)
{
    uint64_t n = 0;

    for (size_t i = 0; i < x->n_segs; i++)
        n += x->segs[i].records - x->segs[i].loaded;
    return n;
}

void fwd__idx_done(struct fwd__spool_index *x)
{
    for (size_t i = 0; i < x->n_segs; i++) {
        free(x->segs[i].ackmap);
        free(x->segs[i].series);
    }
    free(x->segs);
    fwd__smap_done(&x->series);
    memset(x, 0, sizeof(*x));
}
