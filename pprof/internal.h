/* SPDX-License-Identifier: Apache-2.0 */
/** Internal interface of pprof/: protobuf wire-format helpers shared by the
 * streaming delta and the protobuf-c decoder, the arena-backed full decoder
 * (used for validation and by tests), and the timing hook used by the
 * benchmark. Not installed; only pprof/ and its tests include it. */
#ifndef PROFLET_PPROF_INTERNAL_H
#define PROFLET_PPROF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/hashmap.h"
#include "pprof/pprof.h"
#include "profile.pb-c.h"

/* Wire types of the protobuf encoding. */
enum {
    PPROF__WT_VARINT = 0,
    PPROF__WT_I64 = 1,
    PPROF__WT_LEN = 2,
    PPROF__WT_I32 = 5,
};

/** Reads one base-128 varint at `*pp` (not past `end`), advancing `*pp`.
 * Returns 0, or -1 when truncated or longer than 10 bytes. */
static inline int pprof__varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r;

    /* One- and two-byte varints (ids, lengths, small values) are most of a
     * profile: decode them without the loop. */
    if (p < end && *p < 0x80) {
        *v = *p;
        *pp = p + 1;
        return 0;
    }
    if (end - p >= 2 && p[1] < 0x80) {
        *v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        *pp = p + 2;
        return 0;
    }
    r = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return -1;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *v = r;
            *pp = p;
            return 0;
        }
    }
    return -1;
}

/** Decodes the first two varints of `w`, eight bytes of a packed field read
 * little-endian, when each takes at most three bytes (values below 2^21):
 * returns the bytes both take (2 to 6) and the values, or 0 when either is
 * longer. No branch depends on the widths: the bytes that end a varint are
 * found with a bit scan, and each value is masked to its length. A loop
 * that branches on each varint's width mispredicts about every other one
 * when widths are mixed, as the location ids of large profiles are. */
static inline unsigned pprof__two_varints3(uint64_t w, uint64_t *a, uint64_t *b)
{
    uint64_t ends = ~w & 0x8080808080808080ULL;
    /* Bit 7, 15 or 23 ends the first varint; the second ends at most 24
     * bits later. Bit 63 stands in for "no end", which fails both tests. */
    unsigned e1 = (unsigned)__builtin_ctzll(ends | 1ULL << 63);
    unsigned e2 = (unsigned)__builtin_ctzll((ends & (ends - 1)) | 1ULL << 63);

    if (e1 >= 24 || e2 - e1 > 24)
        return 0;
    uint64_t w2 = w >> (e1 + 1);
    *a = ((w & 0x7f) | (w >> 1 & 0x3f80) | (w >> 2 & 0x1fc000)) & ((1ULL << (e1 + 1) / 8 * 7) - 1);
    *b = ((w2 & 0x7f) | (w2 >> 1 & 0x3f80) | (w2 >> 2 & 0x1fc000)) &
         ((1ULL << (e2 - e1) / 8 * 7) - 1);
    return (e2 + 1) / 8;
}

/** One field of a message: number, wire type, and either the varint/fixed
 * value or the [data, data+len) span of a length-delimited field. `start`
 * points at the tag, so [start, next) is the whole encoded field. */
struct pprof__field {
    uint32_t num;
    /* Not next to `num`: GCC joins a test of both adjacent fields into one
     * 8-byte load of the two 4-byte stores just made, and that load stalls
     * on store forwarding at every field (measured: half of the location
     * scan's cycles). */
    uint64_t val;
    const uint8_t *data;
    size_t len;
    const uint8_t *start;
    uint32_t wt;
};

/* The largest field number protobuf allows. */
#define PPROF__MAX_FIELD_NUM 0x1fffffffu

/** Reads the next field from [*pp, end). Returns 1 with `f` filled, 0 at the
 * end of the message, -1 on malformed input (groups, field 0, truncation). */
