/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of pprof/flame.c: the call tree of a profile built with
 * protobuf-c (tests/pprof/tprof): totals and self values per frame,
 * inlined frames expanded caller first, shared prefixes merged, the sample
 * type chosen by name or by default, the node cap, and refusals; and what
 * a tree keeps: names cut at a character boundary, one frame however many
 * functions bear a name, never more names than nodes. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tprof.h"

static const char *const cols[] = { "alloc_space/bytes", "inuse_space/bytes" };

/* main -> a -> (b inlined into a's location) -> c, and main -> a. */
static uint8_t *sample_profile(size_t *len)
{
    struct tprof *tp = tp_new(cols, 2);
    uint64_t fmain = tp_func(tp, "main", "m.go"), fa = tp_func(tp, "a", "m.go");
    uint64_t fb = tp_func(tp, "b", "m.go"), fc = tp_func(tp, "c", "m.go");
    uint64_t lmain = tp_loc(tp, 0x10, fmain, 1), la = tp_loc(tp, 0x20, fb, 2);
    uint64_t lc = tp_loc(tp, 0x30, fc, 3);
    uint8_t *out;

    tp_loc_add_line(tp, la, fa, 4); /* line[0] = b (inlined), line[1] = a */
    tp_sample(tp, (uint64_t[]){ lc, la, lmain }, 3, (int64_t[]){ 3, 30 });
    tp_sample(tp, (uint64_t[]){ la, lmain }, 2, (int64_t[]){ 2, 20 });
    tp_sample(tp, (uint64_t[]){ lmain }, 1, (int64_t[]){ 0, 7 });
    out = tp_pack(tp, len, true);
    tp_free(tp);
    return out;
}

static const struct pprof_flame_node *find(const struct pprof_flame *f, uint32_t parent,
                                           const char *name)
{
    for (uint32_t c = f->nodes[parent].first_child; c != UINT32_MAX; c = f->nodes[c].next_sibling)
        if (strcmp(f->names[f->nodes[c].name], name) == 0)
            return &f->nodes[c];
    return NULL;
}

static uint32_t idx(const struct pprof_flame *f, const struct pprof_flame_node *n)
{
    return (uint32_t)(n - f->nodes);
}

TEST(tree_totals_self_and_inlining)
{
    struct pprof_limits lim;
    struct pprof_flame *f;
    const struct pprof_flame_node *m, *a, *b, *c;
    size_t len;
    uint8_t *p = sample_profile(&len);
    char err[256];

    pprof_limits_default(&lim);
    ASSERT_EQ(pprof_flame_build(p, len, &lim, "alloc_space", 100, &f, err, sizeof(err)), 0);
    ASSERT_EQ(f->n_types, 2);
    ASSERT_STR_EQ(f->types[f->sample_type], "alloc_space/bytes");
    ASSERT_EQ(f->nodes[0].total, 5);
    ASSERT_NOT_NULL(m = find(f, 0, "main"));
    ASSERT_EQ(m->total, 5);
    ASSERT_EQ(m->self, 0); /* the third sample is zero in this column */
    ASSERT_NOT_NULL(a = find(f, idx(f, m), "a"));
    ASSERT_NOT_NULL(b = find(f, idx(f, a), "b"));
    ASSERT_NOT_NULL(c = find(f, idx(f, b), "c"));
    ASSERT_EQ(a->total, 5);
    ASSERT_EQ(b->total, 5);
    ASSERT_EQ(b->self, 2);
    ASSERT_EQ(c->total, 3);
    ASSERT_EQ(c->self, 3);
    ASSERT_NULL(find(f, idx(f, m), "b")); /* inlined under a, not beside it */
    ASSERT_EQ(f->n_nodes, 5);
    ASSERT_FALSE(f->truncated);
    pprof_flame_free(f);
    /* the other column, by its full name */
    ASSERT_EQ(pprof_flame_build(p, len, &lim, "inuse_space/bytes", 100, &f, err, sizeof(err)), 0);
    ASSERT_EQ(f->nodes[0].total, 57);
    ASSERT_EQ(find(f, 0, "main")->self, 7);
    pprof_flame_free(f);
    free(p);
}

