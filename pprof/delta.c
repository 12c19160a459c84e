/* SPDX-License-Identifier: Apache-2.0 */
/* Delta of cumulative pprof profiles (Go allocs, mutex, block), straight
 * from the wire format (docs/design.md "Deltas": the sample key, the state,
 * the walk that pairs them, the output).
 *
 * Code map. One pass over the top-level fields records where every record
 * lies; samples are parsed just enough to hash their key (add_locs()) and
 * read their values; the state's keys are met in the samples' order where
 * Go keeps it (match_in_order()), the others through a per-call index; the
 * output copies the referenced records as raw bytes, so ids and string
 * indices never change (the string table is cut after its last referenced
 * string).
 *
 * Threading: a `struct pprof_delta` is used by one call at a time (the agent
 * serialises jobs of a pair); calls on different states may run in
 * parallel. Ownership: input borrowed; output malloc'd for the caller.
 * Every per-call buffer (gunzipped input, span and id tables, per-entry
 * arrays, the output before gzip) is the calling thread's scratch
 * (scratch.c), kept between calls up to 48 MiB for all threads; only the id maps
 * of sparse ids are malloc'd, and freed before returning.
 *
 * Memory. A call may be given a grant (limits.max_memory): every buffer it
 * grows or allocates is charged against it (scratch.c), and once the
 * record scan has counted the tables, the structure's need (need_of()) is
 * checked before any per-sample buffer is taken, so that a profile of
 * many small samples stops early instead of at its grant. Either way the
 * call fails with PPROF_EOVERBUDGET, its buffers released, and the state
 * keeps the need for the next admission (pprof_delta_need()).
 *
 * Files. This file holds the types, the memory accounting and the public
 * calls; the stages are parts included below, into this one translation
 * unit so that the hot loops still inline across them: delta_ids.c.h (the
 * shuffle readers of ids), delta_scan.c.h (the record scan and tables),
 * delta_stack.c.h (samples and stack keys), delta_index.c.h (the key index
 * and the state), delta_out.c.h (the output writer). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "common/clock.h"
#include "pprof/internal.h"

/* A restart is declared when more than this fraction of the keys found in
 * both profiles went down. */
#define RESET_DECREASE_NUM 1
#define RESET_DECREASE_DEN 2

enum {
    F_SAMPLE_TYPE = 1,
    F_SAMPLE,
    F_MAPPING,
    F_LOCATION,
    F_FUNCTION,
    F_STRING,
    F_DROP_FRAMES,
    F_KEEP_FRAMES,
    F_TIME,
    F_DURATION,
    F_PERIOD_TYPE,
    F_PERIOD,
    F_COMMENT,
    F_DEFAULT_SAMPLE_TYPE,
    F_DOC_URL
};

struct pprof_delta {
    enum pprof_delta_kind kind;
    const struct pprof_filter *filter; /* borrowed; NULL: none */
    bool seeded;
    int64_t prev_time;
    uint64_t types_fp;
    uint64_t mapping_fp;
    unsigned ncum; /* cumulative columns kept per key */
    /* n keys (uint64, ascending), then ncum varints per key in key order;
     * NULL when n is 0. */
    uint8_t *state;
    size_t n;
    size_t state_len; /* bytes of `state` */
    /* What a call needed for a profile of need_raw decompressed bytes:
     * kept through a poisoned state, for the next admission. */
    uint64_t need;
    size_t need_raw;
};

/* Content span of a length-delimited record inside the raw profile. */
struct span {
    uint32_t off, len;
};

/* One location as the sample scan and encode() use it: the fields side by
 * side, so that a frame touches one cache line (profiles with tens of
 * thousands of locations do not keep them in L1). */
struct loc {
    uint64_t key;  /* odd; 0 = no such location */
    uint32_t refs; /* references from stacks; see str_lblrefs */
    uint32_t used; /* encode(): an emitted sample references it */
};

/* One sample of the current profile: entry i is sample i. A key met again
 * is summed into the entry of its first sample, whose fields are emitted. */
struct ent {
    uint32_t vbytes;   /* bytes of the sample's value fields, tags included */
    uint32_t out_vlen; /* encode(): bytes of its output values, 0 = dropped */
    /* [voff, vend): the sample's only value field, tag included, relative
     * to the sample's content; vend = 0 when it has several (or none). */
    uint32_t voff, vend;
    bool matched; /* the key was in the state */
    bool dup;     /* an earlier sample has the same key: summed into it */
    bool fresh;   /* in_order: not met in the state's order (match_in_order()) */
};

/* log2 of the bits of ctx.fresh_bits. */
#define FRESH_BITS 12

