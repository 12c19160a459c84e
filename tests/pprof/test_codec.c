/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of pprof/'s codec: the capped gunzip and gzip, the varint
 * readers, and the protobuf-c decoder. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "delta_run.h"
#include "pprof/internal.h"
#include "pprof/pprof.h"
#include "test.h"
#include "tprof.h"

/* ---- gunzip ---- */

TEST(two_varints_decoded_at_once_for_every_width_pair)
{
    /* Each width's edges, and values past three bytes, which the helper
     * must refuse; then every pair, followed by bytes that look like more
     * varints or like continuations. */
    static const uint64_t vals[] = { 0,       1,         2,       127,           128,
                                     129,     255,       300,     16383,         16384,
                                     16385,   40000,     1 << 20, (1 << 21) - 1, 1 << 21,
                                     1 << 28, UINT64_MAX };
    static const uint8_t fill[] = { 0x00, 0x7f, 0x80, 0xff };
    const size_t nv = sizeof(vals) / sizeof(vals[0]);

    for (size_t i = 0; i < nv; i++)
        for (size_t j = 0; j < nv; j++)
            for (size_t f = 0; f < sizeof(fill); f++) {
                uint8_t buf[32];
                uint8_t *mid = pprof__put_varint(buf, vals[i]);
                uint8_t *end = pprof__put_varint(mid, vals[j]);
                uint64_t w, a = 0, b = 0;

                memset(end, fill[f], sizeof(buf) - (size_t)(end - buf));
                memcpy(&w, buf, 8);
                unsigned used = pprof__two_varints3(w, &a, &b);
                if (vals[i] < 1 << 21 && vals[j] < 1 << 21) {
                    ASSERT_EQ(used, (size_t)(end - buf));
                    ASSERT_EQ(a, vals[i]);
                    ASSERT_EQ(b, vals[j]);
                } else {
                    ASSERT_EQ(used, 0);
                }
            }
}

TEST(gunzip_roundtrip_and_plain)
{
    uint8_t data[5000], *gz, *out;
    size_t gz_len, out_len;

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 7 % 13);
    ASSERT_EQ(pprof_compress(data, sizeof(data), PPROF_COMPRESS_SMALLEST, &gz, &gz_len), 0);
    ASSERT_EQ(gz[0], 0x1f);
    ASSERT_EQ(pprof_gunzip(gz, gz_len, sizeof(data), &out, &out_len), 0);
    ASSERT_EQ(out_len, sizeof(data));
    ASSERT_EQ(memcmp(out, data, sizeof(data)), 0);
    free(out);
    /* One byte under the real size: refused, whatever the trailer says. */
    ASSERT_EQ(pprof_gunzip(gz, gz_len, sizeof(data) - 1, &out, &out_len), PPROF_ETOOLARGE);
    ASSERT_NULL(out);
    /* A lying trailer (ISIZE = 10) is only a hint: the buffer grows. */
    memcpy(gz + gz_len - 4, "\x0a\x00\x00\x00", 4);
    ASSERT_EQ(pprof_gunzip(gz, gz_len, 1 << 20, &out, &out_len), PPROF_ECORRUPT);
    free(gz);
    /* Plain input is copied, within the cap. */
    ASSERT_EQ(pprof_gunzip(data, 100, 100, &out, &out_len), 0);
    ASSERT_EQ(out_len, 100);
    ASSERT_EQ(memcmp(out, data, 100), 0);
    free(out);
    ASSERT_EQ(pprof_gunzip(data, 101, 100, &out, &out_len), PPROF_ETOOLARGE);
}

/* A compressed profile may wait in the forwarder's queue: it must hold
 * about its own size, not the compressor's worst-case bound (about the raw
 * size). Both gzip paths, a large (mmap'd) and a small output. */
TEST(gzip_output_holds_only_its_bytes)
{
    size_t sizes[2] = { 4 << 20, 64 << 10 };

    for (int k = 0; k < 2; k++) {
        size_t len = sizes[k];
        uint8_t *data = malloc(len), *gz;
        size_t gz_len;

        ASSERT_NOT_NULL(data);
        for (size_t i = 0; i < len; i++)
            data[i] = (uint8_t)(i % 251 * (i / 4096 % 3));
        for (int cached = 0; cached < 2; cached++) {
            ASSERT_EQ(cached
                          ? pprof__compress_cached(data, len, PPROF_COMPRESS_FASTEST, &gz, &gz_len)
                          : pprof_compress(data, len, PPROF_COMPRESS_FASTEST, &gz, &gz_len),
                      0);
            ASSERT_LT(gz_len, len / 4);
            ASSERT_LE(malloc_usable_size(gz), gz_len + 4096);
            free(gz);
        }
        free(data);
    }
}

