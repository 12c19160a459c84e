/* SPDX-License-Identifier: Apache-2.0 */
/* Profile builder and content-keyed reader for the pprof tests (tprof.h).
 * Single-threaded; everything a builder allocates is freed by tp_free(). */
#include "tprof.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

struct tprof {
    Perftools__Profiles__Profile p;
};

/* Appends, doubling the room at each power of two (at least 8), so that
 * profiles of tens of thousands of records build in linear time, also
 * under AddressSanitizer, whose realloc always copies. */
#define PUSH(arr, n, item)                                                \
    do {                                                                  \
        if ((n) == 0 || ((n) >= 8 && ((n) & ((n)-1)) == 0)) {             \
            (arr) = realloc((arr), ((n) ? 2 * (n) : 8) * sizeof(*(arr))); \
            if (!(arr))                                                   \
                abort();                                                  \
        }                                                                 \
        (arr)[(n)++] = (item);                                            \
    } while (0)

static void *zalloc(size_t n)
{
    void *p = calloc(1, n);

    if (!p)
        abort();
    return p;
}

uint64_t tp_str(struct tprof *tp, const char *s)
{
    Perftools__Profiles__Profile *p = &tp->p;
    char *dup;

    for (size_t i = 0; i < p->n_string_table; i++)
        if (strcmp(p->string_table[i], s) == 0)
            return i;
    dup = strdup(s);
    if (!dup)
        abort();
    PUSH(p->string_table, p->n_string_table, dup);
    return p->n_string_table - 1;
}

struct tprof *tp_new(const char *const *columns, size_t ncols)
{
    struct tprof *tp = zalloc(sizeof(*tp));

    perftools__profiles__profile__init(&tp->p);
    tp_str(tp, "");
    for (size_t i = 0; i < ncols; i++) {
        Perftools__Profiles__ValueType *vt = zalloc(sizeof(*vt));
        char buf[256];
        char *slash;

        perftools__profiles__value_type__init(vt);
        snprintf(buf, sizeof(buf), "%s", columns[i]);
        slash = strchr(buf, '/');
        *slash = '\0';
        vt->type = (int64_t)tp_str(tp, buf);
        vt->unit = (int64_t)tp_str(tp, slash + 1);
        PUSH(tp->p.sample_type, tp->p.n_sample_type, vt);
    }
    return tp;
}

void tp_free(struct tprof *tp)
{
    Perftools__Profiles__Profile *p;

    if (!tp)
        return;
    p = &tp->p;
    for (size_t i = 0; i < p->n_sample_type; i++)
        free(p->sample_type[i]);
    free(p->sample_type);
    for (size_t i = 0; i < p->n_sample; i++) {
        Perftools__Profiles__Sample *s = p->sample[i];
        free(s->location_id);
        free(s->value);
        for (size_t j = 0; j < s->n_label; j++)
            free(s->label[j]);
        free(s->label);
        free(s);
    }
    free(p->sample);
    for (size_t i = 0; i < p->n_mapping; i++)
        free(p->mapping[i]);
    free(p->mapping);
    for (size_t i = 0; i < p->n_location; i++) {
        for (size_t j = 0; j < p->location[i]->n_line; j++)
            free(p->location[i]->line[j]);
        free(p->location[i]->line);
        free(p->location[i]);
    }
    free(p->location);
    for (size_t i = 0; i < p->n_function; i++)
        free(p->function[i]);
    free(p->function);
    for (size_t i = 0; i < p->n_string_table; i++)
        free(p->string_table[i]);
    free(p->string_table);
    free(p->period_type);
    free(tp);
}

uint64_t tp_mapping(struct tprof *tp, uint64_t start, uint64_t limit, const char *file,
                    const char *build_id)
{
    Perftools__Profiles__Mapping *m = zalloc(sizeof(*m));

    perftools__profiles__mapping__init(m);
    m->id = tp->p.n_mapping + 1;
    m->memory_start = start;
    m->memory_limit = limit;
    m->filename = (int64_t)tp_str(tp, file);
    m->build_id = (int64_t)tp_str(tp, build_id);
    m->has_functions = 1;
    PUSH(tp->p.mapping, tp->p.n_mapping, m);
    return m->id;
}