/* Slots of the memo of short labels (struct lbl_memo), one way: std-heap's
 * 57 distinct `bytes` labels find theirs in 80 % of its samples with 64
 * slots, 91 % with 256 (of 92 % at most). */
#define LBL_MEMO_BITS 8

struct ctx {
    struct pprof_delta *d;
    const uint8_t *raw;
    size_t len;
    size_t in_len; /* the body as it came (gzip) */
    const struct pprof_limits *lim;
    char *err;
    size_t errlen;

    size_t n[F_STRING + 1];
    struct span *spans[F_STRING + 1];
    int64_t *comments;
    size_t n_comments;
    int64_t drop_frames, keep_frames, time_nanos, duration_nanos, period, default_sample_type,
        doc_url;
    bool has_period_type;
    struct span period_type;

    uint64_t *strhash; /* lazy; 0 = not computed yet */
    uint8_t *str_used;
    /* References to each string from sample labels, and to each location
     * from stacks, counted by the sample scan. Every reference takes at
     * least a byte of the profile, which is under 4 GiB: no overflow. */
    uint32_t *str_lblrefs;
    size_t max_str_used;

    struct pprof__idmap mapmap, fnmap, locmap;
    uint32_t *fn_name, *fn_sys, *fn_file;
    uint8_t *fn_used;
    /* The locations, indexed by id when `loc_by_id` (ids dense, as Go
     * writes them: the sample loop then needs one load per frame, no id
     * map), else by index. */
    struct loc *locs;
    bool mark_locs; /* encode(): loc.used is to be marked sample by sample */
    /* The label the sample scan met last: its string indices. */
    uint64_t last_label_str[3];
    size_t loc_by_id;  /* by-id mode: entries in locs, else 0 */
    uint64_t *loc_ids; /* id of each location, by index */
    /* The function of each location's only line, by index, so that encode()
     * need not parse the lines again; LOC_FN_NONE without one,
     * LOC_FN_SEVERAL for inlined frames (parsed again). */
    uint32_t *loc_fn;

    size_t ncols;
    int *cum_of_col;  /* column -> cumulative index, COL_PLAIN or COL_DROPPED */
    size_t ncols_out; /* columns the output keeps */
    unsigned ncum;
    uint64_t types_fp, mapping_fp;

    struct ent *ents; /* one per sample, in sample order */
    size_t n_ents, matched, decreased;
    uint64_t *keys;            /* key of each entry */
    struct pprof__index index; /* the entries by key, unless in_order */
    bool in_order;             /* see match_in_order() */
    uint32_t *fresh;           /* in_order: the fresh entries, in sample order */
    size_t n_fresh;
    /* in_order: a bit per fresh key's top bits, so that the state walk
     * looks up few of its keys in the index (which outgrows the caches). */
    uint64_t fresh_bits[1u << (FRESH_BITS - 6)];
    size_t n_unique; /* the call's keys, at most: sizes the new state's scratch */
    int64_t *sums;   /* n_ents x ncols */
    int64_t *prev;   /* ncum: the previous values of one key */

    uint8_t *out;
    size_t out_len;
    bool out_scratch;  /* out is the thread's scratch, not malloc'd */
    size_t samples_in; /* bytes of the sample records, tags included */
    /* Set by settle_sizes(), once per emitted key: the samples emitted,
     * and the bytes of their records in the output, tags included. */
    bool settled;
    size_t samples_kept, samples_out;

    /* Most samples repeat the label bytes of the previous one (Go's heap
     * `bytes` label): the last label parsed and its hash. */
    const uint8_t *last_label;
    size_t last_label_len;
    uint64_t last_label_hash;

    /* The label filter's verdict per key string: LBL_UNKNOWN until asked;
     * NULL when no label filter is set. */
    uint8_t *lbl_verdict;

    /* Short labels met by the sample scan, by their bytes: Go's heap
     * samples carry a `bytes` label of four to six bytes, a few dozen
     * distinct ones in no order, so the last-label check alone parses
     * most of them again. */
    struct lbl_memo {
        uint64_t word; /* the label's bytes, its length in the top byte; 0 = empty */
        uint64_t hash;
        uint32_t str[3]; /* key, str and num_unit string indices */
    } lbl_memo[1u << LBL_MEMO_BITS];
};

enum { COL_PLAIN = -1, COL_DROPPED = -2 };
enum { LOC_FN_NONE = UINT32_MAX, LOC_FN_SEVERAL = UINT32_MAX - 1 };
enum { LBL_UNKNOWN, LBL_KEEP, LBL_DROP };

