/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: capped gunzip + protobuf-c decode through the arena
 * allocator + reference validation (pprof_validate), with small caps; and
 * the flame graph of what validates, whose every node's total must be its
 * self value plus its children's totals (values are conserved); and its
 * fold (pprof/fold.c) on both sides of a diff: each side's functions equal
 * a one-sided fold's, the sandwich trees conserve values too, and the
 * fold encoded as pprof folds again to the same functions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz_invariants.h"
#include "common/buf.h"
#include "pprof/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_flame(const struct pprof_flame *f)
{
    for (size_t i = 0; i < f->n_nodes; i++) {
        const struct pprof_flame_node *n = &f->nodes[i];
        int64_t sum = n->self;

        FUZZ_ASSERT(n->name < f->n_names);
        FUZZ_ASSERT(i == 0 ? n->parent == UINT32_MAX : n->parent < i);
        for (uint32_t c = n->first_child; c != UINT32_MAX; c = f->nodes[c].next_sibling) {
            FUZZ_ASSERT(c < f->n_nodes && f->nodes[c].parent == i);
            sum = (int64_t)((uint64_t)sum + (uint64_t)f->nodes[c].total);
        }
        FUZZ_ASSERT(sum == n->total);
    }
}

/* The functions of `fd`'s side `side` in type `t`, by name, against
 * `other`'s side `oside`: the same names with the same values. */
static void same_functions(const struct pprof_fold *fd, int side, const struct pprof_fold *other,
                           int oside, int t)
{
    struct pprof_fold_fn *a, *b;
    size_t na, nb, nonzero = 0;

    FUZZ_ASSERT(pprof_fold_functions(fd, t, &a, &na) == 0);
    FUZZ_ASSERT(pprof_fold_functions(other, t, &b, &nb) == 0);
    for (size_t i = 0; i < na; i++) {
        long j = pprof_fold_find_name(other, pprof_fold_name(fd, a[i].name));

        if (!a[i].self[side] && !a[i].total[side])
            continue;
        nonzero++;
        FUZZ_ASSERT(j >= 0);
        FUZZ_ASSERT(a[i].self[side] == b[j].self[oside] && a[i].total[side] == b[j].total[oside]);
    }
    for (size_t i = 0; i < nb; i++)
        nonzero -= b[i].self[oside] || b[i].total[oside];
    FUZZ_ASSERT(nonzero == 0);
    free(a);
    free(b);
}

static void check_fold(const uint8_t *data, size_t size, const struct pprof_limits *lim)
{
    struct pprof_fold *one = pprof_fold_new(1, 8u << 20), *two = pprof_fold_new(2, 16u << 20);
    struct pprof_fold *again = NULL;
    struct pprof_fold_info info;
    char err[256];
    uint8_t *enc = NULL;
    size_t enc_len;

    FUZZ_ASSERT(one && two);
    if (pprof_fold_add(one, 0, data, size, lim, err, sizeof(err)) < 0 ||
        pprof_fold_add(two, 0, data, size, lim, err, sizeof(err)) < 0 ||
        pprof_fold_add(two, 1, data, size, lim, err, sizeof(err)) < 0 ||
        pprof_fold_add(two, 1, data, size, lim, err, sizeof(err)) < 0)
        goto out;
    pprof_fold_info(one, &info);
    for (size_t t = 0; t < info.n_types; t++) {
        struct pprof_fold_fn *fn;
        size_t n;
        struct buf b;
        size_t pos = 0;

        same_functions(two, 0, one, 0, (int)t);
        /* the baseline holds the profile twice: each value doubled */
        FUZZ_ASSERT(pprof_fold_functions(two, (int)t, &fn, &n) == 0);
        for (size_t i = 0; i < n; i++)
            FUZZ_ASSERT(fn[i].self[1] == (int64_t)((uint64_t)fn[i].self[0] * 2) &&
                        fn[i].total[1] == (int64_t)((uint64_t)fn[i].total[0] * 2));
        for (int mode = PPROF_FLAME_CALLEES; mode <= PPROF_FLAME_CALLERS && n > 1; mode++) {
            struct pprof_flame_opts o = { .type = (int)t,
                                          .max_nodes = 4096,
                                          .mode = (enum pprof_flame_mode)mode,
                                          .focus = pprof_fold_name(two, fn[n - 1].name) };
            struct pprof_flame *tr;

            FUZZ_ASSERT(pprof_flame_from_fold(two, &o, &tr) == 0);
            check_flame(tr);
            pprof_flame_free(tr);
        }
        free(fn);
        buf_init(&b, 1 << 20);
        while (pprof_fold_collapsed(two, (int)t, 1, &pos, &b, 64 << 10) == 1)
            buf_reset(&b);
        buf_done(&b);
    }
    if (pprof_fold_encode(one, 0, PPROF_COMPRESS_NONE, &enc, &enc_len) == 0) {
        again = pprof_fold_new(1, 16u << 20);
        FUZZ_ASSERT(again);
        if (pprof_fold_add(again, 0, enc, enc_len, lim, err, sizeof(err)) == 0)
            for (size_t t = 0; t < info.n_types; t++)
                same_functions(again, 0, one, 0, (int)t);
    }
out:
    free(enc);
    pprof_fold_free(again);
    pprof_fold_free(one);
    pprof_fold_free(two);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pprof_limits lim;
    struct pprof_flame *f = NULL;
    char err[256];

    pprof_limits_default(&lim);
    lim.max_decompressed = 4u << 20;
    lim.max_samples = 20000;
    lim.max_locations = 20000;
    lim.max_functions = 20000;
    lim.max_strings = 40000;
    lim.max_labels = 16;
    lim.max_stack_depth = 256;
    if (pprof_validate(data, size, &lim, err, sizeof(err)) < 0) {
        if (err[0] == '\0')
            abort();
        return 0;
    }
    if (pprof_flame_build(data, size, &lim, NULL, 4096, &f, err, sizeof(err)) == 0)
        check_flame(f);
    pprof_flame_free(f);
    check_fold(data, size, &lim);
    return 0;
}
