/* Delta of cumulative pprof profiles (Go allocs, mutex, block), straight
 * from the wire format.
 *
 * Design. A delta changes only sample values, so nothing else is decoded
 * into structs: one pass over the top-level fields records where every
 * sample, location, function, mapping and string record lies; samples are
 * parsed just enough to hash their key and read their values; the output is
 * written by copying the referenced location, function, mapping and string
 * records as raw bytes, each sample as its raw location and label fields
 * plus freshly encoded values. Ids and string indices therefore never
 * change; unreferenced strings are written empty so indices hold, and the
 * table is cut after the last referenced one.
 *
 * Key of a sample: its location addresses in stack order (a hash of the
 * function name, file and line of each line instead, for locations whose
 * address is 0 as non-Go producers write them) plus an order-independent
 * sum of its label hashes, labels compared by content (the heap `bytes`
 * label included, which makes Go's per-sample heap scaling constant per key
 * so differencing scaled values is exact). A key is a 64-bit hash: a sum
 * of the mixed per-location keys times random weights by depth (see
 * add_locs()), finished with the labels' hash; strings are hashed with
 * xxh3, once per string per profile. Location keys are looked up by id in a
 * dense array when ids are dense, as Go writes them.
 *
 * State. Per (target, profile type), one malloc'd block: the keys of the
 * last profile, eight bytes each, then the cumulative values of each key in
 * the same order as varints (its size per stack, measured, is in
 * docs/design.md "Deltas"). A call parses every
 * sample into a per-call entry (key, values), then walks the state in its
 * order and finds each old key's entry: a key found keeps its place in the
 * new state, with the new values, and its entry gets its output values
 * there and then; the keys new to the state follow, in sample order. Go
 * writes a profile's samples in the order of its last one, new stacks
 * first, so the walk finds the entries by going on through the samples,
 * and only those met out of that order are indexed (match_in_order()).
 * Samples in any other order are all indexed by key, in a per-call
 * open-addressing table (a key met again is summed into its first sample).
 * No sort, nothing to prune, and the state holds only what the next call
 * reads.
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
 * keeps the need for the next admission (pprof_delta_need()). */
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

#include "pprof/internal.h"

/* A restart is declared when more than this fraction of the keys found in
 * both profiles went down. */
#define RESET_DECREASE_NUM 1
#define RESET_DECREASE_DEN 2

enum { F_SAMPLE_TYPE = 1, F_SAMPLE, F_MAPPING, F_LOCATION, F_FUNCTION, F_STRING,
       F_DROP_FRAMES, F_KEEP_FRAMES, F_TIME, F_DURATION, F_PERIOD_TYPE, F_PERIOD,
       F_COMMENT, F_DEFAULT_SAMPLE_TYPE, F_DOC_URL };

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
    uint32_t vbytes; /* bytes of the sample's value fields, tags included */
    uint32_t out_vlen; /* encode(): bytes of its output values, 0 = dropped */
    /* [voff, vend): the sample's only value field, tag included, relative
     * to the sample's content; vend = 0 when it has several (or none). */
    uint32_t voff, vend;
    bool matched;      /* the key was in the state */
    bool dup;          /* an earlier sample has the same key: summed into it */
    bool fresh;        /* in_order: not met in the state's order (match_in_order()) */
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
    bool mark_locs;    /* encode(): loc.used is to be marked sample by sample */
    /* The label the sample scan met last: its string indices. */
    uint64_t last_label_str[3];
    size_t loc_by_id; /* by-id mode: entries in locs, else 0 */
    uint64_t *loc_ids; /* id of each location, by index */
    /* The function of each location's only line, by index, so that encode()
     * need not parse the lines again; LOC_FN_NONE without one,
     * LOC_FN_SEVERAL for inlined frames (parsed again). */
    uint32_t *loc_fn;

    size_t ncols;
    int *cum_of_col; /* column -> cumulative index, COL_PLAIN or COL_DROPPED */
    size_t ncols_out;  /* columns the output keeps */
    unsigned ncum;
    uint64_t types_fp, mapping_fp;

    struct ent *ents; /* one per sample, in sample order */
    size_t n_ents, matched, decreased;
    uint64_t *keys;   /* key of each entry */
    struct pprof__index index; /* the entries by key, unless in_order */
    bool in_order;             /* see match_in_order() */
    uint32_t *fresh; /* in_order: the fresh entries, in sample order */
    size_t n_fresh;
    /* in_order: a bit per fresh key's top bits, so that the state walk
     * looks up few of its keys in the index (which outgrows the caches). */
    uint64_t fresh_bits[1u << (FRESH_BITS - 6)];
    size_t n_unique; /* the call's keys, at most: sizes the new state's scratch */
    int64_t *sums;  /* n_ents x ncols */
    int64_t *prev; /* ncum: the previous values of one key */

    uint8_t *out;
    size_t out_len;
    bool out_scratch; /* out is the thread's scratch, not malloc'd */
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

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

/* Location ids below this take at most two bytes as varints, so a by-id
 * table this large holds every id the four-lane check can see. */
#define LOC_FAST_IDS 16384
#define LANES16_HIGH 0x8000800080008000ULL

/* Stack hash weights by depth (see add_locs()); deeper frames, past the
 * default depth cap, compute theirs. Filled once per process. */
#define POS_WEIGHTS 4096
static uint64_t pos_weight[POS_WEIGHTS];

/* Four location ids at once, by one byte shuffle (SSSE3's pshufb, checked
 * at run time; elsewhere stacks are read two ids at a time): a table
 * indexed by the continuation bits of the next bytes of a stack gives the
 * bytes four ids take (0: one of them is longer than the reader takes)
 * and the shuffle that puts each id's bytes in a lane of its own, the
 * lanes' other bytes zeroed (0x80 in a control byte). Ids of one or two
 * bytes from eight bytes into 16-bit lanes; ids of one to three bytes
 * from twelve bytes into 32-bit lanes (68 KB of tables, filled once). */
static uint64_t ids2_shuffle[256];
static uint8_t ids2_len[256];
static uint8_t ids3_shuffle[4096][16] __attribute__((aligned(16)));
static uint8_t ids3_len[4096];

/* Fills the tables of a reader of four ids of at most `maxw` bytes from
 * `nbytes` bytes into lanes of `lane_bytes`: per pattern m, `len[m]` and
 * the 4 x lane_bytes control bytes at `shuffle` + m x 4 x lane_bytes. */
static void ids_table_fill(unsigned nbytes, unsigned maxw, unsigned lane_bytes, uint8_t *shuffle,
                           uint8_t *len)
{
    for (unsigned m = 0; m < 1u << nbytes; m++) {
        uint8_t *ctrl = shuffle + (size_t)m * 4 * lane_bytes;
        unsigned pos = 0, j;

        memset(ctrl, 0x80, 4 * lane_bytes);
        for (j = 0; j < 4; j++) {
            unsigned w = 1;
            while (pos + w <= nbytes && m >> (pos + w - 1) & 1)
                w++;
            if (w > maxw || pos + w > nbytes)
                break; /* longer, or cut */
            for (unsigned t = 0; t < w; t++)
                ctrl[lane_bytes * j + t] = (uint8_t)(pos + t);
            pos += w;
        }
        len[m] = j == 4 ? (uint8_t)pos : 0;
    }
}

#if defined(__x86_64__)
static bool have_pshufb;

static inline __m128i shuffle_bytes(__m128i v, __m128i ctrl)
{
    /* Inline assembly, so that the rest of the file keeps the baseline
     * instruction set; run only when have_pshufb. */
    __asm__("pshufb %1, %0" : "+x"(v) : "x"(ctrl));
    return v;
}

/* The continuation bits of eight bytes, byte i's in bit i. */
static inline unsigned continuation_bits(uint64_t w)
{
    return (unsigned)(((w >> 7 & 0x0101010101010101ULL) * 0x0102040810204080ULL) >> 56);
}

/* Four ids of one or two bytes from the eight bytes `w`, each in a 16-bit
 * lane of `*x` with its two 7-bit groups unjoined: returns the bytes they
 * take, or 0. */
static inline unsigned four_ids2(uint64_t w, uint64_t *x)
{
    unsigned cb = continuation_bits(w);
    __m128i v = shuffle_bytes(_mm_cvtsi64_si128((long long)w),
                              _mm_cvtsi64_si128((long long)ids2_shuffle[cb]));

    *x = (uint64_t)_mm_cvtsi128_si64(v);
    return ids2_len[cb];
}

/* Four ids of one to three bytes at `q` (16 bytes readable) into `ids`,
 * when they end within `left` bytes and are all below `nid`: returns the
 * bytes they take, or 0. */
static inline unsigned four_ids3(const uint8_t *q, size_t left, uint32_t nid, uint64_t ids[4])
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
    unsigned cb = (unsigned)_mm_movemask_epi8(v) & 0xfff, len = ids3_len[cb];

    if (!len || len > left)
        return 0;
    v = shuffle_bytes(v, _mm_load_si128((const __m128i *)(const void *)ids3_shuffle[cb]));
    __m128i x = _mm_or_si128(
        _mm_or_si128(_mm_and_si128(v, _mm_set1_epi32(0x7f)),
                     _mm_and_si128(_mm_srli_epi32(v, 1), _mm_set1_epi32(0x3f80))),
        _mm_and_si128(_mm_srli_epi32(v, 2), _mm_set1_epi32(0x1fc000)));
    if (_mm_movemask_epi8(_mm_cmpgt_epi32(x, _mm_set1_epi32((int)nid - 1))))
        return 0;
    uint64_t lo = (uint64_t)_mm_cvtsi128_si64(x);
    uint64_t hi = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(x, x));
    ids[0] = (uint32_t)lo;
    ids[1] = lo >> 32;
    ids[2] = (uint32_t)hi;
    ids[3] = hi >> 32;
    return len;
}
#else
static const bool have_pshufb = false;

