/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of pprof/fold.c and the trees flame.c builds from it: profiles
 * built with protobuf-c (tests/pprof/tprof) folded into stacks of function
 * names and merged (values summed per stack), functions' flat and cum as
 * `go tool pprof -top` counts them (recursion once per sample), profiles of
 * other sample types refused, a diff's two sides kept apart, the sandwich
 * halves (callers inverted, callees), the collapsed text written in chunks,
 * the merged profile encoded and read back, and the byte cap. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "test.h"
#include "tprof.h"

static const char *const cols[] = { "samples/count", "cpu/nanoseconds" };

/* main -> work -> (hash inlined into work's location) -> leaf, scaled by
 * `k`; main -> rec -> rec -> leaf (recursion); main alone. */
static uint8_t *profile(int64_t k, size_t *len)
{
    struct tprof *tp = tp_new(cols, 2);
    uint64_t fmain = tp_func(tp, "main.main", "m.go"), fwork = tp_func(tp, "main.work", "m.go");
    uint64_t fhash = tp_func(tp, "crypto/sha256.block", "s.go");
    uint64_t fleaf = tp_func(tp, "runtime.memmove", "r.go");
    uint64_t frec = tp_func(tp, "main.rec", "m.go");
    uint64_t lmain = tp_loc(tp, 0x10, fmain, 1), lwork = tp_loc(tp, 0x20, fhash, 2);
    uint64_t lleaf = tp_loc(tp, 0x30, fleaf, 3), lrec1 = tp_loc(tp, 0x40, frec, 4);
    uint64_t lrec2 = tp_loc(tp, 0x41, frec, 5);
    uint8_t *out;

    tp_loc_add_line(tp, lwork, fwork, 6); /* line[0] hash (inlined), line[1] work */
    tp_sample(tp, (uint64_t[]){ lleaf, lwork, lmain }, 3, (int64_t[]){ 3 * k, 30 * k });
    tp_sample(tp, (uint64_t[]){ lwork, lmain }, 2, (int64_t[]){ 2 * k, 20 * k });
    tp_sample(tp, (uint64_t[]){ lleaf, lrec2, lrec1, lmain }, 4, (int64_t[]){ 1 * k, 10 * k });
    tp_sample(tp, (uint64_t[]){ lmain }, 1, (int64_t[]){ 4 * k, 40 * k });
    tp_time(tp, 1000 * k);
    out = tp_pack(tp, len, true);
    tp_free(tp);
    return out;
}

static const struct pprof_fold_fn *fn(const struct pprof_fold *fd, const struct pprof_fold_fn *v,
                                      size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(pprof_fold_name(fd, v[i].name), name) == 0)
            return &v[i];
    return NULL;
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

static struct pprof_fold *fold_of(int sides, const int64_t *k, const int *side, size_t n)
{
    struct pprof_limits lim;
    struct pprof_fold *fd = pprof_fold_new(sides, 0);
    char err[256];

    pprof_limits_default(&lim);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        uint8_t *p = profile(k[i], &len);

        ASSERT_EQ(pprof_fold_add(fd, side[i], p, len, &lim, err, sizeof(err)), 0);
        free(p);
    }
    return fd;
}

TEST(merge_sums_stacks_and_functions_count_as_go_tool_pprof)
{
    struct pprof_fold *fd = fold_of(1, (int64_t[]){ 1, 2, 10 }, (int[]){ 0, 0, 0 }, 3);
    struct pprof_fold_info info;
    struct pprof_fold_fn *v;
    const struct pprof_fold_fn *f;
    size_t n;

    pprof_fold_info(fd, &info);
    ASSERT_EQ(info.profiles[0], 3);
    ASSERT_EQ(info.n_types, 2);
    ASSERT_EQ(info.stacks, 4); /* the same four stacks in every profile */
    ASSERT_EQ(info.default_type, 1);
    ASSERT_EQ(pprof_fold_find_type(fd, "cpu"), 1);
    ASSERT_EQ(pprof_fold_find_type(fd, "samples/count"), 0);
    ASSERT_EQ(pprof_fold_find_type(fd, "cp"), -1);
    ASSERT_EQ(pprof_fold_functions(fd, 1, &v, &n), 0);
    ASSERT_EQ(n, 5);
    /* k = 13 in all: main flat 40k, cum 100k */
    ASSERT_NOT_NULL(f = fn(fd, v, n, "main.main"));
    ASSERT_EQ(f->self[0], 40 * 13);
    ASSERT_EQ(f->total[0], 100 * 13);
    ASSERT_NOT_NULL(f = fn(fd, v, n, "main.work"));
    ASSERT_EQ(f->self[0], 0);
    ASSERT_EQ(f->total[0], 50 * 13);
    ASSERT_NOT_NULL(f = fn(fd, v, n, "crypto/sha256.block")); /* inlined, leaf of the second */
    ASSERT_EQ(f->self[0], 20 * 13);
    ASSERT_EQ(f->total[0], 50 * 13);
    ASSERT_NOT_NULL(f = fn(fd, v, n, "runtime.memmove"));
    ASSERT_EQ(f->self[0], 40 * 13);
    ASSERT_EQ(f->total[0], 40 * 13);
    ASSERT_NOT_NULL(f = fn(fd, v, n, "main.rec")); /* twice in its stack, counted once */
    ASSERT_EQ(f->total[0], 10 * 13);
    ASSERT_EQ(f->self[0], 0);
    free(v);
    ASSERT_EQ(pprof_fold_functions(fd, 2, &v, &n), -EINVAL);
    pprof_fold_free(fd);
}

