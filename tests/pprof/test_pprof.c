/* Unit tests of pprof/: capped gunzip, the protobuf-c decoder, and every
 * delta rule of docs/design.md "Deltas". Profiles are built with protobuf-c
 * (tprof.c) and outputs are read back with protobuf-c and matched by content
 * (addresses or function/file/line, sorted labels), never by id, so the
 * tests do not share code paths with the wire scanner they check. Expected
 * values are worked out by hand in each test; the randomized test checks
 * against a reference model that sums and subtracts decoded samples. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "pprof/pprof.h"
#include "pprof/internal.h"
#include "test.h"
#include "tprof.h"

static const char *const MEM_COLS[] = {"alloc_objects/count", "alloc_space/bytes",
                                       "inuse_objects/count", "inuse_space/bytes"};
static const char *const CONT_COLS[] = {"contentions/count", "delay/nanoseconds"};

static struct tprof *mem_prof(int64_t t)
{
    struct tprof *tp = tp_new(MEM_COLS, 4);

    tp_mapping(tp, 0x400000, 0x800000, "/app", "build-1");
    tp_time(tp, t);
    return tp;
}

static struct tprof *cont_prof(int64_t t)
{
    struct tprof *tp = tp_new(CONT_COLS, 2);

    tp_mapping(tp, 0x400000, 0x800000, "/app", "build-1");
    tp_time(tp, t);
    return tp;
}

/* Adds a sample whose stack is the given addresses (each a location with a
 * function named after it). */
static void add(struct tprof *tp, const uint64_t *addrs, size_t n, const int64_t *vals)
{
    uint64_t ids[16];

    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "fn_%llx", (unsigned long long)addrs[i]);
        ids[i] = tp_loc(tp, addrs[i], tp_func(tp, name, "app.go"), (int64_t)(addrs[i] & 0xff));
    }
    tp_sample(tp, ids, n, vals);
}

struct run {
    int rc;
    char err[256];
    uint8_t *out;
    size_t out_len;
    struct pprof__decoded dec;
};

/* Packs `tp` (gzip), frees it, feeds it to `d`; decodes any output. */
static void run_lim(struct pprof_delta *d, struct tprof *tp, const struct pprof_limits *lim,
                    struct run *r)
{
    size_t len;
    uint8_t *in = tp_pack(tp, &len, true);

    memset(r, 0, sizeof(*r));
    tp_free(tp);
    r->rc = pprof_delta_process(d, in, len, lim, &r->out, &r->out_len, r->err, sizeof(r->err));
    free(in);
    if (r->rc == PPROF_DELTA_EMITTED)
        tp_decode(r->out, r->out_len, &r->dec);
    else
        ASSERT_NULL(r->out);
}

static void run(struct pprof_delta *d, struct tprof *tp, struct run *r)
{
    struct pprof_limits lim;

    pprof_limits_default(&lim);
    run_lim(d, tp, &lim, r);
}

static void run_done(struct run *r)
{
    free(r->out);
    pprof__decoded_done(&r->dec);
}

/* Feeds `d` the profile make(1, 1), a baseline, then make(2, 3), whose
 * delta `r` then holds. */
static void run_scaled_pair(struct pprof_delta *d, struct tprof *(*make)(int64_t, int64_t),
                            struct run *r)
{
    run(d, make(1, 1), r);
    ASSERT_EQ(r->rc, PPROF_DELTA_BASELINE);
    run_done(r);
    run(d, make(2, 3), r);
    ASSERT_EQ(r->rc, PPROF_DELTA_EMITTED);
}

static void assert_vals(const Perftools__Profiles__Sample *s, const int64_t *want, size_t n)
{
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(s->n_value, n);
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(s->value[i], want[i]);
}

/* A delta was emitted with `n` samples, each of two values v, v. */
static void assert_all_emitted(const struct run *r, size_t n, int64_t v)
{
    ASSERT_EQ(r->rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r->dec.prof->n_sample, n);
    for (size_t i = 0; i < n; i++)
        assert_vals(r->dec.prof->sample[i], (int64_t[]){v, v}, 2);
}

/* ---- gunzip ---- */

TEST(two_varints_decoded_at_once_for_every_width_pair)
{
    /* Each width's edges, and values past three bytes, which the helper
     * must refuse; then every pair, followed by bytes that look like more
     * varints or like continuations. */
    static const uint64_t vals[] = {0,       1,        2,       127,           128,
                                    129,     255,      300,     16383,         16384,
                                    16385,   40000,    1 << 20, (1 << 21) - 1, 1 << 21,
                                    1 << 28, UINT64_MAX};
    static const uint8_t fill[] = {0x00, 0x7f, 0x80, 0xff};
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
    size_t sizes[2] = {4 << 20, 64 << 10};

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
        uint64_t addrs[3] = {0x1000 + i, 0x2000 + i % 7, 0x3000};
        int64_t v[4] = {(int64_t)i, 2, 3, 4};
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
    uint64_t a[1] = {0x10};
    int64_t v[2] = {1, 1};

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

/* ---- delta rules ---- */

TEST(first_profile_is_baseline)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct tprof *tp = mem_prof(1000);
    uint64_t a[2] = {0x1000, 0x2000};
    int64_t v[4] = {10, 640, 2, 128};
    struct run r;

    ASSERT_EQ(pprof_delta_mem(d) >= sizeof(void *), 1);
    add(tp, a, 2, v);
    tp_label_num(tp, "bytes", 64, NULL);
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    ASSERT_EQ(r.out_len, 0);
    ASSERT_EQ(pprof_delta_keys(d), 1);
    run_done(&r);
    pprof_delta_free(d);
    pprof_delta_free(NULL);
}

TEST(memory_alloc_differenced_inuse_passed_through)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[2] = {0x1000, 0x2000}, B[1] = {0x3000}, C[2] = {0x4000, 0x2000};
    struct tprof *tp;
    struct run r;

    tp = mem_prof(1000);
    add(tp, A, 2, (int64_t[]){10, 640, 2, 128});
    tp_label_num(tp, "bytes", 64, NULL);
    add(tp, B, 1, (int64_t[]){1, 128, 1, 128});
    tp_label_num(tp, "bytes", 128, NULL);
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);

    tp = mem_prof(2000);
    add(tp, C, 2, (int64_t[]){4, 256, 4, 256});
    tp_label_num(tp, "bytes", 64, NULL);
    add(tp, B, 1, (int64_t[]){1, 128, 0, 0});
    tp_label_num(tp, "bytes", 128, NULL);
    add(tp, A, 2, (int64_t[]){15, 960, 3, 192});
    tp_label_num(tp, "bytes", 64, NULL);
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.out[0], 0x1f); /* gzip at the default level */
    ASSERT_EQ(r.dec.prof->n_sample, 2); /* B: no allocation, nothing in use */
    assert_vals(tp_find(r.dec.prof, "1000,2000,|bytes=#64#;"), (int64_t[]){5, 320, 3, 192}, 4);
    assert_vals(tp_find(r.dec.prof, "4000,2000,|bytes=#64#;"), (int64_t[]){4, 256, 4, 256}, 4);
    ASSERT_NULL(tp_find(r.dec.prof, "3000,|bytes=#128#;"));
    ASSERT_EQ(r.dec.prof->time_nanos, 2000);
    ASSERT_EQ(r.dec.prof->duration_nanos, 1000);
    ASSERT_EQ(r.dec.prof->n_sample_type, 4);
    ASSERT_STR_EQ(r.dec.prof->string_table[r.dec.prof->sample_type[1]->type], "alloc_space");
    ASSERT_NOT_NULL(r.dec.prof->period_type);
    ASSERT_EQ(r.dec.prof->period, 524288);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(contention_unchanged_samples_dropped)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    uint64_t A[1] = {0x10}, B[2] = {0x20, 0x10};
    struct tprof *tp;
    struct run r;

    tp = cont_prof(1);
    add(tp, A, 1, (int64_t[]){3, 300});
    add(tp, B, 2, (int64_t[]){5, 500});
    run(d, tp, &r);
    run_done(&r);
    tp = cont_prof(2);
    add(tp, A, 1, (int64_t[]){3, 300});
    add(tp, B, 2, (int64_t[]){7, 900});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 1);
    assert_vals(tp_find(r.dec.prof, "20,10,|"), (int64_t[]){2, 400}, 2);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(duplicate_keys_summed)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    uint64_t A[2] = {0x10, 0x20};
    struct tprof *tp;
    struct run r;

    /* Two samples with distinct location ids but the same addresses. */
    tp = cont_prof(1);
    add(tp, A, 2, (int64_t[]){2, 20});
    add(tp, A, 2, (int64_t[]){3, 30});
    run(d, tp, &r);
    ASSERT_EQ(pprof_delta_keys(d), 1);
    run_done(&r);
    tp = cont_prof(2);
    add(tp, A, 2, (int64_t[]){4, 45});
    add(tp, A, 2, (int64_t[]){5, 55});
    add(tp, A, 2, (int64_t[]){1, 0});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 1);
    assert_vals(tp_find(r.dec.prof, "10,20,|"), (int64_t[]){10 - 5, 100 - 50}, 2);
    run_done(&r);
    pprof_delta_free(d);
}

/* Go writes a profile's samples in the order of its last one, new stacks
 * first: the state walk then follows the samples, and only the others are
 * indexed. Here every way a sample can leave that order: new keys, one met
 * twice among them, an old key ahead of its place and in it, one moved to
 * the end, one met in its place and again at the end, and one gone. */
static void add_one(struct tprof *tp, uint64_t addr, int64_t v0, int64_t v1)
{
    add(tp, &addr, 1, (int64_t[]){v0, v1});
}

static void assert_one(const struct run *r, uint64_t addr, int64_t v0, int64_t v1)
{
    char key[32];

    snprintf(key, sizeof(key), "%llx,|", (unsigned long long)addr);
    assert_vals(tp_find(r->dec.prof, key), (int64_t[]){v0, v1}, 2);
}

TEST(samples_in_the_last_order_with_keys_new_moved_repeated_and_gone)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;

    tp = cont_prof(1);
    for (int64_t i = 1; i <= 256; i++)
        add_one(tp, 0x100 + (uint64_t)i, 10 * i, 100 * i);
    run(d, tp, &r);
    run_done(&r);

    tp = cont_prof(2);
    add_one(tp, 0x900, 1, 1); /* new */
    add_one(tp, 0x1c8, 2, 2); /* old, far ahead of its place */
    add_one(tp, 0x901, 3, 3); /* new */
    add_one(tp, 0x900, 4, 4); /* new, again */
    for (int64_t i = 1; i <= 256; i++)
        if (i != 3 && i != 10) /* 3 moves to the end, 10 is gone */
            add_one(tp, 0x100 + (uint64_t)i, 11 * i, 101 * i);
    add_one(tp, 0x103, 33, 303);
    add_one(tp, 0x107, 7, 70); /* again, after its place */
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 257);
    assert_one(&r, 0x900, 5, 5);
    assert_one(&r, 0x901, 3, 3);
    assert_one(&r, 0x1c8, 200 + 2, 200 + 2);
    /* A key met twice is written where it was first met. */
    ASSERT_TRUE(tp_find(r.dec.prof, "1c8,|") == r.dec.prof->sample[1]);
    assert_one(&r, 0x103, 3, 3);
    assert_one(&r, 0x107, 7 + 7, 7 + 70);
    assert_one(&r, 0x200, 256, 256);
    ASSERT_NULL(tp_find(r.dec.prof, "10a,|"));
    run_done(&r);
    ASSERT_EQ(pprof_delta_keys(d), 257);

    /* The state kept each key's sum once: one more of each now. */
    tp = cont_prof(3);
    add_one(tp, 0x900, 6, 6);
    add_one(tp, 0x901, 4, 4);
    for (int64_t i = 1; i <= 256; i++) {
        int64_t v0 = 11 * i + 1, v1 = 101 * i + 1;
        if (i == 200)
            v0 += 2, v1 += 2;
        if (i == 7)
            v0 += 7, v1 += 70;
        if (i != 10)
            add_one(tp, 0x100 + (uint64_t)i, v0, v1);
    }
    run(d, tp, &r);
    assert_all_emitted(&r, 257, 1);
    run_done(&r);
    pprof_delta_free(d);
}

/* ---- filters ---- */

static bool keep_all_but_span_id(const char *key, size_t len, void *ud)
{
    (*(int *)ud)++;
    return !(len == 7 && memcmp(key, "span_id", 7) == 0);
}

static void assert_no_string(const Perftools__Profiles__Profile *p, const char *s)
{
    for (size_t i = 0; i < p->n_string_table; i++)
        ASSERT(strcmp(p->string_table[i], s) != 0);
}

static const char *type_name(const Perftools__Profiles__Profile *p, size_t i)
{
    return p->string_table[p->sample_type[i]->type];
}

