/* SPDX-License-Identifier: Apache-2.0 */
/* Stable target sampling (a job's target-sampling): which targets of each
 * group are scraped. A group is the targets with the same values of the
 * group-by labels; at most max-per-group of each are chosen.
 *
 * Stable means a choice changes only where it must: targets chosen before
 * stay chosen while they exist (if the group now allows fewer, the best
 * ranked of them stay), and free places go to the best ranked others. The
 * rank is the target's identity hash (the hash of its final labels), so
 * with no history, every process that sees the same targets chooses the
 * same ones (rendezvous hashing, highest weight first; docs/design.md
 * "Targets, labels and scheduling").
 *
 * Pure: no loop, no allocation but the caller's; any thread. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "scrape/internal.h"

uint64_t scrape__sample_group(const struct scrape_sampling_cfg *s, const struct labels *final,
                              const struct labels *discovered)
{
    uint64_t h = 0;

    /* Each value hashed with the previous hash as its seed: positions count,
     * and an absent label is an empty value, as in Prometheus. */
    for (unsigned i = 0; i < s->n_group_by; i++) {
        const char *v = labels_get(final, s->group_by[i]);

        if (!v && discovered)
            v = labels_get(discovered, s->group_by[i]);
        h = XXH64(v ? v : "", v ? strlen(v) : 0, h + i + 1);
    }
    return h;
}

static int cand_cmp(const void *a, const void *b)
{
    const struct scrape_sample_cand *x = *(const struct scrape_sample_cand *const *)a;
    const struct scrape_sample_cand *y = *(const struct scrape_sample_cand *const *)b;

    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    if (x->was_chosen != y->was_chosen)
        return x->was_chosen ? -1 : 1;
    if (x->id != y->id)
        return x->id > y->id ? -1 : 1; /* highest weight first */
    return 0;
}

int scrape__sample_choose(struct scrape_sample_cand *c, size_t n, unsigned max_per_group)
{
    struct scrape_sample_cand **order = malloc((n ? n : 1) * sizeof(*order));
    size_t in_group = 0;

    if (!order)
        return -1;
    for (size_t i = 0; i < n; i++)
        order[i] = &c[i];
    qsort(order, n, sizeof(*order), cand_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || order[i]->group != order[i - 1]->group)
            in_group = 0;
        order[i]->chosen = in_group++ < max_per_group;
    }
    free(order);
    return 0;
}
