/* SPDX-License-Identifier: Apache-2.0 */
/* A part of delta.c (included there, one translation unit, so that the
 * hot loops inline across parts): the readers of a stack's location ids,
 * four at a time by one byte shuffle where the CPU has SSSE3, and the
 * tables they and the stack hash use, filled once per process. */
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
    __m128i x =
        _mm_or_si128(_mm_or_si128(_mm_and_si128(v, _mm_set1_epi32(0x7f)),
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