/* A dropped label leaves the key, the samples and the string table;
 * samples that differed only by it are summed before the delta, so totals
 * per stack stay exact. The filter is asked once per key string. */
TEST(filter_drops_labels_and_merges_what_became_equal)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    int asked = 0;
    struct pprof_filter f = {.label_keep = keep_all_but_span_id, .label_ud = &asked};
    uint64_t A[2] = {0x10, 0x20}, B[1] = {0x30};
    struct tprof *tp;
    struct run r;

    pprof_delta_set_filter(d, &f);
    tp = cont_prof(1);
    add(tp, A, 2, (int64_t[]){1, 10});
    tp_label_str(tp, "span_id", "s1");
    add(tp, A, 2, (int64_t[]){2, 20});
    tp_label_str(tp, "span_id", "s2");
    add(tp, A, 2, (int64_t[]){1, 5});
    tp_label_str(tp, "k", "v");
    tp_label_str(tp, "span_id", "s3");
    add(tp, B, 1, (int64_t[]){1, 1});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    ASSERT_EQ(pprof_delta_keys(d), 3); /* A, A{k=v}, B */
    ASSERT_EQ(asked, 2);               /* span_id and k, once each */
    run_done(&r);

    tp = cont_prof(2);
    add(tp, A, 2, (int64_t[]){2, 15});
    tp_label_str(tp, "span_id", "s1");
    add(tp, A, 2, (int64_t[]){4, 40});
    tp_label_str(tp, "span_id", "s2");
    add(tp, A, 2, (int64_t[]){1, 1});
    tp_label_str(tp, "span_id", "s4"); /* new span, same stack */
    add(tp, A, 2, (int64_t[]){1, 5});
    tp_label_str(tp, "span_id", "s3");
    tp_label_str(tp, "k", "v");
    add(tp, B, 1, (int64_t[]){3, 3});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 2); /* A{k=v} did not change */
    assert_vals(tp_find(r.dec.prof, "10,20,|"), (int64_t[]){7 - 3, 56 - 30}, 2);
    assert_vals(tp_find(r.dec.prof, "30,|"), (int64_t[]){2, 2}, 2);
    assert_no_string(r.dec.prof, "span_id");
    assert_no_string(r.dec.prof, "s4");
    run_done(&r);

    /* The same filter built again (a reload): the state stays. */
    struct pprof_filter again = f;
    pprof_delta_set_filter(d, &again);
    tp = cont_prof(3);
    add(tp, B, 1, (int64_t[]){4, 4});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "30,|"), (int64_t[]){1, 1}, 2);
    run_done(&r);
    /* Another filter, or none, re-seeds: the labels are keys again. */
    struct pprof_filter other = f;
    other.fingerprint++;
    pprof_delta_set_filter(d, &other);
    tp = cont_prof(4);
    add(tp, B, 1, (int64_t[]){5, 5});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    pprof_delta_set_filter(d, NULL);
    tp = cont_prof(5);
    add(tp, A, 2, (int64_t[]){9, 90});
    tp_label_str(tp, "span_id", "s1");
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    pprof_delta_free(d);
}

/* Sample types by name: the output's sample_type, values and
 * default_sample_type agree; the kept cumulative column is differenced,
 * the others pass through. */
TEST(filter_drops_sample_types_and_their_default)
{
    static const char *const drop_objects[] = {"alloc_objects"};
    struct pprof_filter f = {.types = drop_objects, .n_types = 1};
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[1] = {0x10};
    struct tprof *tp;
    struct run r;

    pprof_delta_set_filter(d, &f);
    tp = mem_prof(1);
    tp_proto(tp)->default_sample_type = (int64_t)tp_str(tp, "alloc_objects");
    add(tp, A, 1, (int64_t[]){1, 100, 1, 100});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    tp = mem_prof(2);
    tp_proto(tp)->default_sample_type = (int64_t)tp_str(tp, "alloc_objects");
    add(tp, A, 1, (int64_t[]){3, 300, 2, 200});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample_type, 3);
    ASSERT_STR_EQ(type_name(r.dec.prof, 0), "alloc_space");
    ASSERT_STR_EQ(type_name(r.dec.prof, 1), "inuse_objects");
    ASSERT_STR_EQ(type_name(r.dec.prof, 2), "inuse_space");
    ASSERT_EQ(r.dec.prof->default_sample_type, 0);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){200, 2, 200}, 3);
    run_done(&r);
    pprof_delta_free(d);
}

/* Keeping only in-use columns leaves nothing to difference: profiles go
 * out from the first, as they came but for the filter, and the default
 * type stays when it is kept. Dropping every type is an error. */
TEST(filter_without_cumulative_columns_emits_every_profile)
{
    static const char *const inuse[] = {"inuse_space"};
    static const char *const all[] = {"alloc_objects", "alloc_space", "inuse_objects",
                                      "inuse_space"};
    struct pprof_filter keep = {.types = inuse, .n_types = 1, .types_keep = true};
    struct pprof_filter none = {.types = all, .n_types = 4};
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[1] = {0x10}, B[1] = {0x20};
    struct tprof *tp;
    struct run r;

    pprof_delta_set_filter(d, &keep);
    for (int64_t t = 1; t <= 2; t++) {
        tp = mem_prof(t);
        tp_proto(tp)->default_sample_type = (int64_t)tp_str(tp, "inuse_space");
        add(tp, A, 1, (int64_t[]){5, 500, 1, 64 * t});
        add(tp, B, 1, (int64_t[]){5, 500, 0, 0}); /* nothing in use: dropped */
        run(d, tp, &r);
        ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
        ASSERT_EQ(r.dec.prof->n_sample_type, 1);
        ASSERT_STR_EQ(type_name(r.dec.prof, 0), "inuse_space");
        ASSERT_STR_EQ(r.dec.prof->string_table[r.dec.prof->default_sample_type], "inuse_space");
        ASSERT_EQ(r.dec.prof->n_sample, 1);
        assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){64 * t}, 1);
        ASSERT_EQ(pprof_delta_keys(d), 0); /* no state */
        run_done(&r);
    }
    pprof_delta_set_filter(d, &none);
    tp = mem_prof(3);
    add(tp, A, 1, (int64_t[]){5, 500, 1, 64});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_EFILTER);
    run_done(&r);
    pprof_delta_free(d);
}

/* Profiles sent as they came, filtered: no state, each one emitted, its
 * duration its own, samples merged once their dropped labels are gone. */
TEST(filter_on_profiles_sent_as_they_came)
{
    static const char *const cpu_cols[] = {"samples/count", "cpu/nanoseconds"};
    int asked = 0;
    struct pprof_filter f = {.label_keep = keep_all_but_span_id, .label_ud = &asked};
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_NONE);
    uint64_t A[2] = {0x10, 0x20};
    struct tprof *tp;
    struct run r;

    pprof_delta_set_filter(d, &f);
    for (int64_t t = 1; t <= 2; t++) {
        tp = tp_new(cpu_cols, 2);
        tp_mapping(tp, 0x400000, 0x800000, "/app", "build-1");
        tp_time(tp, t * 1000000000);
        tp_proto(tp)->duration_nanos = 10000000000;
        add(tp, A, 2, (int64_t[]){1, 10000000});
        tp_label_str(tp, "span_id", "a");
        tp_label_str(tp, "handler", "/x");
        add(tp, A, 2, (int64_t[]){2, 20000000});
        tp_label_str(tp, "handler", "/x");
        tp_label_str(tp, "span_id", "b");
        run(d, tp, &r);
        ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
        ASSERT_EQ(r.dec.prof->n_sample, 1);
        ASSERT_EQ(r.dec.prof->duration_nanos, 10000000000);
        assert_vals(tp_find(r.dec.prof, "10,20,|handler=/x#0#;"), (int64_t[]){3, 30000000}, 2);
        assert_no_string(r.dec.prof, "span_id");
        run_done(&r);
    }
    pprof_delta_free(d);
}

/* The delta's key index against a linear search, on the shapes a profile
 * can give it: hash-like keys, runs of one key (duplicate samples, summed
 * into the earliest), and keys that agree in every bit a slot could be
 * taken from but for the salt (as a target that knows the key function but
 * not the process's salt could craft them): every key must be found, the
 * first of equal keys must hold them, and an absent key must be absent. */
TEST(key_index_finds_every_key_and_keeps_the_first_of_equal_ones)
{
    enum { N = 600 };
    static uint64_t keys[N];
    static uint32_t slot[1u << 12];
    uint64_t x = 0x243f6a8885a308d3ULL;
    unsigned bits = pprof__index_bits(N);

    ASSERT((1u << bits) >= 4 * N && (1u << bits) <= sizeof(slot) / sizeof(slot[0]));
    /* Past 8192 slots, half full at most. */
    ASSERT_EQ(pprof__index_bits(4096), 13);
    ASSERT_EQ(pprof__index_bits(100000), 18);
    ASSERT_U64_EQ(pprof__index_salt() & 1, 1);
    ASSERT_U64_EQ(pprof__index_salt(), pprof__index_salt());
    for (int shape = 0; shape < 3; shape++) {
        struct pprof__index ix = {slot, ((size_t)1 << bits) - 1, 64 - bits, pprof__index_salt()};
        size_t distinct = 0, want_distinct = 0;

        memset(slot, 0, sizeof(slot));
        for (size_t i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            switch (shape) {
            case 0: keys[i] = x; break;                        /* hashes */
            case 1: keys[i] = x % 37; break;                   /* runs of equal keys */
            case 2: keys[i] = (0xabcdULL << 48) | (i << 20); break; /* one top, one bottom */
            }
            if (shape != 1 && i % 7 == 3)
                keys[i] = keys[i / 2]; /* an earlier key again */
        }
        for (size_t i = 0; i < N; i++) {
            size_t first = 0;
            while (keys[first] != keys[i])
                first++;
            uint32_t got = pprof__index_add(&ix, keys, (uint32_t)i);
            ASSERT_EQ(got, first);
            distinct += got == i;
            want_distinct += first == i;
        }
        for (size_t i = 0; i < N; i++) {
            size_t first = 0;
            while (keys[first] != keys[i])
                first++;
            ASSERT_EQ(pprof__index_find(&ix, keys, keys[i]), first);
        }
        ASSERT_EQ(pprof__index_find(&ix, keys, 0x5555555555555555ULL), UINT32_MAX);
        ASSERT_EQ(distinct, want_distinct);
        ASSERT(shape != 1 || distinct == 37);
    }
}

TEST(labels_keyed_sorted_and_by_content)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[1] = {0x10};
    struct tprof *tp;
    struct run r;

    tp = mem_prof(1);
    add(tp, A, 1, (int64_t[]){1, 64, 0, 0});
    tp_label_str(tp, "k1", "a");
    tp_label_str(tp, "k2", "b");
    tp_label_num(tp, "bytes", 64, NULL);
    add(tp, A, 1, (int64_t[]){1, 128, 0, 0});
    tp_label_str(tp, "k1", "a");
    tp_label_str(tp, "k2", "b");
    tp_label_num(tp, "bytes", 128, NULL);
    run(d, tp, &r);
    ASSERT_EQ(pprof_delta_keys(d), 2); /* the bytes label separates them */
    run_done(&r);

    tp = mem_prof(2);
    tp_str(tp, "padding so that string indices move");
    add(tp, A, 1, (int64_t[]){3, 384, 0, 0});
    tp_label_num(tp, "bytes", 128, NULL);
    tp_label_str(tp, "k2", "b");
    tp_label_str(tp, "k1", "a");
    add(tp, A, 1, (int64_t[]){2, 128, 0, 0});
    tp_label_str(tp, "k2", "b");
    tp_label_num(tp, "bytes", 64, NULL);
    tp_label_str(tp, "k1", "a");
    add(tp, A, 1, (int64_t[]){1, 64, 0, 0}); /* same stack, other label value */
    tp_label_str(tp, "k1", "z");
    tp_label_str(tp, "k2", "b");
    tp_label_num(tp, "bytes", 64, NULL);
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 3);
    assert_vals(tp_find(r.dec.prof, "10,|bytes=#128#;k1=a#0#;k2=b#0#;"),
                (int64_t[]){2, 256, 0, 0}, 4);
    assert_vals(tp_find(r.dec.prof, "10,|bytes=#64#;k1=a#0#;k2=b#0#;"),
                (int64_t[]){1, 64, 0, 0}, 4);
    assert_vals(tp_find(r.dec.prof, "10,|bytes=#64#;k1=z#0#;k2=b#0#;"),
                (int64_t[]){1, 64, 0, 0}, 4);
    run_done(&r);
    pprof_delta_free(d);
}

/* Label sets that hold the same strings in other roles are other keys:
 * key and value swapped, values swapped between two keys, a string as key
 * or as unit, a unit or none. */