static inline int pprof__next_field(const uint8_t **pp, const uint8_t *end, struct pprof__field *f)
{
    const uint8_t *p = *pp;
    uint64_t tag;

    if (p >= end)
        return 0;
    f->start = p;
    f->val = 0;
    f->data = NULL;
    f->len = 0;
    /* A tag is a uint32 of at most five bytes and a field number below
     * 2^29, as protobuf (and protobuf-c, which reads what we send) has it;
     * anything else would be copied into the output and break it there. */
    if (pprof__varint(&p, end, &tag) < 0 || p - f->start > 5 || tag >> 3 == 0 ||
        tag >> 3 > PPROF__MAX_FIELD_NUM)
        return -1;
    f->num = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    switch (f->wt) {
    case PPROF__WT_VARINT:
        if (pprof__varint(&p, end, &f->val) < 0)
            return -1;
        break;
    case PPROF__WT_I64:
        if (end - p < 8)
            return -1;
        memcpy(&f->val, p, 8);
        p += 8;
        break;
    case PPROF__WT_I32: {
        uint32_t v32;
        if (end - p < 4)
            return -1;
        memcpy(&v32, p, 4);
        f->val = v32;
        p += 4;
        break;
    }
    case PPROF__WT_LEN: {
        uint64_t len;
        if (pprof__varint(&p, end, &len) < 0 || len > (uint64_t)(end - p))
            return -1;
        f->data = p;
        f->len = (size_t)len;
        p += len;
        break;
    }
    default:
        return -1;
    }
    *pp = p;
    return 1;
}

/** Bytes a varint encoding of `v` takes. */
static inline size_t pprof__varint_size(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/** Writes `v` as a varint at `p`; returns the byte after it. */
static inline uint8_t *pprof__put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/** Maps profile object ids (locations, functions, mappings) to their index
 * in the profile. Dense (one array slot per id) when ids are small, as Go
 * numbers them 1..n; an open-addressing table otherwise. */
struct pprof__idmap {
    uint32_t *dense;    /**< dense mode: index by id, UINT32_MAX when absent */
    size_t dense_len;   /**< dense mode: max id + 1 */
    uint64_t *keys;     /**< hash mode: ids, 0 = empty slot */
    uint32_t *vals;     /**< hash mode: indices */
    size_t mask;        /**< hash mode: slots - 1 */
    bool dense_scratch; /**< dense is the thread's scratch: not freed */
};

/** Builds a map of ids[i] -> i, its dense table in scratch buffer `scratch`
 * (a PPROF__S_* id) or, when negative, malloc'd. Returns 0, -EINVAL for an
 * id 0, -EEXIST for a repeated id, or -ENOMEM. `m` is always safe to pass
 * to _done(). */
int pprof__idmap_init(struct pprof__idmap *m, const uint64_t *ids, size_t n, int scratch);
/** Frees the map's storage. */
void pprof__idmap_done(struct pprof__idmap *m);

/** Index of `id`, or UINT32_MAX when absent. */
static inline uint32_t pprof__idmap_get(const struct pprof__idmap *m, uint64_t id)
{
    if (m->dense)
        return id < m->dense_len ? m->dense[id] : UINT32_MAX;
    if (!m->keys || id == 0)
        return UINT32_MAX;
    for (size_t i = (id * 0x9E3779B97F4A7C15ULL) >> 20 & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == id)
            return m->vals[i];
        if (m->keys[i] == 0)
            return UINT32_MAX;
    }
}

/** The decompressed size the state's need was found for (tests). */
size_t pprof__delta_need_raw(const struct pprof_delta *d);

/** Per-phase wall time of one pprof_delta_process() call, in nanoseconds
 * (benchmark instrumentation; "decode" is the wire scan and sample parse,
 * "delta" the state lookups and update, "encode" the output writer). */
struct pprof__phase_ns {
    uint64_t gunzip, decode, delta, encode, gzip;
};

/** pprof_delta_process() that also records phase timings into `ph` when it
 * is not NULL. */
int pprof__delta_process_timed(struct pprof_delta *d, const uint8_t *in, size_t in_len,
                               const struct pprof_limits *lim, uint8_t **out, size_t *out_len,
                               char *err, size_t errlen, struct pprof__phase_ns *ph);

/* An index of the keys of a call's entries (one per sample), by open
 * addressing: a slot holds an entry's index plus one, 0 = empty; the
 * entries' keys are the caller's array. At most half full, so a probe
 * looks at one or two slots. Keys are hashes of what a target sent, so a
 * slot is chosen by the key mixed with `salt`, a secret of the process: no
 * target can aim keys at one slot. */
struct pprof__index {
    uint32_t *slot;
    size_t mask;
    unsigned shift;
    uint64_t salt;
};

/* Slot bits for n keys: 2^bits >= 2n, and >= 4n up to 8192 slots; at
 * least 16 slots. */
unsigned pprof__index_bits(size_t n);
/* A random odd number, read once per process. */
uint64_t pprof__index_salt(void);

