/* SPDX-License-Identifier: Apache-2.0 */
/* A part of delta.c (included there, one translation unit): the key index
 * and the state. The entries of this call are matched to the keys of the
 * last (in order where the producer kept it, through an open-addressing
 * index otherwise), and the new state is written. */
/* Slots at most half full, so that a probe mostly ends at its first slot;
 * a quarter full while that fits in 32 KB (L1): whether the first slot
 * is free is then better foretold, and a key seen once, the most common,
 * costs no second probe. */
#define INDEX_QUARTER_SLOTS 8192

unsigned pprof__index_bits(size_t n)
{
    unsigned bits = 4;

    while (bits < 32 &&
           (((size_t)1 << bits) < 2 * n ||
            (((size_t)1 << bits) < 4 * n && ((size_t)1 << bits) < INDEX_QUARTER_SLOTS)))
        bits++;
    return bits;
}

static uint64_t index_salt;
static pthread_once_t index_salt_once = PTHREAD_ONCE_INIT;

static void index_salt_init(void)
{
    uint64_t x = 0;

    /* Without getrandom() (no entropy yet), the clock: a target cannot
     * read it either. */
    if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t)sizeof(x)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = mix64((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32 ^ (uintptr_t)&x);
    }
    index_salt = x | 1;
}

uint64_t pprof__index_salt(void)
{
    pthread_once(&index_salt_once, index_salt_init);
    return index_salt;
}

/* Opens the call's index, empty, with room for `n` entries. */
static int index_open(struct ctx *c, size_t n)
{
    struct pprof__index *ix = &c->index;
    unsigned bits = pprof__index_bits(n);
    size_t slots = (size_t)1 << bits;

    ix->slot = pprof__scratch(PPROF__S_INDEX, slots * sizeof(uint32_t), false);
    if (!ix->slot)
        return -ENOMEM;
    memset(ix->slot, 0, slots * sizeof(uint32_t));
    ix->mask = slots - 1;
    ix->shift = 64 - bits;
    ix->salt = pprof__index_salt();
    return 0;
}

/* Entries are added this far ahead of their slot's prefetch: the index
 * outgrows the L1 cache from a few thousand samples on. */
#define PREFETCH_AHEAD 16

/* Sums the values of entry `from` into those of entry `to`, which takes
 * its key's place: a key met again. */
static void merge_into(struct ctx *c, uint32_t to, uint32_t from)
{
    int64_t *sum = c->sums + (size_t)to * c->ncols;
    const int64_t *row = c->sums + (size_t)from * c->ncols;

    for (size_t k = 0; k < c->ncols; k++)
        sum[k] = sat_add(sum[k], row[k]);
    c->ents[from].dup = true;
    c->ents[from].out_vlen = 0;
}

/* Indexes the entries by key, in sample order: a key met again is summed
 * into the entry that holds it (the earliest sample, whose fields are
 * emitted) and its entry marked `dup`. */