static inline unsigned four_ids2(uint64_t w, uint64_t *x)
{
    (void)w, (void)x;
    return 0;
}

static inline unsigned four_ids3(const uint8_t *q, size_t left, uint32_t nid, uint64_t ids[4])
{
    (void)q, (void)left, (void)nid, (void)ids;
    return 0;
}
#endif

static void ids_tables_init(void)
{
    uint8_t ctrl[256][8];

    ids_table_fill(8, 2, 2, &ctrl[0][0], ids2_len);
    for (unsigned m = 0; m < 256; m++)
        memcpy(&ids2_shuffle[m], ctrl[m], 8);
    ids_table_fill(12, 3, 4, &ids3_shuffle[0][0], ids3_len);
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_pshufb = __builtin_cpu_supports("ssse3");
#endif
}

/* The process's tables: the weights, the shuffle readers'. */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
    for (size_t i = 0; i < POS_WEIGHTS; i++)
        pos_weight[i] = mix64(i) | 1;
    ids_tables_init();
}

/* True when field `f` is one of the scalar fields 1..`last` of its message
 * but not varint-encoded. protobuf-c refuses those, and so must we, or the
 * output could be something the decoder rejects. */
static bool bad_scalar(const struct pprof__field *f, uint32_t last)
{
    return f->num <= last && f->wt != PPROF__WT_VARINT;
}

/* Reads a message made of scalar fields into v[1..keep] (by field number;
 * later duplicates win, as protobuf-c). Fields up to `last` must be varints.
 * Returns 0, or -1 for a malformed message. */
static int read_scalars(const uint8_t *p, const uint8_t *end, uint32_t last, uint64_t *v,
                        uint32_t keep)
{
    struct pprof__field f;
    int r;

    while ((r = pprof__next_field(&p, end, &f)) > 0) {
        if (bad_scalar(&f, last))
            return -1;
        if (f.num >= 1 && f.num <= keep)
            v[f.num] = f.val;
    }
    return r < 0 ? -1 : 0;
}

static bool str_ok(const struct ctx *c, int64_t i)
{
    return i >= 0 && (uint64_t)i < c->n[F_STRING];
}

static uint64_t str_hash(struct ctx *c, uint64_t i)
{
    uint64_t h = c->strhash[i];

    if (h == 0) {
        const struct span *s = &c->spans[F_STRING][i];
        h = XXH3_64bits(c->raw + s->off, s->len) | 1;
        c->strhash[i] = h;
    }
    return h;
}

static bool str_eq(const struct ctx *c, uint64_t i, const char *lit)
{
    const struct span *s = &c->spans[F_STRING][i];
    size_t n = strlen(lit);

    return s->len == n && memcmp(c->raw + s->off, lit, n) == 0;
}

static void mark_str(struct ctx *c, uint64_t i)
{
    c->str_used[i] = 1;
    if (i > c->max_str_used)
        c->max_str_used = i;
}

/* ---- state ---- */

static void state_clear(struct pprof_delta *d)
{
    free(d->state);
    d->state = NULL;
    d->state_len = 0;
    d->n = 0;
    d->seeded = false;
}

/* ---- pass 1: top-level records ---- */

static const unsigned span_scratch[F_STRING + 1] = {
    [F_SAMPLE_TYPE] = PPROF__S_SPANS_TYPE,   [F_SAMPLE] = PPROF__S_SPANS_SAMPLE,
    [F_MAPPING] = PPROF__S_SPANS_MAPPING,    [F_LOCATION] = PPROF__S_SPANS_LOCATION,
    [F_FUNCTION] = PPROF__S_SPANS_FUNCTION, [F_STRING] = PPROF__S_SPANS_STRING,
};

/* Cap on the records of kind `k` (sample types and mappings have none of
 * their own: the profile's size bounds them). */
static size_t record_cap(const struct ctx *c, int k)
{
    switch (k) {
    case F_SAMPLE: return c->lim->max_samples;
    case F_LOCATION: return c->lim->max_locations;
    case F_FUNCTION: return c->lim->max_functions;
    case F_STRING: return c->lim->max_strings;
    default: return SIZE_MAX;
    }
}

/* The error of a profile past a cap, found by the record scan. Only then
 * are all records counted, so that the error names how many there are
 * (and a malformed profile is reported as such, whichever comes first). */
static int cap_error(struct ctx *c)
{
    const uint8_t *p = c->raw, *end = c->raw + c->len;
    struct pprof__field f;
    size_t n[F_STRING + 1] = {0}, comments = 0;
    int r;

    while ((r = pprof__next_field(&p, end, &f)) > 0) {
        if (f.num <= F_STRING) {
            if (f.wt != PPROF__WT_LEN)
                return corrupt(c, "wrong wire type for a repeated message");
            n[f.num]++;
        } else if (f.num == F_COMMENT) {
            comments += f.wt == PPROF__WT_LEN ? f.len : 1; /* a varint takes >= 1 byte */
        }
    }
    if (r < 0)
        return corrupt(c, "bad protobuf encoding");
    static const char *const what[F_STRING + 1] = {
        [F_SAMPLE] = "samples", [F_LOCATION] = "locations", [F_FUNCTION] = "functions",
        [F_STRING] = "strings"};
    for (int k = F_SAMPLE; k <= F_STRING; k++)
        if (what[k] && n[k] > record_cap(c, k))
            return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                              "profile too large: %zu %s > cap %zu", n[k], what[k],
                              record_cap(c, k));
    return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                      "profile too large: %zu comments > cap %zu", comments,
                      c->lim->max_strings);
}

/* Room for one more record of kind `k`: its span table, the thread's
 * scratch, doubles (contents kept), never past the kind's cap. */
static int grow_spans(struct ctx *c, int k, size_t *room)
{
    size_t cap = record_cap(c, k), want = room[k] ? 2 * room[k] : 256;

    if (c->n[k] >= cap)
        return cap_error(c);
    if (want > cap)
        want = cap;
    c->spans[k] = pprof__scratch(span_scratch[k], want * sizeof(struct span), true);
    if (!c->spans[k])
        return -ENOMEM;
    room[k] = want;
    return 0;
}

static int push_comment(struct ctx *c, size_t *room, uint64_t v)
{
    if (c->n_comments == *room) {
        size_t want = *room ? 2 * *room : 16;
        if (c->n_comments >= c->lim->max_strings)
            return cap_error(c);
        if (want > c->lim->max_strings)
            want = c->lim->max_strings;
        c->comments = pprof__scratch(PPROF__S_COMMENTS, want * sizeof(int64_t), true);
        if (!c->comments)
            return -ENOMEM;
        *room = want;
    }
    c->comments[c->n_comments++] = (int64_t)v;
    return 0;
}

/* How far ahead of the record scan the raw profile's lines are fetched,
 * in profiles of more than SCAN_PREFETCH_FROM bytes (a smaller one is still
 * in L2 after its gunzip, and fetching it again costs std-heap's scan 10 %). */
#define SCAN_PREFETCH 2048
#define SCAN_PREFETCH_FROM (256 * 1024)

/* A top-level field of scan_top() other than a table's record: the period
 * type, a comment, a scalar, or an unknown field (dropped). */
static int scan_top_field(struct ctx *c, const struct pprof__field *f, size_t *comment_room)
{
    int rc;

    if (f->num == F_PERIOD_TYPE) {
        if (f->wt != PPROF__WT_LEN)
            return corrupt(c, "wrong wire type for period_type");
        c->has_period_type = true;
        c->period_type.off = (uint32_t)(f->data - c->raw);
        c->period_type.len = (uint32_t)f->len;
        return 0;
    }
    if (f->num == F_COMMENT) {
        if (f->wt == PPROF__WT_LEN) {
            const uint8_t *q = f->data, *qe = f->data + f->len;
            uint64_t v;
            while (q < qe) {
                if (pprof__varint(&q, qe, &v) < 0)
                    return corrupt(c, "bad packed comment");
                if ((rc = push_comment(c, comment_room, v)) < 0)
                    return rc;
            }
            return 0;
        }
        if (f->wt == PPROF__WT_VARINT)
            return push_comment(c, comment_room, f->val);
        return corrupt(c, "wrong wire type for comment");
    }
    if (f->num > F_DOC_URL)
        return 0; /* unknown field: dropped from the output */
    if (f->wt != PPROF__WT_VARINT)
        return corrupt(c, "wrong wire type for a scalar field");
    switch (f->num) {
    case F_DROP_FRAMES: c->drop_frames = (int64_t)f->val; break;
    case F_KEEP_FRAMES: c->keep_frames = (int64_t)f->val; break;
    case F_TIME: c->time_nanos = (int64_t)f->val; break;
    case F_DURATION: c->duration_nanos = (int64_t)f->val; break;
    case F_PERIOD: c->period = (int64_t)f->val; break;
    case F_DEFAULT_SAMPLE_TYPE: c->default_sample_type = (int64_t)f->val; break;
    case F_DOC_URL: c->doc_url = (int64_t)f->val; break;
    }
    return 0;
}

