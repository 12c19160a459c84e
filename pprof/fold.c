/* SPDX-License-Identifier: Apache-2.0 */
/* Folding profiles into stacks of function names: the merge behind the web
 * UI's time ranges and diffs, its flame graphs (flame.c), its top table,
 * its collapsed-stack and merged pprof downloads.
 *
 * A fold interns every function name once (cut to PPROF_FLAME_NAME_MAX
 * bytes) and every distinct stack of names once, root first, each stack
 * with the sum of its samples' values per sample type and side; so
 * summing profiles is summing per stack, and what `go tool pprof` reports
 * per function after merging the same profiles (flat, cum) is what
 * pprof_fold_functions() reports. Both indexes are keyed by a 64-bit hash
 * and probe on, comparing contents, so two stacks that share a hash stay
 * apart. Everything a fold holds is counted by capacity in `bytes`, and a
 * fold refuses to grow past its `max_bytes` (docs/design.md "Threads": a
 * merge is a job whose cost is its decode plus that cap).
 *
 * Pure; one thread at a time. The fold owns its blocks; the profiles it is
 * given are borrowed for the call. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/array.h"
#include "common/buf.h"
#include "pprof/internal.h"

/* Frames kept of one sample (its locations with their inlined lines); a
 * deeper stack keeps its root-most frames, its value on the last kept. */
#define FOLD_MAX_FRAMES 16384
/* Sample types of a profile a fold takes. */
#define FOLD_MAX_TYPES 64
/* What a hashmap slot costs, with the table at most 70% full and doubling. */
#define SLOT_BYTES 48

struct pprof_fold *pprof_fold_new(int sides, size_t max_bytes)
{
    struct pprof_fold *fd;

    if (sides < 1 || sides > PPROF_FOLD_SIDES || !(fd = calloc(1, sizeof(*fd))))
        return NULL;
    /* Never NULL, so that an empty stack (a sample without locations) has
     * frames to point at. */
    if (!(fd->frames = array_grow(NULL, &fd->cap_frames, 0, sizeof(*fd->frames), 256))) {
        free(fd);
        return NULL;
    }
    fd->sides = sides;
    fd->max_bytes = max_bytes;
    fd->default_type = -1;
    hashmap_init(&fd->name_index);
    hashmap_init(&fd->stack_index);
    fd->bytes = sizeof(*fd);
    return fd;
}

void pprof_fold_free(struct pprof_fold *fd)
{
    if (!fd)
        return;
    for (size_t i = 0; i < fd->n_types; i++)
        free(fd->types[i]);
    free(fd->types);
    free(fd->period_type);
    free(fd->name_data);
    free(fd->name_off);
    hashmap_done(&fd->name_index);
    free(fd->frames);
    free(fd->stacks);
    free(fd->values);
    hashmap_done(&fd->stack_index);
    free(fd);
}

static void account(struct pprof_fold *fd)
{
    size_t b = sizeof(*fd);

    for (size_t i = 0; i < fd->n_types; i++)
        b += strlen(fd->types[i]) + 1 + sizeof(char *);
    b += fd->name_cap + fd->cap_names * sizeof(*fd->name_off);
    b += fd->cap_frames * sizeof(*fd->frames) + fd->cap_stacks * sizeof(*fd->stacks);
    b += fd->cap_stacks * (size_t)fd->sides * fd->n_types * sizeof(*fd->values);
    b += (fd->n_names + fd->n_stacks) * SLOT_BYTES;
    fd->bytes = b;
}

static int over(struct pprof_fold *fd, char *err, size_t errlen)
{
    account(fd);
    if (fd->max_bytes && fd->bytes > fd->max_bytes)
        return pprof__err(err, errlen, PPROF_ETOOLARGE,
                          "profile too large: merging needs more than %zu MiB (%zu stacks, %zu "
                          "functions so far)",
                          fd->max_bytes >> 20, fd->n_stacks, fd->n_names);
    return 0;
}

/* ------------------------------------------------------------------ names */

const char *pprof_fold_name(const struct pprof_fold *fd, size_t i)
{
    return i < fd->n_names ? fd->name_data + fd->name_off[i] : NULL;
}