static void add_role_samples(struct tprof *tp, int64_t n)
{
    static const uint64_t A[1] = {0x10};

    add(tp, A, 1, (int64_t[]){n, n});
    tp_label_str(tp, "a", "b");
    add(tp, A, 1, (int64_t[]){n, n});
    tp_label_str(tp, "b", "a");
    add(tp, A, 1, (int64_t[]){n, n});
    tp_label_str(tp, "k1", "a");
    tp_label_str(tp, "k2", "b");
    add(tp, A, 1, (int64_t[]){n, n});
    tp_label_str(tp, "k1", "b");
    tp_label_str(tp, "k2", "a");
    add(tp, A, 1, (int64_t[]){n, n});
    tp_label_num(tp, "u", 5, "w");
    add(tp, A, 1, (int64_t[]){n, n});
    tp_label_num(tp, "w", 5, "u");
    add(tp, A, 1, (int64_t[]){n, n});
    tp_label_num(tp, "u", 5, NULL);
}

TEST(labels_distinct_when_strings_swap_roles)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;

    tp = cont_prof(1);
    add_role_samples(tp, 1);
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    ASSERT_EQ(pprof_delta_keys(d), 7);
    run_done(&r);

    tp = cont_prof(2);
    add_role_samples(tp, 3);
    run(d, tp, &r);
    assert_all_emitted(&r, 7, 2);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(negative_clamped_minority_not_reset)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[1] = {0x10}, B[1] = {0x20}, C[1] = {0x30}, D[1] = {0x40};
    struct tprof *tp;
    struct run r;

    tp = mem_prof(1);
    add(tp, A, 1, (int64_t[]){10, 100, 5, 50});
    add(tp, B, 1, (int64_t[]){10, 100, 0, 0});
    add(tp, C, 1, (int64_t[]){10, 100, 0, 0});
    add(tp, D, 1, (int64_t[]){10, 100, 0, 0});
    run(d, tp, &r);
    run_done(&r);
    tp = mem_prof(2);
    add(tp, A, 1, (int64_t[]){7, 120, 4, 40}); /* objects down, space up */
    add(tp, B, 1, (int64_t[]){8, 80, 0, 0});   /* both down, nothing in use */
    add(tp, C, 1, (int64_t[]){11, 110, 0, 0});
    add(tp, D, 1, (int64_t[]){12, 120, 0, 0});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){0, 20, 4, 40}, 4);
    ASSERT_NULL(tp_find(r.dec.prof, "20,|"));
    assert_vals(tp_find(r.dec.prof, "30,|"), (int64_t[]){1, 10, 0, 0}, 4);
    assert_vals(tp_find(r.dec.prof, "40,|"), (int64_t[]){2, 20, 0, 0}, 4);
    ASSERT_EQ(r.dec.prof->n_sample, 3);
    run_done(&r);
    /* The lowered values are the new reference. */
    tp = mem_prof(3);
    add(tp, B, 1, (int64_t[]){9, 95, 0, 0});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "20,|"), (int64_t[]){1, 15, 0, 0}, 4);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(unused_locations_functions_strings_pruned)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;
    uint64_t keep[2] = {0xaa, 0xbb};
    uint64_t gone[2] = {0xcc, 0xbb};

    for (int step = 0; step < 2; step++) {
        uint64_t ids[2];
        tp = cont_prof(step + 1);
        ids[0] = tp_loc(tp, gone[0], tp_func(tp, "only_in_unchanged", "old.go"), 1);
        ids[1] = tp_loc(tp, gone[1], tp_func(tp, "shared", "app.go"), 2);
        tp_sample(tp, ids, 2, (int64_t[]){5, 50});
        ids[0] = tp_loc(tp, keep[0], tp_func(tp, "hot", "hot.go"), 3);
        ids[1] = tp_loc(tp, keep[1] + 0, tp_func(tp, "shared", "app.go"), 2);
        tp_sample(tp, ids, 2, (int64_t[]){5 + step, 50 + step});
        tp_label_str(tp, "thread", "main");
        run(d, tp, &r);
        if (step == 0) {
            run_done(&r);
            continue;
        }
        ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
        const Perftools__Profiles__Profile *p = r.dec.prof;
        ASSERT_EQ(p->n_sample, 1);
        assert_vals(tp_find(p, "aa,bb,|thread=main#0#;"), (int64_t[]){1, 1}, 2);
        ASSERT_EQ(p->n_location, 2);
        ASSERT_EQ(p->n_function, 2);
        for (size_t i = 0; i < p->n_string_table; i++) {
            ASSERT(strcmp(p->string_table[i], "only_in_unchanged") != 0);
            ASSERT(strcmp(p->string_table[i], "old.go") != 0);
        }
        bool hot = false, thread = false, build = false;
        for (size_t i = 0; i < p->n_string_table; i++) {
            hot |= strcmp(p->string_table[i], "hot") == 0;
            thread |= strcmp(p->string_table[i], "main") == 0;
            build |= strcmp(p->string_table[i], "build-1") == 0;
        }
        ASSERT(hot && thread && build);
        ASSERT_EQ(p->n_mapping, 1);
        run_done(&r);
    }
    pprof_delta_free(d);
}

/* Pruning takes one of two ways: the references of the few samples not
 * emitted are taken out of the scan's counts, or, when most are not
 * emitted, the emitted ones are walked. Both must keep exactly what the
 * emitted samples reference, labels included, with duplicates (whose
 * locations differ by id only) merged into an emitted sample. */
/* Runs step `step` of a two-step pruning test: the first is the baseline
 * (NULL, nothing to check); the second must emit `samples` samples. */
static const Perftools__Profiles__Profile *run_pruning_step(struct pprof_delta *d,
                                                            struct tprof *tp, int step,
                                                            struct run *r, size_t samples)
{
    run(d, tp, r);
    if (step == 0) {
        ASSERT_EQ(r->rc, PPROF_DELTA_BASELINE);
        run_done(r);
        return NULL;
    }
    ASSERT_EQ(r->rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r->dec.prof->n_sample, samples);
    return r->dec.prof;
}

TEST(pruning_keeps_exactly_what_emitted_samples_reference)
{
    for (int most_dropped = 0; most_dropped < 2; most_dropped++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        int emitted = most_dropped ? 1 : 4, dropped = most_dropped ? 4 : 1;
        struct run r;

        for (int step = 0; step < 2; step++) {
            struct tprof *tp = cont_prof(step + 1);
            uint64_t root = tp_loc(tp, 0x100, tp_func(tp, "root", "main.go"), 1);
            char name[32];

            for (int i = 0; i < emitted + dropped; i++) {
                bool drop = i >= emitted;
                uint64_t ids[2];
                snprintf(name, sizeof(name), "%s_fn_%d", drop ? "dropped" : "emitted", i);
                ids[0] = tp_loc(tp, 0xe00 + (uint64_t)i, tp_func(tp, name, "x.go"), 2);
                ids[1] = root;
                tp_sample(tp, ids, 2, (int64_t[]){10 + (drop ? 0 : step), 100});
                snprintf(name, sizeof(name), "%s_val_%d", drop ? "dropped" : "emitted", i);
                tp_label_str(tp, drop ? "dropped_key" : "emitted_key", name);
                if (step == 1 && i == 0) {
                    /* A duplicate of sample 0 through fresh location ids. */
                    snprintf(name, sizeof(name), "emitted_fn_%d", i);
                    ids[0] = tp_loc(tp, 0xe00, tp_func(tp, name, "x.go"), 2);
                    ids[1] = tp_loc(tp, 0x100, tp_func(tp, "root", "main.go"), 1);
                    tp_sample(tp, ids, 2, (int64_t[]){1, 1});
                    tp_label_str(tp, "emitted_key", "emitted_val_0");
                }
            }
            const Perftools__Profiles__Profile *p =
                run_pruning_step(d, tp, step, &r, (size_t)emitted);
            if (!p)
                continue;
            assert_vals(tp_find(p, "e00,100,|emitted_key=emitted_val_0#0#;"),
                        (int64_t[]){2, 1}, 2);
            /* Sample 0's two location ids and the emitted ones' own, plus
             * the root; the duplicate's copies are gone. */
            ASSERT_EQ(p->n_location, (size_t)emitted + 1);
            ASSERT_EQ(p->n_function, (size_t)emitted + 1);
            size_t emitted_strings = 0;
            for (size_t i = 0; i < p->n_string_table; i++) {
                const char *str = p->string_table[i];
                ASSERT(strncmp(str, "dropped", 7) != 0);
                emitted_strings += strncmp(str, "emitted_", 8) == 0;
            }
            /* emitted_fn_i and emitted_val_i per sample, and the key. */
            ASSERT_EQ(emitted_strings, 2 * (size_t)emitted + 1);
            run_done(&r);
        }
        pprof_delta_free(d);
    }
}

/* Pruning reads the stacks again, eight bytes at a time where their ids
 * are all one byte wide, or all two: stacks of 16 frames, half shared by
 * every sample and half each sample's own, once with ids under 128 and
 * once past 200. With one sample in five unchanged, the scan's references
 * are taken back for it; with four in five, the emitted one is marked. The
 * unchanged samples' own locations and functions must go, the shared ones
 * stay. */
TEST(pruning_exact_on_deep_stacks_of_each_id_width)
{
    for (int wide = 0; wide < 2; wide++) {
        for (int most_dropped = 0; most_dropped < 2; most_dropped++) {
            struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
            int emitted = most_dropped ? 1 : 4, dropped = most_dropped ? 4 : 1;
            struct run r;

            for (int step = 0; step < 2; step++) {
                struct tprof *tp = cont_prof(step + 1);
                uint64_t shared[8], ids[16];
                char name[32];

                /* Unreferenced padding first: the stacks' ids then take two
                 * bytes each. */
                for (int k = 0; wide && k < 200; k++)
                    tp_loc(tp, 0x90000 + (uint64_t)k, tp_func(tp, "pad", "pad.go"), k + 1);
                for (int k = 0; k < 8; k++) {
                    snprintf(name, sizeof(name), "shared_fn_%d", k);
                    shared[k] = tp_loc(tp, 0x1000 + (uint64_t)k, tp_func(tp, name, "x.go"), 1);
                }
                for (int i = 0; i < emitted + dropped; i++) {
                    bool drop = i >= emitted;
                    for (int k = 0; k < 8; k++) {
                        snprintf(name, sizeof(name), "%s_fn_%d_%d", drop ? "dropped" : "emitted",
                                 i, k);
                        ids[k] = tp_loc(tp, 0x10000 + (uint64_t)(i * 16 + k),
                                        tp_func(tp, name, "x.go"), 2);
                        ids[8 + k] = shared[k];
                    }
                    tp_sample(tp, ids, 16, (int64_t[]){10 + (drop ? 0 : step), 100});
                }
                /* The widths meant: every stack id two bytes, or one. */
                ASSERT(wide ? shared[0] >= 128 && ids[7] < 16384 : ids[7] < 128);
                const Perftools__Profiles__Profile *p =
                    run_pruning_step(d, tp, step, &r, (size_t)emitted);
                if (!p)
                    continue;
                ASSERT_EQ(p->n_location, 8 + 8 * (size_t)emitted);
                ASSERT_EQ(p->n_function, 8 + 8 * (size_t)emitted);
                size_t shared_fns = 0, emitted_fns = 0;
                for (size_t i = 0; i < p->n_string_table; i++) {
                    const char *str = p->string_table[i];
                    ASSERT(strncmp(str, "dropped", 7) != 0 && strcmp(str, "pad") != 0);
                    shared_fns += strncmp(str, "shared_fn_", 10) == 0;
                    emitted_fns += strncmp(str, "emitted_fn_", 11) == 0;
                }
                ASSERT_EQ(shared_fns, 8);
                ASSERT_EQ(emitted_fns, 8 * (size_t)emitted);
                run_done(&r);
            }
            pprof_delta_free(d);
        }
    }
}