/* One pass over the top-level fields: where each record lies, the scalars
 * and the comments. The span tables grow as records come, within their
 * caps. Each record's place is known only once the one before is read, and
 * a large profile has left L2 by then (its gunzip went through more than
 * L2 holds), so the lines ahead are fetched as the scan goes: the hardware
 * prefetcher alone leaves every record's first byte waiting on memory
 * (a third of the scan of heap-wide). */
static int scan_top(struct ctx *c)
{
    const uint8_t *p = c->raw, *end = c->raw + c->len;
    struct pprof__field f;
    size_t room[F_STRING + 1] = {0}, comment_room = 0;
    int r, rc;

    if (c->len > UINT32_MAX)
        return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                          "profile too large: %zu bytes > 4 GiB", c->len);
    size_t ahead = c->len > SCAN_PREFETCH_FROM ? 0 : c->len;
    for (;;) {
        const uint8_t *start = p;
        size_t k, off, len;

        /* A record of one of the tables with a one-byte tag and length, as
         * nearly all of them are: read without the general field reader,
         * whose checks and stores the chain from one record to the next
         * would wait on. */
        if (end - p >= 2 && (p[0] & 7) == PPROF__WT_LEN && (unsigned)(p[0] >> 3) - 1 < F_STRING &&
            p[1] < 0x80 && p[1] <= end - p - 2) {
            k = p[0] >> 3;
            off = (size_t)(p + 2 - c->raw);
            len = p[1];
            p += 2 + len;
        } else {
            if ((r = pprof__next_field(&p, end, &f)) <= 0)
                break;
            /* Scalars and comments: few, their lines fetched with the next
             * record's. */
            if (f.num > F_STRING) {
                if ((rc = scan_top_field(c, &f, &comment_room)) < 0)
                    return rc;
                continue;
            }
            if (f.wt != PPROF__WT_LEN)
                return corrupt(c, "wrong wire type for a repeated message");
            k = f.num;
            off = (size_t)(f.data - c->raw);
            len = f.len;
        }
        for (; ahead < (size_t)(p - c->raw) + SCAN_PREFETCH && ahead < c->len; ahead += 64)
            __builtin_prefetch(c->raw + ahead);
        if (__builtin_expect(c->n[k] == room[k], 0) && (rc = grow_spans(c, (int)k, room)) < 0)
            return rc;
        struct span *s = &c->spans[k][c->n[k]++];
        s->off = (uint32_t)off;
        s->len = (uint32_t)len;
        if (k == F_SAMPLE)
            c->samples_in += (size_t)(p - start);
    }
    if (r < 0)
        return corrupt(c, "bad protobuf encoding");
    /* Tables of kinds the profile lacks: one entry, so they are not NULL. */
    for (int k = F_SAMPLE_TYPE; k <= F_STRING; k++)
        if (room[k] == 0 && !(c->spans[k] = pprof__scratch(span_scratch[k], sizeof(struct span),
                                                           false)))
            return -ENOMEM;
    if (comment_room == 0 &&
        !(c->comments = pprof__scratch(PPROF__S_COMMENTS, sizeof(int64_t), false)))
        return -ENOMEM;
    return 0;
}

/* ---- strings, sample types, mappings, functions, locations ---- */

static int scan_strings(struct ctx *c)
{
    size_t n = c->n[F_STRING];

    if (n == 0 || c->spans[F_STRING][0].len != 0)
        return corrupt(c, "string_table[0] must be empty");
    c->strhash = pprof__scratch(PPROF__S_STRHASH, n * sizeof(uint64_t), false);
    c->str_used = pprof__scratch(PPROF__S_STRUSED, n, false);
    c->str_lblrefs = pprof__scratch(PPROF__S_STRREFS, n * sizeof(uint32_t), false);
    if (!c->strhash || !c->str_used || !c->str_lblrefs)
        return -ENOMEM;
    memset(c->strhash, 0, n * sizeof(uint64_t));
    memset(c->str_used, 0, n);
    memset(c->str_lblrefs, 0, n * sizeof(uint32_t));
    mark_str(c, 0);
    for (size_t i = 0; i < c->n_comments; i++) {
        if (!str_ok(c, c->comments[i]))
            return corrupt(c, "bad comment string");
        mark_str(c, (uint64_t)c->comments[i]);
    }
    if (!str_ok(c, c->drop_frames) || !str_ok(c, c->keep_frames) ||
        !str_ok(c, c->default_sample_type) || !str_ok(c, c->doc_url))
        return corrupt(c, "bad string index");
    mark_str(c, (uint64_t)c->drop_frames);
    mark_str(c, (uint64_t)c->keep_frames);
    mark_str(c, (uint64_t)c->default_sample_type);
    mark_str(c, (uint64_t)c->doc_url);
    return 0;
}

/* Reads a ValueType (sample_type, period_type) and marks its strings. */
static int value_type(struct ctx *c, const struct span *s, uint64_t *type, uint64_t *unit)
{
    const uint8_t *p = c->raw + s->off;
    uint64_t v[3] = {0};

    if (read_scalars(p, p + s->len, 2, v, 2) < 0 || !str_ok(c, (int64_t)v[1]) ||
        !str_ok(c, (int64_t)v[2]))
        return corrupt(c, "bad value type");
    *type = v[1];
    *unit = v[2];
    mark_str(c, *type);
    mark_str(c, *unit);
    return 0;
}

static bool is_cumulative(struct ctx *c, enum pprof_delta_kind kind, uint64_t type, uint64_t unit)
{
    if (kind == PPROF_DELTA_NONE)
        return false;
    if (kind == PPROF_DELTA_MEMORY)
        return (str_eq(c, type, "alloc_objects") && str_eq(c, unit, "count")) ||
               (str_eq(c, type, "alloc_space") && str_eq(c, unit, "bytes"));
    return (str_eq(c, type, "contentions") && str_eq(c, unit, "count")) ||
           (str_eq(c, type, "delay") && str_eq(c, unit, "nanoseconds"));
}

/* Whether the filter keeps the sample type whose name is string `type`. */
static bool type_kept(const struct ctx *c, uint64_t type)
{
    const struct pprof_filter *f = c->d->filter;
    bool listed = false;

    if (!f || !f->n_types)
        return true;
    for (size_t i = 0; i < f->n_types && !listed; i++)
        listed = str_eq(c, type, f->types[i]);
    return listed == f->types_keep;
}

static int scan_types(struct ctx *c)
{
    uint64_t type, unit;
    int rc;

    c->ncols = c->n[F_SAMPLE_TYPE];
    /* Every sample holds a value of at least a byte per column: checked
     * here, the per-sample tables (samples x columns) stay within a few
     * times the input, however many columns a hostile profile declares. */
    if (c->ncols && c->n[F_SAMPLE] > c->samples_in / c->ncols)
        return corrupt(c, "sample has fewer values than sample types");
    c->cum_of_col = pprof__scratch(PPROF__S_COLUMNS, (c->ncols ? c->ncols : 1) * sizeof(int), false);
    if (!c->cum_of_col)
        return -ENOMEM;
    c->types_fp = 0x51ed27;
    for (size_t i = 0; i < c->ncols; i++) {
        if ((rc = value_type(c, &c->spans[F_SAMPLE_TYPE][i], &type, &unit)) < 0)
            return rc;
        c->types_fp = mix64(c->types_fp ^ str_hash(c, type)) + str_hash(c, unit);
        if (!type_kept(c, type))
            c->cum_of_col[i] = COL_DROPPED;
        else
            c->cum_of_col[i] = is_cumulative(c, c->d->kind, type, unit) ? (int)c->ncum++ : COL_PLAIN;
        c->ncols_out += c->cum_of_col[i] != COL_DROPPED;
    }
    if (c->ncols && !c->ncols_out)
        return pprof__err(c->err, c->errlen, PPROF_EFILTER,
                          "the filter drops every sample type of the profile");
    if (c->has_period_type && (rc = value_type(c, &c->period_type, &type, &unit)) < 0)
        return rc;
    return 0;
}

/* Builds the id map of one table once its records were read (rc: how
 * that went); a zero or repeated id makes the profile malformed. */
static int build_idmap(struct ctx *c, int rc, struct pprof__idmap *m, const uint64_t *ids,
                       size_t n, int scratch, const char *what)
{
    if (rc == 0 && (rc = pprof__idmap_init(m, ids, n, scratch)) < 0 && rc != -ENOMEM)
        rc = pprof__err(c->err, c->errlen, PPROF_ECORRUPT,
                        "malformed profile: %s id 0 or repeated", what);
    return rc;
}

static int scan_mappings(struct ctx *c)
{
    size_t n = c->n[F_MAPPING];
    uint64_t *ids = pprof__scratch(PPROF__S_IDS, (n ? n : 1) * sizeof(uint64_t), false);
    int rc = 0;

    if (!ids)
        return -ENOMEM;
    c->mapping_fp = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct span *s = &c->spans[F_MAPPING][i];
        const uint8_t *p = c->raw + s->off;
        uint64_t v[7] = {0}; /* by field number 1..6 */

        if (read_scalars(p, p + s->len, 10, v, 6) < 0 || !str_ok(c, (int64_t)v[5]) ||
            !str_ok(c, (int64_t)v[6])) {
            rc = corrupt(c, "bad mapping");
            break;
        }
        mark_str(c, v[5]);
        mark_str(c, v[6]);
        ids[i] = v[1];
        if (i == 0) /* the main binary: a restart with ASLR or a new build changes it */
            c->mapping_fp = mix64(mix64(mix64(v[2] ^ 0x9e37) ^ v[3]) ^ v[4]) ^
                            str_hash(c, v[5]) ^ mix64(str_hash(c, v[6]));
    }
    return build_idmap(c, rc, &c->mapmap, ids, n, PPROF__S_MAPIDX, "mapping");
}

