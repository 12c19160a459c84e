/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile profiles: a gzip bomb (about 10 MB on the wire, 10 GiB inflated,
 * generated here, never committed), a million samples, a deep stack and
 * garbage. Each test runs in its own process (meson passes its name) and
 * asserts its peak RSS against a bound derived from the caps; error
 * messages must name the cap. Peak RSS is the kernel's VmHWM of this
 * process image: getrusage()'s ru_maxrss survives execve() and so also
 * counts whatever forked us (meson's Python), which would hide or fake a
 * regression; both are printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <zlib.h>

#include "pprof/internal.h"
#include "pprof/pprof.h"
#include "test.h"
#include "tprof.h"

#define MIB (1024.0 * 1024.0)

static double peak_rss_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    if (kb < 0)
        test__fail(__FILE__, __LINE__, "no VmHWM in /proc/self/status");
    return kb * 1024.0 / MIB;
}

/* AddressSanitizer's shadow memory and quarantine inflate RSS several-fold,
 * so under it the bounds are reported, not enforced (the functional checks
 * still run); the plain build enforces them. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_ENFORCED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_ENFORCED 0
#endif
#endif
#ifndef RSS_ENFORCED
#define RSS_ENFORCED 1
#endif

static void assert_rss_below(double mib)
{
    double peak = peak_rss_mib();
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS %.1f MiB (bound %.0f MiB%s; getrusage says %.1f MiB)\n", peak, mib,
           RSS_ENFORCED ? "" : ", not enforced under ASan", (double)ru.ru_maxrss / 1024.0);
    if (!RSS_ENFORCED)
        return;
    if (peak >= mib)
        test__fail(__FILE__, __LINE__, "peak RSS %.1f MiB >= %.0f MiB", peak, mib);
}

/* ---- gzip bomb ---- */

#define BOMB_CHUNK (1u << 20)
#define BOMB_CHUNKS 10240u /* 10 GiB of zeros */

/* Builds gzip(10 GiB of zeros) without ever holding the 10 GiB: after a
 * full flush deflate restarts from an empty state and byte-aligned, so the
 * compressed form of each 1 MiB chunk of zeros is the same bytes, which are
 * repeated. The trailer's CRC is computed with crc32_combine(). */
static uint8_t *make_bomb(size_t *len, bool honest_size)
{
    static uint8_t zeros[BOMB_CHUNK];
    uint8_t hdr[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3 };
    uint8_t *c1 = malloc(BOMB_CHUNK), *c2 = malloc(BOMB_CHUNK), *fin = malloc(64), *bomb;
    size_t c1_len, c2_len, fin_len, off = 0;
    uLong crc_chunk, crc = crc32(0, NULL, 0);
    uint64_t total = (uint64_t)BOMB_CHUNK * BOMB_CHUNKS;
    z_stream z;

    memset(&z, 0, sizeof(z));
    ASSERT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = zeros;
    z.avail_in = BOMB_CHUNK;
    z.next_out = c1;
    z.avail_out = BOMB_CHUNK;
    ASSERT_EQ(deflate(&z, Z_FULL_FLUSH), Z_OK);
    c1_len = BOMB_CHUNK - z.avail_out;
    z.next_in = zeros;
    z.avail_in = BOMB_CHUNK;
    z.next_out = c2;
    z.avail_out = BOMB_CHUNK;
    ASSERT_EQ(deflate(&z, Z_FULL_FLUSH), Z_OK);
    c2_len = BOMB_CHUNK - z.avail_out;
    /* The premise: a chunk after a full flush compresses to the same bytes. */
    ASSERT_EQ(c1_len, c2_len);
    ASSERT_EQ(memcmp(c1, c2, c1_len), 0);
    z.next_in = NULL;
    z.avail_in = 0;
    z.next_out = fin;
    z.avail_out = 64;
    ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    fin_len = 64 - z.avail_out;
    deflateEnd(&z);

    crc_chunk = crc32(0, zeros, BOMB_CHUNK);
    for (unsigned i = 0; i < BOMB_CHUNKS; i++)
        crc = crc32_combine(crc, crc_chunk, BOMB_CHUNK);
    *len = sizeof(hdr) + (size_t)BOMB_CHUNKS * c1_len + fin_len + 8;
    bomb = malloc(*len);
    ASSERT_NOT_NULL(bomb);
    memcpy(bomb, hdr, sizeof(hdr));
    off = sizeof(hdr);
    for (unsigned i = 0; i < BOMB_CHUNKS; i++, off += c1_len)
        memcpy(bomb + off, c1, c1_len);
    memcpy(bomb + off, fin, fin_len);
    off += fin_len;
    uint32_t isize = honest_size ? (uint32_t)total : 1000;
    for (int i = 0; i < 4; i++)
        bomb[off + i] = (uint8_t)(crc >> (8 * i));
    for (int i = 0; i < 4; i++)
        bomb[off + 4 + i] = (uint8_t)(isize >> (8 * i));
    free(c1);
    free(c2);
    free(fin);
    return bomb;
}

