/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/: capped buffers, array growth, interned strings,
 * label sets and their Prometheus hash, durations. */
#include <errno.h>
#include <stdlib.h>

#include "common/array.h"
#include "common/buf.h"
#include "common/duration.h"
#include "common/hashmap.h"
#include "common/intern.h"
#include "common/labels.h"
#include "test.h"

TEST(buf_cap)
{
    struct buf b;

    buf_init(&b, 8);
    ASSERT_EQ(buf_append(&b, "12345678", 8), 0);
    ASSERT_EQ(buf_append(&b, "9", 1), -E2BIG);
    ASSERT_EQ(b.len, 8);
    ASSERT_STR_EQ(b.data, "12345678");
    buf_reset(&b);
    ASSERT_EQ(buf_printf(&b, "%d-%s", 42, "x"), 0);
    ASSERT_STR_EQ(b.data, "42-x");
    ASSERT_EQ(buf_printf(&b, "%s", "too long!"), -E2BIG);
    buf_done(&b);
}

/* RFC 3986's unreserved bytes pass; every other byte, NUL and high bytes
 * included, is %XX; the cap holds. */
TEST(buf_append_pct_encodes_all_but_unreserved)
{
    struct buf b;

    buf_init(&b, 64);
    ASSERT_EQ(buf_append_pct(&b, "aZ09-._~ /=&?%\xff\0x", 17), 0);
    ASSERT_STR_EQ(b.data, "aZ09-._~%20%2F%3D%26%3F%25%FF%00x");
    buf_reset(&b);
    ASSERT_EQ(buf_append_pct(&b, "\xe2\x9c\x93", 3), 0);
    ASSERT_STR_EQ(b.data, "%E2%9C%93");
    buf_done(&b);
    buf_init(&b, 4);
    ASSERT_EQ(buf_append_pct(&b, "a b", 3), -E2BIG);
    buf_done(&b);
}

TEST(array_grow_doubles_and_refuses_overflow)
{
    size_t cap = 0, n;
    uint32_t *v = NULL, *nv;
    char *big;

    /* First room: `first` elements; then doubling, keeping the contents. */
    ASSERT((v = array_grow(v, &cap, 0, sizeof(*v), 4)) != NULL);
    ASSERT_EQ(cap, 4);
    for (n = 0; n < 100; n++) {
        ASSERT((nv = array_grow(v, &cap, n, sizeof(*v), 4)) != NULL);
        v = nv;
        ASSERT(n < cap);
        v[n] = (uint32_t)n * 3;
    }
    ASSERT_EQ(cap, 128);
    for (n = 0; n < 100; n++)
        ASSERT_EQ(v[n], n * 3);
    /* Room already there: the same array, cap unchanged. */
    ASSERT(array_grow(v, &cap, 100, sizeof(*v), 4) == v);
    ASSERT_EQ(cap, 128);
    /* A size whose doubled product wraps is refused, the array kept. */
    n = cap;
    ASSERT(array_grow(v, &cap, n, SIZE_MAX / 200, 4) == NULL);
    ASSERT_EQ(cap, 128);
    ASSERT_EQ(v[99], 297);
    /* So is a count whose doubling wraps. */
    big = NULL;
    cap = SIZE_MAX / 2 + 1;
    ASSERT(array_grow(big, &cap, cap, 1, 4) == NULL);
    ASSERT_EQ(cap, SIZE_MAX / 2 + 1);
    free(v);
}

TEST(intern_shares_and_counts)
{
    static const char text[] = "kubectl.kubernetes.io/last-applied-configuration";
    size_t n0, b0, n1, b1;
    const char *a, *b, *c, *e;

    intern_stats(&n0, &b0);
    a = intern(text, sizeof(text) - 1);
    b = intern(text, sizeof(text) - 1);
    c = intern(text, 7); /* a prefix is another string */
    e = intern("", 0);
    ASSERT_NOT_NULL(a);
    ASSERT_NOT_NULL(c);
    ASSERT_NOT_NULL(e);
    ASSERT_TRUE(a == b);
    ASSERT_TRUE(a != c);
    ASSERT_STR_EQ(a, text);
    ASSERT_STR_EQ(c, "kubectl");
    ASSERT_EQ(intern_len(a), sizeof(text) - 1);
    ASSERT_EQ(intern_len(c), 7);
    ASSERT_EQ(intern_len(e), 0);
    intern_stats(&n1, &b1);
    ASSERT_EQ(n1, n0 + 3);
    ASSERT_EQ(b1, b0 + sizeof(text) + 8 + 1); /* each with its NUL */
    /* The copy stays while a reference does. */
    intern_unref(b);
    ASSERT_TRUE(intern(text, sizeof(text) - 1) == a);
    intern_unref(a);
    intern_unref(a);
    intern_unref(c);
    intern_unref(e);
    intern_stats(&n1, &b1);
    ASSERT_EQ(n1, n0);
    ASSERT_EQ(b1, b0);
}

TEST(labels_sorted_and_delete_on_empty)
{
    struct labels ls = LABELS_INIT;

    ASSERT_EQ(labels_set(&ls, "b", "2"), 0);
    ASSERT_EQ(labels_set(&ls, "a", "1"), 0);
    ASSERT_EQ(labels_set(&ls, "c", "3"), 0);
    ASSERT_EQ(ls.n, 3);
    ASSERT_STR_EQ(ls.v[0].name, "a");
    ASSERT_STR_EQ(ls.v[2].name, "c");
    ASSERT_EQ(labels_set(&ls, "b", ""), 0);
    ASSERT_EQ(ls.n, 2);
    ASSERT_NULL(labels_get(&ls, "b"));
    ASSERT_STR_EQ(labels_get(&ls, "c"), "3");
    char *s = labels_to_string(&ls);
    ASSERT_STR_EQ(s, "{a=\"1\", c=\"3\"}");
    free(s);
    labels_done(&ls);
}

