/* SPDX-License-Identifier: Apache-2.0 */
/* Capped gunzip and gzip of pprof bodies (docs/design.md "Deltas"): libdeflate
 * inflates, and the output is compressed by the encoder each compression
 * setting maps to, ISA-L's igzip or libdeflate (docs/design.md
 * "Compression").
 *
 * libdeflate decompresses whole buffers, not streams, so the output buffer
 * must be sized up front. The gzip trailer's ISIZE is only a hint (it is the
 * size modulo 2^32 and a peer can lie): we start from it, double the buffer
 * on LIBDEFLATE_INSUFFICIENT_SPACE and give up at the caller's cap, so a
 * decompression bomb costs at most the cap in memory and about twice the
 * cap in work. An honest ISIZE larger than the cap proves the member is
 * larger than the cap (the real size is ISIZE + k * 2^32), so such input is
 * refused without inflating anything. Multi-member gzip (concatenated
 * streams) is accepted, like Go's gzip reader.
 *
 * Threading: pure functions, with the calling thread's cached
 * (de)compressors (pprof/scratch.c).
 * Ownership: inputs are borrowed, outputs are malloc'd and returned. */
#include <errno.h>
#include <libdeflate.h>
#include <stdlib.h>
#ifdef PROFLET_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif
#include <string.h>

#include "pprof/internal.h"

#define GUNZIP_MAX_RATIO 64
#define GUNZIP_MIN_GUESS 4096

static bool is_gzip(const uint8_t *in, size_t in_len)
{
    return in_len >= 2 && in[0] == 0x1f && in[1] == 0x8b;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int grow(uint8_t **buf, size_t *cap, size_t want, size_t max)
{
    uint8_t *nb;

    if (want > max)
        want = max;
    if (want <= *cap)
        return 0;
    nb = realloc(*buf, want ? want : 1);
    if (!nb)
        return -ENOMEM;
    *buf = nb;
    *cap = want;
    return 0;
}

/* The first output buffer size. The gzip trailer's size is only a hint:
 * trust it as far as a pprof body plausibly inflates (64x; real profiles
 * compress 5-25x), so a forged hint cannot make us allocate the whole cap up
 * front. Past it, the buffer doubles. */
static size_t initial_guess(const uint8_t *in, size_t in_len)
{
    size_t guess = le32(in + in_len - 4);
    size_t plausible = in_len <= (SIZE_MAX - GUNZIP_MIN_GUESS) / GUNZIP_MAX_RATIO
                           ? in_len * GUNZIP_MAX_RATIO + GUNZIP_MIN_GUESS
                           : SIZE_MAX;

    if (guess < GUNZIP_MIN_GUESS)
        guess = GUNZIP_MIN_GUESS;
    return guess > plausible ? plausible : guess;
}

int pprof_gunzip(const uint8_t *in, size_t in_len, size_t max, uint8_t **out, size_t *out_len)
{
    struct libdeflate_decompressor *dec = NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, used = 0, pos = 0;
    int rc;

    *out = NULL;
    *out_len = 0;
    if (!is_gzip(in, in_len)) {
        if (in_len > max)
            return PPROF_ETOOLARGE;
        buf = malloc(in_len ? in_len : 1);
        if (!buf)
            return -ENOMEM;
        if (in_len)
            memcpy(buf, in, in_len);
        *out = buf;
        *out_len = in_len;
        return 0;
    }
    if (in_len < 18)
        return PPROF_ECORRUPT;
    if (le32(in + in_len - 4) > max)
        return PPROF_ETOOLARGE;

    dec = libdeflate_alloc_decompressor();
    if (!dec)
        return -ENOMEM;
    if ((rc = grow(&buf, &cap, initial_guess(in, in_len), max)) < 0)
        goto fail;
    while (pos < in_len) {
        size_t in_used = 0, got = 0;
        enum libdeflate_result r;

        if (!is_gzip(in + pos, in_len - pos)) {
            rc = PPROF_ECORRUPT;
            goto fail;
        }
        r = libdeflate_gzip_decompress_ex(dec, in + pos, in_len - pos, buf + used, cap - used,
                                          &in_used, &got);
        if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
            if (cap >= max) {
                rc = PPROF_ETOOLARGE;
                goto fail;
            }
            if ((rc = grow(&buf, &cap, cap <= max / 2 ? cap * 2 : max, max)) < 0)
                goto fail;
            continue;
        }
        if (r != LIBDEFLATE_SUCCESS) {
            rc = PPROF_ECORRUPT;
            goto fail;
        }
        pos += in_used;
        used += got;
    }
    libdeflate_free_decompressor(dec);
    *out = buf;
    *out_len = used;
    return 0;

fail:
    free(buf);
    libdeflate_free_decompressor(dec);
    return rc;
}