TEST(other_sample_types_are_refused_and_change_nothing)
{
    static const char *const other[] = { "samples/count", "wall/nanoseconds" };
    struct pprof_limits lim;
    struct pprof_fold *fd = fold_of(1, (int64_t[]){ 1 }, (int[]){ 0 }, 1);
    struct pprof_fold_info a, b;
    struct tprof *tp = tp_new(other, 2);
    uint64_t f = tp_func(tp, "x", "x.go");
    uint64_t l = tp_loc(tp, 1, f, 1);
    uint8_t *p;
    size_t len;
    char err[256];

    tp_sample(tp, (uint64_t[]){ l }, 1, (int64_t[]){ 1, 1 });
    p = tp_pack(tp, &len, true);
    tp_free(tp);
    pprof_limits_default(&lim);
    pprof_fold_info(fd, &a);
    ASSERT_EQ(pprof_fold_add(fd, 0, p, len, &lim, err, sizeof(err)), PPROF_EMISMATCH);
    ASSERT_TRUE(strstr(err, "wall/nanoseconds") != NULL);
    pprof_fold_info(fd, &b);
    ASSERT_EQ(a.stacks, b.stacks);
    ASSERT_EQ(a.names, b.names);
    ASSERT_EQ(b.profiles[0], 1);
    ASSERT_STR_EQ(pprof_strerror(PPROF_EMISMATCH), "other sample types");
    /* not a profile at all */
    ASSERT_LT(
        pprof_fold_add(fd, 0, (const uint8_t *)"\x1f\x8b\x08\x00xx", 6, &lim, err, sizeof(err)), 0);
    ASSERT_EQ(pprof_fold_add(fd, 1, p, len, &lim, err, sizeof(err)), -EINVAL); /* one side */
    free(p);
    pprof_fold_free(fd);
    ASSERT_NULL(pprof_fold_new(3, 0));
    ASSERT_NULL(pprof_fold_new(0, 0));
}

TEST(diff_sides_stay_apart_in_functions_and_tree)
{
    /* comparison: k = 3; baseline: k = 1 + 1 */
    struct pprof_fold *fd = fold_of(2, (int64_t[]){ 3, 1, 1 }, (int[]){ 0, 1, 1 }, 3);
    struct pprof_flame_opts o = { .type = 1, .max_nodes = 100, .mode = PPROF_FLAME_ALL };
    struct pprof_flame *t;
    struct pprof_fold_fn *v;
    const struct pprof_fold_fn *f;
    const struct pprof_flame_node *m, *w;
    size_t n;

    ASSERT_EQ(pprof_fold_functions(fd, 1, &v, &n), 0);
    ASSERT_NOT_NULL(f = fn(fd, v, n, "main.work"));
    ASSERT_EQ(f->total[0], 150);
    ASSERT_EQ(f->total[1], 100);
    ASSERT_NOT_NULL(f = fn(fd, v, n, "main.main"));
    ASSERT_EQ(f->self[0], 120);
    ASSERT_EQ(f->self[1], 80);
    free(v);
    ASSERT_EQ(pprof_flame_from_fold(fd, &o, &t), 0);
    ASSERT_EQ(t->nodes[0].total, 300);
    ASSERT_EQ(t->nodes[0].base_total, 200);
    ASSERT_NOT_NULL(m = find(t, 0, "main.main"));
    ASSERT_NOT_NULL(w = find(t, idx(t, m), "main.work"));
    ASSERT_EQ(w->total, 150);
    ASSERT_EQ(w->base_total, 100);
    ASSERT_EQ(m->base_self, 80);
    pprof_flame_free(t);
    pprof_fold_free(fd);
}