static int corrupt(struct ctx *c, const char *what)
{
    return pprof__err(c->err, c->errlen, PPROF_ECORRUPT, "malformed profile: %s", what);
}

/* 2^64 / phi, odd: multiplying by it is a bijection that spreads small
 * numbers over the word. */
#define GOLDEN 0x9e3779b97f4a7c15ULL

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The parts in the order they build on each other, not sorted. */
/* clang-format off */
#include "pprof/delta_ids.c.h"
#include "pprof/delta_scan.c.h"
#include "pprof/delta_stack.c.h"
#include "pprof/delta_index.c.h"
#include "pprof/delta_out.c.h"
/* clang-format on */

/* ---- memory ---- */

/* Bytes a scratch buffer of `bytes` takes (its headroom, scratch.c). */
static uint64_t scratch_size(uint64_t bytes)
{
    return bytes / 8 * 9 + 64;
}

/* The room a span table of `n` records grows to (grow_spans()). */
static uint64_t spans_room(uint64_t n, uint64_t cap)
{
    uint64_t room = 256;

    while (room < n)
        room *= 2;
    return room < cap ? room : cap;
}

/* What the call will charge for this profile, from the counts of the
 * record scan and the columns: every buffer at the size it will ask for,
 * but for what depends on the values (the output's values, the state's
 * varints, the gzipped size), taken as large as the input's. Measured: 1.2x
 * what a million-sample block profile charges (tests/pprof), so that a
 * profile past its grant is refused here, before the per-sample buffers;
 * the charges themselves are the bound. Each term names the buffers it
 * covers; the tables of one scratch id count once, at their largest. */
static uint64_t need_of(const struct ctx *c)
{
    uint64_t n = c->n[F_SAMPLE], nl = c->n[F_LOCATION], nf = c->n[F_FUNCTION];
    uint64_t nm = c->n[F_MAPPING], ns = c->n[F_STRING], raw = c->len;
    uint64_t ncols = c->ncols ? c->ncols : 1, ncum = c->ncum ? c->ncum : 1;
    uint64_t ids = nl > nf ? nl : nf, out, gz, raw_buf, need = 0;

    ids = ids > nm ? ids : nm;
    /* The input, inflated: into a buffer of the trailer's size, unless
     * that passes 64x the body (gzip.c), when it doubles from there: up to
     * twice the size. Then the span tables. */
    raw_buf = scratch_size(raw > 64 * (uint64_t)c->in_len + 4096 ? 2 * raw : raw);
    need += raw_buf;
    for (int k = F_SAMPLE_TYPE; k <= F_STRING; k++)
        need += scratch_size(spans_room(c->n[k], record_cap(c, k)) * sizeof(struct span));
    need += scratch_size(2 * c->n_comments * sizeof(int64_t));
    /* Strings: hash, used, label references, label verdict. */
    need += scratch_size(ns * 8) + 2 * scratch_size(ns) + scratch_size(ns * 4);
    /* Ids, and an id map per table (dense: up to 2n + 1025 slots of 4
     * bytes; sparse: up to 4n slots of 12, malloc'd). */
    need += scratch_size(ids * 8) + 3 * 4096 + 48 * (nl + nf + nm) + 3 * 64;
    /* Functions: name, system name, file, used. */
    need += scratch_size(nf * 12) + scratch_size(nf);
    /* Locations: keys, ids, functions, the table by id (up to 2n + 1025
     * entries). */
    need += 2 * scratch_size(nl * 8) + scratch_size(nl * 4) +
            scratch_size((2 * nl + 1025) * sizeof(struct loc));
    /* Samples: entries, keys, sums, the index, the fresh list, the new
     * state's keys and values (ten bytes a varint), then the state itself
     * (malloc'd; its varints about as long as the input's values). */
    need += scratch_size(n * sizeof(struct ent)) + scratch_size(n * 8) +
            scratch_size(n * ncols * 8) + scratch_size(((uint64_t)1 << pprof__index_bits(n)) * 4) +
            scratch_size(n / 8 * 4) + scratch_size(n * 8) + scratch_size(n * ncum * 10) +
            n * (8 + ncum * 4);
    /* The output, its values about as long as the input's; gzipped into
     * the input's buffer (grown if the bound passes it), then copied out
     * (malloc'd, about as large as the input was). */
    out = raw + 4 * n + 11 * c->n_comments + 128;
    gz = out + out / 64 + 4096;
    need += scratch_size(out) + (scratch_size(gz) > raw_buf ? scratch_size(gz) - raw_buf : 0) +
            2 * (uint64_t)c->in_len + 4096;
    return need;
}

/* The profile's structure needs more than the call's grant: stop before
 * the per-sample buffers, and say how much. */