/* The encoder each setting runs as, chosen by measurement (docs/design.md
 * "Compression"; figures: docs/benchmarks.md "Output compression"): ISA-L's
 * igzip compresses 2-2.5x faster than libdeflate's fastest level for about
 * a tenth more bytes, and nothing here compresses smaller at a bounded cost
 * than libdeflate's level 6. igzip_level -1: libdeflate even when igzip is
 * there. */
static const struct setting {
    int igzip_level;
    int deflate_level;
} settings[PPROF_COMPRESS_COUNT] = {
    [PPROF_COMPRESS_NONE] = { -1, 0 },
    [PPROF_COMPRESS_FASTEST] = { 0, 1 },
    [PPROF_COMPRESS_BALANCED] = { 2, 1 },
    [PPROF_COMPRESS_SMALLEST] = { -1, 6 },
};

bool pprof__igzip_off;

/* igzip is used where it was built in and the CPU runs its fast paths:
 * ISA-L picks its SIMD kernels at run time, and its portable C fallback
 * is slower than libdeflate, so an x86-64 CPU without AVX2 uses libdeflate
 * (aarch64 always has the NEON kernels). */
static bool igzip_usable(void)
{
#if defined(PROFLET_HAVE_ISAL) && defined(__x86_64__)
    return !pprof__igzip_off && __builtin_cpu_supports("avx2");
#elif defined(PROFLET_HAVE_ISAL) && defined(__aarch64__)
    return !pprof__igzip_off;
#else
    return false;
#endif
}

static bool use_igzip(const struct setting *s, size_t in_len)
{
    return s->igzip_level >= 0 && in_len <= UINT32_MAX / 2 && igzip_usable();
}

const char *pprof_compression_encoder(enum pprof_compression c)
{
    static const char *const deflate_names[] = {
        [1] = "libdeflate level 1", [6] = "libdeflate level 6"
    };
    static const char *const igzip_names[] = { "igzip level 0", "igzip level 1", "igzip level 2",
                                               "igzip level 3" };
    const struct setting *s;

    if ((unsigned)c >= PPROF_COMPRESS_COUNT)
        return "?";
    if (c == PPROF_COMPRESS_NONE)
        return "none";
    s = &settings[c];
    return use_igzip(s, 0) ? igzip_names[s->igzip_level] : deflate_names[s->deflate_level];
}

/* Room for any gzip of `n` bytes by either encoder: stored blocks (5 bytes
 * of header each, at least 4 KiB of data) plus the gzip header and
 * trailer, with slack. libdeflate's own bound is checked against it. */
size_t pprof__gzip_bound(size_t n)
{
    return n + 5 * (n / 4096 + 1) + 64;
}

/* One stream into `buf`; 0 if it did not end within `cap` (it cannot,
 * given pprof__gzip_bound(), but the caller then falls back to
 * libdeflate). */
static size_t igzip_into(const uint8_t *in, size_t in_len, int level, uint8_t *buf, size_t cap)
{
#ifdef PROFLET_HAVE_ISAL
    struct isal_zstream *zs = pprof__scratch_igzip(level);

    if (!zs || cap > UINT32_MAX)
        return 0;
    zs->next_in = (uint8_t *)in;
    zs->avail_in = (uint32_t)in_len;
    zs->next_out = buf;
    zs->avail_out = (uint32_t)cap;
    zs->end_of_stream = 1;
    zs->flush = NO_FLUSH;
    if (isal_deflate(zs) != COMP_OK || zs->internal_state.state != ZSTATE_END)
        return 0;
    return zs->total_out;
#else
    (void)in, (void)in_len, (void)level, (void)buf, (void)cap;
    return 0;
#endif
}

