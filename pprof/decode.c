/* SPDX-License-Identifier: Apache-2.0 */
/* Full pprof decoding with protobuf-c, for validation and tests
 * (docs/design.md "Modules").
 *
 * The hot path (pprof_delta_process) never builds protobuf-c structs; it
 * scans the wire format directly (delta.c). This file is the slow, simple
 * and independent decoder: protobuf-c unpacks into an arena (a
 * ProtobufCAllocator that bumps a pointer through a few large chunks and
 * frees nothing until the end), so one profile costs a handful of mallocs,
 * and the arena refuses to grow past a cap derived from the input size.
 * Count caps are checked on the wire before unpacking, and every cross
 * reference is checked after it, so a profile that passes is safe to walk.
 *
 * Also here: the limits defaults, error strings and the id map shared with
 * delta.c.
 *
 * Threading: no shared state. Ownership: decoded profiles own their arena. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "pprof/internal.h"

/* protobuf-c structs take at most this many bytes per input byte (an empty
 * Sample is 2 bytes on the wire and about 72 bytes unpacked). */
#define ARENA_BYTES_PER_INPUT_BYTE 48
#define ARENA_SLACK (1u << 20)
#define ARENA_ALIGN 16

void pprof_limits_default(struct pprof_limits *l)
{
    l->max_decompressed = PPROF_DEFAULT_MAX_DECOMPRESSED;
    l->max_samples = PPROF_DEFAULT_MAX_SAMPLES;
    l->max_locations = PPROF_DEFAULT_MAX_LOCATIONS;
    l->max_functions = PPROF_DEFAULT_MAX_FUNCTIONS;
    l->max_strings = PPROF_DEFAULT_MAX_STRINGS;
    l->max_labels = PPROF_DEFAULT_MAX_LABELS;
    l->max_stack_depth = PPROF_DEFAULT_MAX_STACK_DEPTH;
    l->compression = PPROF_DEFAULT_COMPRESSION;
    l->max_memory = 0;
}

const char *pprof_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
    case PPROF_ECORRUPT:
        return "malformed profile";
    case PPROF_ETOOLARGE:
        return "profile too large";
    case PPROF_EFILTER:
        return "filter drops every sample type";
    case PPROF_EOVERBUDGET:
        return "over the job's memory grant";
    case PPROF_EMISMATCH:
        return "other sample types";
    case -ENOMEM:
        return "out of memory";
    case -EINVAL:
        return "invalid argument";
    default:
        return "unknown error";
    }
}

int pprof__err(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- id map ---- */

int pprof__idmap_init(struct pprof__idmap *m, const uint64_t *ids, size_t n, int scratch)
{
    uint64_t max_id = 0;
    size_t slots = 16;

    memset(m, 0, sizeof(*m));
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == 0)
            return -EINVAL;
        if (ids[i] > max_id)
            max_id = ids[i];
    }
    if (n >= UINT32_MAX)
        return -EINVAL;
    if (max_id <= 2 * (uint64_t)n + 1024) {
        m->dense_len = (size_t)max_id + 1;
        m->dense_scratch = scratch >= 0;
        if (!m->dense_scratch && !pprof__acct_charge(m->dense_len * sizeof(*m->dense)))
            return -ENOMEM;
        m->dense = m->dense_scratch
                       ? pprof__scratch((unsigned)scratch, m->dense_len * sizeof(*m->dense), false)
                       : malloc(m->dense_len * sizeof(*m->dense));
        if (!m->dense)
            return -ENOMEM;
        memset(m->dense, 0xff, m->dense_len * sizeof(*m->dense));
        for (size_t i = 0; i < n; i++) {
            if (m->dense[ids[i]] != UINT32_MAX)
                return -EEXIST;
            m->dense[ids[i]] = (uint32_t)i;
        }
        return 0;
    }
    while (slots < 2 * n)
        slots *= 2;
    if (!pprof__acct_charge(slots * (sizeof(*m->keys) + sizeof(*m->vals))))
        return -ENOMEM;
    m->keys = calloc(slots, sizeof(*m->keys));
    m->vals = malloc(slots * sizeof(*m->vals));
    if (!m->keys || !m->vals)
        return -ENOMEM;
    m->mask = slots - 1;
    for (size_t i = 0; i < n; i++) {
        size_t s = (ids[i] * 0x9E3779B97F4A7C15ULL) >> 20 & m->mask;
        while (m->keys[s] != 0) {
            if (m->keys[s] == ids[i])
                return -EEXIST;
            s = (s + 1) & m->mask;
        }
        m->keys[s] = ids[i];
        m->vals[s] = (uint32_t)i;
    }
    return 0;
}