TEST(sandwich_callers_inverted_and_callees)
{
    struct pprof_fold *fd = fold_of(1, (int64_t[]){ 1 }, (int[]){ 0 }, 1);
    struct pprof_flame_opts o = {
        .type = 1, .max_nodes = 100, .mode = PPROF_FLAME_CALLERS, .focus = "runtime.memmove"
    };
    struct pprof_flame *t;
    const struct pprof_flame_node *leaf, *a, *b, *c;

    /* Callers of memmove: memmove <- sha256.block <- work <- main (30),
     * memmove <- rec <- rec <- main (10). */
    ASSERT_EQ(pprof_flame_from_fold(fd, &o, &t), 0);
    ASSERT_EQ(t->nodes[0].total, 40);
    ASSERT_NOT_NULL(leaf = find(t, 0, "runtime.memmove"));
    ASSERT_EQ(leaf->total, 40);
    ASSERT_NOT_NULL(a = find(t, idx(t, leaf), "crypto/sha256.block"));
    ASSERT_EQ(a->total, 30);
    ASSERT_NOT_NULL(b = find(t, idx(t, leaf), "main.rec"));
    ASSERT_NOT_NULL(c = find(t, idx(t, b), "main.rec"));
    ASSERT_NOT_NULL(c = find(t, idx(t, c), "main.main"));
    ASSERT_EQ(c->total, 10);
    ASSERT_EQ(c->self, 10);
    pprof_flame_free(t);
    /* Callees of main.rec: from its outermost frame, rec -> rec -> memmove. */
    o.mode = PPROF_FLAME_CALLEES;
    o.focus = "main.rec";
    ASSERT_EQ(pprof_flame_from_fold(fd, &o, &t), 0);
    ASSERT_EQ(t->nodes[0].total, 10);
    ASSERT_NOT_NULL(a = find(t, 0, "main.rec"));
    ASSERT_NOT_NULL(b = find(t, idx(t, a), "main.rec"));
    ASSERT_NOT_NULL(c = find(t, idx(t, b), "runtime.memmove"));
    ASSERT_EQ(c->self, 10);
    ASSERT_EQ(t->n_nodes, 4);
    pprof_flame_free(t);
    /* A function the fold does not have: an empty tree. */
    o.focus = "nope";
    ASSERT_EQ(pprof_flame_from_fold(fd, &o, &t), 0);
    ASSERT_EQ(t->n_nodes, 1);
    ASSERT_EQ(t->nodes[0].total, 0);
    pprof_flame_free(t);
    o.type = 7;
    ASSERT_EQ(pprof_flame_from_fold(fd, &o, &t), -EINVAL);
    pprof_fold_free(fd);
}

TEST(collapsed_stacks_in_chunks)
{
    struct pprof_fold *fd = fold_of(1, (int64_t[]){ 1, 1 }, (int[]){ 0, 0 }, 2);
    struct buf all, part;
    size_t pos = 0;
    int rc, turns = 0;

    buf_init(&all, 1 << 20);
    buf_init(&part, 1 << 20);
    do {
        buf_reset(&part);
        rc = pprof_fold_collapsed(fd, 1, 0, &pos, &part, 1); /* one line a call */
        ASSERT_TRUE(rc == 0 || rc == 1);
        buf_append(&all, part.data ? part.data : "", part.len);
        turns++;
    } while (rc == 1);
    ASSERT_STR_EQ(all.data, "main.main;main.work;crypto/sha256.block;runtime.memmove 60\n"
                            "main.main;main.work;crypto/sha256.block 40\n"
                            "main.main;main.rec;main.rec;runtime.memmove 20\n"
                            "main.main 80\n");
    ASSERT_EQ(turns, 4); /* a line a call, the last one saying it is done */
    ASSERT_EQ(pprof_fold_collapsed(fd, 2, 0, &pos, &part, 1), -EINVAL);
    buf_done(&all);
    buf_done(&part);
    pprof_fold_free(fd);
}

