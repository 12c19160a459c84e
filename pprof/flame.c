/* SPDX-License-Identifier: Apache-2.0 */
/* Flame graphs for the status pages: the stacks of a fold (fold.c: one
 * profile, or the merge of a range, with a baseline for a diff) made into
 * a call tree of function frames, root first, each node with its total and
 * self value (and its baseline's), in one sample type: every stack, or
 * only those through one function, from it to their leaves (its callees)
 * or to their roots (its callers, inverted): the two halves of a sandwich
 * view (docs/design.md "Threads": built by a job, its tree charged to the
 * budget). A tree outlives its fold (a web page keeps it while it is
 * sent), so what it keeps is bounded by `max_nodes` alone: at most one
 * name per node, each a copy of the fold's, which is cut to
 * PPROF_FLAME_NAME_MAX bytes.
 *
 * Pure; any thread. The tree is a few malloc'd blocks (nodes, names and
 * their one storage block, types), freed with pprof_flame_free(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/hashmap.h"
#include "pprof/internal.h"

#define NONE UINT32_MAX

struct builder {
    struct pprof_flame *f;
    const struct pprof_fold *fd;
    struct hashmap children; /* parent << 32 | name -> node index + 1 */
    uint32_t *name_of;       /* fold name -> tree name, NONE before its first use */
    size_t *name_off;        /* tree name -> offset in `data`, cap_names long */
    char *data;              /* the names' bytes, NUL-terminated one after another */
    size_t data_len, data_cap;
    size_t max_nodes;
};

/* The child of `parent` named `name`, created if room is left; NONE when
 * the tree is full (the value then stays with the parent, as self). */
static int child(struct builder *b, uint32_t parent, uint32_t name, uint32_t *out)
{
    struct pprof_flame *f = b->f;
    uint64_t key = (uint64_t)parent << 32 | name;
    uintptr_t got = (uintptr_t)hashmap_get(&b->children, key);
    struct pprof_flame_node *n, *nodes;

    if (got) {
        *out = (uint32_t)(got - 1);
        return 0;
    }
    if (f->n_nodes >= b->max_nodes) {
        f->truncated = true;
        *out = NONE;
        return 0;
    }
    if (!(nodes = array_grow(f->nodes, &f->cap_nodes, f->n_nodes, sizeof(*nodes), 64)))
        return -ENOMEM;
    f->nodes = nodes;
    if (hashmap_put(&b->children, key, (void *)(uintptr_t)(f->n_nodes + 1)) < 0)
        return -ENOMEM;
    n = &f->nodes[f->n_nodes];
    memset(n, 0, sizeof(*n));
    n->name = name;
    n->parent = parent;
    n->first_child = NONE;
    n->next_sibling = f->nodes[parent].first_child;
    f->nodes[parent].first_child = (uint32_t)f->n_nodes;
    *out = (uint32_t)f->n_nodes++;
    return 0;
}

/* Appends `s` (already cut by the fold) to the names' storage. */
static int store_name(struct builder *b, const char *s, size_t *off)
{
    size_t need = strlen(s) + 1;

    if (b->data_len + need > b->data_cap) {
        size_t nc = b->data_cap ? b->data_cap * 2 : 4096;
        char *nd;

        while (nc < b->data_len + need)
            nc *= 2;
        if (!(nd = realloc(b->data, nc)))
            return -ENOMEM;
        b->data = nd;
        b->data_cap = nc;
    }
    *off = b->data_len;
    memcpy(b->data + b->data_len, s, need);
    b->data_len += need;
    return 0;
}

/* The tree's name for the fold's name `fn`, or NONE when it is new and the
 * tree is full: a new name always needs a new node, so names never
 * outnumber nodes. */
