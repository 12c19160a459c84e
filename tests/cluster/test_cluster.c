/* SPDX-License-Identifier: Apache-2.0 */
/* The assignment of targets to peers (rendezvous hashing, pure) and the
 * static membership on a real loop: every replica computes the same owners
 * from the same peers, a peer that leaves moves only its own targets, one
 * that joins takes about 1/N, and the load is even. */
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "cluster/cluster.h"
#include "test.h"
#include "test_loop.h"

#define MAX_PEERS 16

struct peers {
    const char *name[MAX_PEERS];
    uint64_t hash[MAX_PEERS];
    size_t n;
};

static void peers_set(struct peers *p, const char *const *names, size_t n)
{
    p->n = n;
    for (size_t i = 0; i < n; i++) {
        p->name[i] = names[i];
        p->hash[i] = cluster_peer_hash(names[i]);
    }
}

static const char *owner(const struct peers *p, uint64_t id)
{
    long i = cluster_owner_of(p->name, p->hash, p->n, id);

    return i < 0 ? NULL : p->name[i];
}

/* splitmix64: many well-spread target identities from one seed. */
static uint64_t next_id(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

TEST(no_peer_no_owner)
{
    struct peers p = { .n = 0 };

    ASSERT_EQ(cluster_owner_of(p.name, p.hash, 0, 42), -1);
}

TEST(order_of_the_peer_list_does_not_matter)
{
    static const char *const a[] = { "proflet-0", "proflet-1", "proflet-2", "proflet-3" };
    static const char *const b[] = { "proflet-2", "proflet-0", "proflet-3", "proflet-1" };
    struct peers pa, pb;
    uint64_t s = 1;

    peers_set(&pa, a, 4);
    peers_set(&pb, b, 4);
    for (int i = 0; i < 20000; i++) {
        uint64_t id = next_id(&s);

        ASSERT_STR_EQ(owner(&pa, id), owner(&pb, id));
    }
}

TEST(load_is_even)
{
    static const char *const names[] = { "a", "b", "c" };
    struct peers p;
    size_t count[3] = { 0 };
    uint64_t s = 7;
    const int n = 30000;

    peers_set(&p, names, 3);
    for (int i = 0; i < n; i++)
        count[cluster_owner_of(p.name, p.hash, p.n, next_id(&s))]++;
    for (int i = 0; i < 3; i++) {
        ASSERT_GT(count[i], n / 3 - n / 30); /* within 10% of a third */
        ASSERT_LT(count[i], n / 3 + n / 30);
    }
}

/* Counts the targets (n from `seed`) whose owner differs between two
 * memberships that differ by peer `who`, and checks that each of them went
 * from or to `who`: nobody else's targets move. */
static size_t moves(const char *const *before, size_t nb, const char *const *after, size_t na,
                    const char *who, uint64_t seed, size_t n)
{
    struct peers b, a;
    size_t moved = 0;

    peers_set(&b, before, nb);
    peers_set(&a, after, na);
    for (size_t i = 0; i < n; i++) {
        uint64_t id = next_id(&seed);
        const char *o = owner(&b, id), *o2 = owner(&a, id);

        if (strcmp(o, o2) == 0)
            continue;
        if (strcmp(o, who) != 0 && strcmp(o2, who) != 0)
            test__fail(__FILE__, __LINE__, "target moved from %s to %s, not involving %s", o, o2,
                       who);
        moved++;
    }
    return moved;
}

TEST(a_peer_that_leaves_moves_only_its_own_targets)
{
    static const char *const four[] = { "p0", "p1", "p2", "p3" };
    static const char *const three[] = { "p0", "p1", "p3" };
    size_t n = 20000, moved = moves(four, 4, three, 3, "p2", 11, n);

    ASSERT_GT(moved, n / 4 - n / 40);
    ASSERT_LT(moved, n / 4 + n / 40);
}

TEST(a_peer_that_joins_takes_about_one_nth)
{
    static const char *const three[] = { "proflet-7d9f-a", "proflet-7d9f-b", "proflet-7d9f-c" };
    static const char *const four[] = { "proflet-7d9f-a", "proflet-7d9f-b", "proflet-7d9f-c",
                                        "proflet-7d9f-d" };
    size_t n = 20000, moved = moves(three, 3, four, 4, "proflet-7d9f-d", 3, n);

    ASSERT_GT(moved, n / 4 - n / 40);
    ASSERT_LT(moved, n / 4 + n / 40);
}

/* Many random memberships: removing any one peer moves exactly the targets
 * it owned, and each replica (a permutation of the list) agrees. */
TEST(property_over_many_memberships)
{
    static const char *const pool[] = { "r0", "r1", "r2", "r3", "r4",  "r5",
                                        "r6", "r7", "r8", "r9", "r10", "r11" };
    uint64_t s = 99;

    for (int round = 0; round < 200; round++) {
        struct peers all, less, perm;
        const char *names[MAX_PEERS], *rest[MAX_PEERS], *shuffled[MAX_PEERS];
        size_t n = 2 + next_id(&s) % 10, gone = next_id(&s) % n, k = 0;

        for (size_t i = 0; i < n; i++)
            names[i] = pool[i];
        for (size_t i = 0; i < n; i++)
            if (i != gone)
                rest[k++] = names[i];
        memcpy(shuffled, names, n * sizeof(*names));
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = next_id(&s) % (i + 1);
            const char *t = shuffled[i];

            shuffled[i] = shuffled[j];
            shuffled[j] = t;
        }
        peers_set(&all, names, n);
        peers_set(&less, rest, k);
        peers_set(&perm, shuffled, n);
        for (int t = 0; t < 500; t++) {
            uint64_t id = next_id(&s);
            const char *o = owner(&all, id);

            ASSERT_STR_EQ(o, owner(&perm, id));
            if (strcmp(o, names[gone]) != 0)
                ASSERT_STR_EQ(o, owner(&less, id));
        }
    }
}