TEST(reset_when_time_goes_back)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    uint64_t A[1] = {0x10};
    struct tprof *tp;
    struct run r;

    tp = cont_prof(5000);
    add(tp, A, 1, (int64_t[]){1, 10});
    run(d, tp, &r);
    run_done(&r);
    tp = cont_prof(4000);
    add(tp, A, 1, (int64_t[]){3, 30});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_RESET);
    run_done(&r);
    tp = cont_prof(9000);
    add(tp, A, 1, (int64_t[]){4, 45});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){1, 15}, 2);
    ASSERT_EQ(r.dec.prof->duration_nanos, 5000);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(reset_when_build_id_or_mapping_changes)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    uint64_t A[1] = {0x10};
    struct tprof *tp;
    struct run r;

    tp = cont_prof(1);
    add(tp, A, 1, (int64_t[]){1, 10});
    run(d, tp, &r);
    run_done(&r);
    tp = tp_new(CONT_COLS, 2);
    tp_mapping(tp, 0x400000, 0x800000, "/app", "build-2");
    tp_time(tp, 2);
    add(tp, A, 1, (int64_t[]){5, 50});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_RESET);
    run_done(&r);
    tp = tp_new(CONT_COLS, 2); /* same build, loaded elsewhere (ASLR) */
    tp_mapping(tp, 0x7f0000, 0xbf0000, "/app", "build-2");
    tp_time(tp, 3);
    add(tp, A, 1, (int64_t[]){6, 60});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_RESET);
    run_done(&r);
    tp = tp_new(CONT_COLS, 2);
    tp_mapping(tp, 0x7f0000, 0xbf0000, "/app", "build-2");
    tp_time(tp, 4);
    add(tp, A, 1, (int64_t[]){8, 61});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){2, 1}, 2);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(reset_when_most_keys_decrease)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[1] = {0x10}, B[1] = {0x20}, C[1] = {0x30};
    struct tprof *tp;
    struct run r;

    tp = mem_prof(1);
    add(tp, A, 1, (int64_t[]){100, 1000, 1, 1});
    add(tp, B, 1, (int64_t[]){100, 1000, 1, 1});
    add(tp, C, 1, (int64_t[]){100, 1000, 1, 1});
    run(d, tp, &r);
    run_done(&r);
    /* A restarted process at the same addresses: later clock, small counts. */
    tp = mem_prof(2);
    add(tp, A, 1, (int64_t[]){2, 20, 1, 1});
    add(tp, B, 1, (int64_t[]){3, 30, 1, 1});
    add(tp, C, 1, (int64_t[]){200, 2000, 1, 1});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_RESET);
    run_done(&r);
    tp = mem_prof(3);
    add(tp, A, 1, (int64_t[]){5, 50, 1, 1});
    add(tp, B, 1, (int64_t[]){3, 30, 0, 0});
    add(tp, C, 1, (int64_t[]){201, 2010, 1, 1});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){3, 30, 1, 1}, 4);
    ASSERT_NULL(tp_find(r.dec.prof, "20,|"));
    assert_vals(tp_find(r.dec.prof, "30,|"), (int64_t[]){1, 10, 1, 1}, 4);
    run_done(&r);
    pprof_delta_free(d);
}

/* A non-Go producer: no addresses, functions and locations numbered in a
 * different order in each profile. */
static struct tprof *nogo_prof(int64_t t, bool reverse, const int64_t *v_main,
                               const int64_t *v_work, int64_t work_line)
{
    struct tprof *tp = tp_new(CONT_COLS, 2);
    uint64_t fm, fw, lm, lw, ids[2];

    tp_time(tp, t);
    if (reverse) {
        tp_str(tp, "shifts every index");
        fw = tp_func(tp, "work", "lib.rs");
        fm = tp_func(tp, "main", "main.rs");
        lw = tp_loc(tp, 0, fw, work_line);
        lm = tp_loc(tp, 0, fm, 7);
    } else {
        fm = tp_func(tp, "main", "main.rs");
        fw = tp_func(tp, "work", "lib.rs");
        lm = tp_loc(tp, 0, fm, 7);
        lw = tp_loc(tp, 0, fw, work_line);
    }
    ids[0] = lw;
    ids[1] = lm;
    tp_sample(tp, ids, 2, v_work);
    tp_sample(tp, &lm, 1, v_main);
    return tp;
}

TEST(non_go_producer_keyed_by_function_file_line)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct run r;

    run(d, nogo_prof(1, false, (int64_t[]){1, 10}, (int64_t[]){2, 20}, 40), &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    run(d, nogo_prof(2, true, (int64_t[]){4, 40}, (int64_t[]){3, 35}, 40), &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "main@main.rs:7;,|"), (int64_t[]){3, 30}, 2);
    assert_vals(tp_find(r.dec.prof, "work@lib.rs:40;,main@main.rs:7;,|"), (int64_t[]){1, 15},
                2);
    run_done(&r);
    /* Another line in the same function is another frame. */
    run(d, nogo_prof(3, false, (int64_t[]){4, 40}, (int64_t[]){1, 1}, 41), &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 1);
    assert_vals(tp_find(r.dec.prof, "work@lib.rs:41;,main@main.rs:7;,|"), (int64_t[]){1, 1}, 2);
    run_done(&r);
    pprof_delta_free(d);
}

/* The two sample types of a hand-written contention profile, whose string
 * table starts "", "contentions", "count", "delay", "nanoseconds". */
static void twb_contention_types(struct twb *w)
{
    struct twb m = {0};

    for (uint64_t i = 1; i <= 3; i += 2) {
        m.len = 0;
        twb_uint(&m, 1, i);
        twb_uint(&m, 2, i + 1);
        twb_bytes(w, 1, m.data, m.len);
    }
    twb_free(&m);
}

/* Ends a hand-written profile with its string table and time: returns its
 * bytes. */
static uint8_t *twb_profile_end(struct twb *w, const char *const *strs, size_t nstrs, int64_t t,
                                size_t *len)
{
    for (size_t i = 0; i < nstrs; i++)
        twb_bytes(w, 6, strs[i], strlen(strs[i]));
    twb_uint(w, 9, (uint64_t)t);
    *len = w->len;
    return w->data;
}

/* Ends a hand-written contention profile whose only function, 1, is f in
 * f.go: that function, the strings, time `t`. */
static uint8_t *twb_end_with_f(struct twb *w, int64_t t, size_t *len)
{
    struct twb m = {0};
    const char *strs[] = {"", "contentions", "count", "delay", "nanoseconds", "f", "f.go"};

    twb_uint(&m, 1, 1);
    twb_uint(&m, 2, 5);
    twb_uint(&m, 4, 6);
    twb_bytes(w, 5, m.data, m.len);
    twb_free(&m);
    return twb_profile_end(w, strs, sizeof(strs) / sizeof(strs[0]), t, len);
}

/* Encodes a contention profile with one sample by hand: unpacked repeated
 * fields, values and location ids interleaved (value, loc, value, loc). */
static uint8_t *unpacked_prof(int64_t t, const int64_t *vals, size_t *len)
{
    struct twb w = {0}, m = {0};

    twb_contention_types(&w);
    twb_uint(&m, 2, (uint64_t)vals[0]);
    twb_uint(&m, 1, 2);
    twb_uint(&m, 2, (uint64_t)vals[1]);
    twb_uint(&m, 1, 1);
    twb_bytes(&w, 2, m.data, m.len);
    for (uint64_t id = 1; id <= 2; id++) {
        struct twb line = {0};
        m.len = 0;
        twb_uint(&m, 1, id);
        twb_uint(&m, 3, 0x100 * id);
        twb_uint(&line, 1, 1);
        twb_uint(&line, 2, id);
        twb_bytes(&m, 4, line.data, line.len);
        twb_free(&line);
        twb_bytes(&w, 4, m.data, m.len);
    }
    twb_free(&m);
    return twb_end_with_f(&w, t, len);
}

TEST(unpacked_repeated_fields_read)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    uint8_t *in, *out;
    size_t len, out_len;
    char err[256];
    struct pprof__decoded dp;

    pprof_limits_default(&lim);
    in = unpacked_prof(10, (int64_t[]){2, 200}, &len);
    tp_decode(in, len, &dp); /* protobuf-c reads it too */
    ASSERT_EQ(dp.prof->sample[0]->n_location_id, 2);
    ASSERT_EQ(dp.prof->sample[0]->location_id[0], 2);
    ASSERT_EQ(dp.prof->sample[0]->value[1], 200);
    pprof__decoded_done(&dp);
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_DELTA_BASELINE);
    free(in);
    in = unpacked_prof(20, (int64_t[]){5, 260}, &len);
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_DELTA_EMITTED);
    free(in);
    tp_decode(out, out_len, &dp);
    assert_vals(tp_find(dp.prof, "200,100,|"), (int64_t[]){3, 60}, 2);
    ASSERT_EQ(dp.prof->duration_nanos, 10);
    pprof__decoded_done(&dp);
    free(out);
    pprof_delta_free(d);
}

/* The orders a location's fields come in: Go's (id, address, lines,
 * mapping_id last), field-number order (protobuf-c's, and most writers'),
 * and lines first, which no writer uses. */
enum loc_order { LOC_GO, LOC_BY_NUMBER, LOC_LINES_FIRST };

static void put_lines(struct twb *m, const uint64_t *fns, size_t nfns)
{
    for (size_t i = 0; i < nfns; i++) {
        struct twb line = {0};
        twb_uint(&line, 1, fns[i]);
        twb_uint(&line, 2, 10 + i);
        twb_bytes(m, 4, line.data, line.len);
        twb_free(&line);
    }
}

static void put_location(struct twb *w, enum loc_order order, uint64_t id, uint64_t mapping,
                         uint64_t addr, const uint64_t *fns, size_t nfns)
{
    struct twb m = {0};

    switch (order) {
    case LOC_GO:
        twb_uint(&m, 1, id);
        twb_uint(&m, 3, addr);
        put_lines(&m, fns, nfns);
        twb_uint(&m, 2, mapping);
        break;
    case LOC_BY_NUMBER:
        twb_uint(&m, 1, id);
        twb_uint(&m, 2, mapping);
        twb_uint(&m, 3, addr);
        put_lines(&m, fns, nfns);
        break;
    case LOC_LINES_FIRST:
        put_lines(&m, fns, nfns);
        twb_uint(&m, 3, addr);
        twb_uint(&m, 1, id);
        twb_uint(&m, 2, mapping);
        break;
    }
    twb_bytes(w, 4, m.data, m.len);
    twb_free(&m);
}

/* A contention profile whose locations are written in `order`: 0x100 and
 * 0x200 of one line each, 0x300 of two (g inlined into f). Location 2
 * names function `fn2` and mapping `map2` (1 exists, 9 does not). Samples:
 * [0x200, 0x100] with (1, 100) x scale, [0x300] with (2, 50) x scale. */
static uint8_t *ordered_prof(int64_t t, enum loc_order order, int64_t scale, uint64_t fn2,
                             uint64_t map2, size_t *len)
{
    struct twb w = {0}, m = {0}, v = {0};
    const char *strs[] = {"", "contentions", "count", "delay", "nanoseconds", "f", "f.go", "g",
                          "main"};

    twb_contention_types(&w);
    for (int k = 0; k < 2; k++) {
        m.len = v.len = 0;
        twb_bytes(&m, 1, k == 0 ? "\x02\x01" : "\x03", k == 0 ? 2 : 1);
        twb_varint(&v, (uint64_t)((k == 0 ? 1 : 2) * scale));
        twb_varint(&v, (uint64_t)((k == 0 ? 100 : 50) * scale));
        twb_bytes(&m, 2, v.data, v.len);
        twb_bytes(&w, 2, m.data, m.len);
    }
    m.len = 0;
    twb_uint(&m, 1, 1);
    twb_uint(&m, 2, 0x1000);
    twb_uint(&m, 3, 0x9000);
    twb_uint(&m, 5, 8);
    twb_bytes(&w, 3, m.data, m.len);
    put_location(&w, order, 1, 1, 0x100, (uint64_t[]){1}, 1);
    put_location(&w, order, 2, map2, 0x200, (uint64_t[]){fn2}, 1);
    put_location(&w, order, 3, 1, 0x300, (uint64_t[]){2, 1}, 2);
    for (uint64_t id = 1; id <= 2; id++) {
        m.len = 0;
        twb_uint(&m, 1, id);
        twb_uint(&m, 2, id == 1 ? 5 : 7);
        twb_uint(&m, 4, 6);
        twb_bytes(&w, 5, m.data, m.len);
    }
    twb_free(&m);
    twb_free(&v);
    return twb_profile_end(&w, strs, sizeof(strs) / sizeof(strs[0]), t, len);
}

TEST(locations_read_alike_whatever_the_order_of_their_fields)
{
    struct pprof_limits lim;
    uint8_t *in, *out;
    size_t len, out_len;
    char err[256];
    struct pprof__decoded dp;

    pprof_limits_default(&lim);
    for (int order = LOC_GO; order <= LOC_LINES_FIRST; order++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);

        in = ordered_prof(10, order, 1, 1, 1, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_DELTA_BASELINE);
        free(in);
        in = ordered_prof(20, order, 3, 1, 1, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_DELTA_EMITTED);
        free(in);
        tp_decode(out, out_len, &dp);
        ASSERT_EQ(dp.prof->n_sample, 2);
        assert_vals(tp_find(dp.prof, "200,100,|"), (int64_t[]){2, 200}, 2);
        assert_vals(tp_find(dp.prof, "300,|"), (int64_t[]){4, 100}, 2);
        /* g is named only by the inlined frame of 0x300, which must count
         * as a location of two lines for g to be kept. */
        ASSERT_EQ(dp.prof->n_location, 3);
        ASSERT_EQ(dp.prof->n_mapping, 1);
        ASSERT_EQ(dp.prof->n_function, 2);
        pprof__decoded_done(&dp);
        free(out);

        /* A function or a mapping that does not exist is found whatever
         * the order, and named. */
        in = ordered_prof(30, order, 4, 9, 1, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_ECORRUPT);
        ASSERT(strstr(err, "unknown function") != NULL);
        free(in);
        in = ordered_prof(40, order, 4, 1, 9, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_ECORRUPT);
        ASSERT(strstr(err, "unknown mapping") != NULL);
        free(in);
        pprof_delta_free(d);
    }
}