static void bomb_test(bool honest_size)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct pprof_limits lim;
    uint8_t *out = NULL;
    size_t len, out_len = 0;
    char err[256];
    uint8_t *bomb = make_bomb(&len, honest_size);

    pprof_limits_default(&lim);
    printf("bomb: %.1f MB on the wire, 10 GiB inflated\n", (double)len / 1e6);
    ASSERT_GT(len, 5 * 1000 * 1000);
    ASSERT_LT(len, 20 * 1000 * 1000);
    ASSERT_EQ(pprof_delta_process(d, bomb, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_ETOOLARGE);
    ASSERT_NULL(out);
    printf("error: %s\n", err);
    ASSERT(strstr(err, "cap 268435456 bytes") != NULL);
    ASSERT_EQ(pprof_validate(bomb, len, &lim, err, sizeof(err)), PPROF_ETOOLARGE);
    free(bomb);
    pprof_delta_free(d);
    /* At most the 256 MiB cap of inflated bytes, plus the 10 MB input. */
    assert_rss_below(256 + 10 + 48);
}

TEST(gzip_bomb_honest_trailer)
{
    bomb_test(true);
}

TEST(gzip_bomb_lying_trailer)
{
    /* The trailer claims 1000 bytes: the inflater runs until the cap. */
    bomb_test(false);
}

/* ---- a million samples ---- */

/* Writes a contention profile of `n` samples, each a distinct stack of two
 * of 2000 locations, by hand (protobuf-c would need ~200 MB of structs). */
static uint8_t *many_samples(size_t n, int64_t t, int64_t scale, size_t *len)
{
    struct twb w = { 0 }, m = { 0 }, inner = { 0 };
    const char *strs[] = { "", "contentions", "count", "delay", "nanoseconds", "f", "f.go" };
    const size_t nloc = 2000;

    twb_bytes(&w, 1, "\x08\x01\x10\x02", 4);
    twb_bytes(&w, 1, "\x08\x03\x10\x04", 4);
    for (size_t i = 0; i < n; i++) {
        m.len = 0;
        inner.len = 0;
        twb_varint(&inner, 1 + i % nloc);
        twb_varint(&inner, 1 + (i / nloc) % nloc);
        twb_bytes(&m, 1, inner.data, inner.len);
        inner.len = 0;
        twb_varint(&inner, (uint64_t)(scale * (int64_t)(1 + i % 3)));
        twb_varint(&inner, (uint64_t)(scale * 1000));
        twb_bytes(&m, 2, inner.data, inner.len);
        twb_bytes(&w, 2, m.data, m.len);
    }
    for (size_t id = 1; id <= nloc; id++) {
        m.len = 0;
        twb_uint(&m, 1, id);
        twb_uint(&m, 3, 0x400000 + 16 * id);
        twb_bytes(&m, 4, "\x08\x01\x10\x07", 4);
        twb_bytes(&w, 4, m.data, m.len);
    }
    twb_bytes(&w, 5, "\x08\x01\x10\x05\x18\x05\x20\x06", 8);
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        twb_bytes(&w, 6, strs[i], strlen(strs[i]));
    twb_uint(&w, 9, (uint64_t)t);
    twb_free(&m);
    twb_free(&inner);
    *len = w.len;
    return w.data;
}

/* Peak RSS bounds, measured under meson's MALLOC_PERTURB_ (which touches
 * every allocated byte) plus about 25%: */
#define LIB_BOUND_MIB 190   /* the two deltas: state + one profile's work */
#define CHECK_BOUND_MIB 550 /* and the test's own protobuf-c decode */

TEST(million_samples)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    uint8_t *in, *out = NULL;
    size_t len, out_len = 0;
    char err[256];
    struct pprof__decoded dp;

    pprof_limits_default(&lim);
    in = many_samples(1000000, 1000, 1, &len);
    printf("1,000,000 samples: %.1f MB raw\n", (double)len / 1e6);
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_DELTA_BASELINE);
    free(in);
    ASSERT_EQ(pprof_delta_keys(d), 1000000);
    in = many_samples(1000000, 2000, 3, &len);
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_DELTA_EMITTED);
    free(in);
    printf("state: %zu keys in %.1f MiB\n", pprof_delta_keys(d), pprof_delta_mem(d) / MIB);
    /* The delta itself, before this test decodes its output to check it. */
    assert_rss_below(LIB_BOUND_MIB);
    /* 1M keys of 8 bytes with two 8-byte values: 24 MB; at most 2x that. */
    ASSERT_LE(pprof_delta_mem(d), 2 * 24 * 1000000 + 4096);
    tp_decode(out, out_len, &dp);
    ASSERT_EQ(dp.prof->n_sample, 1000000);
    /* Sample i went from (1 + i % 3, 1000) to three times that. */
    ASSERT_EQ(dp.prof->sample[4]->value[0], 2 * (1 + 4 % 3));
    ASSERT_EQ(dp.prof->sample[4]->value[1], 2000);
    pprof__decoded_done(&dp);
    free(out);

    in = many_samples(1000001, 3000, 4, &len);
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_ETOOLARGE);
    printf("error: %s\n", err);
    ASSERT(strstr(err, "1000001 samples > cap 1000000") != NULL);
    ASSERT_EQ(pprof_validate(in, len, &lim, err, sizeof(err)), PPROF_ETOOLARGE);
    ASSERT(strstr(err, "1000001 samples > cap 1000000") != NULL);
    free(in);
    pprof_delta_free(d);
    /* Including the protobuf-c copy of the output this test decoded. */
    assert_rss_below(CHECK_BOUND_MIB);
}

