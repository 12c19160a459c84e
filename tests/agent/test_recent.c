/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the web UI's store of recent profiles (agent/recent.c): a
 * series per key, oldest first; over the byte cap the oldest profile that
 * has a newer one in its series goes first, then the oldest newest one,
 * against a model of that rule; a profile larger than the cap is not
 * kept; a zero cap keeps nothing; forgetting a key drops its series; a
 * blob outlives its eviction while referenced; and with 1,000 targets
 * the store stays within its cap, measured by the allocator itself (glibc's
 * mallinfo2, its thread cache off (meson.build), or the sanitizer's count
 * in sanitized builds). */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/recent.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
/* The sanitizer runtime's count (gcc ships no header for it). */
size_t __sanitizer_get_current_allocated_bytes(void);
#define HEAP_IN_USE() __sanitizer_get_current_allocated_bytes()
/* It counts the bytes asked for, not glibc's size word the store counts
 * beside each block. */
#define OVERCOUNT_SLACK (cap / 20)
#else
#define HEAP_IN_USE() mallinfo2().uordblks
#define OVERCOUNT_SLACK (cap / 50)
#endif

/* A store of at most `max_bytes`, or the test fails with the constructor's
 * message. */
static struct recent *new_store(size_t max_bytes)
{
    struct recent *r;
    char err[64] = "";
    int rc = recent_new(&(struct recent_opts){ .max_bytes = max_bytes }, &r, err, sizeof(err));

    if (rc < 0)
        test__fail(__FILE__, __LINE__, "recent_new: %d %s", rc, err);
    return r;
}

/* {job="<name>"} */
static struct labels *lbl(const char *name)
{
    static struct labels ls;

    labels_done(&ls);
    labels_set(&ls, "job", name);
    return &ls;
}

TEST(series_newest_first_and_older_ones)
{
    static uint8_t data[1000];
    struct recent *r = new_store(1 << 20);
    const struct recent_profile *p;
    struct recent_stats st;

    recent_put(r, 1, lbl("a"), data, 1000, 1, 10);
    recent_put(r, 2, lbl("b"), data, 1000, 11, 20);
    recent_put(r, 1, lbl("a"), data, 500, 21, 30);
    ASSERT_NOT_NULL(p = recent_get(r, 1));
    ASSERT_EQ(p->len, 500);
    ASSERT_EQ(p->end_ns, 30);
    ASSERT_EQ(p->start_ns, 21);
    ASSERT_STR_EQ(labels_get(p->labels, "job"), "a");
    ASSERT_NULL(recent_newer(p));
    ASSERT_NOT_NULL(p = recent_older(p));
    ASSERT_EQ(p->end_ns, 10);
    ASSERT_NULL(recent_older(p));
    ASSERT_EQ(recent_newer(p)->end_ns, 30);
    ASSERT_EQ(recent_count(r, 1), 2);
    ASSERT_EQ(recent_count(r, 2), 1);
    ASSERT_EQ(recent_count(r, 3), 0);
    recent_stats(r, &st);
    ASSERT_EQ(st.profiles, 3);
    ASSERT_EQ(st.series, 2);
    ASSERT_EQ(st.evicted, 0);
    recent_free(r);
}

/* What a put of `len` bytes costs in the store's own figure. */
static size_t put_cost(size_t len)
{
    static uint8_t data[4096];
    struct recent *r = new_store(1 << 20);
    struct recent_stats a, b;

    recent_put(r, 1, lbl("x"), data, len, 0, 0);
    recent_put(r, 1, lbl("x"), data, len, 0, 0); /* the heap of series is made here */
    recent_stats(r, &a);
    recent_put(r, 1, lbl("x"), data, len, 0, 0);
    recent_stats(r, &b);
    recent_free(r);
    return b.bytes - a.bytes;
}

/* What `keys` series cost beside their profiles (and the heap of series):
 * a store holding one profile of each and a second of the first, less
 * their profiles. */
static size_t series_cost(size_t keys, size_t len)
{
    static uint8_t data[4096];
    struct recent *r = new_store(1 << 20);
    struct recent_stats st;

    for (uint64_t k = 1; k <= keys; k++)
        recent_put(r, k, lbl("x"), data, len, 0, 0);
    recent_put(r, 1, lbl("x"), data, len, 0, 0);
    recent_stats(r, &st);
    recent_free(r);
    return st.bytes - (keys + 1) * put_cost(len);
}