/* Compressible bytes (a profile's tables repeat) and random ones (stored
 * blocks: the encoders' worst case against the output bound). */
static uint8_t *sample_bytes(size_t len, bool random)
{
    uint8_t *b = malloc(len ? len : 1);
    uint64_t x = 88172645463325252ull;

    for (size_t i = 0; b && i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = random ? (uint8_t)x : (uint8_t)(i % 251 * (i / 4096 % 3) + (x % 16 == 0));
    }
    return b;
}

/* Every setting gives a standard gzip stream of the same bytes, with igzip
 * and without it (a build without ISA-L, a CPU without AVX2), for empty,
 * compressible and incompressible input; the settings keep their order
 * of sizes. */
TEST(every_compression_setting_round_trips_with_each_encoder)
{
    static const size_t lens[] = { 0, 1, 100000, 1 << 20 };

    for (int off = 0; off < 2; off++) {
        pprof__igzip_off = off;
        for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
            for (int random = 0; random < 2; random++) {
                uint8_t *data = sample_bytes(lens[k], random);
                size_t sizes[PPROF_COMPRESS_COUNT] = { 0 };

                ASSERT_NOT_NULL(data);
                for (int c = 0; c < PPROF_COMPRESS_COUNT; c++) {
                    uint8_t *z, *back;
                    size_t z_len, back_len;

                    ASSERT_EQ(pprof_compress(data, lens[k], c, &z, &z_len), 0);
                    if (c == PPROF_COMPRESS_NONE) {
                        ASSERT_EQ(z_len, lens[k]);
                    } else {
                        ASSERT(z_len >= 18 && z[0] == 0x1f && z[1] == 0x8b);
                        /* Stored blocks cost five bytes per 64 KiB at most. */
                        ASSERT_LE(z_len, lens[k] + 5 * (lens[k] / 65535 + 1) + 18 + 64);
                    }
                    ASSERT_EQ(pprof_gunzip(z, z_len, lens[k], &back, &back_len), 0);
                    ASSERT_EQ(back_len, lens[k]);
                    ASSERT(lens[k] == 0 || memcmp(back, data, lens[k]) == 0);
                    sizes[c] = z_len;
                    free(back);
                    free(z);
                }
                if (lens[k] >= 100000 && !random) {
                    ASSERT_LT(sizes[PPROF_COMPRESS_SMALLEST], sizes[PPROF_COMPRESS_BALANCED]);
                    ASSERT_LE(sizes[PPROF_COMPRESS_BALANCED], sizes[PPROF_COMPRESS_FASTEST]);
                    ASSERT_LT(sizes[PPROF_COMPRESS_FASTEST], lens[k] / 4);
                }
                free(data);
            }
        }
    }
    pprof__igzip_off = false;
    ASSERT_EQ(pprof_compress((const uint8_t *)"x", 1, PPROF_COMPRESS_COUNT, &(uint8_t *){ 0 },
                             &(size_t){ 0 }),
              -EINVAL);
}

/* Where the build has ISA-L and the CPU runs its AVX2 code (the machines
 * the project is tested on), the fast settings are igzip's; switched off,
 * or without it, libdeflate's. */
TEST(compression_settings_use_the_measured_encoders)
{
    bool igzip = false;

#if defined(PROFLET_HAVE_ISAL) && defined(__x86_64__)
    igzip = __builtin_cpu_supports("avx2");
#elif defined(PROFLET_HAVE_ISAL) && defined(__aarch64__)
    igzip = true;
#endif
    ASSERT_STR_EQ(pprof_compression_encoder(PPROF_COMPRESS_FASTEST),
                  igzip ? "igzip level 0" : "libdeflate level 1");
    ASSERT_STR_EQ(pprof_compression_encoder(PPROF_COMPRESS_BALANCED),
                  igzip ? "igzip level 2" : "libdeflate level 1");
    ASSERT_STR_EQ(pprof_compression_encoder(PPROF_COMPRESS_SMALLEST), "libdeflate level 6");
    ASSERT_STR_EQ(pprof_compression_encoder(PPROF_COMPRESS_NONE), "none");
    pprof__igzip_off = true;
    ASSERT_STR_EQ(pprof_compression_encoder(PPROF_COMPRESS_BALANCED), "libdeflate level 1");
    pprof__igzip_off = false;
    ASSERT_STR_EQ(pprof_compression_name(PPROF_COMPRESS_BALANCED), "balanced");
    ASSERT_EQ(PPROF_DEFAULT_COMPRESSION, PPROF_COMPRESS_BALANCED);
}