void pprof__idmap_done(struct pprof__idmap *m)
{
    if (!m)
        return;
    if (!m->dense_scratch)
        free(m->dense);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

/* ---- arena ---- */

struct arena_chunk {
    struct arena_chunk *next;
    size_t size, used;
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

struct pprof__arena {
    ProtobufCAllocator pc; /* first: protobuf-c gets &arena->pc */
    struct arena_chunk *chunks;
    size_t next_chunk, total, cap, handed_out, n_chunks;
};

static void *arena_alloc(void *ud, size_t size)
{
    struct pprof__arena *a = ud;
    struct arena_chunk *c = a->chunks;
    size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);

    if (need < size)
        return NULL;
    if (!c || c->size - c->used < need) {
        size_t sz = a->next_chunk > need ? a->next_chunk : need;

        if (sz > a->cap - a->total || a->total > a->cap)
            return NULL;
        c = malloc(sizeof(*c) + sz);
        if (!c)
            return NULL;
        c->size = sz;
        c->used = 0;
        c->next = a->chunks;
        a->chunks = c;
        a->total += sz;
        a->n_chunks++;
        a->next_chunk *= 2;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->handed_out += need;
    return p;
}

static void arena_free(void *ud, void *p)
{
    /* Everything goes at once in arena_destroy(). */
}

static void arena_destroy(struct pprof__arena *a)
{
    if (!a)
        return;
    for (struct arena_chunk *c = a->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
}

static struct pprof__arena *arena_new(size_t input_len)
{
    struct pprof__arena *a = calloc(1, sizeof(*a));

    if (!a)
        return NULL;
    a->pc.alloc = arena_alloc;
    a->pc.free = arena_free;
    a->pc.allocator_data = a;
    a->cap = input_len > (SIZE_MAX - ARENA_SLACK) / ARENA_BYTES_PER_INPUT_BYTE
                 ? SIZE_MAX
                 : input_len * ARENA_BYTES_PER_INPUT_BYTE + ARENA_SLACK;
    /* Go profiles unpack to 4-10x their size: start at 4x, then double. */
    a->next_chunk = input_len * 4 + 4096;
    return a;
}

size_t pprof__decoded_arena_bytes(const struct pprof__decoded *dp)
{
    return dp && dp->arena ? dp->arena->handed_out : 0;
}

size_t pprof__decoded_arena_chunks(const struct pprof__decoded *dp)
{
    return dp && dp->arena ? dp->arena->n_chunks : 0;
}

void pprof__decoded_done(struct pprof__decoded *dp)
{
    if (!dp)
        return;
    /* The profile lives inside the arena: nothing to unpack-free. */
    arena_destroy(dp->arena);
    dp->arena = NULL;
    dp->prof = NULL;
}

/* ---- decode and validate ---- */

/* Counts the repeated top-level messages on the wire so that caps are
 * enforced before protobuf-c allocates anything. */
static int precount(const uint8_t *raw, size_t len, const struct pprof_limits *lim, char *err,
                    size_t errlen)
{
    const uint8_t *p = raw, *end = raw + len;
    size_t n[7] = { 0 };
    struct pprof__field f;
    int r;

    while ((r = pprof__next_field(&p, end, &f)) > 0)
        if (f.num < 7)
            n[f.num]++;
    if (r < 0)
        return pprof__err(err, errlen, PPROF_ECORRUPT, "malformed profile: bad protobuf encoding");
    if (n[2] > lim->max_samples)
        return pprof__err(err, errlen, PPROF_ETOOLARGE, "profile too large: %zu samples > cap %zu",
                          n[2], lim->max_samples);
    if (n[4] > lim->max_locations)
        return pprof__err(err, errlen, PPROF_ETOOLARGE,
                          "profile too large: %zu locations > cap %zu", n[4], lim->max_locations);
    if (n[5] > lim->max_functions)
        return pprof__err(err, errlen, PPROF_ETOOLARGE,
                          "profile too large: %zu functions > cap %zu", n[5], lim->max_functions);
    if (n[6] > lim->max_strings)
        return pprof__err(err, errlen, PPROF_ETOOLARGE, "profile too large: %zu strings > cap %zu",
                          n[6], lim->max_strings);
    return 0;
}

#define STR_OK(i) ((i) >= 0 && (uint64_t)(i) < n_str)

static int validate(const Perftools__Profiles__Profile *p, const struct pprof_limits *lim,
                    char *err, size_t errlen)
{
    struct pprof__idmap locs = { 0 }, funcs = { 0 }, maps = { 0 };
    uint64_t *ids = NULL;
    size_t n_str = p->n_string_table, most;
    int rc = PPROF_ECORRUPT;

    if (n_str == 0 || p->string_table[0][0] != '\0')
        return pprof__err(err, errlen, PPROF_ECORRUPT,
                          "malformed profile: string_table[0] must be empty");
    for (size_t i = 0; i < p->n_sample_type; i++)
        if (!STR_OK(p->sample_type[i]->type) || !STR_OK(p->sample_type[i]->unit))
            return pprof__err(err, errlen, rc, "malformed profile: bad sample_type string");
    if (p->period_type && (!STR_OK(p->period_type->type) || !STR_OK(p->period_type->unit)))
        return pprof__err(err, errlen, rc, "malformed profile: bad period_type string");
    for (size_t i = 0; i < p->n_comment; i++)
        if (!STR_OK(p->comment[i]))
            return pprof__err(err, errlen, rc, "malformed profile: bad comment string");
    if (!STR_OK(p->drop_frames) || !STR_OK(p->keep_frames) || !STR_OK(p->default_sample_type) ||
        !STR_OK(p->doc_url))
        return pprof__err(err, errlen, rc, "malformed profile: bad string index");

    most = p->n_location > p->n_function ? p->n_location : p->n_function;
    most = most > p->n_mapping ? most : p->n_mapping;
    ids = malloc((most ? most : 1) * sizeof(*ids));
    if (!ids)
        return -ENOMEM;

    for (size_t i = 0; i < p->n_mapping; i++) {
        const Perftools__Profiles__Mapping *m = p->mapping[i];
        if (!STR_OK(m->filename) || !STR_OK(m->build_id)) {
            pprof__err(err, errlen, rc, "malformed profile: bad mapping string");
            goto out;
        }
        ids[i] = m->id;
    }
    if ((rc = pprof__idmap_init(&maps, ids, p->n_mapping, -1)) < 0) {
        rc = rc == -ENOMEM ? rc
                           : pprof__err(err, errlen, PPROF_ECORRUPT,
                                        "malformed profile: mapping id 0 or repeated");
        goto out;
    }
    for (size_t i = 0; i < p->n_function; i++) {
        const Perftools__Profiles__Function *fn = p->function[i];
        if (!STR_OK(fn->name) || !STR_OK(fn->system_name) || !STR_OK(fn->filename)) {
            rc = pprof__err(err, errlen, PPROF_ECORRUPT, "malformed profile: bad function string");
            goto out;
        }
        ids[i] = fn->id;
    }
    if ((rc = pprof__idmap_init(&funcs, ids, p->n_function, -1)) < 0) {
        rc = rc == -ENOMEM ? rc
                           : pprof__err(err, errlen, PPROF_ECORRUPT,
                                        "malformed profile: function id 0 or repeated");
        goto out;
    }
    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *l = p->location[i];
        if (l->mapping_id && pprof__idmap_get(&maps, l->mapping_id) == UINT32_MAX) {
            rc = pprof__err(err, errlen, PPROF_ECORRUPT,
                            "malformed profile: location %" PRIu64 " has unknown mapping %" PRIu64,
                            l->id, l->mapping_id);
            goto out;
        }
        for (size_t j = 0; j < l->n_line; j++) {
            uint64_t fid = l->line[j]->function_id;
            if (fid && pprof__idmap_get(&funcs, fid) == UINT32_MAX) {
                rc = pprof__err(err, errlen, PPROF_ECORRUPT,
                                "malformed profile: unknown function id %" PRIu64, fid);
                goto out;
            }
        }
        ids[i] = l->id;
    }
    if ((rc = pprof__idmap_init(&locs, ids, p->n_location, -1)) < 0) {
        rc = rc == -ENOMEM ? rc
                           : pprof__err(err, errlen, PPROF_ECORRUPT,
                                        "malformed profile: location id 0 or repeated");
        goto out;
    }
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        if (s->n_location_id > lim->max_stack_depth) {
            rc = pprof__err(err, errlen, PPROF_ETOOLARGE,
                            "profile too large: %zu locations in one sample > cap %zu",
                            s->n_location_id, lim->max_stack_depth);
            goto out;
        }
        if (s->n_label > lim->max_labels) {
            rc = pprof__err(err, errlen, PPROF_ETOOLARGE,
                            "profile too large: %zu labels in one sample > cap %zu", s->n_label,
                            lim->max_labels);
            goto out;
        }
        if (s->n_value != p->n_sample_type) {
            rc = pprof__err(err, errlen, PPROF_ECORRUPT,
                            "malformed profile: sample has %zu values for %zu sample types",
                            s->n_value, p->n_sample_type);
            goto out;
        }
        for (size_t j = 0; j < s->n_location_id; j++) {
            if (pprof__idmap_get(&locs, s->location_id[j]) == UINT32_MAX) {
                rc = pprof__err(err, errlen, PPROF_ECORRUPT,
                                "malformed profile: sample references unknown location %" PRIu64,
                                s->location_id[j]);
                goto out;
            }
        }
        for (size_t j = 0; j < s->n_label; j++) {
            const Perftools__Profiles__Label *lb = s->label[j];
            if (!STR_OK(lb->key) || !STR_OK(lb->str) || !STR_OK(lb->num_unit)) {
                rc = pprof__err(err, errlen, PPROF_ECORRUPT, "malformed profile: bad label string");
                goto out;
            }
        }
    }
    rc = 0;
out:
    pprof__idmap_done(&locs);
    pprof__idmap_done(&funcs);
    pprof__idmap_done(&maps);
    free(ids);
    return rc;
}

int pprof__decode(const uint8_t *raw, size_t len, const struct pprof_limits *lim,
                  struct pprof__decoded *out, char *err, size_t errlen)
{
    struct pprof__arena *a;
    int rc;

    out->prof = NULL;
    out->arena = NULL;
    if ((rc = precount(raw, len, lim, err, errlen)) < 0)
        return rc;
    a = arena_new(len);
    if (!a)
        return -ENOMEM;
    out->arena = a;
    out->prof = (Perftools__Profiles__Profile *)protobuf_c_message_unpack(
        &perftools__profiles__profile__descriptor, &a->pc, len, raw);
    if (!out->prof) {
        pprof__decoded_done(out);
        return pprof__err(err, errlen, PPROF_ECORRUPT,
                          "malformed profile: protobuf decoding failed");
    }
    if ((rc = validate(out->prof, lim, err, errlen)) < 0) {
        pprof__decoded_done(out);
        return rc;
    }
    return 0;
}

int pprof_validate(const uint8_t *in, size_t in_len, const struct pprof_limits *lim, char *err,
                   size_t errlen)
{
    struct pprof__decoded dp;
    uint8_t *raw;
    size_t raw_len;
    int rc;

    rc = pprof_gunzip(in, in_len, lim->max_decompressed, &raw, &raw_len);
    if (rc == PPROF_ETOOLARGE)
        return pprof__err(err, errlen, rc, "profile too large: decompressed size > cap %zu bytes",
                          lim->max_decompressed);
    if (rc < 0)
        return pprof__err(err, errlen, rc, "%s: gunzip failed", pprof_strerror(rc));
    rc = pprof__decode(raw, raw_len, lim, &dp, err, errlen);
    free(raw);
    pprof__decoded_done(&dp);
    return rc;
}