size_t pprof__encode_into(enum pprof_compression c, const uint8_t *in, size_t in_len, uint8_t *buf,
                          size_t cap)
{
    const struct setting *s = &settings[c];
    struct libdeflate_compressor *ld;
    size_t n = 0;

    if (use_igzip(s, in_len))
        n = igzip_into(in, in_len, s->igzip_level, buf, cap);
    if (n == 0 && (ld = pprof__scratch_compressor(s->deflate_level)) &&
        libdeflate_gzip_compress_bound(ld, in_len) <= cap)
        n = libdeflate_gzip_compress(ld, in, in_len, buf, cap);
    return n;
}

/* Compresses into a buffer of the bound's size, then gives the caller a
 * block of the output's exact size, either by shrinking a malloc()'d
 * buffer (realloc() shrinks in place, or with mremap() for large blocks:
 * no copy), or, with `scratch`, by copying out of the thread's scratch:
 * a destination malloc()'d at the bound is mapped afresh on every call
 * for a large profile and its pages faulted in (3 % of the gzip of
 * heap-16k). The scratch is that of the gunzipped input, which a delta no
 * longer reads when it compresses its output, and which it releases past
 * the retention cap; other callers (push bodies) would keep it. */
static int encode(const uint8_t *in, size_t in_len, enum pprof_compression c, bool scratch,
                  uint8_t **out, size_t *out_len)
{
    size_t bound = pprof__gzip_bound(in_len), n;
    uint8_t *buf, *res;

    *out = NULL;
    *out_len = 0;
    if ((unsigned)c >= PPROF_COMPRESS_COUNT)
        return -EINVAL;
    if (c == PPROF_COMPRESS_NONE) {
        if (scratch && !pprof__acct_charge(in_len))
            return -ENOMEM;
        if (!(res = malloc(in_len ? in_len : 1)))
            return -ENOMEM;
        if (in_len)
            memcpy(res, in, in_len);
        *out = res;
        *out_len = in_len;
        return 0;
    }
    buf = scratch ? pprof__scratch(PPROF__S_RAW, bound, false) : malloc(bound);
    if (!buf)
        return -ENOMEM;
    n = pprof__encode_into(c, in, in_len, buf, bound);
    if (scratch) {
        if (n == 0 || !pprof__acct_charge(n) || !(res = malloc(n)))
            return -ENOMEM;
        memcpy(res, buf, n);
    } else {
        if (n == 0) {
            free(buf);
            return -ENOMEM;
        }
        res = realloc(buf, n);
        if (!res)
            res = buf;
    }
    *out = res;
    *out_len = n;
    return 0;
}

/* The thread's cached encoders: one per worker thread for every gzip of
 * proflet (deltas, push bodies), not one allocation per call. */
int pprof_compress(const uint8_t *in, size_t in_len, enum pprof_compression c, uint8_t **out,
                   size_t *out_len)
{
    return encode(in, in_len, c, false, out, out_len);
}

int pprof_recompress(const uint8_t *in, size_t in_len, size_t max, enum pprof_compression c,
                     uint8_t **out, size_t *out_len)
{
    const uint8_t *raw;
    size_t raw_len;
    int rc;

    *out = NULL;
    *out_len = 0;
    if ((rc = pprof__gunzip_scratch(in, in_len, max, &raw, &raw_len)) < 0)
        return rc;
    /* Out of the RAW scratch: the encoder must not reuse it. */
    rc = encode(raw, raw_len, c, false, out, out_len);
    pprof__scratch_release();
    return rc;
}

/* pprof_gunzip() into the thread's scratch buffer, with the thread's cached
 * decompressor: the same caps and checks, without a fresh 10 MB mapping per
 * call. Plain input is borrowed, not copied. */