/* ---- deep stack ---- */

static uint8_t *deep_stack(size_t depth, size_t *len)
{
    struct twb w = { 0 }, m = { 0 }, ids = { 0 };
    const char *strs[] = { "", "contentions", "count", "delay", "nanoseconds" };

    twb_bytes(&w, 1, "\x08\x01\x10\x02", 4);
    twb_bytes(&w, 1, "\x08\x03\x10\x04", 4);
    for (size_t i = 0; i < depth; i++)
        twb_varint(&ids, 1 + i % 7);
    twb_bytes(&m, 1, ids.data, ids.len);
    twb_bytes(&m, 2, "\x01\x02", 2);
    twb_bytes(&w, 2, m.data, m.len);
    for (size_t id = 1; id <= 7; id++) {
        m.len = 0;
        twb_uint(&m, 1, id);
        twb_uint(&m, 3, 0x1000 * id);
        twb_bytes(&w, 4, m.data, m.len);
    }
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        twb_bytes(&w, 6, strs[i], strlen(strs[i]));
    twb_free(&m);
    twb_free(&ids);
    *len = w.len;
    return w.data;
}

TEST(deep_stack)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    uint8_t *in, *out = NULL;
    size_t len, out_len = 0;
    char err[256];

    pprof_limits_default(&lim);
    in = deep_stack(4096, &len); /* exactly at the cap: fine */
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_DELTA_BASELINE);
    free(in);
    in = deep_stack(5000000, &len);
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_ETOOLARGE);
    printf("error: %s\n", err);
    ASSERT(strstr(err, "stack depth > cap 4096") != NULL);
    ASSERT_EQ(pprof_validate(in, len, &lim, err, sizeof(err)), PPROF_ETOOLARGE);
    ASSERT(strstr(err, "cap 4096") != NULL);
    free(in);
    pprof_delta_free(d);
    /* A 5 MB input: the delta needs only a 4096-entry scratch stack; the
     * protobuf-c validator holds the 40 MB array of ids. */
    assert_rss_below(128);
}

/* ---- garbage ---- */

static uint32_t rng = 0x9e3779b9;

static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

TEST(garbage_protobuf)
{
    struct pprof_limits lim;
    struct tprof *tp;
    uint8_t *good, *buf;
    size_t good_len;
    int rejected = 0, accepted = 0;
    static const char *const cols[] = { "contentions/count", "delay/nanoseconds" };

    pprof_limits_default(&lim);
    tp = tp_new(cols, 2);
    for (uint64_t i = 1; i < 50; i++) {
        uint64_t id = tp_loc(tp, 0x1000 * i, tp_func(tp, "f", "f.go"), (int64_t)i);
        tp_sample(tp, &id, 1, (int64_t[]){ (int64_t)i, 10 });
        tp_label_str(tp, "k", "v");
    }
    good = tp_pack(tp, &good_len, false);
    tp_free(tp);
    buf = malloc(1 << 16);
    for (int iter = 0; iter < 20000; iter++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        uint8_t *out = NULL;
        size_t len, out_len = 0;
        char err[256];
        int rc;

        if (iter % 2) {
            /* Random bytes, sometimes behind a gzip magic. */
            len = next_rand() % (1 << 16);
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)next_rand();
            if (iter % 4 == 1 && len > 2) {
                buf[0] = 0x1f;
                buf[1] = 0x8b;
            }
        } else {
            /* A valid profile with a few bytes flipped. */
            len = good_len;
            memcpy(buf, good, len);
            for (int k = 0; k < 1 + iter % 4; k++)
                buf[next_rand() % len] ^= (uint8_t)(1 + next_rand() % 255);
        }
        /* Twice on one state: baseline, then delta. */
        for (int pass = 0; pass < 2; pass++) {
            rc = pprof_delta_process(d, buf, len, &lim, &out, &out_len, err, sizeof(err));
            if (rc < 0) {
                ASSERT(rc == PPROF_ECORRUPT || rc == PPROF_ETOOLARGE);
                ASSERT(err[0] != '\0');
                ASSERT_NULL(out);
                rejected++;
            } else {
                accepted++;
                if (rc == PPROF_DELTA_EMITTED)
                    ASSERT_EQ(pprof_validate(out, out_len, &lim, err, sizeof(err)), 0);
            }
            free(out);
            out = NULL;
        }
        pprof_delta_free(d);
    }
    printf("garbage: %d rejected, %d accepted\n", rejected, accepted);
    ASSERT_GT(rejected, 10000);
    free(buf);
    free(good);
    assert_rss_below(64);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