TEST(history_goes_before_any_newest)
{
    static uint8_t data[1000];
    size_t one = put_cost(1000);
    struct recent_stats st;
    struct recent *r;

    recent_stats(NULL, &st);
    /* Room for two series and six profiles, not seven. */
    r = new_store(series_cost(2, 1000) + 6 * one + one / 2);
    recent_put(r, 1, lbl("slow"), data, 1000, 0, 1); /* seq 1: slow's only one */
    for (int i = 0; i < 5; i++)                      /* seq 2..6: fast's */
        recent_put(r, 2, lbl("fast"), data, 1000, 0, 2 + i);
    recent_stats(r, &st);
    ASSERT_EQ(st.profiles, 6);
    ASSERT_EQ(st.evicted, 0);
    recent_put(r, 2, lbl("fast"), data, 1000, 0, 7); /* over: fast's oldest goes, not slow's */
    ASSERT_EQ(recent_count(r, 1), 1);
    ASSERT_EQ(recent_count(r, 2), 5);
    {
        const struct recent_profile *p = recent_get(r, 2);

        while (recent_older(p))
            p = recent_older(p);
        ASSERT_EQ(p->end_ns, 3);
    }
    /* Only newest ones left: the oldest of them goes. */
    recent_forget(r, 2);
    recent_put(r, 3, lbl("c"), data, 1000, 0, 8);
    recent_stats(r, &st);
    ASSERT_EQ(st.profiles, 2);
    recent_free(r);
    r = new_store(series_cost(1, 1000) + one + one / 2); /* one profile and a half */
    recent_put(r, 1, lbl("a"), data, 1000, 0, 1);
    recent_put(r, 2, lbl("b"), data, 1000, 0, 2); /* a's only one goes: it is the oldest */
    ASSERT_NULL(recent_get(r, 1));
    ASSERT_NOT_NULL(recent_get(r, 2));
    recent_stats(r, &st);
    ASSERT_EQ(st.evicted, 1);
    ASSERT_EQ(st.series, 1);
    ASSERT_LE(st.bytes, st.max_bytes);
    recent_free(r);
}

/* A model of the rule: entries by arrival; evict the oldest that is not its
 * key's newest, else the oldest. */
#define MODEL_MAX 4096
struct model {
    uint64_t key[MODEL_MAX];
    int64_t end[MODEL_MAX];
    size_t n;
};

static bool model_is_newest(const struct model *m, size_t i)
{
    for (size_t j = i + 1; j < m->n; j++)
        if (m->key[j] == m->key[i])
            return false;
    return true;
}

static void model_drop(struct model *m, size_t i)
{
    memmove(m->key + i, m->key + i + 1, (m->n - i - 1) * sizeof(m->key[0]));
    memmove(m->end + i, m->end + i + 1, (m->n - i - 1) * sizeof(m->end[0]));
    m->n--;
}

static void model_evict(struct model *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (!model_is_newest(m, i)) {
            model_drop(m, i);
            return;
        }
    model_drop(m, 0);
}

TEST(eviction_order_matches_the_rule)
{
    static uint8_t data[64];
    size_t one = put_cost(64);
    struct model m = { .n = 0 };
    struct recent *r;
    unsigned seed = 7;

    /* Room for exactly 40 profiles of 10 keys, with every series' own cost. */
    r = new_store(series_cost(10, 64) + 40 * one + one / 2);
    for (int64_t t = 1; t <= 3000; t++) {
        uint64_t key;

        seed = seed * 1103515245u + 12345u;
        key = 1 + (seed >> 16) % 10;
        if ((seed >> 8) % 7 == 0)
            key = 1; /* one busy key */
        recent_put(r, key, lbl("k"), data, 64, 0, t);
        m.key[m.n] = key;
        m.end[m.n++] = t;
        while (m.n > 40)
            model_evict(&m);
        if (t % 50 == 0) {
            /* Same profiles, key by key, oldest first. */
            for (uint64_t k = 1; k <= 10; k++) {
                const struct recent_profile *p = recent_get(r, k);
                size_t have = 0;

                while (p && recent_older(p))
                    p = recent_older(p);
                for (size_t i = 0; i < m.n; i++) {
                    if (m.key[i] != k)
                        continue;
                    ASSERT_NOT_NULL(p);
                    ASSERT_EQ(p->end_ns, m.end[i]);
                    p = recent_newer(p);
                    have++;
                }
                ASSERT_NULL(p);
                ASSERT_EQ(recent_count(r, k), have);
            }
        }
    }
    recent_free(r);
}