static int name_of(struct builder *b, uint32_t fn, uint32_t *out)
{
    struct pprof_flame *f = b->f;
    size_t off;
    int rc;

    if (b->name_of[fn] != NONE) {
        *out = b->name_of[fn];
        return 0;
    }
    if (f->n_nodes >= b->max_nodes) {
        f->truncated = true;
        *out = NONE;
        return 0;
    }
    if ((rc = store_name(b, pprof_fold_name(b->fd, fn), &off)) < 0)
        return rc;
    if (f->n_names >= f->cap_names) {
        size_t *no = array_grow(b->name_off, &f->cap_names, f->n_names, sizeof(*no), 64);

        if (!no)
            return -ENOMEM;
        b->name_off = no;
    }
    b->name_off[f->n_names] = off;
    b->name_of[fn] = (uint32_t)f->n_names;
    *out = (uint32_t)f->n_names++;
    return 0;
}

/* Sums wrap instead of overflowing: a hostile profile's values are its
 * business, not undefined behaviour. */
static void add(int64_t *to, int64_t v)
{
    *to = (int64_t)((uint64_t)*to + (uint64_t)v);
}

/* Adds one stack's values along `n` frames taken from `fr` with `step`
 * (+1 root to leaf, -1 backwards). */
static int add_path(struct builder *b, const uint32_t *fr, size_t n, int step, int64_t v,
                    int64_t base)
{
    struct pprof_flame_node *nodes = b->f->nodes;
    uint32_t at = 0;

    add(&nodes[0].total, v);
    add(&nodes[0].base_total, base);
    for (size_t i = 0; i < n; i++) {
        uint32_t name, next;
        int rc;

        if ((rc = name_of(b, fr[step > 0 ? (ptrdiff_t)i : -(ptrdiff_t)i], &name)) < 0)
            return rc;
        if (name == NONE)
            break;
        if ((rc = child(b, at, name, &next)) < 0)
            return rc;
        if (next == NONE)
            break;
        at = next;
        nodes = b->f->nodes;
        add(&nodes[at].total, v);
        add(&nodes[at].base_total, base);
    }
    add(&b->f->nodes[at].self, v);
    add(&b->f->nodes[at].base_self, base);
    return 0;
}

/* Hands the names to the tree (one pointer each into one block) and
 * trims the nodes to their count: the tree is kept while a page is sent,
 * and what it holds is charged for that time. */
static int finish(struct builder *b)
{
    struct pprof_flame *f = b->f;
    struct pprof_flame_node *nodes;
    char *data;

    if (!(f->names = malloc(f->n_names * sizeof(*f->names))))
        return -ENOMEM;
    f->cap_names = f->n_names;
    if (!(data = realloc(b->data, b->data_len)))
        return -ENOMEM;
    b->data = NULL;
    f->name_data = data;
    for (size_t i = 0; i < f->n_names; i++)
        f->names[i] = data + b->name_off[i];
    if ((nodes = realloc(f->nodes, f->n_nodes * sizeof(*nodes))) != NULL) {
        f->nodes = nodes;
        f->cap_nodes = f->n_nodes;
    }
    f->bytes = sizeof(*f) + f->cap_nodes * sizeof(*f->nodes) + f->n_names * sizeof(*f->names) +
               b->data_len + f->n_types * sizeof(*f->types);
    for (size_t i = 0; i < f->n_types; i++)
        f->bytes += strlen(f->types[i]) + 1;
    return 0;
}

int pprof_flame_from_fold(const struct pprof_fold *fd, const struct pprof_flame_opts *o,
                          struct pprof_flame **out)
{
    struct builder b = { 0 };
    struct pprof_flame *f;
    long focus = -1;
    int rc = -ENOMEM;