/* The length `s` is kept at: whole, or cut at a character boundary so that
 * it and U+2026 fit in PPROF_FLAME_NAME_MAX bytes (*cut set). */
static size_t kept_len(const char *s, size_t len, bool *cut)
{
    size_t keep;

    *cut = len > PPROF_FLAME_NAME_MAX;
    if (!*cut)
        return len;
    keep = PPROF_FLAME_NAME_MAX - 3;
    while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
        keep--;
    return keep;
}

/* The index of the name `s` (its first `len` bytes), looked up as it is
 * kept (cut), added when new. */
static int intern(struct pprof_fold *fd, const char *s, size_t len, uint32_t *out)
{
    static const char ell[] = "\xe2\x80\xa6";
    bool cut;
    size_t keep = kept_len(s, len, &cut), need = keep + (cut ? 3 : 0) + 1;
    char tmp[PPROF_FLAME_NAME_MAX + 1];
    uint64_t h;
    uintptr_t got;

    memcpy(tmp, s, keep);
    if (cut)
        memcpy(tmp + keep, ell, 3);
    tmp[need - 1] = '\0';
    h = XXH3_64bits(tmp, need - 1);
    while ((got = (uintptr_t)hashmap_get(&fd->name_index, h)) != 0) {
        if (strcmp(fd->name_data + fd->name_off[got - 1], tmp) == 0) {
            *out = (uint32_t)(got - 1);
            return 0;
        }
        h++;
    }
    if (fd->n_names >= UINT32_MAX - 1)
        return PPROF_ETOOLARGE;
    if (fd->name_len + need > fd->name_cap) {
        size_t nc = fd->name_cap ? fd->name_cap : 4096;
        char *nd;

        while (nc < fd->name_len + need)
            nc *= 2;
        if (!(nd = realloc(fd->name_data, nc)))
            return -ENOMEM;
        fd->name_data = nd;
        fd->name_cap = nc;
    }
    {
        uint32_t *no = array_grow(fd->name_off, &fd->cap_names, fd->n_names, sizeof(*no), 256);

        if (!no)
            return -ENOMEM;
        fd->name_off = no;
    }
    memcpy(fd->name_data + fd->name_len, tmp, need);
    fd->name_off[fd->n_names] = (uint32_t)fd->name_len;
    if (hashmap_put(&fd->name_index, h, (void *)(uintptr_t)(fd->n_names + 1)) < 0)
        return -ENOMEM;
    fd->name_len += need;
    *out = (uint32_t)fd->n_names++;
    return 0;
}

long pprof_fold_find_name(const struct pprof_fold *fd, const char *name)
{
    uint64_t h = XXH3_64bits(name, strlen(name));
    uintptr_t got;

    while ((got = (uintptr_t)hashmap_get(&fd->name_index, h)) != 0) {
        if (strcmp(fd->name_data + fd->name_off[got - 1], name) == 0)
            return (long)(got - 1);
        h++;
    }
    return -1;
}

/* ----------------------------------------------------------------- stacks */

/* Sums wrap instead of overflowing: a hostile profile's values are its
 * business, not undefined behaviour. */
static void wrap_add(int64_t *to, int64_t v)
{
    *to = (int64_t)((uint64_t)*to + (uint64_t)v);
}

