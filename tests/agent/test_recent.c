/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the web UI's store of latest profiles (agent/recent.c): a
 * put replaces the previous profile of its key; over the byte cap the
 * oldest go first and are counted; a profile larger than the cap is not
 * kept; a zero cap keeps nothing. */
#include <stdlib.h>
#include <string.h>

#include "agent/recent.h"
#include "test.h"

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

TEST(replace_and_evict_oldest_first)
{
    static uint8_t data[1000];
    struct recent *r = new_store(3500); /* three entries fit, not four */
    struct recent_stats st;

    recent_put(r, 1, "{a}", data, 1000, 10);
    recent_put(r, 2, "{b}", data, 1000, 20);
    recent_put(r, 1, "{a}", data, 500, 30); /* replaces, and is now the newest */
    ASSERT_EQ(recent_get(r, 1)->len, 500);
    ASSERT_EQ(recent_get(r, 1)->end_ns, 30);
    recent_stats(r, &st);
    ASSERT_EQ(st.profiles, 2);
    ASSERT_EQ(st.evicted, 0);
    recent_put(r, 3, "{c}", data, 1000, 40);
    recent_put(r, 4, "{d}", data, 1000, 50); /* over the cap: key 2, the oldest, goes */
    ASSERT_NULL(recent_get(r, 2));
    ASSERT_NOT_NULL(recent_get(r, 1));
    ASSERT_NOT_NULL(recent_get(r, 4));
    ASSERT_STR_EQ(recent_get(r, 3)->labels, "{c}");
    recent_stats(r, &st);
    ASSERT_LE(st.bytes, 3500);
    ASSERT_EQ(st.evicted, 1);
    recent_free(r);
}

TEST(forget_drops_one_key_and_its_bytes)
{
    static uint8_t data[1000];
    struct recent *r = new_store(1 << 20);
    struct recent_stats st;

    recent_put(r, 1, "{a}", data, 1000, 10);
    recent_put(r, 2, "{b}", data, 700, 20);
    recent_put(r, 3, "{c}", data, 300, 30);
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
    ASSERT_EQ(st.bytes, 0);
    recent_put(r, 4, "{d}", data, 10, 40); /* the list is sound after emptying */
    ASSERT_EQ(recent_get(r, 4)->len, 10);
    recent_forget(NULL, 4);
    recent_free(r);
}

TEST(too_large_and_zero_cap)
{
    static uint8_t data[5000];
    struct recent *r = new_store(4000), *none = new_store(0);
    struct recent_stats st;

    recent_put(r, 1, "{a}", data, 100, 1);
    recent_put(r, 2, "{b}", data, 5000, 2);
    ASSERT_NULL(recent_get(r, 2));
    ASSERT_NOT_NULL(recent_get(r, 1)); /* the large one evicted nothing */
    recent_stats(r, &st);
    ASSERT_EQ(st.evicted, 1);
    recent_put(none, 1, "{a}", data, 10, 1);
    ASSERT_NULL(recent_get(none, 1));
    recent_free(r);
    recent_free(none);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