    *out = NULL;
    if (o->type < 0 || (size_t)o->type >= fd->n_types)
        return -EINVAL;
    if (o->mode != PPROF_FLAME_ALL &&
        (!o->focus || (focus = pprof_fold_find_name(fd, o->focus)) < 0))
        focus = -1; /* a function the fold does not have: an empty tree */
    if (!(f = calloc(1, sizeof(*f))))
        return -ENOMEM;
    b.f = f;
    b.fd = fd;
    b.max_nodes = o->max_nodes ? o->max_nodes : 1;
    hashmap_init(&b.children);
    f->sample_type = o->type;
    f->n_types = fd->n_types;
    if (!(f->types = calloc(f->n_types ? f->n_types : 1, sizeof(*f->types))))
        goto done;
    for (size_t i = 0; i < f->n_types; i++)
        if (!(f->types[i] = strdup(fd->types[i])))
            goto done;
    if (!(b.name_of = malloc((fd->n_names ? fd->n_names : 1) * sizeof(*b.name_of))))
        goto done;
    memset(b.name_of, 0xff, (fd->n_names ? fd->n_names : 1) * sizeof(*b.name_of));
    if (!(f->nodes = array_grow(NULL, &f->cap_nodes, 0, sizeof(*f->nodes), 64)) ||
        !(b.name_off = malloc(64 * sizeof(*b.name_off))) ||
        store_name(&b, "total", &b.name_off[0]) < 0)
        goto done;
    f->cap_names = 64;
    f->n_names = 1;
    f->nodes[0] = (struct pprof_flame_node){ 0, NONE, NONE, NONE, 0, 0, 0, 0 };
    f->n_nodes = 1;
    rc = 0;
    for (size_t i = 0; i < fd->n_stacks && rc == 0; i++) {
        const struct pprof__fold_stack *s = &fd->stacks[i];
        const uint32_t *fr = fd->frames + s->off;
        int64_t v = pprof__fold_values(fd, i, 0)[o->type];
        int64_t base = fd->sides > 1 ? pprof__fold_values(fd, i, 1)[o->type] : 0;
        size_t k = 0;

        if (v == 0 && base == 0)
            continue;
        if (o->mode != PPROF_FLAME_ALL) {
            if (focus < 0)
                continue;
            while (k < s->len && fr[k] != (uint32_t)focus)
                k++;
            if (k == s->len)
                continue;
        }
        if (o->mode == PPROF_FLAME_CALLERS)
            rc = add_path(&b, fr + k, k + 1, -1, v, base);
        else
            rc = add_path(&b, fr + k, s->len - k, 1, v, base);
    }
    if (rc == 0)
        rc = finish(&b);
done:
    free(b.name_off);
    free(b.name_of);
    free(b.data);
    hashmap_done(&b.children);
    if (rc < 0)
        pprof_flame_free(f);
    else
        *out = f;
    return rc;
}

int pprof_flame_build(const uint8_t *in, size_t in_len, const struct pprof_limits *lim,
                      const char *sample_type, size_t max_nodes, struct pprof_flame **out,
                      char *err, size_t errlen)
{
    struct pprof_fold *fd = pprof_fold_new(1, 0);
    struct pprof_flame_opts o = { .max_nodes = max_nodes, .mode = PPROF_FLAME_ALL };
    int rc;

    *out = NULL;
    if (!fd)
        return pprof__err(err, errlen, -ENOMEM, "out of memory");
    if ((rc = pprof_fold_add(fd, 0, in, in_len, lim, err, errlen)) < 0)
        goto out;
    o.type = sample_type ? pprof_fold_find_type(fd, sample_type) : fd->default_type;
    if (o.type < 0) {
        rc = pprof__err(err, errlen, PPROF_ECORRUPT, "no sample type %s",
                        sample_type ? sample_type : "");
        goto out;
    }
    if ((rc = pprof_flame_from_fold(fd, &o, out)) < 0)
        pprof__err(err, errlen, rc, "%s", pprof_strerror(rc));
out:
    pprof_fold_free(fd);
    return rc;
}

void pprof_flame_free(struct pprof_flame *f)
{
    if (!f)
        return;
    for (size_t i = 0; f->types && i < f->n_types; i++)
        free(f->types[i]);
    free(f->types);
    free(f->names);
    free(f->name_data);
    free(f->nodes);
    free(f);
}