/* ---------------------------------------------- static membership, a loop */

static int changes;

static void changed(void *ud)
{
    (void)ud;
    changes++;
}

static void closed(void *ud)
{
    *(bool *)ud = true;
}

/* Closes the cluster, runs the loop until it is closed, and closes the
 * loop, which must then hold no handle. */
static void close_all(struct cluster *c, uv_loop_t *loop)
{
    bool done = false;

    cluster_close(c, closed, &done);
    uv_run(loop, UV_RUN_DEFAULT);
    ASSERT_TRUE(done);
    ASSERT_EQ(uv_loop_close(loop), 0);
}

TEST(static_membership_on_a_loop)
{
    uv_loop_t loop;
    char *peers[] = { "a", "b", "c" };
    struct cluster_cfg cfg = { .enabled = true, .self = "b", .peers = peers, .n_peers = 3 };
    struct cluster_opts o = { .changed = changed };
    struct disc_cfg g = { 0 };
    struct cluster *c;
    size_t n, mine = 0, total = 2000;
    uint64_t s = 5;
    int want;
    char err[256];

    uv_loop_init(&loop);
    o.loop = &loop;
    changes = 0;
    ASSERT_EQ(cluster_new(&o, &c, err, sizeof(err)), 0);
    /* Off: everything is ours, nobody named. */
    ASSERT_TRUE(cluster_ready(c));
    {
        const char *who = "x";

        ASSERT_TRUE(cluster_owns(123, &who, c));
        ASSERT_TRUE(who == NULL);
    }
    ASSERT_EQ(cluster_apply(c, &cfg, &g, err, sizeof(err)), 0);
    ASSERT_EQ(changes, 0);          /* announced from the loop, not from inside the call */
    ASSERT_FALSE(cluster_ready(c)); /* ready once announced */
    RUN_UNTIL(&loop, changes >= 1, 5000);
    ASSERT_TRUE(cluster_ready(c));
    ASSERT_TRUE(cluster_peers(c, &n) != NULL);
    ASSERT_EQ(n, 3);
    ASSERT_STR_EQ(cluster_self(c), "b");
    for (size_t i = 0; i < total; i++) {
        const char *who = NULL;
        uint64_t id = next_id(&s);
        bool own = cluster_owns(id, &who, c);

        ASSERT_TRUE(who != NULL);
        ASSERT_EQ(own, strcmp(who, "b") == 0);
        mine += own;
    }
    ASSERT_GT(mine, total / 3 - total / 15);
    ASSERT_LT(mine, total / 3 + total / 15);

    /* A name that is not a peer is refused, and the view in force stays. */
    cfg.self = "z";
    ASSERT_LT(cluster_apply(c, &cfg, &g, err, sizeof(err)), 0);
    ASSERT_TRUE(strstr(err, "not one of the peers") != NULL);
    ASSERT_STR_EQ(cluster_self(c), "b");

    /* Leaving (shutdown): nothing is ours any more. */
    cluster_leave(c);
    want = changes + 1;
    RUN_UNTIL(&loop, changes >= want, 5000);
    s = 5;
    for (size_t i = 0; i < total; i++)
        ASSERT_FALSE(cluster_owns(next_id(&s), NULL, c));

    close_all(c, &loop);
}

/* A name listed twice (a pod of that name in two watched namespaces) is
 * one peer: the view, the count and the assignment see it once. */
TEST(a_name_seen_twice_is_one_peer)
{
    uv_loop_t loop;
    char *peers[] = { "b", "a", "b" };
    struct cluster_cfg cfg = { .enabled = true, .self = "a", .peers = peers, .n_peers = 3 };
    struct cluster_opts o = { .changed = changed };
    struct disc_cfg g = { 0 };
    struct cluster *c;
    const char *const *view;
    struct buf m;
    size_t n;
    char err[256];

    uv_loop_init(&loop);
    o.loop = &loop;
    changes = 0;
    ASSERT_EQ(cluster_new(&o, &c, err, sizeof(err)), 0);
    ASSERT_EQ(cluster_apply(c, &cfg, &g, err, sizeof(err)), 0);
    RUN_UNTIL(&loop, changes >= 1, 5000);
    view = cluster_peers(c, &n);
    ASSERT_EQ(n, 2);
    ASSERT_STR_EQ(view[0], "a");
    ASSERT_STR_EQ(view[1], "b");
    buf_init(&m, 1 << 16);
    cluster_metrics(c, 0, 0, &m);
    ASSERT_TRUE(m.data && strstr(m.data, "\nproflet_cluster_peers 2\n") != NULL);
    buf_done(&m);

    close_all(c, &loop);
}

/* Without clustering, leaving (shutdown) changes nothing: every target
 * stays owned and no change is announced. */
TEST(leaving_without_clustering_announces_nothing)
{
    uv_loop_t loop;
    struct cluster_opts o = { .changed = changed };
    struct cluster *c;
    char err[64];

    uv_loop_init(&loop);
    o.loop = &loop;
    changes = 0;
    ASSERT_EQ(cluster_new(&o, &c, err, sizeof(err)), 0);
    cluster_leave(c);
    /* An announcement would be a 1 ms timer: the loop runs until no handle
     * is active, so it would have fired by the time this returns. */
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(changes, 0);
    ASSERT_TRUE(cluster_owns(7, NULL, c));
    ASSERT_STR_EQ(cluster_self(c), "");
    close_all(c, &loop);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