static int scan_functions(struct ctx *c)
{
    size_t n = c->n[F_FUNCTION];
    uint64_t *ids = pprof__scratch(PPROF__S_IDS, (n ? n : 1) * sizeof(uint64_t), false);
    int rc = 0;

    c->fn_name = pprof__scratch(PPROF__S_FNTAB, 3 * (n ? n : 1) * sizeof(uint32_t), false);
    c->fn_used = pprof__scratch(PPROF__S_FNUSED, n ? n : 1, false);
    if (!ids || !c->fn_name || !c->fn_used)
        return -ENOMEM;
    c->fn_sys = c->fn_name + n;
    c->fn_file = c->fn_sys + n;
    memset(c->fn_used, 0, n);
    for (size_t i = 0; i < n; i++) {
        const struct span *s = &c->spans[F_FUNCTION][i];
        const uint8_t *p = c->raw + s->off;
        uint64_t v[5] = {0};

        if (read_scalars(p, p + s->len, 5, v, 4) < 0 || !str_ok(c, (int64_t)v[2]) ||
            !str_ok(c, (int64_t)v[3]) ||
            !str_ok(c, (int64_t)v[4])) {
            rc = corrupt(c, "bad function");
            break;
        }
        ids[i] = v[1];
        c->fn_name[i] = (uint32_t)v[2];
        c->fn_sys[i] = (uint32_t)v[3];
        c->fn_file[i] = (uint32_t)v[4];
    }
    return build_idmap(c, rc, &c->fnmap, ids, n, PPROF__S_FNIDX, "function");
}

/* Checks one Line of a location and, with `key`, folds its function's
 * name and file and its line number into the location's symbolic key; with
 * `fi_out`, gives the index of its function (LOC_FN_NONE for none). */
static int scan_line(struct ctx *c, const struct pprof__field *f, uint64_t *key,
                     uint32_t *fi_out)
{
    const uint8_t *q = f->data, *qe = f->data + f->len;
    struct pprof__field g;
    uint64_t fid = 0, line = 0;
    uint32_t fi;
    int r;

    while ((r = pprof__next_field(&q, qe, &g)) > 0) {
        if (bad_scalar(&g, 3))
            return corrupt(c, "bad line");
        if (g.num == 1)
            fid = g.val;
        else if (g.num == 2)
            line = g.val;
    }
    if (r < 0)
        return corrupt(c, "bad line");
    if (fid == 0) {
        if (key)
            *key = mix64(*key ^ line);
        if (fi_out)
            *fi_out = LOC_FN_NONE;
        return 0;
    }
    if ((fi = pprof__idmap_get(&c->fnmap, fid)) == UINT32_MAX)
        return corrupt(c, "line references unknown function");
    if (fi_out)
        *fi_out = fi;
    if (key)
        *key = mix64(*key ^ str_hash(c, c->fn_name[fi])) +
               mix64(str_hash(c, c->fn_file[fi]) ^ line);
    return 0;
}

/* The function id of a Line of `len` bytes at `q` laid out as Go writes
 * it: function_id then line, each a varint of one to three bytes. Both
 * widths mix in a profile (a function id and a line number take one byte
 * or two about as often), so they are found from one eight-byte load
 * without a branch on either; the line number itself is only checked to
 * end the Line. False for any other layout, or a Line too close to the end
 * of the profile for the load, which the caller then reads field by
 * field. */
static inline bool go_line_function(const struct ctx *c, const uint8_t *q, unsigned len,
                                    uint64_t *fid)
{
    uint64_t w, tag, ends;
    unsigned used, start;

    if (len > 8 || c->raw + c->len - q < 8)
        return false;
    memcpy(&w, q, 8);
    /* The tag of the line number read as if it were a second varint. */
    used = pprof__two_varints3(w >> 8, fid, &tag);
    start = 1 + used;
    if ((w & 0xff) != 0x08 || used == 0 || tag != 0x10 || start >= len)
        return false;
    /* The line number's varint ends at the Line's last byte. */
    ends = (~w & 0x8080808080808080ULL) >> (8 * start);
    return ends && (unsigned)__builtin_ctzll(ends) == 8 * (len - 1 - start) + 7;
}

/* pprof__varint() for a location's address, which takes three to six
 * bytes (a program's text, mapped low or as a PIE): from one eight-byte
 * load, its 7-bit groups joined pairwise, instead of a loop over them. */
static inline int read_address(const uint8_t **pp, const uint8_t *end, uint64_t *addr)
{
    const uint8_t *p = *pp;
    uint64_t w, x, ends;
    unsigned e;

    if (end - p < 8)
        return pprof__varint(pp, end, addr);
    memcpy(&w, p, 8);
    ends = ~w & 0x8080808080808080ULL;
    if (ends == 0)
        return pprof__varint(pp, end, addr);
    e = (unsigned)__builtin_ctzll(ends);
    x = (w & ((2ULL << e) - 1)) & 0x7f7f7f7f7f7f7f7fULL;
    x = (x & 0x007f007f007f007fULL) | (x >> 1 & 0x3f803f803f803f80ULL);
    x = (x & 0x00003fff00003fffULL) | (x >> 2 & 0x0fffc0000fffc000ULL);
    *addr = (x & 0x000000000fffffffULL) | (x >> 4 & 0x00fffffff0000000ULL);
    *pp = p + (e + 1) / 8;
    return 0;
}

/* Reads a location laid out as Go writes it: id, address, its lines (each
 * of a one-byte length, holding a function_id and a line number), then
 * mapping_id (or the mapping_id after the id, as other writers order the
 * fields). Its tags are then single bytes at known places, and the generic
 * field loop is not needed. Returns false for any other layout (or an
 * unknown function, an address of 0, a bad varint), which scan_locations()
 * then reads field by field and judges. */
static bool read_go_location(const struct ctx *c, const uint8_t *p, const uint8_t *end,
                             uint64_t *id, uint64_t *mapping, uint64_t *addr, uint32_t *fn,
                             unsigned *nlines)
{
    uint64_t fid, line;

    if (p == end || *p != 0x08 || (p++, pprof__varint(&p, end, id) < 0))
        return false;
    if (p < end && *p == 0x10 && (p++, pprof__varint(&p, end, mapping) < 0))
        return false;
    if (p == end || *p != 0x18 || (p++, read_address(&p, end, addr) < 0) || *addr == 0)
        return false;
    while (p < end) {
        if (*p == 0x10 && *mapping == 0) /* Go writes the mapping last */
            return (p++, pprof__varint(&p, end, mapping) == 0) && p == end && *mapping != 0;
        if (end - p < 2 || p[0] != 0x22 || p[1] >= 0x80 || p[1] > end - p - 2)
            return false;
        const uint8_t *q = p + 2, *qe = q + p[1];
        if (!go_line_function(c, q, p[1], &fid)) {
            fid = 0;
            if (q < qe && *q == 0x08 && (q++, pprof__varint(&q, qe, &fid) < 0))
                return false;
            if (q < qe && *q == 0x10 && (q++, pprof__varint(&q, qe, &line) < 0))
                return false;
            if (q != qe)
                return false;
        }
        if (fid == 0)
            *fn = LOC_FN_NONE;
        else if ((*fn = pprof__idmap_get(&c->fnmap, fid)) == UINT32_MAX)
            return false;
        ++*nlines;
        p = qe;
    }
    return true;
}

static int scan_locations(struct ctx *c)
{
    size_t n = c->n[F_LOCATION];
    uint64_t *ids = pprof__scratch(PPROF__S_LOCIDS, (n ? n : 1) * sizeof(uint64_t), false);
    uint64_t *keys = pprof__scratch(PPROF__S_LOCKEY, (n ? n : 1) * sizeof(uint64_t), false);
    int rc = 0;

    c->loc_ids = ids;
    c->loc_fn = pprof__scratch(PPROF__S_LOCFN, (n ? n : 1) * sizeof(uint32_t), false);
    if (!ids || !keys || !c->loc_fn)
        return -ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct span *s = &c->spans[F_LOCATION][i];
        const uint8_t *p = c->raw + s->off, *end = p + s->len;
        uint64_t id = 0, mapping = 0, addr = 0;
        uint64_t fallback = 0x10ca7e;
        uint32_t fn = LOC_FN_NONE;
        unsigned nlines = 0;
        struct pprof__field f;
        int r = 0;

        if (read_go_location(c, p, end, &id, &mapping, &addr, &fn, &nlines)) {
            p = end;
        } else {
            id = mapping = addr = 0;
            fn = LOC_FN_NONE;
            nlines = 0;
        }
        while (p < end && (r = pprof__next_field(&p, end, &f)) > 0) {
            if (f.num == 4 && f.wt == PPROF__WT_LEN) {
                if ((r = scan_line(c, &f, NULL, &fn)) < 0)
                    return r;
                nlines++;
            } else if (f.num == 4 || (f.num <= 5 && f.wt != PPROF__WT_VARINT)) {
                r = -1;
                break;
            } else {
                if (f.num == 1)
                    id = f.val;
                else if (f.num == 2)
                    mapping = f.val;
                else if (f.num == 3)
                    addr = f.val;
            }
        }
        if (r == 0 && addr == 0) {
            /* The symbolic key, needed only without an address (Go always
             * writes one): the lines again, checked already. */
            p = c->raw + s->off;
            while (pprof__next_field(&p, end, &f) > 0)
                if (f.num == 4)
                    scan_line(c, &f, &fallback, NULL);
        }
        if (r < 0)
            rc = corrupt(c, "bad location");
        else if (mapping && pprof__idmap_get(&c->mapmap, mapping) == UINT32_MAX)
            rc = corrupt(c, "location references unknown mapping");
        ids[i] = id;
        c->loc_fn[i] = nlines > 1 ? LOC_FN_SEVERAL : fn;
        /* Addresses identify a frame in a process; without them (non-Go
         * producers) the symbolic frame does. Odd, so that 0 can mean "no
         * such location" in the by-id table. */
        keys[i] = (addr ? mix64(addr ^ 0xadd7) : fallback) | 1;
    }
    if ((rc = build_idmap(c, rc, &c->locmap, ids, n, PPROF__S_LOCIDX, "location")) < 0)
        return rc;
    /* By id when ids are dense, padded so that one-byte ids need no bounds
     * check in the sample loop (two-byte ones are checked four at a time,
     * ids of mixed widths two at a time). */
    if (c->locmap.dense) {
        size_t len = c->locmap.dense_len;
        c->loc_by_id = len <= 128 ? 128 : len;
    }
    size_t nl = c->loc_by_id ? c->loc_by_id : n ? n : 1;
    c->locs = pprof__scratch(PPROF__S_LOCS, nl * sizeof(struct loc), false);
    if (!c->locs)
        return -ENOMEM;
    memset(c->locs, 0, nl * sizeof(struct loc));
    for (size_t i = 0; i < n; i++)
        c->locs[c->loc_by_id ? ids[i] : i].key = keys[i];
    return 0;
}