static int add_stack(struct pprof_fold *fd, const uint32_t *fr, size_t len, int side,
                     const int64_t *v)
{
    uint64_t h = XXH3_64bits(fr, len * sizeof(*fr));
    uintptr_t got;
    size_t i;
    int64_t *to;

    while ((got = (uintptr_t)hashmap_get(&fd->stack_index, h)) != 0) {
        const struct pprof__fold_stack *s = &fd->stacks[got - 1];

        if (s->len == len && memcmp(fd->frames + s->off, fr, len * sizeof(*fr)) == 0)
            break;
        h++;
    }
    if (got) {
        i = got - 1;
    } else {
        size_t oldcap = fd->cap_stacks, row = (size_t)fd->sides * fd->n_types;
        struct pprof__fold_stack *st;

        if (fd->n_frames + len > UINT32_MAX || fd->n_stacks >= UINT32_MAX - 1)
            return PPROF_ETOOLARGE;
        while (fd->n_frames + len > fd->cap_frames) {
            uint32_t *nf =
                array_grow(fd->frames, &fd->cap_frames, fd->n_frames + len - 1, sizeof(*nf), 4096);

            if (!nf)
                return -ENOMEM;
            fd->frames = nf;
        }
        if (!(st = array_grow(fd->stacks, &fd->cap_stacks, fd->n_stacks, sizeof(*st), 256)))
            return -ENOMEM;
        fd->stacks = st;
        if (fd->cap_stacks != oldcap) {
            int64_t *nv;

            size_t cells = fd->cap_stacks * row;

            if (!(nv = realloc(fd->values, (cells ? cells : 1) * sizeof(*nv)))) {
                /* Keep the arrays' capacities in step. */
                fd->cap_stacks = oldcap;
                return -ENOMEM;
            }
            fd->values = nv;
        }
        i = fd->n_stacks;
        memcpy(fd->frames + fd->n_frames, fr, len * sizeof(*fr));
        fd->stacks[i] = (struct pprof__fold_stack){ (uint32_t)fd->n_frames, (uint32_t)len };
        memset(fd->values + i * row, 0, row * sizeof(*fd->values));
        if (hashmap_put(&fd->stack_index, h, (void *)(uintptr_t)(i + 1)) < 0)
            return -ENOMEM;
        fd->n_frames += len;
        fd->n_stacks++;
    }
    to = pprof__fold_values(fd, i, side);
    for (size_t t = 0; t < fd->n_types; t++)
        wrap_add(&to[t], v[t]);
    return 0;
}

/* ------------------------------------------------------------------- add */

/* The sample types of `p` as "type/unit" strings, malloc'd. */
static char **types_of(const Perftools__Profiles__Profile *p)
{
    char **t = calloc(p->n_sample_type ? p->n_sample_type : 1, sizeof(*t));

    for (size_t i = 0; t && i < p->n_sample_type; i++) {
        const char *a = p->string_table[p->sample_type[i]->type];
        const char *b = p->string_table[p->sample_type[i]->unit];
        size_t n = strlen(a) + strlen(b) + 2;

        if (!(t[i] = malloc(n))) {
            for (size_t j = 0; j < i; j++)
                free(t[j]);
            free(t);
            return NULL;
        }
        snprintf(t[i], n, "%s/%s", a, b);
    }
    return t;
}

static void free_types(char **t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        free(t[i]);
    free(t);
}

/* Sets the fold's sample types from its first profile, or checks that `p`
 * has the same ones. */
static int check_types(struct pprof_fold *fd, const Perftools__Profiles__Profile *p, char *err,
                       size_t errlen)
{
    char **t;
    int rc = 0;

    if (p->n_sample_type > FOLD_MAX_TYPES)
        return pprof__err(err, errlen, PPROF_ETOOLARGE,
                          "profile too large: %zu sample types > cap %d", p->n_sample_type,
                          FOLD_MAX_TYPES);
    if (!(t = types_of(p)))
        return -ENOMEM;
    if (fd->profiles[0] + fd->profiles[1] == 0) {
        fd->types = t;
        fd->n_types = p->n_sample_type;
        fd->default_type = (int)p->n_sample_type - 1;
        for (size_t i = 0; p->default_sample_type && i < p->n_sample_type; i++)
            if (p->sample_type[i]->type == p->default_sample_type)
                fd->default_type = (int)i;
        if (p->period_type) {
            const char *a = p->string_table[p->period_type->type];
            const char *b = p->string_table[p->period_type->unit];
            size_t n = strlen(a) + strlen(b) + 2;

            if ((fd->period_type = malloc(n)) != NULL)
                snprintf(fd->period_type, n, "%s/%s", a, b);
        }
        fd->period = p->period;
        return 0;
    }
    if (p->n_sample_type != fd->n_types) {
        rc = pprof__err(err, errlen, PPROF_EMISMATCH, "other sample types: %zu of them, not %zu",
                        p->n_sample_type, fd->n_types);
    } else {
        for (size_t i = 0; i < fd->n_types && rc == 0; i++)
            if (strcmp(t[i], fd->types[i]) != 0)
                rc = pprof__err(err, errlen, PPROF_EMISMATCH,
                                "other sample types: %.64s where the others have %.64s", t[i],
                                fd->types[i]);
    }
    free_types(t, p->n_sample_type);
    return rc;
}