int pprof__gunzip_scratch(const uint8_t *in, size_t in_len, size_t max, const uint8_t **out,
                          size_t *out_len)
{
    struct libdeflate_decompressor *dec;
    uint8_t *buf;
    size_t cap, used = 0, pos = 0;

    *out = NULL;
    *out_len = 0;
    if (!is_gzip(in, in_len)) {
        if (in_len > max)
            return PPROF_ETOOLARGE;
        *out = in;
        *out_len = in_len;
        return 0;
    }
    if (in_len < 18)
        return PPROF_ECORRUPT;
    if (le32(in + in_len - 4) > max)
        return PPROF_ETOOLARGE;
    dec = pprof__scratch_decompressor();
    if (!dec)
        return -ENOMEM;
    {
        size_t guess = initial_guess(in, in_len);

        if (guess > max)
            guess = max;
        cap = guess;
        if (!(buf = pprof__scratch(PPROF__S_RAW, cap, false)))
            return -ENOMEM;
    }
    while (pos < in_len) {
        size_t in_used = 0, got = 0;
        enum libdeflate_result r;

        if (!is_gzip(in + pos, in_len - pos))
            return PPROF_ECORRUPT;
        r = libdeflate_gzip_decompress_ex(dec, in + pos, in_len - pos, buf + used, cap - used,
                                          &in_used, &got);
        if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
            if (cap >= max)
                return PPROF_ETOOLARGE;
            cap = cap <= max / 2 ? cap * 2 : max;
            /* Keeps the members inflated so far. */
            if (!(buf = pprof__scratch(PPROF__S_RAW, cap, true)))
                return -ENOMEM;
            continue;
        }
        if (r != LIBDEFLATE_SUCCESS)
            return PPROF_ECORRUPT;
        pos += in_used;
        used += got;
    }
    *out = buf;
    *out_len = used;
    return 0;
}

int pprof_gzip_check(const uint8_t *in, size_t in_len, size_t max)
{
    const uint8_t *raw;
    size_t raw_len;

    return pprof__gunzip_scratch(in, in_len, max, &raw, &raw_len);
}

int pprof__compress_cached(const uint8_t *in, size_t in_len, enum pprof_compression c,
                           uint8_t **out, size_t *out_len)
{
    return encode(in, in_len, c, true, out, out_len);
}

/* The first grant of a delta, per decompressed byte, before its structure
 * is known: what Go heap profiles need (the input, the decompressed bytes,
 * the decode tables and the re-encoded output at once: about 4x, measured
 * with tests/bench/pprof's heaps). It is a grant, not a bound on the
 * profile: a call whose structure needs more stops as PPROF_EOVERBUDGET and
 * leaves its need for the next admission (pprof_delta_need()). A
 * pass-through check inflates into one scratch buffer of at most the size
 * the trailer announces, plus the scratch's headroom of an eighth. */
#define DELTA_COST_PER_RAW_BYTE 5
/* Plus the tables every delta has whatever its size (id maps of at least
 * 1025 entries, hash tables of at least 16 slots, the scratch's headroom):
 * a few hundred KiB for a small profile. */
#define DELTA_COST_FIXED ((uint64_t)1 << 20)
#define DEFLATE_MAX_RATIO 1032

int pprof_job_cost(const uint8_t *in, size_t in_len, size_t max_decompressed, bool delta,
                   size_t *raw, uint64_t *cost)
{
    *raw = in_len;
    if (is_gzip(in, in_len)) {
        if (in_len < 18)
            return PPROF_ECORRUPT;
        *raw = le32(in + in_len - 4);
        /* Deflate expands at most 1032:1: a larger size is no trailer (a
         * truncated or corrupt stream), not a large profile. */
        if (*raw / DEFLATE_MAX_RATIO > in_len)
            return PPROF_ECORRUPT;
    }
    if (*raw > max_decompressed)
        return PPROF_ETOOLARGE;
    *cost = (uint64_t)in_len + (delta ? (uint64_t)*raw * DELTA_COST_PER_RAW_BYTE + DELTA_COST_FIXED
                                      : (uint64_t)*raw + *raw / 8 + 64);
    return 0;
}