/* ---- samples ---- */

/* Adds with saturation: a hostile profile must not cause signed overflow. */
static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int label_hash_slow(struct ctx *c, const uint8_t *p, size_t len, uint64_t *h);

/* Whether the label filter drops labels whose key is string `key` (a
 * checked index); asked once per key string per profile. */
static bool label_dropped(struct ctx *c, uint64_t key)
{
    const struct pprof_filter *f = c->d->filter;

    if (!c->lbl_verdict)
        return false;
    if (c->lbl_verdict[key] == LBL_UNKNOWN) {
        const struct span *s = &c->spans[F_STRING][key];
        c->lbl_verdict[key] =
            f->label_keep((const char *)c->raw + s->off, s->len, f->label_ud) ? LBL_KEEP : LBL_DROP;
    }
    return c->lbl_verdict[key] == LBL_DROP;
}

/* The key string of a label the sample scan checked. */
static uint64_t label_key(const uint8_t *p, size_t len)
{
    uint64_t v[2] = {0};

    read_scalars(p, p + len, 1, v, 1);
    return v[1];
}

/* Hashes a label and counts the references to its strings. */
static inline int label_hash(struct ctx *c, const uint8_t *p, size_t len, uint64_t *h)
{
    int rc;

    /* A label of one to seven bytes is its own key in the memo: one
     * eight-byte load, within the profile, masked to its length. */
    if (len - 1 < 7 && c->raw + c->len - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w = (w & ((1ULL << (8 * len)) - 1)) | (uint64_t)len << 56;
        struct lbl_memo *m = &c->lbl_memo[(w * GOLDEN) >> (64 - LBL_MEMO_BITS)];
        if (m->word != w) {
            if ((rc = label_hash_slow(c, p, len, &m->hash)) < 0)
                return rc;
            m->word = w;
            m->str[0] = (uint32_t)c->last_label_str[0];
            m->str[1] = (uint32_t)c->last_label_str[1];
            m->str[2] = (uint32_t)c->last_label_str[2];
        } else {
            c->last_label_str[0] = m->str[0];
            c->last_label_str[1] = m->str[1];
            c->last_label_str[2] = m->str[2];
        }
        /* last_label_str no longer belongs to the last long label. */
        c->last_label = NULL;
        *h = m->hash;
    } else if (len == c->last_label_len && c->last_label && memcmp(p, c->last_label, len) == 0) {
        *h = c->last_label_hash;
    } else {
        if ((rc = label_hash_slow(c, p, len, h)) < 0)
            return rc;
        c->last_label = p;
        c->last_label_len = len;
        c->last_label_hash = *h;
    }
    c->str_lblrefs[c->last_label_str[0]]++;
    c->str_lblrefs[c->last_label_str[1]]++;
    c->str_lblrefs[c->last_label_str[2]]++;
    return 0;
}

static int label_hash_slow(struct ctx *c, const uint8_t *p, size_t len, uint64_t *h)
{
    uint64_t v[5] = {0};

    if (read_scalars(p, p + len, 4, v, 4) < 0 || !str_ok(c, (int64_t)v[1]) ||
        !str_ok(c, (int64_t)v[2]) ||
        !str_ok(c, (int64_t)v[4]))
        return corrupt(c, "bad label");
    /* Each part moved differently (rotated, shifted), so that swapping key
     * and value does not give the same label; the number spread by an odd
     * multiplier; one mix for all. */
    uint64_t str = str_hash(c, v[2]);
    *h = mix64(str_hash(c, v[1]) ^ ((str << 21 | str >> 43) + v[3] * GOLDEN) ^
               (str_hash(c, v[4]) << 1));
    c->last_label_str[0] = v[1];
    c->last_label_str[1] = v[2];
    c->last_label_str[2] = v[4];
    return 0;
}

static int add_loc_error(struct ctx *c, uint32_t li, uint64_t id)
{
    if (li == UINT32_MAX)
        return pprof__err(c->err, c->errlen, PPROF_ECORRUPT,
                          "malformed profile: sample references unknown location %" PRIu64, id);
    return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                      "profile too large: stack depth > cap %zu", c->lim->max_stack_depth);
}

/* The four ids of `w`'s 16-bit lanes, each two 7-bit groups joined. */
static inline uint64_t join_lanes16(uint64_t w)
{
    return (w & 0x007f007f007f007fULL) | (w >> 1 & 0x3f803f803f803f80ULL);
}

/* Four frames whose ids are the 16-bit lanes of `x`, at the depths whose
 * weights are `weight[0..3]`: their part of the stack hash, and their
 * references counted. */
static inline __attribute__((always_inline)) uint64_t four_frames(struct loc *locs, uint64_t x,
                                                                  const uint64_t *weight)
{
    uint64_t sum = 0;

#pragma GCC unroll 4
    for (unsigned j = 0; j < 4; j++) {
        size_t i = (uint16_t)(x >> (16 * j));
        sum += locs[i].key * weight[j];
        locs[i].refs++;
    }
    return sum;
}

/* The innermost loop of a delta: the location ids of one sample, folded
 * into the stack hash `*h`. The hash is the sum of each frame's key times a
 * random odd weight for its depth: unlike a polynomial (h + k) * C, whose
 * every step waits for the previous multiply, the products are independent,
 * so frames cost throughput rather than latency. Random weights keep it
 * order-sensitive (no two depth sets share a weight sum, which small weights
 * such as 2i+1 would break on palindromic recursion). The ids are checked
 * here, or after the scan where that saves a test per frame, and the
 * references to every location are counted in its refs, so that encode()
 * can tell which locations the emitted samples use by taking out the few
 * samples it does not emit (recursion makes some increments wait on the
 * previous one of the same counter, a small cost against a second walk
 * over every emitted stack).
 * The ids lie in [q, qe); bytes up to `readable_end` may be loaded.
 * Locals, not ctx fields, so the compiler keeps them in registers; not
 * inlined, so that parse_sample()'s own locals do not crowd them out
 * (inlined, both spilled to the stack: 5 % more per delta on heap-16k). */