static int index_entries(struct ctx *c)
{
    size_t n = c->n_ents, nu = 0;
    struct pprof__index *ix = &c->index;
    int rc;

    if ((rc = index_open(c, n)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (i + PREFETCH_AHEAD < n)
            __builtin_prefetch(&ix->slot[pprof__index_home(ix, c->keys[i + PREFETCH_AHEAD])], 1);
        uint32_t e = pprof__index_add(ix, c->keys, (uint32_t)i);
        if (e == i) {
            nu++;
            continue;
        }
        merge_into(c, e, (uint32_t)i);
    }
    c->n_unique = nu;
    return 0;
}

/* Old keys looked for this far ahead of the next one in the state before
 * a sample's key is taken as new. */
#define IN_ORDER_LOOKAHEAD 64

static unsigned fresh_bit(uint64_t key)
{
    return (unsigned)(key >> (64 - FRESH_BITS));
}

static uint64_t state_key(const struct pprof_delta *d, size_t j)
{
    uint64_t key;

    memcpy(&key, d->state + j * sizeof(uint64_t), sizeof(key));
    return key;
}

/* Whether the samples bring the state's keys in the state's order, with
 * keys new to it among them: Go writes the samples of a profile in the
 * order of its last one, new stacks first (and a stack whose `bytes` label
 * changed, in its place). Then the state walk finds each old key by going
 * on through the samples, and only the others (`fresh`) are indexed: the
 * new keys, and old ones met out of order, which the walk then looks up.
 * Too many of those and the full index costs no more: c->in_order is left
 * false. Keys met again among the fresh ones are summed here, once the
 * index is kept. */
static int match_in_order(struct ctx *c)
{
    const struct pprof_delta *d = c->d;
    struct pprof__index *ix = &c->index;
    size_t n = c->n_ents, j = 0, nfresh = 0, ndup = 0, cap = n / 8;
    int rc;

    c->in_order = false;
    /* Each sample beyond the state's count has a key new to it. */
    if (c->ncum == 0 || d->n == 0 || (n > d->n && n - d->n > cap))
        return 0;
    c->fresh = pprof__scratch(PPROF__S_FRESH, (cap ? cap : 1) * sizeof(uint32_t), false);
    if (!c->fresh)
        return -ENOMEM;
    if ((rc = index_open(c, cap)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        size_t w = 0;
        unsigned b;

        while (w < IN_ORDER_LOOKAHEAD && j + w < d->n && c->keys[i] != state_key(d, j + w))
            w++;
        if (w < IN_ORDER_LOOKAHEAD && j + w < d->n) {
            j += w + 1;
            continue;
        }
        if (++nfresh > cap)
            return 0;
        c->ents[i].fresh = true;
        c->fresh[nfresh - 1] = (uint32_t)i;
        b = fresh_bit(c->keys[i]);
        c->fresh_bits[b / 64] |= 1ULL << (b % 64);
        ndup += pprof__index_add(ix, c->keys, (uint32_t)i) != i;
    }
    /* Summed only now that the index is the one kept. */
    for (size_t k = 0; ndup && k < nfresh; k++) {
        uint32_t i = c->fresh[k], h = pprof__index_find(ix, c->keys, c->keys[i]);
        if (h != i)
            merge_into(c, h, i);
    }
    c->in_order = true;
    c->n_fresh = nfresh;
    c->n_unique = n - ndup;
    return 0;
}

/* The entry of old key `key`, or UINT32_MAX. `*next` is where the entry
 * after the last one found is looked for first. */
static uint32_t find_entry(struct ctx *c, uint64_t key, size_t *next)
{
    size_t i = *next;
    uint32_t e, f;
    unsigned b;

    if (!c->in_order) {
        /* Most often the entry after the last one found: the samples that
         * follow a new stack keep their order. */
        if (i < c->n_ents && c->keys[i] == key && !c->ents[i].dup)
            e = (uint32_t)i;
        else
            e = pprof__index_find(&c->index, c->keys, key);
        if (e != UINT32_MAX)
            *next = (size_t)e + 1;
        return e;
    }
    while (i < c->n_ents && c->ents[i].fresh)
        i++;
    *next = i;
    b = fresh_bit(key);
    f = c->fresh_bits[b / 64] >> (b % 64) & 1 ? pprof__index_find(&c->index, c->keys, key)
                                              : UINT32_MAX;
    if (i == c->n_ents || c->keys[i] != key)
        return f; /* an old key gone, or met out of order */
    *next = i + 1;
    if (f == UINT32_MAX)
        return (uint32_t)i;
    /* Also among the fresh ones: the first sample holds the key. */
    if (f < i) {
        merge_into(c, f, (uint32_t)i);
        return f;
    }
    merge_into(c, (uint32_t)i, f);
    return (uint32_t)i;
}

/* Records that entry i's output values take `vlen` bytes, or that it is
 * not emitted when they are all zero, and counts the sample. */
static void settle_sizes(struct ctx *c, size_t i, bool nonzero, size_t vlen)
{
    struct ent *e = &c->ents[i];
    size_t body;

    e->out_vlen = nonzero ? (uint32_t)vlen : 0;
    if (!nonzero)
        return;
    c->samples_kept++;
    body = c->spans[F_SAMPLE][i].len - e->vbytes + 1 + pprof__varint_size(vlen) + vlen;
    c->samples_out += 1 + pprof__varint_size(body) + body;
}

/* Settles entry i of a profile without cumulative columns: its values are
 * output as they came. */
static void settle_entry(struct ctx *c, size_t i)
{
    const int64_t *v = c->sums + i * c->ncols;
    size_t vlen = 0;
    bool nonzero = false;

    for (size_t k = 0; k < c->ncols; k++) {
        if (c->cum_of_col[k] == COL_DROPPED)
            continue;
        nonzero |= v[k] != 0;
        vlen += pprof__varint_size((uint64_t)v[k]);
    }
    settle_sizes(c, i, nonzero, vlen);
}

/* Takes entry i into the new state, one pass over its columns: writes its
 * cumulative sums at `o` as the state's varints, counts whether one went
 * down from `prev` (the key's previous values; NULL for a key new to the
 * state), and puts its output values in place of its sums: the
 * differences with `prev`, clamped at 0, the other columns as they are.
 * With `settle`, records their size (nothing is emitted for the first
 * profile of a pair). */
static uint8_t *take_entry(struct ctx *c, uint8_t *o, size_t i, const int64_t *prev, bool settle)
{
    int64_t *v = c->sums + i * c->ncols;
    size_t vlen = 0;
    bool nonzero = false, down = false;

    for (size_t k = 0; k < c->ncols; k++) {
        int ci = c->cum_of_col[k];
        int64_t x = v[k];

        if (ci == COL_DROPPED)
            continue;
        if (ci >= 0) {
            o = pprof__put_varint(o, (uint64_t)x);
            if (prev) {
                down |= x < prev[ci];
                x = sat_sub(x, prev[ci]);
            }
            x = x < 0 ? 0 : x;
            v[k] = x;
        }
        nonzero |= x != 0;
        vlen += pprof__varint_size((uint64_t)x);
    }
    c->decreased += down;
    if (settle)
        settle_sizes(c, i, nonzero, vlen);
    return o;
}

/* Walks the state, in the order its keys were written: a key found in the
 * index is counted (and whether it went down), keeps its place in the new
 * state with the new sums, and its entry gets its output values there and
 * then, while in the cache. Keys new to the state follow, in sample order.
 * Nothing is emitted for the first profile of a pair, so its entries are
 * not settled. */
static int finish_state(struct ctx *c)
{
    struct pprof_delta *d = c->d;
    const struct pprof__index *ix = &c->index;
    size_t ncum = c->ncum;
    size_t nu = c->n_unique, vlen, w = 0, next = 0;
    const uint8_t *ov = d->state ? d->state + d->n * sizeof(uint64_t) : NULL;
    const uint8_t *oend = d->state ? d->state + d->state_len : NULL;
    int64_t *prev = c->prev;
    uint64_t *nkeys;
    uint8_t *vals, *o, *ns = NULL;
    bool settle = d->seeded;

    /* At most ten bytes per varint. */
    nkeys = pprof__scratch(PPROF__S_STATEKEYS, (nu ? nu : 1) * sizeof(uint64_t), false);
    vals = pprof__scratch(PPROF__S_STATEVALS, (nu ? nu : 1) * (ncum ? ncum : 1) * 10, false);
    if (!nkeys || !vals)
        return -ENOMEM;
    o = vals;
    for (size_t j = 0; j < d->n; j++) {
        uint64_t key, v = 0;
        uint32_t e;

        if (j + PREFETCH_AHEAD < d->n) {
            if (!c->in_order)
                __builtin_prefetch(
                    &ix->slot[pprof__index_home(ix, state_key(d, j + PREFETCH_AHEAD))]);
            /* The old keys and values stream in from beyond the caches
             * (the profile's gunzip went through them since): fetched a
             * few lines ahead, among the walk's other streams. */
            if (j % 8 == 0 && j + 8 * PREFETCH_AHEAD < d->n)
                __builtin_prefetch(d->state + (j + 8 * PREFETCH_AHEAD) * sizeof(uint64_t));
            if (j % 8 == 0 && oend - ov > 4 * 64)
                __builtin_prefetch(ov + 4 * 64);
        }
        key = state_key(d, j);
        if ((e = find_entry(c, key, &next)) == UINT32_MAX) {
            for (size_t k = 0; k < ncum; k++)
                pprof__varint(&ov, oend, &v);
            continue;
        }
        for (size_t k = 0; k < ncum; k++) {
            pprof__varint(&ov, oend, &v);
            prev[k] = (int64_t)v;
        }
        c->ents[e].matched = true;
        c->matched++;
        nkeys[w++] = key;
        o = take_entry(c, o, e, prev, settle);
    }
    /* In order, only the fresh entries can be new. */
    for (size_t k = 0, m = c->in_order ? c->n_fresh : c->n_ents; k < m; k++) {
        size_t i = c->in_order ? c->fresh[k] : k;
        if (c->ents[i].dup || c->ents[i].matched)
            continue;
        nkeys[w++] = c->keys[i];
        o = take_entry(c, o, i, NULL, settle);
    }
    c->settled = settle;
    vlen = (size_t)(o - vals);
    /* The new state, sized exactly: it is what the pair holds until the
     * next profile. It takes the old one's block, which the walk no
     * longer reads: a large state's block is its own mapping, which
     * realloc() resizes in place or moves without copying, where a fresh
     * one would fault in every page again (a large heap's state is
     * hundreds of KB, every scrape). */
    if (w > 0) {
        if (!pprof__acct_charge(w * sizeof(uint64_t) + vlen) ||
            !(ns = realloc(d->state, w * sizeof(uint64_t) + vlen)))
            return -ENOMEM;
        d->state = NULL;
        memcpy(ns, nkeys, w * sizeof(uint64_t));
        memcpy(ns + w * sizeof(uint64_t), vals, vlen);
    }
    free(d->state);
    d->state = ns;
    d->state_len = w ? w * sizeof(uint64_t) + vlen : 0;
    d->n = w;
    return 0;
}
