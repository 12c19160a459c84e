/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of every delta rule of docs/design.md "Deltas": baselines,
 * differenced and passed-through columns, duplicate keys, the order of the
 * last profile, filters, labels, pruning, resets, non-Go producers.
 * Profiles are built with protobuf-c (tprof.c) and outputs read back with
 * protobuf-c and matched by content (addresses or function/file/line,
 * sorted labels), never by id, so the tests share no code path with the
 * wire scanner they check. Expected values are worked out by hand. The
 * test executable is this file with test_codec.c, test_wire.c and
 * test_model.c, which share delta_run.c. */
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

/* ---- delta rules ---- */

TEST(first_profile_is_baseline)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct tprof *tp = mem_prof(1000);
    uint64_t a[2] = { 0x1000, 0x2000 };
    int64_t v[4] = { 10, 640, 2, 128 };
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
    uint64_t A[2] = { 0x1000, 0x2000 }, B[1] = { 0x3000 }, C[2] = { 0x4000, 0x2000 };
    struct tprof *tp;
    struct run r;

    tp = mem_prof(1000);
    add(tp, A, 2, (int64_t[]){ 10, 640, 2, 128 });
    tp_label_num(tp, "bytes", 64, NULL);
    add(tp, B, 1, (int64_t[]){ 1, 128, 1, 128 });
    tp_label_num(tp, "bytes", 128, NULL);
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);

    tp = mem_prof(2000);
    add(tp, C, 2, (int64_t[]){ 4, 256, 4, 256 });
    tp_label_num(tp, "bytes", 64, NULL);
    add(tp, B, 1, (int64_t[]){ 1, 128, 0, 0 });
    tp_label_num(tp, "bytes", 128, NULL);
    add(tp, A, 2, (int64_t[]){ 15, 960, 3, 192 });
    tp_label_num(tp, "bytes", 64, NULL);
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.out[0], 0x1f);          /* gzip at the default level */
    ASSERT_EQ(r.dec.prof->n_sample, 2); /* B: no allocation, nothing in use */
    assert_vals(tp_find(r.dec.prof, "1000,2000,|bytes=#64#;"), (int64_t[]){ 5, 320, 3, 192 }, 4);
    assert_vals(tp_find(r.dec.prof, "4000,2000,|bytes=#64#;"), (int64_t[]){ 4, 256, 4, 256 }, 4);
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
    uint64_t A[1] = { 0x10 }, B[2] = { 0x20, 0x10 };
    struct tprof *tp;
    struct run r;

    tp = cont_prof(1);
    add(tp, A, 1, (int64_t[]){ 3, 300 });
    add(tp, B, 2, (int64_t[]){ 5, 500 });
    run(d, tp, &r);
    run_done(&r);
    tp = cont_prof(2);
    add(tp, A, 1, (int64_t[]){ 3, 300 });
    add(tp, B, 2, (int64_t[]){ 7, 900 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 1);
    assert_vals(tp_find(r.dec.prof, "20,10,|"), (int64_t[]){ 2, 400 }, 2);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(duplicate_keys_summed)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    uint64_t A[2] = { 0x10, 0x20 };
    struct tprof *tp;
    struct run r;

    /* Two samples with distinct location ids but the same addresses. */
    tp = cont_prof(1);
    add(tp, A, 2, (int64_t[]){ 2, 20 });
    add(tp, A, 2, (int64_t[]){ 3, 30 });
    run(d, tp, &r);
    ASSERT_EQ(pprof_delta_keys(d), 1);
    run_done(&r);
    tp = cont_prof(2);
    add(tp, A, 2, (int64_t[]){ 4, 45 });
    add(tp, A, 2, (int64_t[]){ 5, 55 });
    add(tp, A, 2, (int64_t[]){ 1, 0 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 1);
    assert_vals(tp_find(r.dec.prof, "10,20,|"), (int64_t[]){ 10 - 5, 100 - 50 }, 2);
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
    add(tp, &addr, 1, (int64_t[]){ v0, v1 });
}

static void assert_one(const struct run *r, uint64_t addr, int64_t v0, int64_t v1)
{
    char key[32];

    snprintf(key, sizeof(key), "%llx,|", (unsigned long long)addr);
    assert_vals(tp_find(r->dec.prof, key), (int64_t[]){ v0, v1 }, 2);
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
    struct pprof_filter f = { .label_keep = keep_all_but_span_id, .label_ud = &asked };
    uint64_t A[2] = { 0x10, 0x20 }, B[1] = { 0x30 };
    struct tprof *tp;
    struct run r;

    pprof_delta_set_filter(d, &f);
    tp = cont_prof(1);
    add(tp, A, 2, (int64_t[]){ 1, 10 });
    tp_label_str(tp, "span_id", "s1");
    add(tp, A, 2, (int64_t[]){ 2, 20 });
    tp_label_str(tp, "span_id", "s2");
    add(tp, A, 2, (int64_t[]){ 1, 5 });
    tp_label_str(tp, "k", "v");
    tp_label_str(tp, "span_id", "s3");
    add(tp, B, 1, (int64_t[]){ 1, 1 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    ASSERT_EQ(pprof_delta_keys(d), 3); /* A, A{k=v}, B */
    ASSERT_EQ(asked, 2);               /* span_id and k, once each */
    run_done(&r);

    tp = cont_prof(2);
    add(tp, A, 2, (int64_t[]){ 2, 15 });
    tp_label_str(tp, "span_id", "s1");
    add(tp, A, 2, (int64_t[]){ 4, 40 });
    tp_label_str(tp, "span_id", "s2");
    add(tp, A, 2, (int64_t[]){ 1, 1 });
    tp_label_str(tp, "span_id", "s4"); /* new span, same stack */
    add(tp, A, 2, (int64_t[]){ 1, 5 });
    tp_label_str(tp, "span_id", "s3");
    tp_label_str(tp, "k", "v");
    add(tp, B, 1, (int64_t[]){ 3, 3 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 2); /* A{k=v} did not change */
    assert_vals(tp_find(r.dec.prof, "10,20,|"), (int64_t[]){ 7 - 3, 56 - 30 }, 2);
    assert_vals(tp_find(r.dec.prof, "30,|"), (int64_t[]){ 2, 2 }, 2);
    assert_no_string(r.dec.prof, "span_id");
    assert_no_string(r.dec.prof, "s4");
    run_done(&r);

    /* The same filter built again (a reload): the state stays. */
    struct pprof_filter again = f;
    pprof_delta_set_filter(d, &again);
    tp = cont_prof(3);
    add(tp, B, 1, (int64_t[]){ 4, 4 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "30,|"), (int64_t[]){ 1, 1 }, 2);
    run_done(&r);
    /* Another filter, or none, re-seeds: the labels are keys again. */
    struct pprof_filter other = f;
    other.fingerprint++;
    pprof_delta_set_filter(d, &other);
    tp = cont_prof(4);
    add(tp, B, 1, (int64_t[]){ 5, 5 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    pprof_delta_set_filter(d, NULL);
    tp = cont_prof(5);
    add(tp, A, 2, (int64_t[]){ 9, 90 });
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
    static const char *const drop_objects[] = { "alloc_objects" };
    struct pprof_filter f = { .types = drop_objects, .n_types = 1 };
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[1] = { 0x10 };
    struct tprof *tp;
    struct run r;

    pprof_delta_set_filter(d, &f);
    tp = mem_prof(1);
    tp_proto(tp)->default_sample_type = (int64_t)tp_str(tp, "alloc_objects");
    add(tp, A, 1, (int64_t[]){ 1, 100, 1, 100 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    tp = mem_prof(2);
    tp_proto(tp)->default_sample_type = (int64_t)tp_str(tp, "alloc_objects");
    add(tp, A, 1, (int64_t[]){ 3, 300, 2, 200 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample_type, 3);
    ASSERT_STR_EQ(type_name(r.dec.prof, 0), "alloc_space");
    ASSERT_STR_EQ(type_name(r.dec.prof, 1), "inuse_objects");
    ASSERT_STR_EQ(type_name(r.dec.prof, 2), "inuse_space");
    ASSERT_EQ(r.dec.prof->default_sample_type, 0);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){ 200, 2, 200 }, 3);
    run_done(&r);
    pprof_delta_free(d);
}

/* Keeping only in-use columns leaves nothing to difference: profiles go
 * out from the first, as they came but for the filter, and the default
 * type stays when it is kept. Dropping every type is an error. */
TEST(filter_without_cumulative_columns_emits_every_profile)
{
    static const char *const inuse[] = { "inuse_space" };
    static const char *const all[] = { "alloc_objects", "alloc_space", "inuse_objects",
                                       "inuse_space" };
    struct pprof_filter keep = { .types = inuse, .n_types = 1, .types_keep = true };
    struct pprof_filter none = { .types = all, .n_types = 4 };
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[1] = { 0x10 }, B[1] = { 0x20 };
    struct tprof *tp;
    struct run r;

    pprof_delta_set_filter(d, &keep);
    for (int64_t t = 1; t <= 2; t++) {
        tp = mem_prof(t);
        tp_proto(tp)->default_sample_type = (int64_t)tp_str(tp, "inuse_space");
        add(tp, A, 1, (int64_t[]){ 5, 500, 1, 64 * t });
        add(tp, B, 1, (int64_t[]){ 5, 500, 0, 0 }); /* nothing in use: dropped */
        run(d, tp, &r);
        ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
        ASSERT_EQ(r.dec.prof->n_sample_type, 1);
        ASSERT_STR_EQ(type_name(r.dec.prof, 0), "inuse_space");
        ASSERT_STR_EQ(r.dec.prof->string_table[r.dec.prof->default_sample_type], "inuse_space");
        ASSERT_EQ(r.dec.prof->n_sample, 1);
        assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){ 64 * t }, 1);
        ASSERT_EQ(pprof_delta_keys(d), 0); /* no state */
        run_done(&r);
    }
    pprof_delta_set_filter(d, &none);
    tp = mem_prof(3);
    add(tp, A, 1, (int64_t[]){ 5, 500, 1, 64 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_EFILTER);
    run_done(&r);
    pprof_delta_free(d);
}

/* Profiles sent as they came, filtered: no state, each one emitted, its
 * duration its own, samples merged once their dropped labels are gone. */
TEST(filter_on_profiles_sent_as_they_came)
{
    static const char *const cpu_cols[] = { "samples/count", "cpu/nanoseconds" };
    int asked = 0;
    struct pprof_filter f = { .label_keep = keep_all_but_span_id, .label_ud = &asked };
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_NONE);
    uint64_t A[2] = { 0x10, 0x20 };
    struct tprof *tp;
    struct run r;

    pprof_delta_set_filter(d, &f);
    for (int64_t t = 1; t <= 2; t++) {
        tp = tp_new(cpu_cols, 2);
        tp_mapping(tp, 0x400000, 0x800000, "/app", "build-1");
        tp_time(tp, t * 1000000000);
        tp_proto(tp)->duration_nanos = 10000000000;
        add(tp, A, 2, (int64_t[]){ 1, 10000000 });
        tp_label_str(tp, "span_id", "a");
        tp_label_str(tp, "handler", "/x");
        add(tp, A, 2, (int64_t[]){ 2, 20000000 });
        tp_label_str(tp, "handler", "/x");
        tp_label_str(tp, "span_id", "b");
        run(d, tp, &r);
        ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
        ASSERT_EQ(r.dec.prof->n_sample, 1);
        ASSERT_EQ(r.dec.prof->duration_nanos, 10000000000);
        assert_vals(tp_find(r.dec.prof, "10,20,|handler=/x#0#;"), (int64_t[]){ 3, 30000000 }, 2);
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
        struct pprof__index ix = { slot, ((size_t)1 << bits) - 1, 64 - bits, pprof__index_salt() };
        size_t distinct = 0, want_distinct = 0;

        memset(slot, 0, sizeof(slot));
        for (size_t i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            switch (shape) {
            case 0:
                keys[i] = x;
                break; /* hashes */
            case 1:
                keys[i] = x % 37;
                break; /* runs of equal keys */
            case 2:
                keys[i] = (0xabcdULL << 48) | (i << 20);
                break; /* one top, one bottom */
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
    uint64_t A[1] = { 0x10 };
    struct tprof *tp;
    struct run r;

    tp = mem_prof(1);
    add(tp, A, 1, (int64_t[]){ 1, 64, 0, 0 });
    tp_label_str(tp, "k1", "a");
    tp_label_str(tp, "k2", "b");
    tp_label_num(tp, "bytes", 64, NULL);
    add(tp, A, 1, (int64_t[]){ 1, 128, 0, 0 });
    tp_label_str(tp, "k1", "a");
    tp_label_str(tp, "k2", "b");
    tp_label_num(tp, "bytes", 128, NULL);
    run(d, tp, &r);
    ASSERT_EQ(pprof_delta_keys(d), 2); /* the bytes label separates them */
    run_done(&r);

    tp = mem_prof(2);
    tp_str(tp, "padding so that string indices move");
    add(tp, A, 1, (int64_t[]){ 3, 384, 0, 0 });
    tp_label_num(tp, "bytes", 128, NULL);
    tp_label_str(tp, "k2", "b");
    tp_label_str(tp, "k1", "a");
    add(tp, A, 1, (int64_t[]){ 2, 128, 0, 0 });
    tp_label_str(tp, "k2", "b");
    tp_label_num(tp, "bytes", 64, NULL);
    tp_label_str(tp, "k1", "a");
    add(tp, A, 1, (int64_t[]){ 1, 64, 0, 0 }); /* same stack, other label value */
    tp_label_str(tp, "k1", "z");
    tp_label_str(tp, "k2", "b");
    tp_label_num(tp, "bytes", 64, NULL);
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 3);
    assert_vals(tp_find(r.dec.prof, "10,|bytes=#128#;k1=a#0#;k2=b#0#;"),
                (int64_t[]){ 2, 256, 0, 0 }, 4);
    assert_vals(tp_find(r.dec.prof, "10,|bytes=#64#;k1=a#0#;k2=b#0#;"), (int64_t[]){ 1, 64, 0, 0 },
                4);
    assert_vals(tp_find(r.dec.prof, "10,|bytes=#64#;k1=z#0#;k2=b#0#;"), (int64_t[]){ 1, 64, 0, 0 },
                4);
    run_done(&r);
    pprof_delta_free(d);
}

/* Label sets that hold the same strings in other roles are other keys:
 * key and value swapped, values swapped between two keys, a string as key
 * or as unit, a unit or none. */
static void add_role_samples(struct tprof *tp, int64_t n)
{
    static const uint64_t A[1] = { 0x10 };

    add(tp, A, 1, (int64_t[]){ n, n });
    tp_label_str(tp, "a", "b");
    add(tp, A, 1, (int64_t[]){ n, n });
    tp_label_str(tp, "b", "a");
    add(tp, A, 1, (int64_t[]){ n, n });
    tp_label_str(tp, "k1", "a");
    tp_label_str(tp, "k2", "b");
    add(tp, A, 1, (int64_t[]){ n, n });
    tp_label_str(tp, "k1", "b");
    tp_label_str(tp, "k2", "a");
    add(tp, A, 1, (int64_t[]){ n, n });
    tp_label_num(tp, "u", 5, "w");
    add(tp, A, 1, (int64_t[]){ n, n });
    tp_label_num(tp, "w", 5, "u");
    add(tp, A, 1, (int64_t[]){ n, n });
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
    uint64_t A[1] = { 0x10 }, B[1] = { 0x20 }, C[1] = { 0x30 }, D[1] = { 0x40 };
    struct tprof *tp;
    struct run r;

    tp = mem_prof(1);
    add(tp, A, 1, (int64_t[]){ 10, 100, 5, 50 });
    add(tp, B, 1, (int64_t[]){ 10, 100, 0, 0 });
    add(tp, C, 1, (int64_t[]){ 10, 100, 0, 0 });
    add(tp, D, 1, (int64_t[]){ 10, 100, 0, 0 });
    run(d, tp, &r);
    run_done(&r);
    tp = mem_prof(2);
    add(tp, A, 1, (int64_t[]){ 7, 120, 4, 40 }); /* objects down, space up */
    add(tp, B, 1, (int64_t[]){ 8, 80, 0, 0 });   /* both down, nothing in use */
    add(tp, C, 1, (int64_t[]){ 11, 110, 0, 0 });
    add(tp, D, 1, (int64_t[]){ 12, 120, 0, 0 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){ 0, 20, 4, 40 }, 4);
    ASSERT_NULL(tp_find(r.dec.prof, "20,|"));
    assert_vals(tp_find(r.dec.prof, "30,|"), (int64_t[]){ 1, 10, 0, 0 }, 4);
    assert_vals(tp_find(r.dec.prof, "40,|"), (int64_t[]){ 2, 20, 0, 0 }, 4);
    ASSERT_EQ(r.dec.prof->n_sample, 3);
    run_done(&r);
    /* The lowered values are the new reference. */
    tp = mem_prof(3);
    add(tp, B, 1, (int64_t[]){ 9, 95, 0, 0 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "20,|"), (int64_t[]){ 1, 15, 0, 0 }, 4);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(unused_locations_functions_strings_pruned)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;
    uint64_t keep[2] = { 0xaa, 0xbb };
    uint64_t gone[2] = { 0xcc, 0xbb };

    for (int step = 0; step < 2; step++) {
        uint64_t ids[2];
        tp = cont_prof(step + 1);
        ids[0] = tp_loc(tp, gone[0], tp_func(tp, "only_in_unchanged", "old.go"), 1);
        ids[1] = tp_loc(tp, gone[1], tp_func(tp, "shared", "app.go"), 2);
        tp_sample(tp, ids, 2, (int64_t[]){ 5, 50 });
        ids[0] = tp_loc(tp, keep[0], tp_func(tp, "hot", "hot.go"), 3);
        ids[1] = tp_loc(tp, keep[1] + 0, tp_func(tp, "shared", "app.go"), 2);
        tp_sample(tp, ids, 2, (int64_t[]){ 5 + step, 50 + step });
        tp_label_str(tp, "thread", "main");
        run(d, tp, &r);
        if (step == 0) {
            run_done(&r);
            continue;
        }
        ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
        const Perftools__Profiles__Profile *p = r.dec.prof;
        ASSERT_EQ(p->n_sample, 1);
        assert_vals(tp_find(p, "aa,bb,|thread=main#0#;"), (int64_t[]){ 1, 1 }, 2);
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
static const Perftools__Profiles__Profile *run_pruning_step(struct pprof_delta *d, struct tprof *tp,
                                                            int step, struct run *r, size_t samples)
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
                tp_sample(tp, ids, 2, (int64_t[]){ 10 + (drop ? 0 : step), 100 });
                snprintf(name, sizeof(name), "%s_val_%d", drop ? "dropped" : "emitted", i);
                tp_label_str(tp, drop ? "dropped_key" : "emitted_key", name);
                if (step == 1 && i == 0) {
                    /* A duplicate of sample 0 through fresh location ids. */
                    snprintf(name, sizeof(name), "emitted_fn_%d", i);
                    ids[0] = tp_loc(tp, 0xe00, tp_func(tp, name, "x.go"), 2);
                    ids[1] = tp_loc(tp, 0x100, tp_func(tp, "root", "main.go"), 1);
                    tp_sample(tp, ids, 2, (int64_t[]){ 1, 1 });
                    tp_label_str(tp, "emitted_key", "emitted_val_0");
                }
            }
            const Perftools__Profiles__Profile *p =
                run_pruning_step(d, tp, step, &r, (size_t)emitted);
            if (!p)
                continue;
            assert_vals(tp_find(p, "e00,100,|emitted_key=emitted_val_0#0#;"), (int64_t[]){ 2, 1 },
                        2);
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
                        snprintf(name, sizeof(name), "%s_fn_%d_%d", drop ? "dropped" : "emitted", i,
                                 k);
                        ids[k] = tp_loc(tp, 0x10000 + (uint64_t)(i * 16 + k),
                                        tp_func(tp, name, "x.go"), 2);
                        ids[8 + k] = shared[k];
                    }
                    tp_sample(tp, ids, 16, (int64_t[]){ 10 + (drop ? 0 : step), 100 });
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
    uint64_t A[1] = { 0x10 };
    struct tprof *tp;
    struct run r;

    tp = cont_prof(5000);
    add(tp, A, 1, (int64_t[]){ 1, 10 });
    run(d, tp, &r);
    run_done(&r);
    tp = cont_prof(4000);
    add(tp, A, 1, (int64_t[]){ 3, 30 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_RESET);
    run_done(&r);
    tp = cont_prof(9000);
    add(tp, A, 1, (int64_t[]){ 4, 45 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){ 1, 15 }, 2);
    ASSERT_EQ(r.dec.prof->duration_nanos, 5000);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(reset_when_build_id_or_mapping_changes)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    uint64_t A[1] = { 0x10 };
    struct tprof *tp;
    struct run r;

    tp = cont_prof(1);
    add(tp, A, 1, (int64_t[]){ 1, 10 });
    run(d, tp, &r);
    run_done(&r);
    tp = tp_new(CONT_COLS, 2);
    tp_mapping(tp, 0x400000, 0x800000, "/app", "build-2");
    tp_time(tp, 2);
    add(tp, A, 1, (int64_t[]){ 5, 50 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_RESET);
    run_done(&r);
    tp = tp_new(CONT_COLS, 2); /* same build, loaded elsewhere (ASLR) */
    tp_mapping(tp, 0x7f0000, 0xbf0000, "/app", "build-2");
    tp_time(tp, 3);
    add(tp, A, 1, (int64_t[]){ 6, 60 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_RESET);
    run_done(&r);
    tp = tp_new(CONT_COLS, 2);
    tp_mapping(tp, 0x7f0000, 0xbf0000, "/app", "build-2");
    tp_time(tp, 4);
    add(tp, A, 1, (int64_t[]){ 8, 61 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){ 2, 1 }, 2);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(reset_when_most_keys_decrease)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[1] = { 0x10 }, B[1] = { 0x20 }, C[1] = { 0x30 };
    struct tprof *tp;
    struct run r;

    tp = mem_prof(1);
    add(tp, A, 1, (int64_t[]){ 100, 1000, 1, 1 });
    add(tp, B, 1, (int64_t[]){ 100, 1000, 1, 1 });
    add(tp, C, 1, (int64_t[]){ 100, 1000, 1, 1 });
    run(d, tp, &r);
    run_done(&r);
    /* A restarted process at the same addresses: later clock, small counts. */
    tp = mem_prof(2);
    add(tp, A, 1, (int64_t[]){ 2, 20, 1, 1 });
    add(tp, B, 1, (int64_t[]){ 3, 30, 1, 1 });
    add(tp, C, 1, (int64_t[]){ 200, 2000, 1, 1 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_RESET);
    run_done(&r);
    tp = mem_prof(3);
    add(tp, A, 1, (int64_t[]){ 5, 50, 1, 1 });
    add(tp, B, 1, (int64_t[]){ 3, 30, 0, 0 });
    add(tp, C, 1, (int64_t[]){ 201, 2010, 1, 1 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){ 3, 30, 1, 1 }, 4);
    ASSERT_NULL(tp_find(r.dec.prof, "20,|"));
    assert_vals(tp_find(r.dec.prof, "30,|"), (int64_t[]){ 1, 10, 1, 1 }, 4);
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

    run(d, nogo_prof(1, false, (int64_t[]){ 1, 10 }, (int64_t[]){ 2, 20 }, 40), &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    run(d, nogo_prof(2, true, (int64_t[]){ 4, 40 }, (int64_t[]){ 3, 35 }, 40), &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "main@main.rs:7;,|"), (int64_t[]){ 3, 30 }, 2);
    assert_vals(tp_find(r.dec.prof, "work@lib.rs:40;,main@main.rs:7;,|"), (int64_t[]){ 1, 15 }, 2);
    run_done(&r);
    /* Another line in the same function is another frame. */
    run(d, nogo_prof(3, false, (int64_t[]){ 4, 40 }, (int64_t[]){ 1, 1 }, 41), &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r.dec.prof->n_sample, 1);
    assert_vals(tp_find(r.dec.prof, "work@lib.rs:41;,main@main.rs:7;,|"), (int64_t[]){ 1, 1 }, 2);
    run_done(&r);
    pprof_delta_free(d);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