/* An endpoint's own setting: gzip in, another gzip (or plain) out, the
 * same bytes inside; plain input is compressed; a damaged stream is
 * refused, not passed off as compressed. */
TEST(recompress_between_settings)
{
    size_t len = 300000;
    uint8_t *data = sample_bytes(len, false), *fast, *small, *plain, *again, *back;
    size_t fast_len, small_len, plain_len, again_len, back_len;

    ASSERT_NOT_NULL(data);
    ASSERT_EQ(pprof_compress(data, len, PPROF_COMPRESS_FASTEST, &fast, &fast_len), 0);
    ASSERT_EQ(pprof_recompress(fast, fast_len, len, PPROF_COMPRESS_SMALLEST, &small, &small_len),
              0);
    ASSERT_LT(small_len, fast_len);
    ASSERT_EQ(pprof_gunzip(small, small_len, len, &back, &back_len), 0);
    ASSERT_EQ(back_len, len);
    ASSERT_EQ(memcmp(back, data, len), 0);
    free(back);
    ASSERT_EQ(pprof_recompress(fast, fast_len, len, PPROF_COMPRESS_NONE, &plain, &plain_len), 0);
    ASSERT_EQ(plain_len, len);
    ASSERT_EQ(memcmp(plain, data, len), 0);
    ASSERT_EQ(pprof_recompress(plain, plain_len, len, PPROF_COMPRESS_BALANCED, &again, &again_len),
              0);
    ASSERT_EQ(pprof_gunzip(again, again_len, len, &back, &back_len), 0);
    ASSERT_EQ(memcmp(back, data, len), 0);
    free(back);
    /* Over its cap, or damaged: an error, nothing out. */
    ASSERT_EQ(pprof_recompress(fast, fast_len, len - 1, PPROF_COMPRESS_SMALLEST, &back, &back_len),
              PPROF_ETOOLARGE);
    ASSERT_NULL(back);
    fast[fast_len - 8] ^= 0x55; /* the CRC */
    ASSERT_EQ(pprof_recompress(fast, fast_len, len, PPROF_COMPRESS_SMALLEST, &back, &back_len),
              PPROF_ECORRUPT);
    ASSERT_NULL(back);
    free(again);
    free(plain);
    free(small);
    free(fast);
    free(data);
}

TEST(gunzip_grows_past_small_hint_and_multi_member)
{
    static uint8_t data[300000];
    uint8_t *a, *b, *cat, *out;
    size_t a_len, b_len, out_len;

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i % 251 ^ i / 1000);
    ASSERT_EQ(pprof_compress(data, 1000, PPROF_COMPRESS_FASTEST, &a, &a_len), 0);
    ASSERT_EQ(pprof_compress(data, sizeof(data), PPROF_COMPRESS_FASTEST, &b, &b_len), 0);
    cat = malloc(a_len + b_len);
    memcpy(cat, a, a_len);
    memcpy(cat + a_len, b, b_len);
    /* The last member's trailer says 300000, the total is 301000. */
    ASSERT_EQ(pprof_gunzip(cat, a_len + b_len, 1 << 20, &out, &out_len), 0);
    ASSERT_EQ(out_len, 1000 + sizeof(data));
    ASSERT_EQ(memcmp(out, data, 1000), 0);
    ASSERT_EQ(memcmp(out + 1000, data, sizeof(data)), 0);
    free(out);
    ASSERT_EQ(pprof_gunzip(cat, a_len + b_len, 300999, &out, &out_len), PPROF_ETOOLARGE);
    /* Trailing garbage after a member is not a profile (its last four
     * bytes make a small ISIZE hint, so decompression does run). */
    cat = realloc(cat, a_len + b_len + 4);
    memcpy(cat + a_len + b_len, "x\0\0\0", 4);
    ASSERT_EQ(pprof_gunzip(cat, a_len + b_len + 4, 1 << 20, &out, &out_len), PPROF_ECORRUPT);
    /* A damaged member is corrupt (the CRC or the deflate data says so). */
    b[b_len / 2] ^= 0x55;
    ASSERT_EQ(pprof_gunzip(b, b_len, 1 << 20, &out, &out_len), PPROF_ECORRUPT);
    /* A truncated one is refused too; its last bytes are no trailer, so the
     * refusal may come from the size hint or from the inflater. */
    ASSERT_LT(pprof_gunzip(b, b_len - 9, 1 << 20, &out, &out_len), 0);
    ASSERT_NULL(out);
    free(cat);
    free(a);
    free(b);
}

