/* Flame graphs for the status pages: the samples of one sample type folded
 * root first into a call tree of function frames (inlined frames
 * expanded, leaf last), each node with its total and self value, and the
 * flat / cumulative table of the top functions. Built from a decoded and
 * validated profile (pprof__decode: every id resolves), so a hostile
 * profile costs at most the decode limits plus `max_nodes` nodes.
 *
 * Pure; any thread. The tree is one malloc'd block set, freed with
 * pprof_flame_free(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hashmap.h"
#include "pprof/internal.h"

#define NONE UINT32_MAX

struct builder {
    struct pprof_flame *f;
    struct hashmap children; /* parent << 32 | name -> node index + 1 */
    struct hashmap func_name; /* function id -> string index + 1 */
    struct hashmap loc;       /* location id -> Location * */
    struct hashmap func;      /* function id -> Function * */
    size_t max_nodes;
};

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
    void *nv;
    size_t nc;

    if (n < *cap)
        return 0;
    nc = *cap ? *cap * 2 : 64;
    if (!(nv = realloc(*v, nc * size)))
        return -ENOMEM;
    *v = nv;
    *cap = nc;
    return 0;
}

/* The child of `parent` named `name`, created if room is left; NONE when
 * the tree is full (the value then stays with the parent, as self). */
static int child(struct builder *b, uint32_t parent, uint32_t name, uint32_t *out)
{
    struct pprof_flame *f = b->f;
    uint64_t key = (uint64_t)parent << 32 | name;
    uintptr_t got = (uintptr_t)hashmap_get(&b->children, key);
    struct pprof_flame_node *n;

    if (got) {
        *out = (uint32_t)(got - 1);
        return 0;
    }
    if (f->n_nodes >= b->max_nodes) {
        f->truncated = true;
        *out = NONE;
        return 0;
    }
    if (grow((void **)&f->nodes, &f->cap_nodes, f->n_nodes, sizeof(*f->nodes)) < 0 ||
        hashmap_put(&b->children, key, (void *)(uintptr_t)(f->n_nodes + 1)) < 0)
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

/* A function's name as an index into f->names (a copy of the profile's
 * string, so the tree outlives the decode). */
static int name_of(struct builder *b, const Perftools__Profiles__Profile *p, uint64_t func_id,
                   uint32_t *out)
{
    struct pprof_flame *f = b->f;
    uintptr_t got = (uintptr_t)hashmap_get(&b->func_name, func_id);
    const char *s = "?";

    if (got) {
        *out = (uint32_t)(got - 1);
        return 0;
    }
    {
        const Perftools__Profiles__Function *fn = hashmap_get(&b->func, func_id);

        if (fn && fn->name >= 0 && (uint64_t)fn->name < p->n_string_table)
            s = p->string_table[fn->name];
    }
    if (grow((void **)&f->names, &f->cap_names, f->n_names, sizeof(*f->names)) < 0 ||
        !(f->names[f->n_names] = strdup(s)))
        return -ENOMEM;
    if (hashmap_put(&b->func_name, func_id, (void *)(uintptr_t)(f->n_names + 1)) < 0) {
        free(f->names[f->n_names]);
        return -ENOMEM;
    }
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

            if ((rc = name_of(b, p, loc->line[l]->function_id, &name)) < 0 ||
                (rc = child(b, at, name, &next)) < 0)
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

int pprof_flame_build(const uint8_t *in, size_t in_len, const struct pprof_limits *lim,
                      const char *sample_type, size_t max_nodes, struct pprof_flame **out,
                      char *err, size_t errlen)
{
    struct pprof__decoded dp = {0};
    struct builder b = {0};
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
        if (sample_type ? strcmp(f->types[i], sample_type) == 0 || strcmp(t, sample_type) == 0
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
    if ((rc = grow((void **)&f->nodes, &f->cap_nodes, 0, sizeof(*f->nodes))) < 0 ||
        (rc = grow((void **)&f->names, &f->cap_names, 0, sizeof(*f->names))) < 0 ||
        !(f->names[0] = strdup("total"))) {
        rc = -ENOMEM;
        goto done;
    }
    f->n_names = 1;
    f->nodes[0] = (struct pprof_flame_node){0, NONE, NONE, NONE, 0, 0};
    f->n_nodes = 1;
    for (size_t i = 0; col >= 0 && i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];

        if ((size_t)col < s->n_value && s->value[col] != 0 &&
            (rc = add_sample(&b, p, s, s->value[col])) < 0)
            goto done;
    }
    rc = 0;
done:
    hashmap_done(&b.children);
    hashmap_done(&b.func_name);
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
    for (size_t i = 0; i < f->n_names; i++)
        free(f->names[i]);
    free(f->types);
    free(f->names);
    free(f->nodes);
    free(f);
}