TEST(labels_copy_equal)
{
    struct labels a = LABELS_INIT, b = LABELS_INIT;

    labels_set(&a, "x", "1");
    labels_set(&a, "__y", "2");
    ASSERT_EQ(labels_copy(&b, &a), 0);
    ASSERT_TRUE(labels_equal(&a, &b));
    labels_set(&b, "__y", "3");
    ASSERT_FALSE(labels_equal(&a, &b));
    ASSERT_U64_EQ(labels_hash_public(&a), labels_hash_public(&b));
    ASSERT_TRUE(labels_hash(&a) != labels_hash(&b));
    labels_done(&a);
    labels_done(&b);
}

/* The test vector of docs/design.md "Targets, labels and scheduling". */
TEST(labels_hash_prometheus_vector)
{
    struct labels ls = LABELS_INIT;

    labels_set(&ls, "__address__", "10.1.2.3:4040");
    labels_set(&ls, "__metrics_path__", "/debug/pprof/profile");
    labels_set(&ls, "__scheme__", "http");
    labels_set(&ls, "__scrape_interval__", "15s");
    labels_set(&ls, "__scrape_timeout__", "10s");
    labels_set(&ls, "instance", "10.1.2.3:4040");
    labels_set(&ls, "job", "pprof");
    ASSERT_U64_EQ(labels_hash(&ls), 16602542465032345977ULL);
    labels_done(&ls);
}

TEST(duration_parse_format)
{
    uint64_t ms;
    char out[32];

    ASSERT_EQ(duration_parse("15s", &ms), 0);
    ASSERT_U64_EQ(ms, 15000);
    ASSERT_EQ(duration_parse("1m30s", &ms), 0);
    ASSERT_U64_EQ(ms, 90000);
    ASSERT_EQ(duration_parse("500ms", &ms), 0);
    ASSERT_U64_EQ(ms, 500);
    ASSERT_EQ(duration_parse("1h1m1s1ms", &ms), 0);
    ASSERT_U64_EQ(ms, 3661001);
    ASSERT_EQ(duration_parse("0", &ms), 0);
    ASSERT_U64_EQ(ms, 0);
    ASSERT_EQ(duration_parse("1s1m", &ms), -EINVAL);
    ASSERT_EQ(duration_parse("15", &ms), -EINVAL);
    ASSERT_EQ(duration_parse("1.5s", &ms), -EINVAL);
    ASSERT_EQ(duration_parse("", &ms), -EINVAL);
    /* What int64 nanoseconds cannot hold is refused, never wrapped:
     * 18446744073710ms would be 0.45 ms in nanoseconds modulo 2^64. */
    ASSERT_EQ(duration_parse("18446744073710ms", &ms), -ERANGE);
    ASSERT_EQ(duration_parse("9223372036855ms", &ms), -ERANGE);
    ASSERT_EQ(duration_parse("300y", &ms), -ERANGE);
    ASSERT_EQ(duration_parse("9223372036854ms", &ms), 0);
    ASSERT_U64_EQ(ms * 1000000, 9223372036854000000ULL);
    ASSERT_EQ(duration_parse("292y", &ms), 0);
    duration_format(90000, out, sizeof(out));
    ASSERT_STR_EQ(out, "1m30s");
    duration_format(15000, out, sizeof(out));
    ASSERT_STR_EQ(out, "15s");
    duration_format(0, out, sizeof(out));
    ASSERT_STR_EQ(out, "0s");
    duration_format(86400000ULL * 8, out, sizeof(out));
    ASSERT_STR_EQ(out, "1w1d");
}

TEST(hashmap_put_get_del_grow)
{
    struct hashmap m;
    size_t pos = 0, seen = 0;
    uint64_t k;
    void *v;

    hashmap_init(&m);
    for (uint64_t i = 2; i < 2002; i++)
        ASSERT_EQ(hashmap_put(&m, i * 7919, (void *)(uintptr_t)i), 0);
    ASSERT_EQ(m.n, 2000);
    for (uint64_t i = 2; i < 2002; i += 2)
        ASSERT_EQ((uintptr_t)hashmap_del(&m, i * 7919), i);
    ASSERT_EQ(m.n, 1000);
    for (uint64_t i = 2; i < 2002; i++)
        ASSERT_EQ((uintptr_t)hashmap_get(&m, i * 7919), i % 2 ? i : 0);
    while (hashmap_next(&m, &pos, &k, &v)) {
        ASSERT_EQ(k, (uintptr_t)v * 7919);
        seen++;
    }
    ASSERT_EQ(seen, 1000);
    /* Re-insert over tombstones and make sure nothing is lost. */
    for (uint64_t i = 2; i < 2002; i += 2)
        ASSERT_EQ(hashmap_put(&m, i * 7919, (void *)(uintptr_t)i), 0);
    ASSERT_EQ(m.n, 2000);
    ASSERT_EQ((uintptr_t)hashmap_get(&m, 1000 * 7919), 1000);
    hashmap_done(&m);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