/* A location's frames, root first (its last line is the caller of the
 * others), as name indices in `lf`: `off` and `n` per location index. */
struct loc_frames {
    uint32_t *v;
    size_t n, cap;
};

static int location_frames(struct pprof_fold *fd, const Perftools__Profiles__Profile *p,
                           const struct hashmap *funcs, const Perftools__Profiles__Location *loc,
                           struct loc_frames *lf)
{
    size_t need = loc->n_line ? loc->n_line : 1;

    while (lf->n + need > lf->cap) {
        uint32_t *nv = array_grow(lf->v, &lf->cap, lf->n + need - 1, sizeof(*nv), 1024);

        if (!nv)
            return -ENOMEM;
        lf->v = nv;
    }
    if (!loc->n_line) { /* unsymbolized: its address, as pprof shows it */
        char a[24];
        int n = snprintf(a, sizeof(a), "0x%" PRIx64, loc->address);

        return intern(fd, a, (size_t)n, &lf->v[lf->n++]);
    }
    for (size_t l = loc->n_line; l-- > 0;) {
        const Perftools__Profiles__Function *fn =
            loc->line[l]->function_id ? hashmap_get(funcs, loc->line[l]->function_id) : NULL;
        const char *name = fn ? p->string_table[fn->name] : "?";
        int rc = intern(fd, name, strlen(name), &lf->v[lf->n++]);

        if (rc < 0)
            return rc;
    }
    return 0;
}

static int fold_profile(struct pprof_fold *fd, int side, const Perftools__Profiles__Profile *p,
                        char *err, size_t errlen)
{
    struct hashmap funcs, locs; /* id -> Function *, id -> location index + 1 */
    struct loc_frames lf = { 0 };
    size_t *loc_off = NULL, *loc_n = NULL;
    uint32_t *stack = NULL;
    int rc = 0;

    hashmap_init(&funcs);
    hashmap_init(&locs);
    if (!(loc_off = malloc((p->n_location + 1) * sizeof(*loc_off))) ||
        !(loc_n = malloc((p->n_location + 1) * sizeof(*loc_n))) ||
        !(stack = malloc(FOLD_MAX_FRAMES * sizeof(*stack)))) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < p->n_function && rc == 0; i++)
        rc = hashmap_put(&funcs, p->function[i]->id, p->function[i]);
    for (size_t i = 0; i < p->n_location && rc == 0; i++) {
        loc_off[i] = lf.n;
        rc = location_frames(fd, p, &funcs, p->location[i], &lf);
        loc_n[i] = lf.n - loc_off[i];
        if (rc == 0)
            rc = hashmap_put(&locs, p->location[i]->id, (void *)(uintptr_t)(i + 1));
    }
    if (rc < 0 || (rc = over(fd, err, errlen)) < 0)
        goto out;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        size_t n = 0;
        bool zero = true;

        for (size_t t = 0; t < s->n_value; t++)
            zero = zero && s->value[t] == 0;
        if (zero)
            continue;
        for (size_t j = s->n_location_id; j-- > 0 && n < FOLD_MAX_FRAMES;) {
            size_t li = (uintptr_t)hashmap_get(&locs, s->location_id[j]) - 1;
            size_t k = loc_n[li] < FOLD_MAX_FRAMES - n ? loc_n[li] : FOLD_MAX_FRAMES - n;

            memcpy(stack + n, lf.v + loc_off[li], k * sizeof(*stack));
            n += k;
        }
        if ((rc = add_stack(fd, stack, n, side, s->value)) < 0)
            goto out;
        if ((i & 1023) == 0 && (rc = over(fd, err, errlen)) < 0)
            goto out;
    }
    rc = over(fd, err, errlen);
out:
    if (rc == -ENOMEM || rc == PPROF_ETOOLARGE) {
        if (rc == -ENOMEM)
            pprof__err(err, errlen, rc, "out of memory");
        else if (!err || !err[0])
            pprof__err(err, errlen, rc, "profile too large for a merge");
    }
    hashmap_done(&funcs);
    hashmap_done(&locs);
    free(lf.v);
    free(loc_off);
    free(loc_n);
    free(stack);
    return rc;
}