/* Lines whose function id and line number take one to five bytes each (a
 * line number of 0 is left out of the Line), some in an inlined second
 * Line: each location keeps its own function, the others are pruned. */
static const uint64_t LINE_FIDS[] = {1, 127, 128, 16383, 16384, 16500};
static const int64_t LINE_NUMS[] = {0, 1, 127, 128, 16384, 2097152, 268435456};
#define N_LINE_FIDS (sizeof(LINE_FIDS) / sizeof(LINE_FIDS[0]))
#define N_LINE_NUMS (sizeof(LINE_NUMS) / sizeof(LINE_NUMS[0]))

static struct tprof *line_widths_prof(int64_t t, int64_t scale)
{
    struct tprof *tp = mem_prof(t);
    char name[16];

    for (unsigned f = 1; f <= 16500; f++) {
        snprintf(name, sizeof(name), "fn%u", f);
        ASSERT_EQ(tp_func(tp, name, "lines.go"), f);
    }
    for (size_t i = 0; i < N_LINE_FIDS; i++) {
        for (size_t j = 0; j < N_LINE_NUMS; j++) {
            uint64_t loc = tp_loc(tp, 0x10000 + 0x100 * i + j, LINE_FIDS[i], LINE_NUMS[j]);
            if (j == 1) /* inlined into the next function id */
                tp_loc_add_line(tp, loc, LINE_FIDS[(i + 1) % N_LINE_FIDS], LINE_NUMS[i]);
            tp_sample(tp, &loc, 1, (int64_t[]){scale, 10 * scale, 1, 10});
        }
    }
    return tp;
}

/* A contention profile of one sample on location 1 (0x100), whose only
 * Line is the raw bytes `line`; function 1 is f. */
static uint8_t *raw_line_prof(const uint8_t *line, size_t line_len, size_t *len)
{
    struct twb w = {0}, m = {0};

    twb_contention_types(&w);
    twb_bytes(&m, 1, "\x01", 1);
    twb_bytes(&m, 2, "\x01\x02", 2);
    twb_bytes(&w, 2, m.data, m.len);
    m.len = 0;
    twb_uint(&m, 1, 1);
    twb_uint(&m, 3, 0x100);
    twb_bytes(&m, 4, line, line_len);
    twb_bytes(&w, 4, m.data, m.len);
    twb_free(&m);
    return twb_end_with_f(&w, 1, len);
}

TEST(lines_read_whatever_the_widths_of_their_function_and_number)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct run r;

    run_scaled_pair(d, line_widths_prof, &r);
    const Perftools__Profiles__Profile *p = r.dec.prof;
    ASSERT_EQ(p->n_sample, N_LINE_FIDS * N_LINE_NUMS);
    ASSERT_EQ(p->n_location, N_LINE_FIDS * N_LINE_NUMS);
    ASSERT_EQ(p->n_function, N_LINE_FIDS);
    for (size_t k = 0; k < p->n_location; k++) {
        const Perftools__Profiles__Location *l = p->location[k];
        size_t i = (l->address - 0x10000) / 0x100, j = (l->address - 0x10000) % 0x100;
        ASSERT_TRUE(i < N_LINE_FIDS && j < N_LINE_NUMS);
        ASSERT_EQ(l->n_line, j == 1 ? 2u : 1u);
        for (size_t n = 0; n < l->n_line; n++) {
            uint64_t want = n == 0 ? LINE_FIDS[i] : LINE_FIDS[(i + 1) % N_LINE_FIDS];
            const Perftools__Profiles__Function *fn = NULL;
            char name[16];
            for (size_t m = 0; m < p->n_function; m++)
                if (p->function[m]->id == l->line[n]->function_id)
                    fn = p->function[m];
            ASSERT_NOT_NULL(fn);
            snprintf(name, sizeof(name), "fn%" PRIu64, want);
            ASSERT_STR_EQ(p->string_table[fn->name], name);
            ASSERT_EQ(l->line[n]->line, n == 0 ? LINE_NUMS[j] : LINE_NUMS[i]);
        }
    }
    assert_vals(tp_find(p, "10203,|"), (int64_t[]){2, 20, 1, 10}, 4);
    run_done(&r);
    pprof_delta_free(d);

    /* Lines of a function id and another field: a column (field 3) is
     * read past; a line number that is not a varint (field 2 of another
     * wire type, whatever follows), or that runs past its Line, makes the
     * profile malformed. */
    static const struct {
        uint8_t bytes[8];
        size_t len;
        int rc;
    } lines[] = {
        {{0x08, 0x01, 0x10, 0x07}, 4, PPROF_DELTA_BASELINE},
        {{0x08, 0x01, 0x10, 0x07, 0x18, 0x02}, 6, PPROF_DELTA_BASELINE},
        {{0x08, 0x01, 0x18, 0x02}, 4, PPROF_DELTA_BASELINE},
        {{0x08, 0x01, 0x12, 0x01, 0x07}, 5, PPROF_ECORRUPT},
        {{0x08, 0x01, 0x12, 0x87, 0x01}, 5, PPROF_ECORRUPT},
        {{0x08, 0x01, 0x10, 0x87}, 4, PPROF_ECORRUPT},
    };
    struct pprof_limits lim;
    char err[256];
    uint8_t *out;
    size_t out_len;

    pprof_limits_default(&lim);
    for (size_t k = 0; k < sizeof(lines) / sizeof(lines[0]); k++) {
        size_t len;
        uint8_t *in = raw_line_prof(lines[k].bytes, lines[k].len, &len);
        d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  lines[k].rc);
        free(in);
        pprof_delta_free(d);
    }
}

TEST(records_cut_short_are_malformed)
{
    struct pprof_limits lim;
    char err[256];
    uint8_t *out;
    size_t out_len;

    pprof_limits_default(&lim);
    /* A record of each table whose length runs past the profile's end by
     * one byte to three, after a whole profile, where the record scan
     * reads one-byte tags and lengths without the general reader. */
    for (uint8_t field = 1; field <= 6; field++) {
        for (size_t over = 1; over <= 3; over++) {
            struct tprof *tp = cont_prof(1);
            size_t len;
            add(tp, (uint64_t[]){0x10}, 1, (int64_t[]){1, 1});
            uint8_t *raw = tp_pack(tp, &len, false);
            uint8_t *in = realloc(raw, len + 8);
            ASSERT(in != NULL);
            in[len] = (uint8_t)(field << 3 | 2);
            in[len + 1] = (uint8_t)(4 + over);
            memset(in + len + 2, 0x08, 4);
            struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
            ASSERT_EQ(pprof_delta_process(d, in, len + 6, &lim, &out, &out_len, err, sizeof(err)),
                      PPROF_ECORRUPT);
            ASSERT(strstr(err, "bad protobuf encoding") != NULL);
            pprof_delta_free(d);
            free(in);
            tp_free(tp);
        }
    }
}

/* Addresses of one to ten bytes as varints, the smallest, the largest and
 * one between of each width: every location keeps its own key (a misread
 * address would merge two samples), and the samples' values tell each
 * delta apart. */
static void width_addresses(int64_t w, uint64_t a[3])
{
    a[0] = 1ULL << (7 * (w - 1));
    a[1] = a[0] | 0x5;
    a[2] = w == 10 ? UINT64_MAX : (1ULL << (7 * w)) - 1;
}

static struct tprof *address_widths_prof(int64_t t, int64_t scale)
{
    struct tprof *tp = mem_prof(t);
    uint64_t fn = tp_func(tp, "f", "f.go");

    for (int64_t k = 0; k < 10; k++) {
        uint64_t addrs[3];
        width_addresses(k + 1, addrs);
        for (int64_t j = 0; j < 3; j++) {
            uint64_t loc = tp_loc(tp, addrs[j], fn, 3 * k + j);
            tp_sample(tp, &loc, 1, (int64_t[]){(3 * k + j + 1) * scale, scale, 1, 1});
        }
    }
    return tp;
}

TEST(addresses_read_whatever_their_width)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct run r;
    char key[32];

    run_scaled_pair(d, address_widths_prof, &r);
    ASSERT_EQ(r.dec.prof->n_sample, 30);
    for (int64_t k = 0; k < 10; k++) {
        uint64_t addrs[3];
        width_addresses(k + 1, addrs);
        for (int64_t j = 0; j < 3; j++) {
            snprintf(key, sizeof(key), "%" PRIx64 ",|", addrs[j]);
            assert_vals(tp_find(r.dec.prof, key), (int64_t[]){2 * (3 * k + j + 1), 2, 1, 1}, 4);
        }
    }
    run_done(&r);
    pprof_delta_free(d);
}

/* A heap profile whose records take headers of every length: function
 * names (string records) of 1 to 20,000 bytes, and a sample of 200 frames
 * (over 128 bytes) beside one of a frame; a record's length takes one,
 * two or three bytes. */
static const size_t NAME_LENS[] = {1, 127, 128, 129, 16383, 16384, 20000};
#define N_NAME_LENS (sizeof(NAME_LENS) / sizeof(NAME_LENS[0]))

static struct tprof *long_records_prof(int64_t t, int64_t scale)
{
    struct tprof *tp = mem_prof(t);
    uint64_t ids[200];
    char *name = malloc(20001);

    ASSERT_NOT_NULL(name);
    for (size_t i = 0; i < N_NAME_LENS; i++) {
        memset(name, 'a' + (int)i, NAME_LENS[i]);
        name[NAME_LENS[i]] = '\0';
        ids[i] = tp_loc(tp, 0x1000 + i, tp_func(tp, name, "app.go"), (int64_t)i);
    }
    free(name);
    for (size_t i = N_NAME_LENS; i < 200; i++)
        ids[i] = ids[i % N_NAME_LENS];
    tp_sample(tp, ids, 200, (int64_t[]){2 * scale, 200 * scale, 1, 100});
    tp_sample(tp, &ids[N_NAME_LENS - 1], 1, (int64_t[]){scale, 10 * scale, 1, 10});
    return tp;
}

TEST(records_read_whatever_the_bytes_of_their_length)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct run r;
    char key[64];
    size_t found = 0;

    run_scaled_pair(d, long_records_prof, &r);
    ASSERT_EQ(r.dec.prof->n_sample, 2);
    snprintf(key, sizeof(key), "%x,|", 0x1000 + (unsigned)N_NAME_LENS - 1);
    assert_vals(tp_find(r.dec.prof, key), (int64_t[]){2, 20, 1, 10}, 4);
    for (size_t i = 0; i < r.dec.prof->n_sample; i++)
        if (r.dec.prof->sample[i]->n_location_id == 200)
            assert_vals(r.dec.prof->sample[i], (int64_t[]){4, 400, 1, 100}, 4);
    /* Every name came through whole. */
    ASSERT_EQ(r.dec.prof->n_function, N_NAME_LENS);
    for (size_t i = 0; i < r.dec.prof->n_function; i++) {
        const char *fn = r.dec.prof->string_table[r.dec.prof->function[i]->name];
        for (size_t j = 0; j < N_NAME_LENS; j++)
            found += strlen(fn) == NAME_LENS[j] && fn[0] == 'a' + (int)j &&
                     fn[NAME_LENS[j] - 1] == 'a' + (int)j;
    }
    ASSERT_EQ(found, N_NAME_LENS);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(error_poisons_state_and_next_profile_reseeds)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    uint64_t A[1] = {0x10};
    struct tprof *tp;
    struct run r;
    uint8_t *in, *out;
    size_t len, out_len;
    char err[256];

    pprof_limits_default(&lim);
    tp = cont_prof(1);
    add(tp, A, 1, (int64_t[]){1, 10});
    run(d, tp, &r);
    run_done(&r);
    tp = cont_prof(2);
    add(tp, A, 1, (int64_t[]){2, 20});
    in = tp_pack(tp, &len, false);
    tp_free(tp);
    ASSERT_EQ(pprof_delta_process(d, in, len - 3, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_ECORRUPT);
    ASSERT_NULL(out);
    ASSERT(strstr(err, "malformed") != NULL);
    ASSERT_EQ(pprof_delta_keys(d), 0);
    free(in);
    tp = cont_prof(3);
    add(tp, A, 1, (int64_t[]){3, 30});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    tp = cont_prof(4);
    add(tp, A, 1, (int64_t[]){4, 40});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){1, 10}, 2);
    run_done(&r);
    pprof_delta_free(d);
}