uint64_t tp_func(struct tprof *tp, const char *name, const char *file)
{
    int64_t n = (int64_t)tp_str(tp, name), f = (int64_t)tp_str(tp, file);
    Perftools__Profiles__Function *fn;

    for (size_t i = 0; i < tp->p.n_function; i++)
        if (tp->p.function[i]->name == n && tp->p.function[i]->filename == f)
            return tp->p.function[i]->id;
    fn = zalloc(sizeof(*fn));
    perftools__profiles__function__init(fn);
    fn->id = tp->p.n_function + 1;
    fn->name = n;
    fn->system_name = n;
    fn->filename = f;
    PUSH(tp->p.function, tp->p.n_function, fn);
    return fn->id;
}

void tp_loc_add_line(struct tprof *tp, uint64_t loc_id, uint64_t func_id, int64_t line)
{
    Perftools__Profiles__Location *l = tp->p.location[loc_id - 1];
    Perftools__Profiles__Line *ln = zalloc(sizeof(*ln));

    perftools__profiles__line__init(ln);
    ln->function_id = func_id;
    ln->line = line;
    PUSH(l->line, l->n_line, ln);
}

uint64_t tp_loc(struct tprof *tp, uint64_t addr, uint64_t func_id, int64_t line)
{
    Perftools__Profiles__Location *l = zalloc(sizeof(*l));

    perftools__profiles__location__init(l);
    l->id = tp->p.n_location + 1;
    l->address = addr;
    l->mapping_id = tp->p.n_mapping ? 1 : 0;
    PUSH(tp->p.location, tp->p.n_location, l);
    if (func_id)
        tp_loc_add_line(tp, l->id, func_id, line);
    return l->id;
}

void tp_sample(struct tprof *tp, const uint64_t *locs, size_t nlocs, const int64_t *vals)
{
    Perftools__Profiles__Sample *s = zalloc(sizeof(*s));

    perftools__profiles__sample__init(s);
    s->n_location_id = nlocs;
    s->location_id = zalloc((nlocs ? nlocs : 1) * sizeof(uint64_t));
    memcpy(s->location_id, locs, nlocs * sizeof(uint64_t));
    s->n_value = tp->p.n_sample_type;
    s->value = zalloc((s->n_value ? s->n_value : 1) * sizeof(int64_t));
    memcpy(s->value, vals, s->n_value * sizeof(int64_t));
    PUSH(tp->p.sample, tp->p.n_sample, s);
}

static void add_label(struct tprof *tp, Perftools__Profiles__Label *lb)
{
    Perftools__Profiles__Sample *s = tp->p.sample[tp->p.n_sample - 1];

    PUSH(s->label, s->n_label, lb);
}

void tp_label_num(struct tprof *tp, const char *key, int64_t num, const char *unit)
{
    Perftools__Profiles__Label *lb = zalloc(sizeof(*lb));

    perftools__profiles__label__init(lb);
    lb->key = (int64_t)tp_str(tp, key);
    lb->num = num;
    lb->num_unit = unit ? (int64_t)tp_str(tp, unit) : 0;
    add_label(tp, lb);
}

void tp_label_str(struct tprof *tp, const char *key, const char *val)
{
    Perftools__Profiles__Label *lb = zalloc(sizeof(*lb));

    perftools__profiles__label__init(lb);
    lb->key = (int64_t)tp_str(tp, key);
    lb->str = (int64_t)tp_str(tp, val);
    add_label(tp, lb);
}

void tp_time(struct tprof *tp, int64_t time_nanos)
{
    tp->p.time_nanos = time_nanos;
    if (!tp->p.period_type) {
        tp->p.period_type = zalloc(sizeof(*tp->p.period_type));
        perftools__profiles__value_type__init(tp->p.period_type);
        tp->p.period_type->type = (int64_t)tp_str(tp, "space");
        tp->p.period_type->unit = (int64_t)tp_str(tp, "bytes");
        tp->p.period = 524288;
    }
}

Perftools__Profiles__Profile *tp_proto(struct tprof *tp)
{
    return &tp->p;
}

uint8_t *tp_pack(struct tprof *tp, size_t *len, bool gzip)
{
    size_t n = protobuf_c_message_get_packed_size(&tp->p.base);
    uint8_t *buf = malloc(n ? n : 1), *gz;
    size_t gz_len;

    if (!buf)
        abort();
    protobuf_c_message_pack(&tp->p.base, buf);
    *len = n;
    if (!gzip)
        return buf;
    if (pprof_compress(buf, n, PPROF_COMPRESS_FASTEST, &gz, &gz_len) < 0)
        abort();
    free(buf);
    *len = gz_len;
    return gz;
}