int pprof_fold_add(struct pprof_fold *fd, int side, const uint8_t *in, size_t in_len,
                   const struct pprof_limits *lim, char *err, size_t errlen)
{
    struct pprof__decoded dp = { 0 };
    const Perftools__Profiles__Profile *p;
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if (side < 0 || side >= fd->sides)
        return pprof__err(err, errlen, -EINVAL, "no side %d", side);
    if ((rc = pprof_gunzip(in, in_len, lim->max_decompressed, &raw, &raw_len)) < 0)
        return pprof__err(err, errlen, rc, "gunzip: %s", pprof_strerror(rc));
    rc = pprof__decode(raw, raw_len, lim, &dp, err, errlen);
    free(raw);
    if (rc < 0)
        return rc;
    p = dp.prof;
    if ((rc = check_types(fd, p, err, errlen)) == 0 &&
        (rc = fold_profile(fd, side, p, err, errlen)) == 0) {
        fd->profiles[side]++;
        wrap_add(&fd->duration_nanos[side], p->duration_nanos);
        if (p->time_nanos && (!fd->time_nanos || p->time_nanos < fd->time_nanos))
            fd->time_nanos = p->time_nanos;
    }
    pprof__decoded_done(&dp);
    return rc;
}

/* ------------------------------------------------------------------ reads */

void pprof_fold_info(const struct pprof_fold *fd, struct pprof_fold_info *out)
{
    memset(out, 0, sizeof(*out));
    out->n_types = fd->n_types;
    out->default_type = fd->default_type;
    for (int s = 0; s < PPROF_FOLD_SIDES; s++) {
        out->profiles[s] = fd->profiles[s];
        out->duration_nanos[s] = fd->duration_nanos[s];
    }
    out->stacks = fd->n_stacks;
    out->names = fd->n_names;
    out->bytes = fd->bytes;
}

const char *pprof_fold_type(const struct pprof_fold *fd, size_t i)
{
    return i < fd->n_types ? fd->types[i] : NULL;
}

int pprof_fold_find_type(const struct pprof_fold *fd, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < fd->n_types; i++)
        if (strcmp(fd->types[i], name) == 0 ||
            (strncmp(fd->types[i], name, n) == 0 && fd->types[i][n] == '/'))
            return (int)i;
    return -1;
}

int pprof_fold_functions(const struct pprof_fold *fd, int type, struct pprof_fold_fn **out,
                         size_t *n)
{
    struct pprof_fold_fn *fn;
    uint32_t *seen; /* the stack a name was last counted for, + 1 */

    *out = NULL;
    *n = 0;
    if (type < 0 || (size_t)type >= fd->n_types)
        return -EINVAL;
    fn = calloc(fd->n_names ? fd->n_names : 1, sizeof(*fn));
    seen = calloc(fd->n_names ? fd->n_names : 1, sizeof(*seen));
    if (!fn || !seen) {
        free(fn);
        free(seen);
        return -ENOMEM;
    }
    for (size_t i = 0; i < fd->n_names; i++)
        fn[i].name = (uint32_t)i;
    for (size_t i = 0; i < fd->n_stacks; i++) {
        const struct pprof__fold_stack *s = &fd->stacks[i];
        const uint32_t *fr = fd->frames + s->off;

        for (int side = 0; side < fd->sides; side++) {
            int64_t v = pprof__fold_values(fd, i, side)[type];
            uint32_t stamp = (uint32_t)(i * (size_t)fd->sides + (size_t)side + 1);

            if (v == 0 || s->len == 0)
                continue;
            wrap_add(&fn[fr[s->len - 1]].self[side], v);
            for (size_t k = 0; k < s->len; k++) {
                if (seen[fr[k]] == stamp)
                    continue; /* recursion: once per sample */
                seen[fr[k]] = stamp;
                wrap_add(&fn[fr[k]].total[side], v);
            }
        }
    }
    free(seen);
    *out = fn;
    *n = fd->n_names;
    return 0;
}

/* A name in collapsed form: ';' (the separator) and control characters
 * become '_'. */