/* The pass-through check refuses what pprof_gunzip() refuses, keeps
 * nothing, and accepts what it accepts: a CRC flipped in the trailer (the
 * deflate data intact) is caught only by the CRC. */
TEST(gzip_check_agrees_with_gunzip_and_checks_the_crc)
{
    static uint8_t data[200000];
    uint8_t *a, *b, *cat;
    size_t a_len, b_len;

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i % 251 ^ i / 1000);
    ASSERT_EQ(pprof_compress(data, 1000, PPROF_COMPRESS_FASTEST, &a, &a_len), 0);
    ASSERT_EQ(pprof_compress(data, sizeof(data), PPROF_COMPRESS_SMALLEST, &b, &b_len), 0);
    ASSERT_EQ(pprof_gzip_check(b, b_len, sizeof(data)), 0);
    ASSERT_EQ(pprof_gzip_check(b, b_len, sizeof(data) - 1), PPROF_ETOOLARGE);
    cat = malloc(a_len + b_len);
    memcpy(cat, a, a_len);
    memcpy(cat + a_len, b, b_len);
    ASSERT_EQ(pprof_gzip_check(cat, a_len + b_len, 1000 + sizeof(data)), 0);
    ASSERT_EQ(pprof_gzip_check(cat, a_len + b_len, 1000 + sizeof(data) - 1), PPROF_ETOOLARGE);
    ASSERT_LT(pprof_gzip_check(b, b_len - 9, 1 << 20), 0);
    b[b_len - 8] ^= 0x01; /* the CRC-32 */
    ASSERT_EQ(pprof_gzip_check(b, b_len, 1 << 20), PPROF_ECORRUPT);
    b[b_len - 8] ^= 0x01;
    b[b_len / 2] ^= 0x55;
    ASSERT_EQ(pprof_gzip_check(b, b_len, 1 << 20), PPROF_ECORRUPT);
    /* Plain input is checked against the cap only. */
    ASSERT_EQ(pprof_gzip_check(data, 100, 100), 0);
    ASSERT_EQ(pprof_gzip_check(data, 101, 100), PPROF_ETOOLARGE);
    free(cat);
    free(a);
    free(b);
}

/* ---- decoder ---- */

TEST(decode_uses_a_handful_of_allocations)
{
    struct tprof *tp = mem_prof(1);
    struct pprof__decoded dp;
    uint8_t *raw;
    size_t len;

    for (uint64_t i = 0; i < 2000; i++) {
        uint64_t addrs[3] = { 0x1000 + i, 0x2000 + i % 7, 0x3000 };
        int64_t v[4] = { (int64_t)i, 2, 3, 4 };
        add(tp, addrs, 3, v);
        tp_label_num(tp, "bytes", 64, NULL);
    }
    raw = tp_pack(tp, &len, false);
    tp_free(tp);
    tp_decode(raw, len, &dp);
    ASSERT_EQ(dp.prof->n_sample, 2000);
    ASSERT_EQ(dp.prof->sample[1999]->value[0], 1999);
    ASSERT_LE(pprof__decoded_arena_chunks(&dp), 3);
    ASSERT_GT(pprof__decoded_arena_bytes(&dp), 2000 * sizeof(Perftools__Profiles__Sample));
    pprof__decoded_done(&dp);
    free(raw);
}

TEST(validate_rejects_bad_references)
{
    struct pprof_limits lim;
    struct tprof *tp;
    uint8_t *buf;
    size_t len;
    char err[256];
    uint64_t a[1] = { 0x10 };
    int64_t v[2] = { 1, 1 };

    pprof_limits_default(&lim);
    tp = cont_prof(1);
    add(tp, a, 1, v);
    buf = tp_pack(tp, &len, true);
    ASSERT_EQ(pprof_validate(buf, len, &lim, err, sizeof(err)), 0);
    free(buf);
    tp_proto(tp)->sample[0]->location_id[0] = 99;
    buf = tp_pack(tp, &len, true);
    ASSERT_EQ(pprof_validate(buf, len, &lim, err, sizeof(err)), PPROF_ECORRUPT);
    ASSERT(strstr(err, "unknown location") != NULL);
    free(buf);
    tp_proto(tp)->sample[0]->location_id[0] = 1;
    tp_proto(tp)->function[0]->name = 1000;
    buf = tp_pack(tp, &len, true);
    ASSERT_EQ(pprof_validate(buf, len, &lim, err, sizeof(err)), PPROF_ECORRUPT);
    free(buf);
    tp_free(tp);
    ASSERT_EQ(pprof_validate((const uint8_t *)"\x0a\x05zz", 4, &lim, err, sizeof(err)),
              PPROF_ECORRUPT);
}