TEST(collapsed_names_lose_separators)
{
    static const char *const one[] = { "samples/count" };
    struct pprof_limits lim;
    struct pprof_fold *fd = pprof_fold_new(1, 0);
    struct tprof *tp = tp_new(one, 1);
    uint64_t f1 = tp_func(tp, "a;b\nc", "x.go"), f2 = tp_func(tp, "d e", "x.go");
    uint64_t l1 = tp_loc(tp, 1, f1, 1), l2 = tp_loc(tp, 2, f2, 1), l3 = tp_loc(tp, 0x2a, 0, 0);
    struct buf b;
    size_t pos = 0, len;
    uint8_t *p;
    char err[256];
    Perftools__Profiles__Profile *pp = tp_proto(tp);

    tp_sample(tp, (uint64_t[]){ l2, l1 }, 2, (int64_t[]){ 7 });
    tp_sample(tp, (uint64_t[]){ l3 }, 1, (int64_t[]){ 1 });
    /* the third location has no line: it is named by its address */
    pp->location[2]->n_line = 0;
    p = tp_pack(tp, &len, false);
    tp_free(tp);
    pprof_limits_default(&lim);
    ASSERT_EQ(pprof_fold_add(fd, 0, p, len, &lim, err, sizeof(err)), 0);
    buf_init(&b, 1 << 16);
    ASSERT_EQ(pprof_fold_collapsed(fd, 0, 0, &pos, &b, 1 << 16), 0);
    ASSERT_STR_EQ(b.data, "a_b_c;d e 7\n0x2a 1\n");
    buf_done(&b);
    free(p);
    pprof_fold_free(fd);
}

TEST(encoded_merge_reads_back_the_same)
{
    struct pprof_fold *fd = fold_of(2, (int64_t[]){ 1, 2, 5 }, (int[]){ 0, 0, 1 }, 3), *again;
    struct pprof_limits lim;
    struct pprof_fold_fn *v, *w;
    struct pprof__decoded dp;
    struct pprof_fold_info info;
    size_t n, m, len;
    uint8_t *out;
    char err[256];

    pprof_limits_default(&lim);
    ASSERT_EQ(pprof_fold_encode(fd, 0, PPROF_COMPRESS_FASTEST, &out, &len), 0);
    tp_decode(out, len, &dp);
    ASSERT_EQ(dp.prof->n_sample, 4);
    ASSERT_EQ(dp.prof->time_nanos, 1000);
    ASSERT_STR_EQ(dp.prof->string_table[dp.prof->default_sample_type], "cpu");
    pprof__decoded_done(&dp);
    again = pprof_fold_new(1, 0);
    ASSERT_EQ(pprof_fold_add(again, 0, out, len, &lim, err, sizeof(err)), 0);
    pprof_fold_info(again, &info);
    ASSERT_EQ(info.n_types, 2);
    for (int t = 0; t < 2; t++) {
        ASSERT_EQ(pprof_fold_functions(fd, t, &v, &n), 0);
        ASSERT_EQ(pprof_fold_functions(again, t, &w, &m), 0);
        ASSERT_EQ(n, m);
        for (size_t i = 0; i < n; i++) {
            const struct pprof_fold_fn *x = fn(again, w, m, pprof_fold_name(fd, v[i].name));

            ASSERT_NOT_NULL(x);
            ASSERT_EQ(x->self[0], v[i].self[0]);
            ASSERT_EQ(x->total[0], v[i].total[0]);
        }
        free(v);
        free(w);
    }
    free(out);
    pprof_fold_free(again);
    ASSERT_EQ(pprof_fold_encode(fd, 1, PPROF_COMPRESS_NONE, &out, &len),
              0); /* plain: the baseline */
    tp_decode(out, len, &dp);
    ASSERT_EQ(dp.prof->sample[0]->value[1], 30 * 5);
    pprof__decoded_done(&dp);
    free(out);
    pprof_fold_free(fd);
}

TEST(byte_cap)
{
    struct pprof_limits lim;
    struct pprof_fold *fd = pprof_fold_new(1, 4096);
    size_t len;
    uint8_t *p = profile(1, &len);
    char err[256];

    pprof_limits_default(&lim);
    ASSERT_EQ(pprof_fold_add(fd, 0, p, len, &lim, err, sizeof(err)), PPROF_ETOOLARGE);
    ASSERT_TRUE(strstr(err, "merging needs more than") != NULL);
    pprof_fold_free(fd);
    fd = pprof_fold_new(1, 1 << 20);
    ASSERT_EQ(pprof_fold_add(fd, 0, p, len, &lim, err, sizeof(err)), 0);
    {
        struct pprof_fold_info info;

        pprof_fold_info(fd, &info);
        ASSERT_TRUE(info.bytes > 4096 && info.bytes <= 1 << 20);
    }
    pprof_fold_free(fd);
    free(p);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