TEST(forget_drops_one_series_and_its_bytes)
{
    static uint8_t data[1000];
    struct recent *r = new_store(1 << 20);
    struct recent_stats st;

    recent_put(r, 1, lbl("a"), data, 1000, 0, 10);
    recent_put(r, 2, lbl("b"), data, 700, 0, 20);
    recent_put(r, 2, lbl("b"), data, 700, 0, 25);
    recent_put(r, 3, lbl("c"), data, 300, 0, 30);
    recent_forget(r, 2); /* the middle one: the order of the others holds */
    recent_forget(r, 9); /* not kept: nothing happens */
    ASSERT_NULL(recent_get(r, 2));
    ASSERT_EQ(recent_get(r, 1)->len, 1000);
    ASSERT_EQ(recent_get(r, 3)->len, 300);
    recent_stats(r, &st);
    ASSERT_EQ(st.profiles, 2);
    ASSERT_EQ(st.evicted, 0);
    recent_forget(r, 1);
    recent_forget(r, 3);
    recent_stats(r, &st);
    ASSERT_EQ(st.profiles, 0);
    ASSERT_EQ(st.series, 0);
    ASSERT_EQ(st.bytes, 0);
    recent_put(r, 4, lbl("d"), data, 10, 0, 40); /* the lists are sound after emptying */
    ASSERT_EQ(recent_get(r, 4)->len, 10);
    recent_forget(NULL, 4);
    recent_free(r);
}

TEST(blob_outlives_eviction_while_referenced)
{
    static uint8_t data[1000];
    struct recent *r = new_store(1 << 20);
    struct recent_blob *b;
    const uint8_t *d;
    size_t len;

    data[0] = 42;
    recent_put(r, 1, lbl("a"), data, 1000, 0, 1);
    b = recent_ref(recent_get(r, 1));
    recent_forget(r, 1);
    d = recent_blob_data(b, &len);
    ASSERT_EQ(len, 1000);
    ASSERT_EQ(d[0], 42);
    recent_unref(b);
    recent_unref(NULL);
    recent_put(r, 1, lbl("a"), data, 1000, 0, 1);
    b = recent_ref(recent_get(r, 1));
    recent_free(r); /* the store goes first: the blob lives on */
    ASSERT_EQ(recent_blob_data(b, &len)[0], 42);
    recent_unref(b);
}

TEST(too_large_and_zero_cap)
{
    static uint8_t data[5000];
    struct recent *r = new_store(4000), *none = new_store(0);
    struct recent_stats st;

    recent_put(r, 1, lbl("a"), data, 100, 0, 1);
    recent_put(r, 2, lbl("b"), data, 5000, 0, 2);
    ASSERT_NULL(recent_get(r, 2));
    ASSERT_NOT_NULL(recent_get(r, 1)); /* the large one evicted nothing */
    recent_stats(r, &st);
    ASSERT_EQ(st.evicted, 1);
    ASSERT_EQ(st.series, 1);
    recent_put(none, 1, lbl("a"), data, 10, 0, 1);
    ASSERT_NULL(recent_get(none, 1));
    recent_free(r);
    recent_free(none);
}

/* 1,000 targets of five profile types, profiles of 100 B to 2 KB, 60,000
 * puts into 16 MiB: the store's own figure stays under its cap after every put,
 * and the heap the process holds beyond what it held before is the
 * store's figure, within the allocator's rounding of its index. */
TEST(a_thousand_targets_stay_within_the_cap)
{
    static uint8_t data[2000];
    const size_t cap = 16u << 20;
    struct recent *r;
    struct recent_stats st;
    size_t before, most = 0, held;
    unsigned seed = 1;

    lbl("warm"); /* the test's own label set, allocated before measuring */
    before = HEAP_IN_USE();
    r = new_store(cap);
    for (int i = 0; i < 60000; i++) {
        uint64_t key;
        size_t len;

        seed = seed * 1103515245u + 12345u;
        key = (seed >> 8) % 5000;
        len = 100 + (seed >> 4) % 1900;
        recent_put(r, key + 1, lbl("t"), data, len, 0, i);
        recent_stats(r, &st);
        ASSERT_LE(st.bytes, cap);
        if (st.bytes > most)
            most = st.bytes;
    }
    recent_stats(r, &st);
    held = HEAP_IN_USE() - before;
    printf("1,000 targets x 5 types: %zu profiles of %zu series kept in %zu bytes (cap %zu), "
           "heap held %zu, %" PRIu64 " evicted\n",
           st.profiles, st.series, st.bytes, cap, held, st.evicted);
    ASSERT_TRUE(st.series >= 4900); /* every series keeps its newest */
    ASSERT_TRUE(st.profiles > st.series);
    ASSERT_TRUE(most > cap - 8192); /* the cap is used, not left empty */
    /* What the allocator says the store holds: its figure, give or take the
     * key index's real size (estimated per series) and the label sets. */
    ASSERT_LE(held, cap + cap / 50);
    ASSERT_GE(held + OVERCOUNT_SLACK, st.bytes);
    recent_free(r);
    ASSERT_LE(HEAP_IN_USE(), before + 4096);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