static int check_need(struct ctx *c)
{
    uint64_t need = need_of(c);

    c->d->need = need;
    c->d->need_raw = c->len;
    if (!c->lim->max_memory || need <= c->lim->max_memory)
        return 0;
    return pprof__err(c->err, c->errlen, PPROF_EOVERBUDGET,
                      "profile needs %" PRIu64 " MiB to process (%zu samples), over its grant "
                      "of %zu MiB",
                      (need + (1 << 20) - 1) >> 20, c->n[F_SAMPLE], c->lim->max_memory >> 20);
}

uint64_t pprof_delta_need(const struct pprof_delta *d, size_t raw)
{
    uint64_t need;

    if (!d || !d->need || !d->need_raw)
        return 0;
    /* Scaled to the new size: a profile that shrank is not held to its
     * larger past. */
    if (raw >= d->need_raw)
        need = d->need / d->need_raw * raw + (d->need % d->need_raw) * raw / d->need_raw + 1;
    else
        need = (uint64_t)((double)d->need * ((double)raw / (double)d->need_raw)) + 1;
    /* An eighth more: the next profile of a target is seldom the same
     * shape to the byte, and one that needs a little more than the last
     * would stop at its grant again. */
    return need + need / 8;
}

size_t pprof__delta_need_raw(const struct pprof_delta *d)
{
    return d ? d->need_raw : 0;
}

/* ---- public ---- */

struct pprof_delta *pprof_delta_new(enum pprof_delta_kind kind)
{
    struct pprof_delta *d = calloc(1, sizeof(*d));

    if (d)
        d->kind = kind;
    return d;
}

void pprof_delta_set_filter(struct pprof_delta *d, const struct pprof_filter *f)
{
    if (!d->filter != !f || (f && f->fingerprint != d->filter->fingerprint))
        state_clear(d);
    d->filter = f;
}

void pprof_delta_free(struct pprof_delta *d)
{
    if (!d)
        return;
    free(d->state);
    free(d);
}

size_t pprof_delta_mem(const struct pprof_delta *d)
{
    if (!d)
        return 0;
    return sizeof(*d) + d->state_len;
}

size_t pprof_delta_keys(const struct pprof_delta *d)
{
    return d ? d->n : 0;
}