static __attribute__((noinline)) int add_locs(struct ctx *c, const uint8_t *q,
                                                          const uint8_t *qe,
                                                          const uint8_t *readable_end,
                                                          size_t *depth, uint64_t *h)
{
    struct loc *locs = c->locs;
    const size_t nid = c->loc_by_id, cap = c->lim->max_stack_depth;
    size_t dep = *depth;
    uint64_t hh = *h;

    const size_t fast_cap = nid && cap < POS_WEIGHTS ? cap : nid ? POS_WEIGHTS : 0;
    /* Added to four two-byte ids in their 16-bit lanes, sets a lane's top
     * bit iff its id is out of the table (0 when every such id is in). */
    const uint64_t lane_bias =
        nid >= LOC_FAST_IDS ? 0 : (uint64_t)(0x8000 - nid) * 0x0001000100010001ULL;
    /* Each shuffle reader on the profiles whose ids it takes: one or two
     * bytes up to 16384 ids, one to three past them (a table looked up
     * for nothing costs more than it saves). */
    const bool ids2_on = have_pshufb && nid <= LOC_FAST_IDS;
    const bool ids3_on = have_pshufb && nid > LOC_FAST_IDS && nid <= INT32_MAX;
    while (q < qe) {
        uint64_t id, k;

        /* Eight bytes of one-byte ids, or of two-byte ids (how Go writes
         * the stacks of profiles with under 128, resp. 16384, locations):
         * decoded at a fixed stride, so frames do not wait on each other.
         * The by-id table has at least 128 entries, so one-byte ids need
         * no bounds check, and two-byte ones are checked four at once; an
         * absent id (key 0; keys are odd) is counted like any other, and
         * check_location_refs() finds its reference after the scan: on
         * error nothing computed here is kept. */
        if (qe - q >= 8 && dep + 8 <= fast_cap) {
            uint64_t w, m;
            memcpy(&w, q, 8);
            m = w & 0x8080808080808080ULL;
            if (m == 0) {
                uint64_t sum = 0;
#pragma GCC unroll 8
                for (unsigned j = 0; j < 8; j++) {
                    k = locs[(w >> (8 * j)) & 0x7f].key;
                    locs[(w >> (8 * j)) & 0x7f].refs++;
                    sum += k * pos_weight[dep + j];
                }
                hh += sum;
                q += 8;
                dep += 8;
                continue;
            }
            /* Four two-byte ids: both 7-bit halves of each joined in its
             * 16-bit lane at once. */
            uint64_t x = join_lanes16(w);
            if (m == 0x0080008000800080ULL && ((x + lane_bias) & LANES16_HIGH) == 0) {
                hh += four_frames(locs, x, &pos_weight[dep]);
                q += 8;
                dep += 4;
                continue;
            }
            /* Four ids of one or two bytes (a profile with under 16384
             * locations numbers them across both widths), each put in its
             * lane by one shuffle. */
            if (ids2_on) {
                unsigned len = four_ids2(w, &x);
                x = join_lanes16(x);
                if (len && ((x + lane_bias) & LANES16_HIGH) == 0) {
                    hh += four_frames(locs, x, &pos_weight[dep]);
                    q += len;
                    dep += 4;
                    continue;
                }
            }
            /* Four ids of one to three bytes (a profile past 16383
             * locations), from twelve bytes that may run past the stack
             * but not past `readable_end`. */
            if (ids3_on && readable_end - q >= 16) {
                uint64_t ids4[4];
                unsigned len = four_ids3(q, (size_t)(qe - q), (uint32_t)nid, ids4);
                if (len) {
                    uint64_t sum = 0;
                    for (unsigned j = 0; j < 4; j++) {
                        sum += locs[ids4[j]].key * pos_weight[dep + j];
                        locs[ids4[j]].refs++;
                    }
                    hh += sum;
                    q += len;
                    dep += 4;
                    continue;
                }
            }
            /* Mixed widths the shuffles do not take (or no shuffle): two
             * ids at a time, without a branch on their widths. Out-of-table
             * ids become id 0, which no location has. */
            uint64_t id1, id2;
            unsigned used = pprof__two_varints3(w, &id1, &id2);
            if (used) {
                id1 = id1 < nid ? id1 : 0;
                id2 = id2 < nid ? id2 : 0;
                uint64_t k2 = locs[id2].key;
                k = locs[id1].key;
                locs[id1].refs++;
                locs[id2].refs++;
                hh += k * pos_weight[dep] + k2 * pos_weight[dep + 1];
                q += used;
                dep += 2;
                continue;
            }
        }
        if (*q < 0x80)
            id = *q++;
        else if (pprof__varint(&q, qe, &id) < 0)
            return corrupt(c, "bad packed location_id");
        if (nid) {
            if (__builtin_expect(id >= nid || locs[id].key == 0, 0))
                return add_loc_error(c, UINT32_MAX, id);
            k = locs[id].key;
            locs[id].refs++;
        } else {
            uint32_t li = pprof__idmap_get(&c->locmap, id);
            if (__builtin_expect(li == UINT32_MAX, 0))
                return add_loc_error(c, li, id);
            k = locs[li].key;
            locs[li].refs++;
        }
        if (__builtin_expect(dep == cap, 0))
            return add_loc_error(c, 0, id);
        hh += k * (dep < POS_WEIGHTS ? pos_weight[dep] : mix64(dep) | 1);
        dep++;
    }
    *depth = dep;
    *h = hh;
    return 0;
}

/* Parses sample `i`: its key, its values into `row`, and the bytes its
 * value fields take. */
static int parse_sample(struct ctx *c, size_t i, int64_t *row, uint64_t *key_out,
                        uint32_t *vbytes_out, uint64_t *vspan_out)
{
    const struct span *s = &c->spans[F_SAMPLE][i];
    const uint8_t *p = c->raw + s->off, *end = p + s->len, *base = p;
    size_t depth = 0, nv = 0, nlabels = 0, vbytes = 0, nvf = 0, dropped = 0;
    uint64_t vspan = 0;
    uint64_t labels = 0, stack = 0x5eed, key;
    struct pprof__field f;
    int r = 0, rc;

    for (;;) {
        /* Fast path: a length-delimited field 1-3 with a one-byte length,
         * which is how Go writes nearly every sample. */
        if (end - p >= 2 && (p[0] == 0x0a || p[0] == 0x12 || p[0] == 0x1a) && p[1] < 0x80 &&
            p[1] <= end - p - 2) {
            f.start = p;
            f.num = p[0] >> 3;
            f.wt = PPROF__WT_LEN;
            f.val = 0;
            f.data = p + 2;
            f.len = p[1];
            p += 2 + p[1];
        } else if ((r = pprof__next_field(&p, end, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 1:
            if (f.wt == PPROF__WT_LEN) {
                if ((rc = add_locs(c, f.data, f.data + f.len, c->raw + c->len, &depth, &stack)) < 0)
                    return rc;
            } else if (f.wt == PPROF__WT_VARINT) {
                /* Unpacked (rare): re-encode the id for the same loop. */
                uint8_t one[10];
                uint8_t *one_end = pprof__put_varint(one, f.val);
                if ((rc = add_locs(c, one, one_end, one_end, &depth, &stack)) < 0)
                    return rc;
            } else {
                return corrupt(c, "wrong wire type for location_id");
            }
            break;
        case 2:
            vbytes += (size_t)(p - f.start);
            nvf++;
            vspan = (uint64_t)(p - base) << 32 | (uint64_t)(f.start - base);
            if (f.wt == PPROF__WT_LEN) {
                const uint8_t *q = f.data, *qe = f.data + f.len;
                uint64_t v;
                while (q < qe) {
                    if (pprof__varint(&q, qe, &v) < 0)
                        return corrupt(c, "bad packed value");
                    if (nv == c->ncols)
                        return corrupt(c, "sample has more values than sample types");
                    row[nv++] = (int64_t)v;
                }
            } else if (f.wt == PPROF__WT_VARINT) {
                if (nv == c->ncols)
                    return corrupt(c, "sample has more values than sample types");
                row[nv++] = (int64_t)f.val;
            } else {
                return corrupt(c, "wrong wire type for value");
            }
            break;
        case 3: {
            uint64_t h = 0;
            if (f.wt != PPROF__WT_LEN)
                return corrupt(c, "wrong wire type for label");
            if (++nlabels > c->lim->max_labels)
                return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                                  "profile too large: labels in one sample > cap %zu",
                                  c->lim->max_labels);
            if ((rc = label_hash(c, f.data, f.len, &h)) < 0)
                return rc;
            if (c->lbl_verdict && label_dropped(c, c->last_label_str[0])) {
                /* Not part of the key, not written, its strings unused. */
                c->str_lblrefs[c->last_label_str[0]]--;
                c->str_lblrefs[c->last_label_str[1]]--;
                c->str_lblrefs[c->last_label_str[2]]--;
                dropped += (size_t)(p - f.start);
                break;
            }
            labels += h; /* a sum: the order of labels does not matter */
            break;
        }
        default:
            break;
        }
    }
    if (r < 0)
        return corrupt(c, "bad sample");
    if (nv != c->ncols)
        return corrupt(c, "sample has fewer values than sample types");
    key = mix64(stack ^ (labels + depth) * GOLDEN);
    *key_out = key;
    /* Dropped labels leave the body as the value fields do; the sample is
     * then rewritten field by field, not copied around its values. */
    *vbytes_out = (uint32_t)(vbytes + dropped);
    *vspan_out = nvf == 1 && !dropped ? vspan : 0;
    return 0;
}

/* The first location id of the samples, in their order, that has no
 * location, or 0 when there is none. */
static uint64_t first_unknown_location(const struct ctx *c)
{
    const size_t nid = c->loc_by_id;

    for (size_t i = 0; i < c->n[F_SAMPLE]; i++) {
        const struct span *s = &c->spans[F_SAMPLE][i];
        const uint8_t *p = c->raw + s->off, *end = p + s->len;
        struct pprof__field f;

        while (pprof__next_field(&p, end, &f) > 0) {
            uint64_t id;
            if (f.num != 1)
                continue;
            if (f.wt != PPROF__WT_LEN) {
                if (f.val >= nid || c->locs[f.val].key == 0)
                    return f.val;
                continue;
            }
            for (const uint8_t *q = f.data, *qe = f.data + f.len;
                 q < qe && pprof__varint(&q, qe, &id) == 0;)
                if (id >= nid || c->locs[id].key == 0)
                    return id;
        }
    }
    return 0;
}

/* add_locs() takes an id without a location (absent from the by-id table,
 * or out of it and counted on id 0, which no location has) as one whose
 * key is 0 rather than test each: its reference shows here, once the
 * samples are scanned. */
static int check_location_refs(struct ctx *c)
{
    for (size_t id = 0; id < c->loc_by_id; id++)
        if (c->locs[id].key == 0 && c->locs[id].refs != 0)
            return add_loc_error(c, UINT32_MAX, first_unknown_location(c));
    return 0;
}

static int scan_samples(struct ctx *c)
{
    size_t n = c->n[F_SAMPLE], ncols1 = c->ncols ? c->ncols : 1;
    int rc;

    c->ents = pprof__scratch(PPROF__S_ENTS, (n ? n : 1) * sizeof(struct ent), false);
    c->keys = pprof__scratch(PPROF__S_KEYS, (n ? n : 1) * sizeof(uint64_t), false);
    c->sums = pprof__scratch(PPROF__S_SUMS, (n ? n : 1) * ncols1 * sizeof(int64_t), false);
    c->prev = pprof__scratch(PPROF__S_PREVS, (c->ncum ? c->ncum : 1) * sizeof(int64_t), false);
    if (!c->ents || !c->keys || !c->sums || !c->prev)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct ent *e = &c->ents[i];
        uint64_t vspan = 0; /* set by parse_sample(); GCC cannot always tell */

        if ((rc = parse_sample(c, i, c->sums + i * c->ncols, &c->keys[i], &e->vbytes, &vspan)) < 0)
            return rc;
        e->voff = (uint32_t)vspan;
        e->vend = (uint32_t)(vspan >> 32);
        e->matched = false;
        e->dup = false;
        e->fresh = false;
    }
    c->n_ents = n;
    return check_location_refs(c);
}