/* Location ids of two bytes are bounds-checked four at a time against a
 * table sized to the profile's ids. A larger profile first leaves keys for
 * higher ids in the thread's scratch table, so an id past the end would
 * read a stale key and pass unnoticed if the check were missing. */
TEST(two_byte_ids_past_the_table_are_unknown_locations)
{
    struct pprof_delta *big = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;
    uint64_t ids[4];

    tp = cont_prof(1);
    for (uint64_t i = 0; i < 400; i++) {
        ids[0] = tp_loc(tp, 0x1000 + i, 0, 0);
        tp_sample(tp, ids, 1, (int64_t[]){1, 1});
    }
    run(big, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);

    for (int past = 0; past < 2; past++) {
        tp = cont_prof(1);
        for (uint64_t i = 0; i < 130; i++)
            tp_loc(tp, 0x1000 + i, 0, 0);
        ids[0] = 129;
        ids[1] = 130;
        ids[2] = past ? 300 : 128;
        ids[3] = 129;
        tp_sample(tp, ids, 4, (int64_t[]){1, 1});
        tp_sample(tp, ids, 4, (int64_t[]){1, 1}); /* eight bytes in a row */
        run(d, tp, &r);
        if (past) {
            ASSERT_EQ(r.rc, PPROF_ECORRUPT);
            ASSERT(strstr(r.err, "unknown location 300") != NULL);
        } else {
            ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
        }
        run_done(&r);
    }
    pprof_delta_free(big);
    pprof_delta_free(d);
}

/* One profile numbers `nloc` locations in one order, the next in the
 * reverse order, so the same stacks are written with other mixes of one-,
 * two- and three-byte ids (ids from 128 on take two bytes, from 16384 on
 * three): every stack must still meet its key, whichever decoding path
 * each eight bytes took. Frames are drawn from both ends of the numbering,
 * so that every width meets every other. */
static void add_width_samples(struct tprof *tp, int nloc, bool reversed, int64_t scale)
{
    uint64_t *id_of = calloc((size_t)nloc, sizeof(uint64_t)), ids[24];
    uint32_t seed = 12345;

    ASSERT(id_of != NULL);
    for (int i = 0; i < nloc; i++) {
        int a = reversed ? nloc - 1 - i : i;
        id_of[a] = tp_loc(tp, 0x5000 + (uint64_t)a * 16, 0, 0);
    }
    for (int st = 0; st < 60; st++) {
        size_t depth = 3 + st % 22;
        ids[0] = id_of[st]; /* distinct leaves: distinct stacks */
        for (size_t k = 1; k < depth; k++) {
            seed = seed * 1103515245u + 12345u;
            uint32_t r = (seed >> 16) % 200;
            ids[k] = id_of[seed >> 31 ? (int)r : nloc - 1 - (int)r];
        }
        tp_sample(tp, ids, depth, (int64_t[]){scale * (st + 1), scale * (st + 1) * 10});
    }
    free(id_of);
}

static void expect_unknown_location_among(struct pprof_delta *d, uint64_t nloc,
                                         const uint64_t *stack, size_t depth, const char *msg)
{
    struct tprof *tp = cont_prof(9);
    struct run r;

    for (uint64_t i = 0; i < nloc; i++)
        tp_loc(tp, 0x1000 + i, 0, 0);
    tp_sample(tp, stack, depth, (int64_t[]){1, 1});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_ECORRUPT);
    if (!strstr(r.err, msg))
        test__fail(__FILE__, __LINE__, "error \"%s\" lacks \"%s\"", r.err, msg);
    run_done(&r);
}

static void expect_unknown_location(struct pprof_delta *d, const uint64_t *stack, size_t depth,
                                    const char *msg)
{
    expect_unknown_location_among(d, 130, stack, depth, msg);
}

TEST(stacks_meet_their_keys_whatever_their_id_widths)
{
    /* 400 locations: one- and two-byte ids; 20000: up to three bytes;
     * 40000: a profile over 256 KB, whose record scan prefetches. */
    static const int nlocs[] = {400, 20000, 40000};
    for (size_t ni = 0; ni < ARRAY_SIZE(nlocs); ni++) {
        int nloc = nlocs[ni];
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        struct tprof *tp;
        struct run r;
        size_t raw_len;

        tp = cont_prof(1);
        add_width_samples(tp, nloc, false, 1);
        free(tp_pack(tp, &raw_len, false));
        ASSERT(nloc < 40000 || raw_len > 256 * 1024);
        run(d, tp, &r);
        ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
        run_done(&r);
        for (int round = 2; round <= 3; round++) {
            tp = cont_prof(round);
            add_width_samples(tp, nloc, round == 2, round);
            run(d, tp, &r);
            ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
            ASSERT_EQ(pprof_delta_keys(d), 60);
            ASSERT_EQ(r.dec.prof->n_sample, 60);
            /* Each stack gained (st + 1) x (1, 10) since the previous
             * round; one that missed its key would show its whole round x
             * (st + 1). */
            bool seen[61] = {false};
            for (size_t i = 0; i < 60; i++) {
                const Perftools__Profiles__Sample *sm = r.dec.prof->sample[i];
                ASSERT(sm->value[0] >= 1 && sm->value[0] <= 60);
                ASSERT(!seen[sm->value[0]]);
                seen[sm->value[0]] = true;
                ASSERT_EQ(sm->value[1], sm->value[0] * 10);
            }
            run_done(&r);
        }
        pprof_delta_free(d);
    }

    /* An id past the table (130 locations) among mixed widths is an
     * unknown location, on whichever path its bytes are read: one by one
     * near the end of the stack, or two at a time, two or three bytes
     * wide. */
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    expect_unknown_location(d, (uint64_t[]){5, 129, 6, 300, 7, 8}, 6, "unknown location 300");
    expect_unknown_location(d, (uint64_t[]){5, 129, 300, 6, 7, 8, 9, 10}, 8,
                            "unknown location 300");
    expect_unknown_location(d, (uint64_t[]){5, 129, 20000, 6, 7, 8, 9, 10}, 8,
                            "unknown location 20000");
    expect_unknown_location(d, (uint64_t[]){5, 6, 7, 8, 9, 10, 11, 20000, 5, 6}, 10,
                            "unknown location 20000");
    /* Ten locations, in a table of 128 by id: 100 and 50 are in the table
     * but absent, read eight at a time; the first unknown one is named. */
    expect_unknown_location_among(d, 10, (uint64_t[]){1, 2, 3, 100, 4, 50, 5, 6}, 8,
                                  "unknown location 100");
    expect_unknown_location_among(d, 10, (uint64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 9, 50}, 10,
                                  "unknown location 50");
    expect_unknown_location_among(d, 10, (uint64_t[]){1, 300, 3, 4, 5, 6, 7, 8, 9, 50}, 10,
                                  "unknown location 300");
    /* A three-byte id among the first four of eight bytes, in the largest
     * table the four-at-once path reads: its first two bytes alone would
     * be a location. */
    expect_unknown_location_among(d, 16383, (uint64_t[]){5, 129, 20000, 6, 7, 8, 9, 10}, 8,
                                  "unknown location 20000");
    /* Past 16383 locations, four ids of up to three bytes are read from
     * twelve: one past the table, and one of four bytes whose first three
     * alone would be a location. */
    expect_unknown_location_among(d, 20000,
                                  (uint64_t[]){5, 129, 30000, 6, 7, 8, 9, 10, 11, 12, 13, 14},
                                  12, "unknown location 30000");
    expect_unknown_location_among(d, 20000,
                                  (uint64_t[]){5, 129, (1u << 21) + 5, 6, 7, 8, 9, 10, 11, 12},
                                  10, "unknown location 2097157");
    pprof_delta_free(d);
}

/* An id of `width` bytes among `nloc` locations, drawn by `salt`. */
static uint64_t id_of_width(unsigned width, unsigned salt, uint64_t nloc)
{
    switch (width) {
    case 1: return 1 + salt % 127;
    case 2: return 128 + salt % ((nloc < 16383 ? nloc : 16383) - 127);
    default: return 16384 + salt % (nloc - 16383);
    }
}

/* Stack s of a profile numbering `nloc` locations: eight frames whose id
 * widths are the digits of s, in base 2 up to 16383 locations (one or two
 * bytes) and in base 3 past them (one to three), then up to six more of
 * alternating widths, so that the first bytes of the 256 stacks take every
 * pattern of widths the four-at-once readers see, and their ends every
 * short tail. */
static size_t width_pattern_stack(unsigned s, uint64_t nloc, uint64_t *ids)
{
    unsigned base = nloc > 16383 ? 3 : 2, digits = s;
    size_t depth = 8 + s % 7;

    for (size_t k = 0; k < depth; k++) {
        unsigned width = k < 8 ? 1 + digits % base : 1 + k % base;
        digits /= k < 8 ? base : 1;
        ids[k] = id_of_width(width, s * 11 + (unsigned)k * 17, nloc);
    }
    return depth;
}

/* A contention profile of the 256 stacks of width_pattern_stack(), stack s
 * at (s + 1) x `scale` contentions and delay; the location ids of a stack
 * packed, or each in its own field (read one at a time). */
static uint8_t *width_pattern_prof(uint64_t nloc, bool packed, int64_t scale, int64_t t,
                                   size_t *len)
{
    struct twb w = {0}, m = {0}, ids = {0};
    uint64_t stack[16];

    twb_contention_types(&w);
    for (unsigned s = 0; s < 256; s++) {
        size_t depth = width_pattern_stack(s, nloc, stack);
        m.len = ids.len = 0;
        for (size_t k = 0; k < depth; k++) {
            if (packed)
                twb_varint(&ids, stack[k]);
            else
                twb_uint(&m, 1, stack[k]);
        }
        if (packed)
            twb_bytes(&m, 1, ids.data, ids.len);
        twb_uint(&m, 2, (uint64_t)((s + 1) * scale));
        twb_uint(&m, 2, (uint64_t)((s + 1) * scale));
        twb_bytes(&w, 2, m.data, m.len);
    }
    for (uint64_t id = 1; id <= nloc; id++) {
        m.len = 0;
        twb_uint(&m, 1, id);
        twb_uint(&m, 3, 0x400000 + 0x10 * id);
        twb_bytes(&w, 4, m.data, m.len);
    }
    twb_free(&m);
    twb_free(&ids);
    return twb_end_with_f(&w, t, len);
}

TEST(stacks_read_alike_packed_and_one_id_at_a_time)
{
    /* 400 locations: two-byte ids past the table among them (read again
     * by the slower paths); 16383: the most ids of at most two bytes;
     * 20000: ids of one to three bytes. */
    static const uint64_t nlocs[] = {400, 16383, 20000};

    for (size_t ni = 0; ni < ARRAY_SIZE(nlocs); ni++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        struct pprof_limits lim;
        struct pprof__decoded dp;
        uint8_t *in, *out;
        size_t len, out_len;
        char err[256];
        bool seen[257] = {false};

        pprof_limits_default(&lim);
        in = width_pattern_prof(nlocs[ni], true, 1000, 10, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_DELTA_BASELINE);
        free(in);
        in = width_pattern_prof(nlocs[ni], false, 1001, 20, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_DELTA_EMITTED);
        free(in);
        ASSERT_EQ(pprof_delta_keys(d), 256);
        /* Each stack gained s + 1; one whose packed ids were misread would
         * show its whole 1001 x (s + 1). */
        tp_decode(out, out_len, &dp);
        ASSERT_EQ(dp.prof->n_sample, 256);
        for (size_t i = 0; i < 256; i++) {
            const Perftools__Profiles__Sample *sm = dp.prof->sample[i];
            ASSERT(sm->value[0] >= 1 && sm->value[0] <= 256);
            ASSERT(!seen[sm->value[0]]);
            seen[sm->value[0]] = true;
            ASSERT_EQ(sm->value[1], sm->value[0]);
        }
        pprof__decoded_done(&dp);
        free(out);
        pprof_delta_free(d);
    }
}

TEST(state_forgets_vanished_keys_and_reports_memory)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;
    size_t mem_big, mem_small;

    tp = cont_prof(1);
    for (uint64_t i = 1; i <= 500; i++)
        add(tp, &i, 1, (int64_t[]){1, 1});
    run(d, tp, &r);
    run_done(&r);
    ASSERT_EQ(pprof_delta_keys(d), 500);
    mem_big = pprof_delta_mem(d);
    /* 500 keys of 8 bytes plus two one-byte varint values: 5000 bytes of
     * data, and a small fixed header. */
    ASSERT_GE(mem_big, 500 * 10);
    ASSERT_LE(mem_big, 500 * 10 + 256);
    tp = cont_prof(2);
    uint64_t one = 7;
    add(tp, &one, 1, (int64_t[]){2, 2});
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "7,|"), (int64_t[]){1, 1}, 2);
    run_done(&r);
    ASSERT_EQ(pprof_delta_keys(d), 1);
    mem_small = pprof_delta_mem(d);
    ASSERT_LT(mem_small, mem_big / 8);
    pprof_delta_free(d);
}