int pprof__delta_process_timed(struct pprof_delta *d, const uint8_t *in, size_t in_len,
                               const struct pprof_limits *lim, uint8_t **out, size_t *out_len,
                               char *err, size_t errlen, struct pprof__phase_ns *ph)
{
    struct ctx c;
    const uint8_t *raw = NULL;
    size_t raw_len = 0;
    bool reset = false;
    int64_t prev_time = d->prev_time;
    uint64_t t0 = ph ? clock_thread_cpu_ns() : 0, t1;
    int rc;

    *out = NULL;
    *out_len = 0;
    if (err && errlen)
        err[0] = '\0';
    pthread_once(&tables_once, tables_init);
    memset(&c, 0, sizeof(c));
    pprof__acct_begin(lim->max_memory);
    rc = pprof__gunzip_scratch(in, in_len, lim->max_decompressed, &raw, &raw_len);
    if (rc == PPROF_ETOOLARGE) {
        pprof__err(err, errlen, rc, "profile too large: decompressed size > cap %zu bytes",
                   lim->max_decompressed);
        goto fail;
    }
    if (rc < 0) {
        pprof__err(err, errlen, rc, "%s: gunzip failed",
                   rc == PPROF_ECORRUPT ? "malformed profile" : pprof_strerror(rc));
        goto fail;
    }
    if (ph) {
        t1 = clock_thread_cpu_ns();
        ph->gunzip = t1 - t0;
        t0 = t1;
    }
    c.d = d;
    c.raw = raw;
    c.len = raw_len;
    c.in_len = in_len;
    c.lim = lim;
    c.err = err;
    c.errlen = errlen;
    if ((rc = scan_top(&c)) < 0 || (rc = scan_strings(&c)) < 0 || (rc = scan_types(&c)) < 0 ||
        (rc = scan_mappings(&c)) < 0 || (rc = scan_functions(&c)) < 0 ||
        (rc = scan_locations(&c)) < 0 || (rc = check_need(&c)) < 0)
        goto fail;
    if (d->filter && d->filter->label_keep) {
        size_t ns = c.n[F_STRING] ? c.n[F_STRING] : 1;
        if (!(c.lbl_verdict = pprof__scratch(PPROF__S_LBLVERDICT, ns, false))) {
            rc = -ENOMEM;
            goto fail;
        }
        memset(c.lbl_verdict, LBL_UNKNOWN, ns);
    }

    /* A restart that shows before any sample is read: time going back, a
     * new main binary (build id or load address), or a new column layout. */
    if (d->seeded && ((c.time_nanos && d->prev_time && c.time_nanos < d->prev_time) ||
                      c.mapping_fp != d->mapping_fp || c.types_fp != d->types_fp)) {
        reset = true;
        state_clear(d);
        d->seeded = true;
    }
    if (d->ncum != c.ncum) {
        free(d->state);
        d->state = NULL;
        d->state_len = d->n = 0;
        d->ncum = c.ncum;
    }
    if (ph) {
        t1 = clock_thread_cpu_ns();
        ph->decode = t1 - t0;
        t0 = t1;
    }
    if ((rc = scan_samples(&c)) < 0 || (rc = match_in_order(&c)) < 0 ||
        (!c.in_order && (rc = index_entries(&c)) < 0))
        goto fail;
    if (c.ncum == 0) {
        /* Nothing to difference (PPROF_DELTA_NONE, or a filter that drops
         * every cumulative column): no state, every profile is emitted. */
        state_clear(d);
        d->seeded = true;
        reset = false;
        prev_time = 0;
    } else if ((rc = finish_state(&c)) < 0) {
        goto fail;
    }
    if (d->seeded && c.decreased * RESET_DECREASE_DEN > c.matched * RESET_DECREASE_NUM)
        reset = true;
    if (ph) {
        t1 = clock_thread_cpu_ns();
        ph->delta = t1 - t0;
        t0 = t1;
    }

    bool baseline = !d->seeded;
    d->seeded = true;
    d->prev_time = c.time_nanos;
    d->types_fp = c.types_fp;
    d->mapping_fp = c.mapping_fp;
    if (baseline || reset) {
        ctx_done(&c);
        pprof__acct_end();
        pprof__scratch_release();
        return baseline ? PPROF_DELTA_BASELINE : PPROF_DELTA_RESET;
    }
    /* Else the output is the caller's. */
    c.out_scratch = lim->compression != PPROF_COMPRESS_NONE;
    if ((rc = encode(&c, prev_time)) < 0)
        goto fail;
    if (ph) {
        t1 = clock_thread_cpu_ns();
        ph->encode = t1 - t0;
        t0 = t1;
    }
    if (lim->compression != PPROF_COMPRESS_NONE) {
        if ((rc = pprof__compress_cached(c.out, c.out_len, lim->compression, out, out_len)) < 0) {
            pprof__err(err, errlen, rc, "gzip failed: %s", pprof_strerror(rc));
            goto fail;
        }
    } else {
        *out = c.out;
        *out_len = c.out_len;
        c.out = NULL;
    }
    if (ph)
        ph->gzip = clock_thread_cpu_ns() - t0;
    ctx_done(&c);
    pprof__acct_end();
    pprof__scratch_release();
    return PPROF_DELTA_EMITTED;

fail:
    if (pprof__acct_over()) {
        /* Past the grant though the structure fit it (or before it was
         * known): the next admission asks for twice as much. */
        size_t charged = pprof__acct_charged();
        rc = pprof__err(err, errlen, PPROF_EOVERBUDGET,
                        "profile processing passed its memory grant of %zu MiB (%zu MiB "
                        "asked for)",
                        lim->max_memory >> 20, (charged + (1 << 20) - 1) >> 20);
        if (d->need < 2 * (uint64_t)lim->max_memory)
            d->need = 2 * (uint64_t)lim->max_memory;
        /* Per decompressed byte: before the gunzip finished, the size
         * its trailer announces. */
        d->need_raw = raw_len;
        if (!raw_len && in_len >= 18 && in[0] == 0x1f && in[1] == 0x8b)
            d->need_raw = (size_t)in[in_len - 4] | (size_t)in[in_len - 3] << 8 |
                          (size_t)in[in_len - 2] << 16 | (size_t)in[in_len - 1] << 24;
        if (!d->need_raw)
            d->need_raw = in_len ? in_len : 1;
    } else if (rc == -ENOMEM && err && errlen && !err[0]) {
        pprof__err(err, errlen, rc, "out of memory");
    }
    /* Poison: the next profile is a fresh baseline. */
    state_clear(d);
    ctx_done(&c);
    pprof__acct_end();
    pprof__scratch_release();
    return rc;
}

int pprof_delta_process(struct pprof_delta *d, const uint8_t *in, size_t in_len,
                        const struct pprof_limits *lim, uint8_t **out, size_t *out_len, char *err,
                        size_t errlen)
{
    return pprof__delta_process_timed(d, in, in_len, lim, out, out_len, err, errlen, NULL);
}
