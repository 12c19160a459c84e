/* SPDX-License-Identifier: Apache-2.0 */
/* Flame graphs for the status pages: the samples of one sample type folded
 * root first into a call tree of function frames (inlined frames
 * expanded, leaf last), each node with its total and self value, and the
 * flat / cumulative table of the top functions (docs/design.md "Threads":
 * built by a job, its tree charged to the budget). Built from a decoded and
 * validated profile (pprof__decode: every id resolves), so a hostile
 * profile costs at most the decode limits plus `max_nodes` nodes. A tree
 * outlives its decode (a web page keeps it while it is sent), so what it
 * keeps is bounded by `max_nodes` alone: at most one name per node, each
 * copied once per distinct string and cut to PPROF_FLAME_NAME_MAX bytes.
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

/* The key of a function without a name in the string-copy index. */
#define NO_STRING UINT64_MAX

struct builder {
    struct pprof_flame *f;
    struct hashmap children;  /* parent << 32 | name -> node index + 1 */
    struct hashmap func_name; /* function id -> name index + 1 */
    struct hashmap str_off;   /* profile string index -> offset in `data` + 1 */
    size_t *name_off;         /* name index -> offset in `data`, cap_names long */
    char *data;               /* the names' bytes, NUL-terminated one after another */
    size_t data_len, data_cap;
    struct hashmap loc;  /* location id -> Location * */
    struct hashmap func; /* function id -> Function * */
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

/* Appends `s` to the names' storage, cut to PPROF_FLAME_NAME_MAX bytes at
 * a character boundary (ending in "..." as one character, U+2026), and
 * returns its offset. A name cannot be shown whole on a frame anyway, and
 * the cut is what keeps a page's tree small however long a hostile
 * profile's names are. */
static int store_name(struct builder *b, const char *s, size_t *off)
{
    static const char ell[] = "\xe2\x80\xa6";
    size_t len = strlen(s), keep = len, need;
    bool cut = len > PPROF_FLAME_NAME_MAX;

    if (cut) {
        keep = PPROF_FLAME_NAME_MAX - (sizeof(ell) - 1);
        while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
            keep--;
    }
    need = keep + (cut ? sizeof(ell) - 1 : 0) + 1;
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
    memcpy(b->data + b->data_len, s, keep);
    if (cut)
        memcpy(b->data + b->data_len + keep, ell, sizeof(ell) - 1);
    b->data[b->data_len + need - 1] = '\0';
    b->data_len += need;
    return 0;
}

/* A function's name as an index into f->names, or NONE when it is new and
 * the tree is full: a new name always needs a new node, so names never
 * outnumber nodes. Functions sharing a string share its one copy. */
static int name_of(struct builder *b, const Perftools__Profiles__Profile *p, uint64_t func_id,
                   uint32_t *out)
{
    struct pprof_flame *f = b->f;
    uintptr_t got = (uintptr_t)hashmap_get(&b->func_name, func_id);
    const Perftools__Profiles__Function *fn;
    uint64_t si = NO_STRING;
    size_t off;
    int rc;

    if (got) {
        *out = (uint32_t)(got - 1);
        return 0;
    }
    if (f->n_nodes >= b->max_nodes) {
        f->truncated = true;
        *out = NONE;
        return 0;
    }
    fn = hashmap_get(&b->func, func_id);
    if (fn && fn->name >= 0 && (uint64_t)fn->name < p->n_string_table)
        si = (uint64_t)fn->name;
    if ((got = (uintptr_t)hashmap_get(&b->str_off, si)) != 0) {
        off = got - 1;
    } else {
        if ((rc = store_name(b, si == NO_STRING ? "?" : p->string_table[si], &off)) < 0)
            return rc;
        if (hashmap_put(&b->str_off, si, (void *)(uintptr_t)(off + 1)) < 0)
            return -ENOMEM;
    }
    if (f->n_names >= f->cap_names) {
        size_t *no = array_grow(b->name_off, &f->cap_names, f->n_names, sizeof(*no), 64);

        if (!no)
            return -ENOMEM;
        b->name_off = no;
    }
    b->name_off[f->n_names] = off;
    if (hashmap_put(&b->func_name, func_id, (void *)(uintptr_t)(f->n_names + 1)) < 0)
        return -ENOMEM;
    *out = (uint32_t)f->n_names++;
    return 0;
}

/* Sums wrap instead of overflowing: a hostile profile's values are its
 * business, not undefined behaviour. */
static void add(int64_t *to, int64_t v)
{
    *to = (int64_t)((uint64_t)*to + (uint64_t)v);
}

/* Adds one sample: from the root down its stack (the last location is the
 * outermost; within a location the last line is the caller). */
static int add_sample(struct builder *b, const Perftools__Profiles__Profile *p,
                      const Perftools__Profiles__Sample *s, int64_t v)
{
    uint32_t at = 0;

    add(&b->f->nodes[0].total, v);
    for (size_t i = s->n_location_id; i-- > 0;) {
        const Perftools__Profiles__Location *loc = hashmap_get(&b->loc, s->location_id[i]);

        for (size_t l = loc ? loc->n_line : 0; l-- > 0;) {
            uint32_t name, next;
            int rc;

            if ((rc = name_of(b, p, loc->line[l]->function_id, &name)) < 0)
                return rc;
            if (name == NONE)
                goto self;
            if ((rc = child(b, at, name, &next)) < 0)
                return rc;
            if (next == NONE)
                goto self;
            at = next;
            add(&b->f->nodes[at].total, v);
        }
    }
self:
    add(&b->f->nodes[at].self, v);
    return 0;
}

/* Hands the names to the tree (one pointer each into one block) and
 * trims the nodes and the names to their counts: the tree is kept while a
 * page is sent, and what it holds is charged for that time. */
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

int pprof_flame_build(const uint8_t *in, size_t in_len, const struct pprof_limits *lim,
                      const char *sample_type, size_t max_nodes, struct pprof_flame **out,
                      char *err, size_t errlen)
{
    struct pprof__decoded dp = { 0 };
    struct builder b = { 0 };
    const Perftools__Profiles__Profile *p;
    struct pprof_flame *f;
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    int col = -1, rc;

    *out = NULL;
    if ((rc = pprof_gunzip(in, in_len, lim->max_decompressed, &raw, &raw_len)) < 0)
        return pprof__err(err, errlen, rc, "gunzip: %s", pprof_strerror(rc));
    rc = pprof__decode(raw, raw_len, lim, &dp, err, errlen);
    free(raw);
    if (rc < 0)
        return rc;
    p = dp.prof;
    if (!(f = calloc(1, sizeof(*f)))) {
        rc = -ENOMEM;
        goto done;
    }
    b.f = f;
    b.max_nodes = max_nodes ? max_nodes : 1;
    hashmap_init(&b.children);
    hashmap_init(&b.func_name);
    hashmap_init(&b.str_off);
    hashmap_init(&b.loc);
    hashmap_init(&b.func);
    /* The sample types, and the one asked for (else the default one, else
     * the last, as pprof's tools choose). */
    f->n_types = p->n_sample_type;
    if (f->n_types && !(f->types = calloc(f->n_types, sizeof(*f->types)))) {
        rc = -ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = p->string_table[p->sample_type[i]->type];
        const char *u = p->string_table[p->sample_type[i]->unit];
        size_t len = strlen(t) + strlen(u) + 2;

        if (!(f->types[i] = malloc(len))) {
            rc = -ENOMEM;
            goto done;
        }
        snprintf(f->types[i], len, "%s/%s", t, u);
        if (sample_type
                ? strcmp(f->types[i], sample_type) == 0 || strcmp(t, sample_type) == 0
                : p->default_sample_type && p->sample_type[i]->type == p->default_sample_type)
            col = (int)i;
    }
    if (col < 0 && sample_type) {
        rc = pprof__err(err, errlen, PPROF_ECORRUPT, "no sample type %s", sample_type);
        goto done;
    }
    if (col < 0)
        col = (int)p->n_sample_type - 1;
    f->sample_type = col;
    for (size_t i = 0; i < p->n_location; i++)
        if (hashmap_put(&b.loc, p->location[i]->id, p->location[i]) < 0) {
            rc = -ENOMEM;
            goto done;
        }
    for (size_t i = 0; i < p->n_function; i++)
        if (hashmap_put(&b.func, p->function[i]->id, p->function[i]) < 0) {
            rc = -ENOMEM;
            goto done;
        }
    if (!(f->nodes = array_grow(NULL, &f->cap_nodes, 0, sizeof(*f->nodes), 64)) ||
        !(b.name_off = malloc(64 * sizeof(*b.name_off))) ||
        (rc = store_name(&b, "total", &b.name_off[0])) < 0) {
        rc = -ENOMEM;
        goto done;
    }
    f->cap_names = 64;
    f->n_names = 1;
    f->nodes[0] = (struct pprof_flame_node){ 0, NONE, NONE, NONE, 0, 0 };
    f->n_nodes = 1;
    for (size_t i = 0; col >= 0 && i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];

        if ((size_t)col < s->n_value && s->value[col] != 0 &&
            (rc = add_sample(&b, p, s, s->value[col])) < 0)
            goto done;
    }
    rc = finish(&b);
done:
    free(b.name_off);
    free(b.data);
    hashmap_done(&b.children);
    hashmap_done(&b.func_name);
    hashmap_done(&b.str_off);
    hashmap_done(&b.loc);
    hashmap_done(&b.func);
    pprof__decoded_done(&dp);
    if (rc < 0)
        pprof_flame_free(f);
    else
        *out = f;
    return rc;
}

void pprof_flame_free(struct pprof_flame *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_types; i++)
        free(f->types[i]);
    free(f->types);
    free(f->names);
    free(f->name_data);
    free(f->nodes);
    free(f);
}