TEST(default_type_cap_and_refusals)
{
    struct pprof_limits lim;
    struct pprof_flame *f;
    size_t len;
    uint8_t *p = sample_profile(&len);
    uint8_t junk[] = { 0x1f, 0x8b, 0x08, 0x00, 1, 2, 3 };
    char err[256];

    pprof_limits_default(&lim);
    /* no default_sample_type: the last type, as pprof's tools choose */
    ASSERT_EQ(pprof_flame_build(p, len, &lim, NULL, 100, &f, err, sizeof(err)), 0);
    ASSERT_STR_EQ(f->types[f->sample_type], "inuse_space/bytes");
    pprof_flame_free(f);
    /* two nodes: the root and main; what is deeper stays with main */
    ASSERT_EQ(pprof_flame_build(p, len, &lim, "alloc_space", 2, &f, err, sizeof(err)), 0);
    ASSERT_TRUE(f->truncated);
    ASSERT_EQ(f->n_nodes, 2);
    ASSERT_EQ(find(f, 0, "main")->self, 5);
    pprof_flame_free(f);
    ASSERT_LT(pprof_flame_build(p, len, &lim, "cpu", 100, &f, err, sizeof(err)), 0);
    ASSERT_NULL(f);
    ASSERT_LT(pprof_flame_build(junk, sizeof(junk), &lim, NULL, 100, &f, err, sizeof(err)), 0);
    free(p);
}

/* `n` functions (each in its own file), each its own root, all named
 * `name` when `same`, else "f0", "f1", ... */
static uint8_t *roots_profile(size_t n, const char *name, bool same, size_t *len)
{
    struct tprof *tp = tp_new(cols, 2);
    uint8_t *out;

    for (size_t i = 0; i < n; i++) {
        char own[32], file[32];
        uint64_t fn, loc;

        snprintf(own, sizeof(own), "f%zu", i);
        snprintf(file, sizeof(file), "f%zu.go", i);
        fn = tp_func(tp, same ? name : own, file);
        loc = tp_loc(tp, 0x10 + i, fn, 1);
        tp_sample(tp, (uint64_t[]){ loc }, 1, (int64_t[]){ 1, 1 });
    }
    out = tp_pack(tp, len, true);
    tp_free(tp);
    return out;
}

TEST(names_are_cut_shared_and_no_more_than_nodes)
{
    struct pprof_limits lim;
    struct pprof_flame *f;
    char name[1500], err[256];
    size_t len, n;
    uint8_t *p;

    /* "ab" then two-byte characters: byte 253, where a cut to 256 bytes
     * with its three-byte ellipsis would fall, is inside a character. */
    name[0] = 'a';
    name[1] = 'b';
    for (n = 2; n + 2 < sizeof(name); n += 2)
        memcpy(name + n, "\xc3\xa9", 2);
    name[n] = '\0';
    pprof_limits_default(&lim);
    p = roots_profile(200, name, true, &len);
    ASSERT_EQ(pprof_flame_build(p, len, &lim, NULL, 1000, &f, err, sizeof(err)), 0);
    /* 200 functions of one name (in 200 files) are one frame, as `go tool
     * pprof` aggregates by function name. */
    ASSERT_EQ(f->n_nodes, 2);
    ASSERT_EQ(f->nodes[1].total, 200);
    n = strlen(f->names[1]);
    ASSERT_EQ(n, 255); /* 252 bytes of the name, then U+2026 */
    ASSERT_TRUE(n <= PPROF_FLAME_NAME_MAX);
    ASSERT_EQ(memcmp(f->names[1], name, 252), 0);
    ASSERT_STR_EQ(f->names[1] + 252, "\xe2\x80\xa6");
    ASSERT_TRUE(f->bytes <
                sizeof(*f) + 2 * (sizeof(*f->nodes) + sizeof(char *)) + 2 * 256 + 64 + 64);
    ASSERT_STR_EQ(f->names[0], "total");
    pprof_flame_free(f);
    free(p);
    /* Short names stay whole; a full tree takes no new name. */
    p = roots_profile(50, NULL, false, &len);
    ASSERT_EQ(pprof_flame_build(p, len, &lim, NULL, 10, &f, err, sizeof(err)), 0);
    ASSERT_TRUE(f->truncated);
    ASSERT_EQ(f->n_nodes, 10);
    ASSERT_TRUE(f->n_names <= f->n_nodes);
    ASSERT_EQ(f->nodes[0].total, 50);
    ASSERT_EQ(f->nodes[0].self, 41); /* the 41 roots with no room stay with the root */
    ASSERT_STR_EQ(f->names[f->nodes[f->nodes[0].first_child].name], "f8");
    pprof_flame_free(f);
    free(p);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