static void expect_cap_error(struct pprof_limits *lim, struct tprof *tp, const char *msg)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct run r;

    run_lim(d, tp, lim, &r);
    ASSERT_EQ(r.rc, PPROF_ETOOLARGE);
    if (!strstr(r.err, msg))
        test__fail(__FILE__, __LINE__, "error \"%s\" lacks \"%s\"", r.err, msg);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(caps_name_the_limit)
{
    struct pprof_limits lim;
    struct tprof *tp;
    uint64_t stack[3] = {1, 2, 3};

    pprof_limits_default(&lim);
    lim.max_samples = 2;
    tp = cont_prof(1);
    for (int i = 0; i < 3; i++)
        add(tp, stack, 1, (int64_t[]){1, 1});
    expect_cap_error(&lim, tp, "3 samples > cap 2");

    pprof_limits_default(&lim);
    lim.max_stack_depth = 2;
    tp = cont_prof(1);
    add(tp, stack, 3, (int64_t[]){1, 1});
    expect_cap_error(&lim, tp, "stack depth > cap 2");

    pprof_limits_default(&lim);
    lim.max_labels = 1;
    tp = cont_prof(1);
    add(tp, stack, 1, (int64_t[]){1, 1});
    tp_label_str(tp, "a", "b");
    tp_label_str(tp, "c", "d");
    expect_cap_error(&lim, tp, "labels in one sample > cap 1");

    pprof_limits_default(&lim);
    lim.max_locations = 2;
    tp = cont_prof(1);
    add(tp, stack, 3, (int64_t[]){1, 1});
    expect_cap_error(&lim, tp, "3 locations > cap 2");

    pprof_limits_default(&lim);
    lim.max_functions = 1;
    tp = cont_prof(1);
    add(tp, stack, 2, (int64_t[]){1, 1});
    expect_cap_error(&lim, tp, "2 functions > cap 1");

    pprof_limits_default(&lim);
    lim.max_strings = 4;
    tp = cont_prof(1);
    add(tp, stack, 1, (int64_t[]){1, 1});
    expect_cap_error(&lim, tp, "strings > cap 4");

    pprof_limits_default(&lim);
    lim.max_decompressed = 64;
    tp = cont_prof(1);
    add(tp, stack, 3, (int64_t[]){1, 1});
    expect_cap_error(&lim, tp, "decompressed size > cap 64 bytes");
}

/* The record tables grow while the profile is read: what was read before a
 * table grew must still be there, and a cap error still names how many
 * records there are, not where reading stopped. */
TEST(record_tables_grow_keeping_what_was_read)
{
    enum { NS = 1500, NC = 40 };
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    struct run r;

    pprof_limits_default(&lim);
    /* An empty scratch: every table starts small and doubles. */
    pprof_thread_cleanup();
    for (int round = 1; round <= 2; round++) {
        struct tprof *tp = cont_prof(round);
        Perftools__Profiles__Profile *p = tp_proto(tp);
        int64_t *comments = malloc(NC * sizeof(int64_t));
        size_t len;
        uint8_t *in;

        for (uint64_t i = 0; i < NS; i++)
            add(tp, (uint64_t[]){0x1000 + i}, 1,
                (int64_t[]){round * (int64_t)i, round * (int64_t)i * 10});
        for (int i = 0; i < NC; i++) {
            char text[16];
            snprintf(text, sizeof(text), "note %d", i);
            comments[i] = (int64_t)tp_str(tp, text);
        }
        p->comment = comments;
        p->n_comment = NC;
        in = tp_pack(tp, &len, true);
        p->comment = NULL;
        p->n_comment = 0;
        free(comments);
        tp_free(tp);
        memset(&r, 0, sizeof(r));
        r.rc = pprof_delta_process(d, in, len, &lim, &r.out, &r.out_len, r.err, sizeof(r.err));
        free(in);
        ASSERT_EQ(r.rc, round == 1 ? PPROF_DELTA_BASELINE : PPROF_DELTA_EMITTED);
        if (round == 1)
            continue;
        tp_decode(r.out, r.out_len, &r.dec);
        ASSERT_EQ(r.dec.prof->n_sample, NS - 1); /* sample 0 stayed 0 */
        for (uint64_t i = 1; i < NS; i++) {
            char key[32];
            snprintf(key, sizeof(key), "%llx,|", (unsigned long long)(0x1000 + i));
            assert_vals(tp_find(r.dec.prof, key), (int64_t[]){(int64_t)i, (int64_t)i * 10}, 2);
        }
        ASSERT_EQ(r.dec.prof->n_comment, NC);
        for (int i = 0; i < NC; i++) {
            char text[16];
            snprintf(text, sizeof(text), "note %d", i);
            ASSERT_STR_EQ(r.dec.prof->string_table[r.dec.prof->comment[i]], text);
        }
        run_done(&r);
    }
    pprof_delta_free(d);

    pprof_limits_default(&lim);
    lim.max_samples = 300;
    struct tprof *tp = cont_prof(1);
    for (uint64_t i = 0; i < 1000; i++)
        add(tp, (uint64_t[]){0x1000 + i % 7}, 1, (int64_t[]){1, 1});
    expect_cap_error(&lim, tp, "1000 samples > cap 300");
}

/* A profile that declares many columns and has many samples without
 * values is refused before its per-sample tables (samples x columns) are
 * sized: what the thread keeps stays small. */
TEST(many_columns_without_values_allocate_nothing_large)
{
    enum { N = 1000 };
    static const char *cols[N];
    static int64_t zeros[N];
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;

    for (int i = 0; i < N; i++)
        cols[i] = "contentions/count";
    tp = tp_new(cols, N);
    uint64_t loc = tp_loc(tp, 0x10, 0, 0);
    for (int i = 0; i < N; i++) {
        tp_sample(tp, &loc, 1, zeros);
        tp_proto(tp)->sample[i]->n_value = 0; /* no values: four bytes each */
    }
    pprof_thread_cleanup();
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_ECORRUPT);
    ASSERT(strstr(r.err, "fewer values than sample types") != NULL);
    /* Sized from the counts, sums alone would take 1000 x 1000 x 8 bytes
     * (kept: under the retain cap). */
    ASSERT(pprof__scratch_bytes() < (size_t)1 << 20);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(gzip_level_zero_writes_plain_pprof)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    uint64_t A[1] = {0x10};
    struct tprof *tp;
    struct run r;

    pprof_limits_default(&lim);
    lim.gzip_level = 0;
    tp = cont_prof(1);
    add(tp, A, 1, (int64_t[]){1, 10});
    run_lim(d, tp, &lim, &r);
    run_done(&r);
    tp = cont_prof(2);
    add(tp, A, 1, (int64_t[]){3, 10});
    run_lim(d, tp, &lim, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_NE(r.out[0], 0x1f);
    ASSERT_EQ(r.out[0], 0x0a); /* sample_type first */
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){2, 0}, 2);
    run_done(&r);
    pprof_delta_free(d);
}

/* The places of the first and last sample record and of the last string
 * record among the top-level records of a plain profile. */
struct layout {
    size_t first_sample, last_sample, last_string, records;
};

static struct layout layout_of(const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    struct layout l = {SIZE_MAX, 0, 0, 0};
    struct pprof__field f;

    while (pprof__next_field(&p, end, &f) > 0) {
        if (f.num == 2) {
            if (l.first_sample == SIZE_MAX)
                l.first_sample = l.records;
            l.last_sample = l.records;
        } else if (f.num == 6) {
            l.last_string = l.records;
        }
        l.records++;
    }
    ASSERT_EQ(p, end);
    return l;
}

/* libdeflate's level 1 compresses a Go heap delta 2-3 % faster with the
 * samples after the tables (docs/benchmarks.md), so encode() writes them
 * last when it knows the locations to keep before writing them: when most
 * samples are emitted. When most are dropped, it marks the locations of
 * the few it writes as it writes them, so these come first. Either way
 * the delta is the same. */
TEST(samples_written_after_the_tables_when_most_are_emitted)
{
    struct pprof_limits lim;
    struct tprof *tp;
    struct run r;

    pprof_limits_default(&lim);
    lim.gzip_level = 0;
    for (int most_dropped = 0; most_dropped <= 1; most_dropped++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        for (int64_t t = 1; t <= 2; t++) {
            tp = cont_prof(t);
            for (uint64_t a = 1; a <= 8; a++) {
                /* In the second profile, sample 1 (most_dropped: only it)
                 * has grown; an unchanged contention sample is dropped. */
                bool grows = t == 2 && (a == 1 || !most_dropped);
                add(tp, (uint64_t[]){0x100 * a, 0x10}, 2,
                    (int64_t[]){grows ? 2 * (int64_t)a : (int64_t)a, 10});
            }
            run_lim(d, tp, &lim, &r);
            if (t == 1) {
                run_done(&r);
                continue;
            }
            ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
            ASSERT_EQ(r.dec.prof->n_sample, most_dropped ? 1u : 8u);
            assert_vals(tp_find(r.dec.prof, "100,10,|"), (int64_t[]){1, 0}, 2);
            struct layout l = layout_of(r.out, r.out_len);
            ASSERT_NE(l.first_sample, SIZE_MAX);
            if (most_dropped)
                ASSERT_TRUE(l.last_sample < l.last_string);
            else
                ASSERT_TRUE(l.first_sample > l.last_string);
            run_done(&r);
        }
        pprof_delta_free(d);
    }
}

/* ---- randomized check against a reference model ---- */

struct model_entry {
    char key[512];
    int64_t v[4];
};

struct model {
    struct model_entry *e;
    size_t n;
};

static int64_t *model_get(struct model *m, const char *key, bool create)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->e[i].key, key) == 0)
            return m->e[i].v;
    if (!create)
        return NULL;
    m->e = realloc(m->e, (m->n + 1) * sizeof(*m->e));
    memset(&m->e[m->n], 0, sizeof(m->e[m->n]));
    snprintf(m->e[m->n].key, sizeof(m->e[m->n].key), "%s", key);
    return m->e[m->n++].v;
}

/* Sums the decoded samples of a profile by content key. */
static void model_of(const uint8_t *data, size_t len, struct model *m)
{
    struct pprof__decoded dp;
    char key[512];

    m->e = NULL;
    m->n = 0;
    tp_decode(data, len, &dp);
    for (size_t i = 0; i < dp.prof->n_sample; i++) {
        const Perftools__Profiles__Sample *s = dp.prof->sample[i];
        int64_t *v;
        tp_sample_key(dp.prof, s, key, sizeof(key));
        v = model_get(m, key, true);
        for (size_t k = 0; k < s->n_value; k++)
            v[k] += s->value[k];
    }
    pprof__decoded_done(&dp);
}

static uint32_t rnd_state = 12345;

static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 8) % n;
}

#define NSTACK 30

struct gen_stack {
    uint64_t frames[5];
    size_t depth;
    int label; /* -1 none, else bytes label value index */
    int64_t total[2];
    bool visible;
};

/* Builds one profile of the simulated process, with ids and strings in a
 * shuffled order and some stacks split into duplicate samples. */