static int collapsed_name(struct buf *out, const char *s)
{
    size_t n = strlen(s);
    size_t at = out->len;
    int rc = buf_append(out, s, n);

    for (size_t i = 0; rc == 0 && i < n; i++) {
        unsigned char c = (unsigned char)out->data[at + i];

        if (c == ';' || c < 0x20 || c == 0x7f)
            out->data[at + i] = '_';
    }
    return rc;
}

int pprof_fold_collapsed(const struct pprof_fold *fd, int type, int side, size_t *pos,
                         struct buf *out, size_t chunk)
{
    int rc = 0;

    if (type < 0 || (size_t)type >= fd->n_types || side < 0 || side >= fd->sides)
        return -EINVAL;
    for (; *pos < fd->n_stacks; ++*pos) {
        const struct pprof__fold_stack *s = &fd->stacks[*pos];
        int64_t v = pprof__fold_values(fd, *pos, side)[type];

        if (out->len >= chunk)
            return 1;
        if (v == 0)
            continue;
        for (size_t k = 0; k < s->len && rc == 0; k++) {
            if (k)
                rc = buf_append(out, ";", 1);
            if (rc == 0)
                rc = collapsed_name(out, pprof_fold_name(fd, fd->frames[s->off + k]));
        }
        if (rc == 0 && s->len == 0)
            rc = buf_puts(out, "?");
        if (rc == 0)
            rc = buf_printf(out, " %" PRId64 "\n", v);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- encode */

/* The string table of an encoded fold: "", the types' halves, the names. */
struct strtab {
    char **v;
    size_t n;
};

static int64_t put_str(struct strtab *t, char *s)
{
    t->v[t->n] = s;
    return (int64_t)t->n++;
}

int pprof_fold_encode(const struct pprof_fold *fd, int side, enum pprof_compression c,
                      uint8_t **out, size_t *out_len)
{
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    Perftools__Profiles__ValueType *vt = NULL, **vtp = NULL,
                                   period = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    Perftools__Profiles__Function *fns = NULL, **fnp = NULL;
    Perftools__Profiles__Location *locs = NULL, **locp = NULL;
    Perftools__Profiles__Line *lines = NULL, **linep = NULL;
    Perftools__Profiles__Sample *smp = NULL, **smpp = NULL;
    struct strtab st = { 0 };
    char *typebuf = NULL, *periodbuf = NULL;
    uint64_t *ids = NULL;
    int64_t *vals = NULL;
    uint8_t *raw = NULL;
    size_t nsmp = 0, raw_len, ntypes = fd->n_types;
    int rc = -ENOMEM;

    *out = NULL;
    *out_len = 0;
    if (side < 0 || side >= fd->sides)
        return -EINVAL;
    for (size_t i = 0; i < fd->n_stacks; i++) {
        const int64_t *v = pprof__fold_values(fd, i, side);
        bool zero = true;

        for (size_t t = 0; t < ntypes; t++)
            zero = zero && v[t] == 0;
        nsmp += !zero;
    }
    st.v = calloc(1 + 2 * ntypes + 2 + fd->n_names, sizeof(*st.v));
    vt = calloc(ntypes + 1, sizeof(*vt));
    vtp = calloc(ntypes + 1, sizeof(*vtp));
    fns = calloc(fd->n_names + 1, sizeof(*fns));
    fnp = calloc(fd->n_names + 1, sizeof(*fnp));
    locs = calloc(fd->n_names + 1, sizeof(*locs));
    locp = calloc(fd->n_names + 1, sizeof(*locp));
    lines = calloc(fd->n_names + 1, sizeof(*lines));
    linep = calloc(fd->n_names + 1, sizeof(*linep));
    smp = calloc(nsmp + 1, sizeof(*smp));
    smpp = calloc(nsmp + 1, sizeof(*smpp));
    ids = malloc((fd->n_frames + 1) * sizeof(*ids));
    vals = malloc((nsmp * ntypes + 1) * sizeof(*vals));
    if (!st.v || !vt || !vtp || !fns || !fnp || !locs || !locp || !lines || !linep || !smp ||
        !smpp || !ids || !vals)
        goto out;
    /* The types' strings, split at their last '/' in one copy. */
    {
        size_t tl = 0;

        for (size_t t = 0; t < ntypes; t++)
            tl += strlen(fd->types[t]) + 1;
        if (!(typebuf = malloc(tl + 1)))
            goto out;
    }
    put_str(&st, "");
    {
        char *w = typebuf;

        for (size_t t = 0; t < ntypes; t++) {
            char *slash;

            strcpy(w, fd->types[t]);
            slash = strrchr(w, '/');
            perftools__profiles__value_type__init(&vt[t]);
            if (slash)
                *slash = '\0';
            vt[t].type = put_str(&st, w);
            vt[t].unit = put_str(&st, slash ? slash + 1 : w + strlen(w));
            vtp[t] = &vt[t];
            w += strlen(fd->types[t]) + 1;
        }
    }
    if (fd->period_type) {
        char *slash;

        if (!(periodbuf = strdup(fd->period_type)))
            goto out;
        slash = strrchr(periodbuf, '/');
        if (slash)
            *slash = '\0';
        period.type = put_str(&st, periodbuf);
        period.unit = put_str(&st, slash ? slash + 1 : periodbuf + strlen(periodbuf));
        p.period_type = &period;
    }
    for (size_t i = 0; i < fd->n_names; i++) {
        perftools__profiles__function__init(&fns[i]);
        fns[i].id = i + 1;
        fns[i].name = fns[i].system_name = put_str(&st, (char *)pprof_fold_name(fd, i));
        fnp[i] = &fns[i];
        perftools__profiles__line__init(&lines[i]);
        lines[i].function_id = i + 1;
        linep[i] = &lines[i];
        perftools__profiles__location__init(&locs[i]);
        locs[i].id = i + 1;
        locs[i].address = i + 1; /* distinct, as readers that key by address expect */
        locs[i].n_line = 1;
        locs[i].line = &linep[i];
        locp[i] = &locs[i];
    }
    nsmp = 0;
    for (size_t i = 0; i < fd->n_stacks; i++) {
        const struct pprof__fold_stack *s = &fd->stacks[i];
        const int64_t *v = pprof__fold_values(fd, i, side);
        bool zero = true;

        for (size_t t = 0; t < ntypes; t++)
            zero = zero && v[t] == 0;
        if (zero)
            continue;
        perftools__profiles__sample__init(&smp[nsmp]);
        for (size_t k = 0; k < s->len; k++) /* leaf first */
            ids[s->off + k] = (uint64_t)fd->frames[s->off + s->len - 1 - k] + 1;
        smp[nsmp].location_id = ids + s->off;
        smp[nsmp].n_location_id = s->len;
        memcpy(vals + nsmp * ntypes, v, ntypes * sizeof(*vals));
        smp[nsmp].value = vals + nsmp * ntypes;
        smp[nsmp].n_value = ntypes;
        smpp[nsmp] = &smp[nsmp];
        nsmp++;
    }
    p.sample_type = vtp;
    p.n_sample_type = ntypes;
    p.sample = smpp;
    p.n_sample = nsmp;
    p.location = locp;
    p.n_location = fd->n_names;
    p.function = fnp;
    p.n_function = fd->n_names;
    p.string_table = st.v;
    p.n_string_table = st.n;
    p.time_nanos = fd->time_nanos;
    p.duration_nanos = fd->duration_nanos[side];
    p.period = fd->period;
    if (fd->default_type >= 0 && (size_t)fd->default_type < ntypes)
        p.default_sample_type = vt[fd->default_type].type;
    raw_len = perftools__profiles__profile__get_packed_size(&p);
    if (!(raw = malloc(raw_len ? raw_len : 1)))
        goto out;
    perftools__profiles__profile__pack(&p, raw);
    if (c != PPROF_COMPRESS_NONE) {
        rc = pprof_compress(raw, raw_len, c, out, out_len);
    } else {
        *out = raw;
        *out_len = raw_len;
        raw = NULL;
        rc = 0;
    }
out:
    free(raw);
    free(st.v);
    free(vt);
    free(vtp);
    free(fns);
    free(fnp);
    free(locs);
    free(locp);
    free(lines);
    free(linep);
    free(smp);
    free(smpp);
    free(ids);
    free(vals);
    free(typebuf);
    free(periodbuf);
    return rc;
}
