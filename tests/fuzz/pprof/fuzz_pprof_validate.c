/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: capped gunzip + protobuf-c decode through the arena
 * allocator + reference validation (pprof_validate), with small caps; and
 * the flame graph of what validates, whose every node's total must be its
 * self value plus its children's totals (values are conserved). */
#include <stdint.h>
#include <stdlib.h>

#include "../fuzz_invariants.h"
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
    return 0;
}
