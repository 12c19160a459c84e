/* SPDX-License-Identifier: Apache-2.0 */
/** A chained hash table of named entries: each entry embeds a struct
 * strtab_node (its name is the key), so lookups by string cost no extra
 * allocation and entries keep their address. Not thread-safe; the table
 * belongs to whoever embeds it. */
#ifndef PROFLET_COMMON_STRTAB_H
#define PROFLET_COMMON_STRTAB_H

#include <stddef.h>

/** Embed first in an entry; `name` is owned by the entry. */
struct strtab_node {
    char *name;
    struct strtab_node *_next;
};

/** Embeddable; zero-initialised is empty. */
struct strtab {
    struct strtab_node **_b;
    size_t _nb; /* power of two, or 0 before the first insert */
    size_t n;
};

/** The entry named `name`, or NULL. */
struct strtab_node *strtab_find(const struct strtab *t, const char *name);
/** Links `e` (its name set, not in the table). Returns 0 or -ENOMEM. */
int strtab_insert(struct strtab *t, struct strtab_node *e);
/** Unlinks `e` (which is in the table). */
void strtab_unlink(struct strtab *t, struct strtab_node *e);
/** Calls `fn` on every entry (which must not change the table). */
void strtab_each(const struct strtab *t, void (*fn)(struct strtab_node *e, void *ud), void *ud);
/** Frees the buckets and, through `free_node` (may be NULL), every entry. */
void strtab_done(struct strtab *t, void (*free_node)(struct strtab_node *e));

#endif