static inline size_t pprof__index_home(const struct pprof__index *ix, uint64_t key)
{
    return (size_t)(((key ^ ix->salt) * 0x9e3779b97f4a7c15ULL) >> ix->shift);
}

/* Adds entry i (key keys[i]) unless its key is in already: returns i, or
 * the entry that holds the key. */
static inline uint32_t pprof__index_add(struct pprof__index *ix, const uint64_t *keys, uint32_t i)
{
    size_t h = pprof__index_home(ix, keys[i]);

    for (;;) {
        uint32_t e = ix->slot[h];
        if (e == 0) {
            ix->slot[h] = i + 1;
            return i;
        }
        if (keys[e - 1] == keys[i])
            return e - 1;
        h = (h + 1) & ix->mask;
    }
}

/* The entry with `key`, or UINT32_MAX. */
static inline uint32_t pprof__index_find(const struct pprof__index *ix, const uint64_t *keys,
                                         uint64_t key)
{
    size_t h = pprof__index_home(ix, key);

    for (;;) {
        uint32_t e = ix->slot[h];
        if (e == 0)
            return UINT32_MAX;
        if (keys[e - 1] == key)
            return e - 1;
        h = (h + 1) & ix->mask;
    }
}

/** Per-thread scratch buffers (scratch.c), reused across calls on one
 * thread so that their pages stay mapped. One id per purpose: a call uses
 * each id for one buffer at a time. */
enum {
    PPROF__S_RAW, /**< gunzipped input */
    PPROF__S_OUT, /**< encoded output before gzip */
    PPROF__S_SPANS_SAMPLE,
    PPROF__S_SPANS_LOCATION,
    PPROF__S_SPANS_STRING,
    PPROF__S_ENTS,
    PPROF__S_KEYS,
    PPROF__S_INDEX,
    PPROF__S_FRESH,
    PPROF__S_SUMS,
    PPROF__S_PREVS,
    PPROF__S_STATEKEYS,
    PPROF__S_STATEVALS,
    PPROF__S_STRHASH,
    PPROF__S_STRUSED,
    PPROF__S_STRREFS,
    PPROF__S_LOCKEY,
    PPROF__S_LOCS,
    PPROF__S_LOCIDS,
    PPROF__S_LOCFN,
    PPROF__S_LBLVERDICT,
    /* Small per-call tables: from the scratch too, so that a delta of a
     * small profile makes no malloc() call but its output's. */
    PPROF__S_SPANS_TYPE,
    PPROF__S_SPANS_MAPPING,
    PPROF__S_SPANS_FUNCTION,
    PPROF__S_COMMENTS,
    PPROF__S_COLUMNS,
    PPROF__S_IDS,
    PPROF__S_FNTAB,
    PPROF__S_FNUSED,
    PPROF__S_MAPIDX,
    PPROF__S_FNIDX,
    PPROF__S_LOCIDX,
    PPROF__S_COUNT
};

/** Bytes of scratch all threads together keep between calls; a call whose
 * buffers would pass it frees all of them at its end. */
#define PPROF__SCRATCH_RETAIN ((size_t)48 << 20)

/** The calling thread's buffer `id` of at least `bytes` bytes (uninitialised;
 * with `keep`, the old contents are kept when it grows). NULL on OOM. Owned
 * by the thread: never freed by the caller. */
void *pprof__scratch(unsigned id, size_t bytes, bool keep);
/** Starts the calling thread's accounting of one call: `grant` bytes (0:
 * no limit), nothing charged yet. */
void pprof__acct_begin(size_t grant);
/** Charges `bytes` the call is about to allocate; false (and the call is
 * over its grant from then on) when that passes the grant. Without a
 * started call, or with grant 0, always true. */
bool pprof__acct_charge(size_t bytes);
/** Bytes the call has charged so far. */
size_t pprof__acct_charged(void);
/** Whether a charge of the call went past its grant. */
bool pprof__acct_over(void);
/** Ends the call's accounting: later charges are not limited. */
void pprof__acct_end(void);
/** End of a call: frees the thread's buffers if keeping them would pass
 * the process's retain cap. */
void pprof__scratch_release(void);
/** Bytes of scratch buffers the calling thread holds (tests). */
size_t pprof__scratch_bytes(void);
/** The thread's cached libdeflate compressor for `level`, or decompressor;
 * NULL on OOM. Owned by the thread. */