static uint8_t *gen_profile(struct gen_stack *st, int64_t t, bool nogo, size_t *len)
{
    struct tprof *tp = tp_new(MEM_COLS, 4);
    int order[NSTACK];

    tp_mapping(tp, 0x400000, 0x800000, "/app", "b");
    tp_time(tp, t);
    for (int i = 0; i < NSTACK; i++)
        order[i] = i;
    for (int i = NSTACK - 1; i > 0; i--) {
        int j = (int)rnd((uint32_t)i + 1), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    for (int oi = 0; oi < NSTACK; oi++) {
        struct gen_stack *g = &st[order[oi]];
        int parts = rnd(4) == 0 ? 2 : 1;
        if (!g->visible)
            continue;
        for (int part = 0; part < parts; part++) {
            uint64_t ids[5];
            for (size_t k = 0; k < g->depth; k++) {
                char name[32];
                snprintf(name, sizeof(name), "f%llu", (unsigned long long)g->frames[k]);
                uint64_t fn = tp_func(tp, name, "x.go");
                ids[k] = tp_loc(tp, nogo ? 0 : 0x1000 * g->frames[k], fn,
                                (int64_t)g->frames[k]);
            }
            int64_t share0 = parts == 1 ? g->total[0] : (part == 0 ? g->total[0] / 3
                                                                   : g->total[0] - g->total[0] / 3);
            int64_t share1 = parts == 1 ? g->total[1] : (part == 0 ? g->total[1] / 2
                                                                   : g->total[1] - g->total[1] / 2);
            tp_sample(tp, ids, g->depth,
                      (int64_t[]){share0, share1, (int64_t)rnd(3), (int64_t)rnd(3) * 64});
            if (g->label >= 0)
                tp_label_num(tp, "bytes", 64 << g->label, NULL);
        }
    }
    uint8_t *data = tp_pack(tp, len, rnd(2) == 0);
    tp_free(tp);
    return data;
}

TEST(randomized_against_reference_model)
{
    int emitted = 0, resets = 0, clamped = 0;

    for (int round = 0; round < 12; round++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
        struct pprof_limits lim;
        struct gen_stack st[NSTACK];
        struct model prev = {0};
        bool nogo = round % 3 == 2;
        int64_t t = 1000;

        pprof_limits_default(&lim);
        memset(st, 0, sizeof(st));
        for (int i = 0; i < NSTACK; i++) {
            st[i].depth = 1 + rnd(5);
            for (size_t k = 0; k < st[i].depth; k++)
                st[i].frames[k] = 1 + rnd(12);
            st[i].label = (int)rnd(3) - 1;
            st[i].visible = rnd(3) != 0;
        }
        for (int step = 0; step < 8; step++) {
            bool restart = step == 5 && round % 2 == 0;
            int lowered = -1;
            for (int i = 0; i < NSTACK; i++) {
                if (restart) {
                    st[i].total[0] = rnd(2);
                    st[i].total[1] = st[i].total[0] * 16;
                    continue;
                }
                if (!st[i].visible && rnd(4) == 0)
                    st[i].visible = true;
                if (rnd(2)) {
                    st[i].total[0] += rnd(50);
                    st[i].total[1] += rnd(5000);
                }
            }
            if (!restart && step > 0 && rnd(2) == 0) {
                lowered = (int)rnd(NSTACK);
                st[lowered].total[0] = st[lowered].total[0] / 2;
            }
            t += 1 + rnd(1000);

            size_t len;
            uint8_t *in = gen_profile(st, t, nogo, &len), *out = NULL;
            size_t out_len = 0;
            char err[256];
            struct model cur, got;
            int rc = pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err));
            model_of(in, len, &cur);
            free(in);

            /* The model of docs/design.md "Deltas": matched keys that went down
             * (any cumulative column) decide a restart. */
            size_t matched = 0, decreased = 0;
            for (size_t i = 0; i < cur.n; i++) {
                int64_t *p = model_get(&prev, cur.e[i].key, false);
                if (!p)
                    continue;
                matched++;
                if (cur.e[i].v[0] < p[0] || cur.e[i].v[1] < p[1])
                    decreased++;
            }
            if (step == 0) {
                ASSERT_EQ(rc, PPROF_DELTA_BASELINE);
            } else if (decreased * 2 > matched) {
                ASSERT_EQ(rc, PPROF_DELTA_RESET);
                resets++;
            } else {
                if (rc != PPROF_DELTA_EMITTED)
                    test__fail(__FILE__, __LINE__, "round %d step %d: rc %d %s", round, step, rc,
                               err);
                emitted++;
                model_of(out, out_len, &got);
                size_t want_n = 0;
                for (size_t i = 0; i < cur.n; i++) {
                    int64_t *p = model_get(&prev, cur.e[i].key, false), want[4];
                    for (int k = 0; k < 2; k++) {
                        want[k] = cur.e[i].v[k] - (p ? p[k] : 0);
                        if (want[k] < 0) {
                            want[k] = 0;
                            clamped++;
                        }
                    }
                    want[2] = cur.e[i].v[2];
                    want[3] = cur.e[i].v[3];
                    int64_t *g = model_get(&got, cur.e[i].key, false);
                    if (!want[0] && !want[1] && !want[2] && !want[3]) {
                        ASSERT_NULL(g);
                        continue;
                    }
                    want_n++;
                    if (!g)
                        test__fail(__FILE__, __LINE__, "missing %s", cur.e[i].key);
                    for (int k = 0; k < 4; k++)
                        ASSERT_EQ(g[k], want[k]);
                }
                ASSERT_EQ(got.n, want_n);
                free(got.e);
            }
            free(out);
            free(prev.e);
            prev = cur;
        }
        free(prev.e);
        pprof_delta_free(d);
    }
    /* The generator really exercised every branch. */
    ASSERT_GT(emitted, 50);
    ASSERT_GE(resets, 4);
    ASSERT_GT(clamped, 3);
}

TEST(scratch_kept_per_thread_capped_and_freed)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[2] = {0x1000, 0x2000}, B[1] = {0x3000};
    struct tprof *tp;
    struct run r;
    size_t kept;

    pprof_thread_cleanup();
    ASSERT_EQ(pprof__scratch_bytes(), 0);
    for (int round = 0; round < 3; round++) {
        tp = mem_prof(1000 * (round + 1));
        add(tp, A, 2, (int64_t[]){10 * (round + 1), 640 * (round + 1), 2, 128});
        tp_label_num(tp, "bytes", 64, NULL);
        add(tp, B, 1, (int64_t[]){1 + round, 128 * (round + 1), 1, 128});
        tp_label_num(tp, "bytes", 128, NULL);
        run(d, tp, &r);
        ASSERT_EQ(r.rc, round == 0 ? PPROF_DELTA_BASELINE : PPROF_DELTA_EMITTED);
        if (round > 0) {
            ASSERT_EQ(r.dec.prof->n_sample, 2);
            assert_vals(tp_find(r.dec.prof, "1000,2000,|bytes=#64#;"),
                        (int64_t[]){10, 640, 2, 128}, 4);
        }
        run_done(&r);
        /* Kept between calls, within the cap; freed on request, after
         * which the next call simply allocates again. */
        kept = pprof__scratch_bytes();
        ASSERT_GT(kept, 0);
        ASSERT_LE(kept, PPROF__SCRATCH_RETAIN);
        if (round == 1) {
            pprof_thread_cleanup();
            ASSERT_EQ(pprof__scratch_bytes(), 0);
        }
    }
    /* A call that needed more than the cap frees it all at its end. */
    ASSERT_NOT_NULL(pprof__scratch(PPROF__S_OUT, PPROF__SCRATCH_RETAIN + 1, false));
    ASSERT_GT(pprof__scratch_bytes(), PPROF__SCRATCH_RETAIN);
    pprof__scratch_release();
    ASSERT_EQ(pprof__scratch_bytes(), 0);
    pprof_thread_cleanup();
    pprof_delta_free(d);
}

/* ---- memory grants ---- */

/* A contention profile of `n` samples, each a distinct stack of two of
 * 1,000 locations with values (i % 7 + 1) * scale and 1000 * scale,
 * written by hand (protobuf-c would need hundreds of bytes of structs per
 * sample) and gzipped; `*raw` is its size before gzip. */
static uint8_t *small_samples(size_t n, int64_t scale, size_t *len, size_t *raw)
{
    struct twb w = {0}, m = {0}, inner = {0};
    const char *strs[] = {"", "contentions", "count", "delay", "nanoseconds", "f", "f.go"};
    uint8_t *out = NULL;

    twb_bytes(&w, 1, "\x08\x01\x10\x02", 4);
    twb_bytes(&w, 1, "\x08\x03\x10\x04", 4);
    for (size_t i = 0; i < n; i++) {
        m.len = 0;
        inner.len = 0;
        twb_varint(&inner, 1 + i % 1000);
        twb_varint(&inner, 1 + (i / 1000) % 1000);
        twb_bytes(&m, 1, inner.data, inner.len);
        inner.len = 0;
        twb_varint(&inner, (uint64_t)(scale * (int64_t)(1 + i % 7)));
        twb_varint(&inner, (uint64_t)(scale * 1000));
        twb_bytes(&m, 2, inner.data, inner.len);
        twb_bytes(&w, 2, m.data, m.len);
    }
    for (uint64_t l = 1; l <= 1000; l++) {
        m.len = 0;
        inner.len = 0;
        twb_uint(&inner, 1, 1);
        twb_uint(&inner, 2, l);
        twb_uint(&m, 1, l);
        twb_uint(&m, 3, 0x400000 + 16 * l);
        twb_bytes(&m, 4, inner.data, inner.len);
        twb_bytes(&w, 4, m.data, m.len);
    }
    m.len = 0;
    twb_uint(&m, 1, 1);
    twb_uint(&m, 2, 5);
    twb_uint(&m, 4, 6);
    twb_bytes(&w, 5, m.data, m.len);
    for (size_t i = 0; i < ARRAY_SIZE(strs); i++)
        twb_bytes(&w, 6, strs[i], strlen(strs[i]));
    *raw = w.len;
    ASSERT_EQ(pprof_gzip(w.data, w.len, 1, &out, len), 0);
    twb_free(&w);
    twb_free(&m);
    twb_free(&inner);
    return out;
}

/* Feeds `in` (freed) to `d` under `lim`; the output, if any, is freed. */
static int feed(struct pprof_delta *d, uint8_t *in, size_t len, const struct pprof_limits *lim,
                char *err, size_t errlen, size_t *samples)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = pprof_delta_process(d, in, len, lim, &out, &out_len, err, errlen);

    free(in);
    if (rc == PPROF_DELTA_EMITTED) {
        struct pprof__decoded dec;
        tp_decode(out, out_len, &dec);
        *samples = dec.prof->n_sample;
        pprof__decoded_done(&dec);
    }
    free(out);
    return rc;
}

TEST(grant_refuses_a_structure_too_large_before_its_samples)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    size_t len, raw, samples = 0;
    uint64_t need;
    char err[256];
    uint8_t *in;

    pprof_thread_cleanup();
    pprof_limits_default(&lim);
    ASSERT_EQ(lim.max_memory, 0);
    /* 100,000 samples of 6 bytes: about 1 MB, admitted as 5x that, but
     * their structure needs three times more. */
    in = small_samples(100000, 1, &len, &raw);
    lim.max_memory = 5 * raw;
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_EOVERBUDGET);
    ASSERT(strstr(err, "over its grant") != NULL);
    /* Stopped by the structure's need, before any per-sample buffer: no
     * charge went past the grant. */
    ASSERT_FALSE(pprof__acct_over());
    ASSERT_LE(pprof__acct_charged(), lim.max_memory);
    need = pprof_delta_need(d, raw);
    ASSERT_GT(need, lim.max_memory);
    ASSERT_STR_EQ(pprof_strerror(PPROF_EOVERBUDGET), "over the job's memory grant");

    /* Granted that need, the profile seeds the state, and what the call
     * charged is within it; the next one is differenced exactly. */
    pprof_thread_cleanup();
    in = small_samples(100000, 1, &len, &raw);
    lim.max_memory = (size_t)need;
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_DELTA_BASELINE);
    ASSERT_LE(pprof__acct_charged(), need);
    pprof_thread_cleanup();
    in = small_samples(100000, 2, &len, &raw);
    lim.max_memory = (size_t)pprof_delta_need(d, raw);
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_DELTA_EMITTED);
    ASSERT_LE(pprof__acct_charged(), lim.max_memory);
    ASSERT_EQ(samples, 100000);
    pprof_thread_cleanup();
    pprof_delta_free(d);
}

TEST(grant_passed_while_running_stops_the_call_and_asks_for_more)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    size_t len, raw, samples = 0;
    char err[256];
    uint8_t *in;

    /* The accounting itself: a growth past the grant fails as an
     * allocation would, and says why; without a grant nothing is held. */
    pprof_thread_cleanup();
    pprof__acct_begin(1000);
    ASSERT_NOT_NULL(pprof__scratch(PPROF__S_OUT, 500, false));
    ASSERT_NULL(pprof__scratch(PPROF__S_OUT, 4096, false));
    ASSERT_TRUE(pprof__acct_over());
    pprof__acct_end();
    ASSERT_NOT_NULL(pprof__scratch(PPROF__S_OUT, 4096, false));
    pprof_thread_cleanup();

    /* A grant below the inflated size: the gunzip passes it. */
    pprof_limits_default(&lim);
    in = small_samples(20000, 1, &len, &raw);
    lim.max_memory = raw / 2;
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_EOVERBUDGET);
    ASSERT(strstr(err, "passed its memory grant") != NULL);
    ASSERT_TRUE(pprof__acct_over());
    /* The next admission asks for at least twice as much. */
    ASSERT_GE(pprof_delta_need(d, raw), 2 * (uint64_t)lim.max_memory);
    /* The state was poisoned; its memory is back (the call released its
     * scratch past the retention cap, and kept at most that). */
    ASSERT_EQ(pprof_delta_keys(d), 0);
    ASSERT_LE(pprof__scratch_bytes(), PPROF__SCRATCH_RETAIN);
    /* Without a grant the same profile goes through. */
    lim.max_memory = 0;
    in = small_samples(20000, 1, &len, &raw);
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_DELTA_BASELINE);
    in = small_samples(20000, 3, &len, &raw);
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_DELTA_EMITTED);
    ASSERT_EQ(samples, 20000);
    pprof_thread_cleanup();
    pprof_delta_free(d);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
