/* SPDX-License-Identifier: Apache-2.0 */
/* The string-keyed chained hash table (see strtab.h; docs/design.md
 * "Modules"). Pure; the owner serialises access. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/strtab.h"

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037ULL;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

struct strtab_node *strtab_find(const struct strtab *t, const char *name)
{
    if (!t->_nb)
        return NULL;
    for (struct strtab_node *e = t->_b[fnv1a(name) & (t->_nb - 1)]; e; e = e->_next)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

static void grow(struct strtab *t)
{
    size_t nb = t->_nb ? t->_nb * 4 : 64;
    struct strtab_node **b = calloc(nb, sizeof(*b));

    if (!b)
        return; /* keep the old table: longer chains, still correct */
    for (size_t i = 0; i < t->_nb; i++) {
        struct strtab_node *e, *n;

        for (e = t->_b[i]; e; e = n) {
            size_t k = fnv1a(e->name) & (nb - 1);

            n = e->_next;
            e->_next = b[k];
            b[k] = e;
        }
    }
    free(t->_b);
    t->_b = b;
    t->_nb = nb;
}

int strtab_insert(struct strtab *t, struct strtab_node *e)
{
    size_t k;

    if (!t->_nb || t->n >= t->_nb * 2)
        grow(t);
    if (!t->_nb)
        return -ENOMEM;
    k = fnv1a(e->name) & (t->_nb - 1);
    e->_next = t->_b[k];
    t->_b[k] = e;
    t->n++;
    return 0;
}

void strtab_unlink(struct strtab *t, struct strtab_node *e)
{
    struct strtab_node **pp = &t->_b[fnv1a(e->name) & (t->_nb - 1)];

    for (; *pp; pp = &(*pp)->_next) {
        if (*pp == e) {
            *pp = e->_next;
            t->n--;
            return;
        }
    }
}

void strtab_each(const struct strtab *t, void (*fn)(struct strtab_node *e, void *ud), void *ud)
{
    for (size_t i = 0; i < t->_nb; i++) {
        for (struct strtab_node *e = t->_b[i]; e; e = e->_next)
            fn(e, ud);
    }
}

void strtab_done(struct strtab *t, void (*free_node)(struct strtab_node *e))
{
    for (size_t i = 0; i < t->_nb; i++) {
        struct strtab_node *e, *n;

        for (e = t->_b[i]; e; e = n) {
            n = e->_next;
            if (free_node)
                free_node(e);
        }
    }
    free(t->_b);
    memset(t, 0, sizeof(*t));
}
