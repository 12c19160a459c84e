/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of stable target sampling (scrape/sample.c): 40 targets in 4
 * groups at max-per-group 3 choose 12; removing a chosen target brings
 * exactly one replacement; adding targets keeps the chosen ones; with no
 * history the choice depends only on the targets (any order, any process);
 * groups read final labels first, then discovered ones. */
#include <stdlib.h>
#include <string.h>

#include "scrape/internal.h"
#include "test.h"

#define GROUPS 4
#define PER 10

static void make(struct scrape_sample_cand *c, size_t n, unsigned first_id)
{
    for (size_t i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        c[i].group = 1000 + i % GROUPS;
        /* identities as hashes look: spread over 64 bits */
        c[i].id = (uint64_t)(first_id + i) * 0x9E3779B97F4A7C15ULL;
    }
}

static size_t chosen_in(const struct scrape_sample_cand *c, size_t n, uint64_t group)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += c[i].group == group && c[i].chosen;
    return k;
}

/* The next pass's input: what was chosen stays marked. */
static void carry(struct scrape_sample_cand *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        c[i].was_chosen = c[i].chosen;
        c[i].chosen = false;
    }
}

TEST(three_per_group_of_forty)
{
    struct scrape_sample_cand c[GROUPS * PER];
    size_t total = 0;

    make(c, GROUPS * PER, 1);
    ASSERT_EQ(scrape__sample_choose(c, GROUPS * PER, 3), 0);
    for (int g = 0; g < GROUPS; g++)
        ASSERT_EQ(chosen_in(c, GROUPS * PER, 1000 + g), 3);
    for (size_t i = 0; i < GROUPS * PER; i++)
        total += c[i].chosen;
    ASSERT_EQ(total, 12);
}

TEST(removing_a_chosen_one_brings_exactly_one_replacement)
{
    struct scrape_sample_cand c[GROUPS * PER], after[GROUPS * PER];
    size_t gone = 0, n = 0, changed = 0;

    make(c, GROUPS * PER, 1);
    ASSERT_EQ(scrape__sample_choose(c, GROUPS * PER, 3), 0);
    while (!c[gone].chosen)
        gone++;
    for (size_t i = 0; i < GROUPS * PER; i++)
        if (i != gone)
            after[n++] = c[i];
    carry(after, n);
    ASSERT_EQ(scrape__sample_choose(after, n, 3), 0);
    ASSERT_EQ(chosen_in(after, n, c[gone].group), 3);
    for (size_t i = 0; i < n; i++) {
        ASSERT_TRUE(!after[i].was_chosen || after[i].chosen); /* the others stay */
        changed += after[i].chosen && !after[i].was_chosen;
    }
    ASSERT_EQ(changed, 1);
}

TEST(adding_targets_keeps_the_chosen_ones)
{
    struct scrape_sample_cand c[GROUPS * PER * 2];

    make(c, GROUPS * PER, 1);
    ASSERT_EQ(scrape__sample_choose(c, GROUPS * PER, 3), 0);
    carry(c, GROUPS * PER);
    /* as many new targets again, some ranked above the chosen ones */
    make(c + GROUPS * PER, GROUPS * PER, 5000);
    ASSERT_EQ(scrape__sample_choose(c, GROUPS * PER * 2, 3), 0);
    for (size_t i = 0; i < GROUPS * PER * 2; i++)
        ASSERT_EQ(c[i].chosen, c[i].was_chosen);
}

TEST(without_history_the_choice_ignores_order)
{
    struct scrape_sample_cand a[GROUPS * PER], b[GROUPS * PER];

    make(a, GROUPS * PER, 1);
    for (size_t i = 0; i < GROUPS * PER; i++)
        b[i] = a[GROUPS * PER - 1 - i];
    ASSERT_EQ(scrape__sample_choose(a, GROUPS * PER, 2), 0);
    ASSERT_EQ(scrape__sample_choose(b, GROUPS * PER, 2), 0);
    for (size_t i = 0; i < GROUPS * PER; i++)
        ASSERT_EQ(a[i].chosen, b[GROUPS * PER - 1 - i].chosen);
}

TEST(fewer_places_keep_the_best_ranked_of_the_chosen)
{
    struct scrape_sample_cand c[PER];
    uint64_t best = 0;

    make(c, PER, 1);
    for (size_t i = 0; i < PER; i++)
        c[i].group = 7;
    ASSERT_EQ(scrape__sample_choose(c, PER, 3), 0);
    carry(c, PER);
    for (size_t i = 0; i < PER; i++)
        if (c[i].was_chosen && c[i].id > best)
            best = c[i].id;
    ASSERT_EQ(scrape__sample_choose(c, PER, 1), 0);
    for (size_t i = 0; i < PER; i++)
        ASSERT_EQ(c[i].chosen, c[i].id == best);
}

TEST(groups_read_final_then_discovered_labels)
{
    struct scrape_sampling_cfg s = { (char *[]){ "namespace", "__meta_controller" }, 2, 3 };
    struct labels fin = LABELS_INIT, disc = LABELS_INIT, other = LABELS_INIT;

    ASSERT_EQ(labels_set(&fin, "namespace", "shop"), 0);
    ASSERT_EQ(labels_set(&disc, "__meta_controller", "cart"), 0);
    ASSERT_EQ(labels_set(&other, "__meta_controller", "api"), 0);
    ASSERT_U64_EQ(scrape__sample_group(&s, &fin, &disc), scrape__sample_group(&s, &fin, &disc));
    ASSERT_NE(scrape__sample_group(&s, &fin, &disc), scrape__sample_group(&s, &fin, &other));
    /* a missing label is an empty value, not a shifted one */
    ASSERT_NE(scrape__sample_group(&s, &fin, NULL), scrape__sample_group(&s, &disc, NULL));
    labels_done(&fin);
    labels_done(&disc);
    labels_done(&other);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