void tp_decode(const uint8_t *data, size_t len, struct pprof__decoded *out)
{
    struct pprof_limits lim;
    uint8_t *raw;
    size_t raw_len;
    char err[256];
    int rc;

    pprof_limits_default(&lim);
    ASSERT_EQ(pprof_gunzip(data, len, lim.max_decompressed, &raw, &raw_len), 0);
    rc = pprof__decode(raw, raw_len, &lim, out, err, sizeof(err));
    free(raw);
    if (rc < 0)
        test__fail(__FILE__, __LINE__, "decode failed: %s", err);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void tp_sample_key(const Perftools__Profiles__Profile *p, const Perftools__Profiles__Sample *s,
                   char *buf, size_t buflen)
{
    size_t off = 0;
    char *labels[64];
    size_t nl = s->n_label < 64 ? s->n_label : 64;

    buf[0] = '\0';
    for (size_t i = 0; i < s->n_location_id; i++) {
        const Perftools__Profiles__Location *l = NULL;
        for (size_t j = 0; j < p->n_location; j++)
            if (p->location[j]->id == s->location_id[i])
                l = p->location[j];
        if (!l) {
            off += (size_t)snprintf(buf + off, buflen - off, "?,");
        } else if (l->address) {
            off += (size_t)snprintf(buf + off, buflen - off, "%" PRIx64 ",", l->address);
        } else {
            for (size_t k = 0; k < l->n_line; k++) {
                const Perftools__Profiles__Function *fn = NULL;
                for (size_t j = 0; j < p->n_function; j++)
                    if (p->function[j]->id == l->line[k]->function_id)
                        fn = p->function[j];
                off += (size_t)snprintf(buf + off, buflen - off, "%s@%s:%" PRId64 ";",
                                        fn ? p->string_table[fn->name] : "?",
                                        fn ? p->string_table[fn->filename] : "?", l->line[k]->line);
            }
            off += (size_t)snprintf(buf + off, buflen - off, ",");
        }
        if (off >= buflen)
            return;
    }
    off += (size_t)snprintf(buf + off, buflen - off, "|");
    for (size_t i = 0; i < nl; i++) {
        const Perftools__Profiles__Label *lb = s->label[i];
        char tmp[512];
        snprintf(tmp, sizeof(tmp), "%s=%s#%" PRId64 "#%s", p->string_table[lb->key],
                 p->string_table[lb->str], lb->num, p->string_table[lb->num_unit]);
        labels[i] = strdup(tmp);
    }
    qsort(labels, nl, sizeof(char *), cmp_str);
    for (size_t i = 0; i < nl; i++) {
        if (off < buflen)
            off += (size_t)snprintf(buf + off, buflen - off, "%s;", labels[i]);
        free(labels[i]);
    }
}

const Perftools__Profiles__Sample *tp_find(const Perftools__Profiles__Profile *p, const char *key)
{
    char buf[4096];

    for (size_t i = 0; i < p->n_sample; i++) {
        tp_sample_key(p, p->sample[i], buf, sizeof(buf));
        if (strcmp(buf, key) == 0)
            return p->sample[i];
    }
    return NULL;
}

static void twb_reserve(struct twb *w, size_t n)
{
    if (w->len + n <= w->cap)
        return;
    while (w->len + n > w->cap)
        w->cap = w->cap ? w->cap * 2 : 256;
    w->data = realloc(w->data, w->cap);
    if (!w->data)
        abort();
}

void twb_varint(struct twb *w, uint64_t v)
{
    twb_reserve(w, 10);
    while (v >= 0x80) {
        w->data[w->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->data[w->len++] = (uint8_t)v;
}

void twb_uint(struct twb *w, uint32_t field, uint64_t v)
{
    twb_varint(w, (uint64_t)field << 3);
    twb_varint(w, v);
}

void twb_bytes(struct twb *w, uint32_t field, const void *data, size_t len)
{
    twb_varint(w, (uint64_t)field << 3 | 2);
    twb_varint(w, len);
    twb_reserve(w, len);
    if (len)
        memcpy(w->data + w->len, data, len);
    w->len += len;
}

void twb_free(struct twb *w)
{
    free(w->data);
    memset(w, 0, sizeof(*w));
}
