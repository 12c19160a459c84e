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
    ASSERT_EQ(pprof_gzip(data, sizeof(data), 6, &gz, &gz_len), 0);
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
            ASSERT_EQ(cached ? pprof__gzip_cached(data, len, 1, &gz, &gz_len)
                             : pprof_gzip(data, len, 1, &gz, &gz_len),
                      0);
            ASSERT_LT(gz_len, len / 4);
            ASSERT_LE(malloc_usable_size(gz), gz_len + 4096);
            free(gz);
        }
        free(data);
    }
}

TEST(gunzip_grows_past_small_hint_and_multi_member)
{
    static uint8_t data[300000];
    uint8_t *a, *b, *cat, *out;
    size_t a_len, b_len, out_len;

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i % 251 ^ i / 1000);
    ASSERT_EQ(pprof_gzip(data, 1000, 1, &a, &a_len), 0);
    ASSERT_EQ(pprof_gzip(data, sizeof(data), 1, &b, &b_len), 0);
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
    ASSERT_EQ(pprof_gzip(data, 1000, 1, &a, &a_len), 0);
    ASSERT_EQ(pprof_gzip(data, sizeof(data), 6, &b, &b_len), 0);
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