/* Slots at most half full, so that a probe mostly ends at its first slot;
 * a quarter full while that fits in 32 KB (L1): whether the first slot
 * is free is then better foretold, and a key seen once, the most common,
 * costs no second probe. */
#define INDEX_QUARTER_SLOTS 8192

unsigned pprof__index_bits(size_t n)
{
    unsigned bits = 4;

    while (bits < 32 && (((size_t)1 << bits) < 2 * n ||
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
     * next profile. */
    if (w > 0) {
        if (!pprof__acct_charge(w * sizeof(uint64_t) + vlen) ||
            !(ns = malloc(w * sizeof(uint64_t) + vlen)))
            return -ENOMEM;
        memcpy(ns, nkeys, w * sizeof(uint64_t));
        memcpy(ns + w * sizeof(uint64_t), vals, vlen);
    }
    free(d->state);
    d->state = ns;
    d->state_len = w ? w * sizeof(uint64_t) + vlen : 0;
    d->n = w;
    return 0;
}

/* ---- output ---- */

/* Bytes the output buffer keeps past the end of the output, so that a
 * short copy may write a whole COPY_CHUNK. */
#define COPY_CHUNK 32

/* Copies `len` bytes of the raw profile at `src` to `o`. Most records of a
 * profile are short (a location, a function, a string: 5 to 30 bytes), and
 * a library memcpy() per record costs more than the copy: one of fixed size
 * (two vector moves) writes into the output's slack and reads within the
 * raw profile instead. */
static inline uint8_t *copy_raw(const struct ctx *c, uint8_t *o, const uint8_t *src, size_t len)
{
    if (len <= COPY_CHUNK && (size_t)(c->raw + c->len - src) >= COPY_CHUNK)
        memcpy(o, src, COPY_CHUNK);
    else
        memcpy(o, src, len);
    return o + len;
}

static uint8_t *put_raw(const struct ctx *c, uint8_t *o, uint8_t tag, const uint8_t *data,
                        size_t len)
{
    *o++ = tag;
    o = pprof__put_varint(o, len);
    return copy_raw(c, o, data, len);
}

static uint8_t *put_scalar(uint8_t *o, uint8_t tag, int64_t v)
{
    if (v == 0)
        return o;
    *o++ = tag;
    return pprof__put_varint(o, (uint64_t)v);
}

/* What visit_locations() does to each location of a stack. */
enum loc_op {
    LOC_MARK,    /* an emitted sample uses it */
    LOC_UNCOUNT, /* a sample not emitted takes its reference back */
};

static inline __attribute__((always_inline)) void visit_location(struct loc *l, enum loc_op op)
{
    if (op == LOC_MARK)
        l->used = 1;
    else
        l->refs--;
}

/* Applies `op` to the location of every id of a location_id field whose
 * ids the sample scan checked: eight one-byte or four two-byte ids per
 * load where they come so, as in add_locs(), else one at a time. */
static inline __attribute__((always_inline)) void visit_locations(struct ctx *c,
                                                                  const struct pprof__field *f,
                                                                  enum loc_op op)
{
    struct loc *locs = c->locs;
    uint64_t id;

    if (f->wt == PPROF__WT_VARINT) {
        visit_location(&locs[c->loc_by_id ? f->val : pprof__idmap_get(&c->locmap, f->val)], op);
        return;
    }
    const uint8_t *q = f->data, *qe = f->data + f->len;
    if (!c->loc_by_id) {
        while (q < qe && pprof__varint(&q, qe, &id) == 0)
            visit_location(&locs[pprof__idmap_get(&c->locmap, id)], op);
        return;
    }
    while (q < qe) {
        if (qe - q >= 8) {
            uint64_t w, m;
            memcpy(&w, q, 8);
            m = w & 0x8080808080808080ULL;
            if (m == 0) {
#pragma GCC unroll 8
                for (unsigned j = 0; j < 8; j++)
                    visit_location(&locs[(w >> (8 * j)) & 0x7f], op);
                q += 8;
                continue;
            }
            if (m == 0x0080008000800080ULL) {
                uint64_t x = (w & 0x007f007f007f007fULL) | (w >> 1 & 0x3f803f803f803f80ULL);
#pragma GCC unroll 4
                for (unsigned j = 0; j < 4; j++)
                    visit_location(&locs[(uint16_t)(x >> (16 * j))], op);
                q += 8;
                continue;
            }
        }
        if (*q < 0x80)
            id = *q++;
        else if (pprof__varint(&q, qe, &id) < 0)
            break;
        visit_location(&locs[id], op);
    }
}

static void mark_locations(struct ctx *c, const struct pprof__field *f)
{
    visit_locations(c, f, LOC_MARK);
}

/* Copies a sample's fields except its values, marking the strings its
 * labels reference. */
static uint8_t *copy_sample_fields(struct ctx *c, uint8_t *o, const struct span *s)
{
    const uint8_t *p = c->raw + s->off, *end = p + s->len;
    struct pprof__field f;

    while (pprof__next_field(&p, end, &f) > 0) {
        if (f.num == 2)
            continue;
        if (f.num == 3 && c->lbl_verdict && label_dropped(c, label_key(f.data, f.len)))
            continue;
        memcpy(o, f.start, (size_t)(p - f.start));
        o += p - f.start;
        if (f.num == 1 && c->mark_locs)
            mark_locations(c, &f);
        if (f.num == 3 && !(f.len == c->last_label_len && c->last_label &&
                            memcmp(f.data, c->last_label, f.len) == 0)) {
            /* A repeated scalar field: the last one wins, as in protobuf-c
             * (and only the last one was checked). The strings of the
             * previous label are marked already. */
            const uint8_t *q = f.data, *qe = f.data + f.len;
            c->last_label = f.data;
            c->last_label_len = f.len;
            struct pprof__field g;
            uint64_t v[5] = {0};
            while (pprof__next_field(&q, qe, &g) > 0)
                if (g.num <= 4)
                    v[g.num] = g.val;
            mark_str(c, v[1]);
            mark_str(c, v[2]);
            mark_str(c, v[4]);
        }
    }
    return o;
}

/* Marks what an emitted sample references (its locations, its labels'
 * strings) without copying it, as copy_sample_fields() does. */
static void mark_sample_refs(struct ctx *c, const struct span *s)
{
    const uint8_t *p = c->raw + s->off, *end = p + s->len;
    struct pprof__field f;

    while (pprof__next_field(&p, end, &f) > 0) {
        if (f.num == 1)
            mark_locations(c, &f);
        else if (f.num == 3 && c->lbl_verdict && label_dropped(c, label_key(f.data, f.len)))
            continue;
        else if (f.num == 3 && !(f.len == c->last_label_len && c->last_label &&
                                 memcmp(f.data, c->last_label, f.len) == 0)) {
            const uint8_t *q = f.data, *qe = f.data + f.len;
            struct pprof__field g;
            uint64_t v[5] = {0};
            c->last_label = f.data;
            c->last_label_len = f.len;
            while (pprof__next_field(&q, qe, &g) > 0)
                if (g.num <= 4)
                    v[g.num] = g.val;
            mark_str(c, v[1]);
            mark_str(c, v[2]);
            mark_str(c, v[4]);
        }
    }
}

static void mark_function(struct ctx *c, uint32_t fi)
{
    c->fn_used[fi] = 1;
    mark_str(c, c->fn_name[fi]);
    mark_str(c, c->fn_sys[fi]);
    mark_str(c, c->fn_file[fi]);
}

static void mark_location_functions(struct ctx *c, const struct span *s)
{
    const uint8_t *p = c->raw + s->off, *end = p + s->len;
    struct pprof__field f;

    while (pprof__next_field(&p, end, &f) > 0) {
        if (f.num != 4 || f.wt != PPROF__WT_LEN)
            continue;
        const uint8_t *q = f.data, *qe = f.data + f.len;
        struct pprof__field g;
        uint64_t fid = 0;
        while (pprof__next_field(&q, qe, &g) > 0)
            if (g.num == 1)
                fid = g.val; /* the last one wins, and was checked */
        if (fid)
            mark_function(c, pprof__idmap_get(&c->fnmap, fid));
    }
}

/* Takes the references of the samples that are not emitted out of the
 * counts of the sample scan: after it, a location or label string is used
 * by the output iff its count is not zero. The ids and labels were checked
 * by the scan. */
static void uncount_not_emitted(struct ctx *c)
{
    for (size_t i = 0; i < c->n_ents; i++) {
        const struct span *s = &c->spans[F_SAMPLE][i];
        const uint8_t *p = c->raw + s->off, *end = p + s->len;
        struct pprof__field f;

        if (c->ents[i].out_vlen)
            continue;
        while (pprof__next_field(&p, end, &f) > 0) {
            if (f.num == 1) {
                visit_locations(c, &f, LOC_UNCOUNT);
            } else if (f.num == 3) {
                uint64_t v[5] = {0};
                read_scalars(f.data, f.data + f.len, 4, v, 4);
                if (c->lbl_verdict && label_dropped(c, v[1]))
                    continue; /* never counted */
                c->str_lblrefs[v[1]]--;
                c->str_lblrefs[v[2]]--;
                c->str_lblrefs[v[4]]--;
            }
        }
    }
}

static uint8_t *put_values(const struct ctx *c, uint8_t *o, const int64_t *v)
{
    for (size_t k = 0; k < c->ncols; k++)
        if (c->cum_of_col[k] != COL_DROPPED)
            o = pprof__put_varint(o, (uint64_t)v[k]);
    return o;
}

/* Writes the emitted samples, their new values in place of the old. */
static uint8_t *put_samples(struct ctx *c, uint8_t *o)
{
    for (size_t i = 0; i < c->n_ents; i++) {
        const struct ent *e = &c->ents[i];
        const struct span *s = &c->spans[F_SAMPLE][i];
        const int64_t *outv = c->sums + i * c->ncols;
        size_t vlen = e->out_vlen, body;

        if (vlen == 0)
            continue;
        body = s->len - e->vbytes + 1 + pprof__varint_size(vlen) + vlen;
        *o++ = 0x12;
        o = pprof__put_varint(o, body);
        if (e->vend) {
            /* One value field (as Go writes samples): the bytes around it
             * are copied as they are, the new values put in its place. */
            const uint8_t *sp = c->raw + s->off;
            if (c->mark_locs)
                mark_sample_refs(c, s);
            o = copy_raw(c, o, sp, e->voff);
            *o++ = 0x12;
            o = pprof__put_varint(o, vlen);
            o = put_values(c, o, outv);
            o = copy_raw(c, o, sp + e->vend, s->len - e->vend);
            continue;
        }
        o = copy_sample_fields(c, o, s);
        *o++ = 0x12;
        o = pprof__put_varint(o, vlen);
        o = put_values(c, o, outv);
    }
    return o;
}

/* default_sample_type names a type by its string; once the filter drops
 * that type, the output names none (readers then take the last type). */
static int64_t default_type_out(const struct ctx *c)
{
    if (c->ncols_out == c->ncols || !c->default_sample_type)
        return c->default_sample_type;
    for (size_t i = 0; i < c->ncols; i++) {
        const struct span *s = &c->spans[F_SAMPLE_TYPE][i];
        uint64_t v[3] = {0};

        if (c->cum_of_col[i] == COL_DROPPED)
            continue;
        read_scalars(c->raw + s->off, c->raw + s->off + s->len, 2, v, 2);
        if ((int64_t)v[1] == c->default_sample_type)
            return c->default_sample_type;
    }
    return 0;
}

static int encode(struct ctx *c, int64_t prev_time)
{
    size_t samples_in = 0, samples_out = 0, samples_kept = 0, bound;
    uint8_t *o;

    c->last_label = NULL;
    /* The output values first (finish_state() settled them, but for a
     * profile without cumulative columns), so that the output buffer can
     * be sized exactly: every other record is copied or shrunk, never
     * grown. */
    if (!c->settled) {
        for (size_t i = 0; i < c->n_ents; i++) {
            if (c->ents[i].dup)
                c->ents[i].out_vlen = 0;
            else
                settle_entry(c, i);
        }
    }
    samples_kept = c->samples_kept;
    samples_out = c->samples_out;
    samples_in = c->samples_in;
    /* The locations and label strings to keep are those the emitted
     * samples reference: the references the sample scan counted, less
     * those of the samples not emitted (duplicates merged, all-zero deltas
     * dropped) when they are the fewer; else the emitted ones are walked
     * and marked as they are written. */
    size_t not_emitted = c->n[F_SAMPLE] - samples_kept;
    c->mark_locs = not_emitted > samples_kept;
    if (!c->mark_locs) {
        if (not_emitted)
            uncount_not_emitted(c);
        for (size_t i = 0; i < c->n[F_STRING]; i++)
            if (c->str_lblrefs[i])
                mark_str(c, i);
    }
    bound = c->len - samples_in + samples_out + 11 * c->n_comments + 64 + COPY_CHUNK;
    c->out = c->out_scratch ? pprof__scratch(PPROF__S_OUT, bound, false)
             : pprof__acct_charge(bound) ? malloc(bound) : NULL;
    if (!c->out)
        return -ENOMEM;
    o = c->out;
    for (size_t i = 0; i < c->n[F_SAMPLE_TYPE]; i++) {
        const struct span *s = &c->spans[F_SAMPLE_TYPE][i];
        if (c->cum_of_col[i] != COL_DROPPED)
            o = put_raw(c, o, 0x0a, c->raw + s->off, s->len);
    }
    if (c->mark_locs)
        o = put_samples(c, o);
    for (size_t i = 0; i < c->n[F_MAPPING]; i++) {
        const struct span *s = &c->spans[F_MAPPING][i];
        o = put_raw(c, o, 0x1a, c->raw + s->off, s->len);
    }
    for (size_t i = 0; i < c->n[F_LOCATION]; i++) {
        const struct span *s = &c->spans[F_LOCATION][i];
        size_t li = c->loc_by_id ? c->loc_ids[i] : i;
        if (c->mark_locs ? !c->locs[li].used : c->locs[li].refs == 0)
            continue;
        if (c->loc_fn[i] < LOC_FN_SEVERAL)
            mark_function(c, c->loc_fn[i]);
        else if (c->loc_fn[i] == LOC_FN_SEVERAL)
            mark_location_functions(c, s);
        o = put_raw(c, o, 0x22, c->raw + s->off, s->len);
    }
    for (size_t i = 0; i < c->n[F_FUNCTION]; i++) {
        const struct span *s = &c->spans[F_FUNCTION][i];
        if (c->fn_used[i])
            o = put_raw(c, o, 0x2a, c->raw + s->off, s->len);
    }
    for (size_t i = 0; i <= c->max_str_used; i++) {
        const struct span *s = &c->spans[F_STRING][i];
        o = put_raw(c, o, 0x32, c->raw + s->off, c->str_used[i] ? s->len : 0);
    }
    if (!c->mark_locs)
        o = put_samples(c, o);
    o = put_scalar(o, 0x38, c->drop_frames);
    o = put_scalar(o, 0x40, c->keep_frames);
    o = put_scalar(o, 0x48, c->time_nanos);
    if (c->time_nanos && prev_time)
        o = put_scalar(o, 0x50, sat_sub(c->time_nanos, prev_time));
    else
        o = put_scalar(o, 0x50, c->duration_nanos);
    if (c->has_period_type)
        o = put_raw(c, o, 0x5a, c->raw + c->period_type.off, c->period_type.len);
    o = put_scalar(o, 0x60, c->period);
    if (c->n_comments) {
        size_t clen = 0;
        for (size_t i = 0; i < c->n_comments; i++)
            clen += pprof__varint_size((uint64_t)c->comments[i]);
        *o++ = 0x6a;
        o = pprof__put_varint(o, clen);
        for (size_t i = 0; i < c->n_comments; i++)
            o = pprof__put_varint(o, (uint64_t)c->comments[i]);
    }
    o = put_scalar(o, 0x70, default_type_out(c));
    o = put_scalar(o, 0x78, c->doc_url);
    c->out_len = (size_t)(o - c->out);
    return 0;
}

static void ctx_done(struct ctx *c)
{
    /* The tables are the thread's scratch, but for sparse id maps. */
    pprof__idmap_done(&c->mapmap);
    pprof__idmap_done(&c->fnmap);
    pprof__idmap_done(&c->locmap);
    if (!c->out_scratch)
        free(c->out);
}

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
                      "of %zu MiB", (need + (1 << 20) - 1) >> 20, c->n[F_SAMPLE],
                      c->lim->max_memory >> 20);
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
    uint64_t t0 = ph ? now_ns() : 0, t1;
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
        t1 = now_ns();
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
        t1 = now_ns();
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
        t1 = now_ns();
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
    c.out_scratch = lim->gzip_level > 0; /* else the output is the caller's */
    if ((rc = encode(&c, prev_time)) < 0)
        goto fail;
    if (ph) {
        t1 = now_ns();
        ph->encode = t1 - t0;
        t0 = t1;
    }
    if (lim->gzip_level > 0) {
        if ((rc = pprof__gzip_cached(c.out, c.out_len, lim->gzip_level, out, out_len)) < 0) {
            pprof__err(err, errlen, rc, "gzip failed: %s", pprof_strerror(rc));
            goto fail;
        }
    } else {
        *out = c.out;
        *out_len = c.out_len;
        c.out = NULL;
    }
    if (ph)
        ph->gzip = now_ns() - t0;
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
                        "asked for)", lim->max_memory >> 20, (charged + (1 << 20) - 1) >> 20);
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
                        const struct pprof_limits *lim, uint8_t **out, size_t *out_len,
                        char *err, size_t errlen)
{
    return pprof__delta_process_timed(d, in, in_len, lim, out, out_len, err, errlen, NULL);
}