struct libdeflate_compressor *pprof__scratch_compressor(int level);
struct libdeflate_decompressor *pprof__scratch_decompressor(void);

/** Gunzips (or, for plain input, borrows) `in` within `max` bytes into the
 * thread's RAW scratch buffer; `*out` is that buffer or `in` itself, never to
 * be freed. Same return codes as pprof_gunzip(). */
int pprof__gunzip_scratch(const uint8_t *in, size_t in_len, size_t max, const uint8_t **out,
                          size_t *out_len);

/** pprof_compress() through the thread's RAW scratch into a malloc'd
 * buffer: for a delta, whose gunzipped input is dead by then and which
 * releases the scratch past its cap. */
int pprof__compress_cached(const uint8_t *in, size_t in_len, enum pprof_compression c,
                           uint8_t **out, size_t *out_len);
/** Room for any gzip of `n` bytes, by any encoder. */
size_t pprof__gzip_bound(size_t n);
/** Gzips `in` into `buf` as setting `c` (not NONE) says, with the thread's
 * cached encoders: the output's size, 0 if it did not fit or on OOM. */
size_t pprof__encode_into(enum pprof_compression c, const uint8_t *in, size_t in_len, uint8_t *buf,
                          size_t cap);
/** Tests: true makes every setting use libdeflate, as on a build without
 * ISA-L or a CPU without the SIMD igzip needs. */
extern bool pprof__igzip_off;

#ifdef PROFLET_HAVE_ISAL
struct isal_zstream;
/** The thread's igzip stream, set up for a new gzip stream at `level`
 * (0..3) with its level buffer; NULL on OOM. Owned by the thread. */
struct isal_zstream *pprof__scratch_igzip(int level);
#endif

/** Fills `err` with a formatted message and returns `code`. */
int pprof__err(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** A decoded profile whose every allocation lives in one arena. */
struct pprof__decoded {
    Perftools__Profiles__Profile *prof; /**< owned by the arena */
    struct pprof__arena *arena;
};

/** Decodes plain (already gunzipped) pprof bytes with protobuf-c through a
 * capped arena allocator, after checking the count caps, then validates
 * every reference (string indices, location/function/mapping ids, value
 * counts, depth and label caps). On success fills `out`, which the caller
 * releases with pprof__decoded_done(). */
int pprof__decode(const uint8_t *raw, size_t len, const struct pprof_limits *lim,
                  struct pprof__decoded *out, char *err, size_t errlen);

/** Releases a decoded profile (a zeroed one is fine). */
void pprof__decoded_done(struct pprof__decoded *dp);

/** Bytes the arena of `dp` has handed out (tests check the allocation cap). */
size_t pprof__decoded_arena_bytes(const struct pprof__decoded *dp);

/** Number of malloc calls the arena of `dp` made. */
size_t pprof__decoded_arena_chunks(const struct pprof__decoded *dp);

/* ------------------------------------------------------------------ fold */

/** One stack of a fold: `len` name indices from frames[off], root first. */
struct pprof__fold_stack {
    uint32_t off, len;
};

/** Profiles folded into stacks of function names (fold.c); flame.c builds
 * its trees from it. Every array is sized by capacity in `bytes`. */
struct pprof_fold {
    size_t max_bytes, bytes;
    int sides;
    char **types; /* "type/unit", n_types of them */
    size_t n_types;
    int default_type;
    char *period_type; /* "type/unit" of the first profile, or NULL */
    int64_t period, time_nanos;
    int64_t duration_nanos[PPROF_FOLD_SIDES];
    size_t profiles[PPROF_FOLD_SIDES];
    /* Names: NUL-terminated, one after another in name_data. */
    char *name_data;
    size_t name_len, name_cap;
    uint32_t *name_off;
    size_t n_names, cap_names;
    struct hashmap name_index; /* xxh3 of the name (probing on) -> index + 1 */
    /* Stacks: their frames, and per stack sides x n_types values. */
    uint32_t *frames;
    size_t n_frames, cap_frames;
    struct pprof__fold_stack *stacks;
    size_t n_stacks, cap_stacks;
    int64_t *values;
    struct hashmap stack_index; /* xxh3 of the frames (probing on) -> index + 1 */
};

/** The values of stack `i`, side `side`: n_types of them. */
static inline int64_t *pprof__fold_values(const struct pprof_fold *fd, size_t i, int side)
{
    return fd->values + ((size_t)i * (size_t)fd->sides + (size_t)side) * fd->n_types;
}

#endif
