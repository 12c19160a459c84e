/* SPDX-License-Identifier: Apache-2.0 */
/* Loading a document (docs/design.md "Configuration"): parse into the
 * positioned tree (tree.c), check and normalise it (walk.c), let libcyaml
 * load it, then run each section's `finish` hook. The document is reference
 * counted.
 *
 * Any thread, one load per call; a document is immutable once loaded, so
 * references may be shared, but counting them is not atomic: the loop
 * thread owns every reference. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/internal.h"

struct conf_doc {
    unsigned refs;
    const struct conf_schema *schema;
    void *data;
    char *name;
    char *warnings[CONF__MAX_WARNINGS];
    size_t n_warnings;
};

static const cyaml_schema_field_t kv_fields[] = {
    CYAML_FIELD_STRING_PTR(".key", CYAML_FLAG_OPTIONAL, struct conf_kv, key, 0, CYAML_UNLIMITED),
    CYAML_FIELD_STRING_PTR(".value", CYAML_FLAG_OPTIONAL, struct conf_kv, value, 0,
                           CYAML_UNLIMITED),
    CYAML_FIELD_END,
};
const cyaml_schema_value_t conf_kv_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct conf_kv, kv_fields),
};
const cyaml_schema_value_t conf_string_entry = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};
static const cyaml_schema_field_t param_fields[] = {
    CYAML_FIELD_STRING_PTR(".key", CYAML_FLAG_OPTIONAL, struct conf_param, key, 0, CYAML_UNLIMITED),
    CYAML_FIELD_SEQUENCE_COUNT(".values", CYAML_FLAG_OPTIONAL | CYAML_FLAG_POINTER,
                               struct conf_param, values, n_values, &conf_string_entry, 0,
                               CYAML_UNLIMITED),
    CYAML_FIELD_END,
};
const cyaml_schema_value_t conf_param_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct conf_param, param_fields),
};

/* --- walking loaded data beside its nodes ------------------------------ */

/* What to do at every mapping that has a section: run `finish` (with its
 * node) or `release`. */
struct visit {
    struct conf_load *ld; /* NULL when releasing */
    const struct conf_schema *schema;
};

static int visit_value(const struct visit *vi, const cyaml_schema_value_t *v, void *data,
                       unsigned count, const struct conf_node *n);

static uint64_t read_count(const void *base, const cyaml_schema_field_t *f)
{
    const unsigned char *p = (const unsigned char *)base + f->count_offset;

    switch (f->count_size) {
    case 1:
        return *(const uint8_t *)p;
    case 2:
        return *(const uint16_t *)p;
    case 4:
        return *(const uint32_t *)p;
    default:
        return *(const uint64_t *)p;
    }
}

static int visit_mapping(const struct visit *vi, const cyaml_schema_value_t *v, void *obj,
                         const struct conf_node *n)
{
    const struct conf_section *sec = conf__section(vi->schema, v->mapping.fields);
    int rc;

    for (const cyaml_schema_field_t *f = v->mapping.fields; f->key; f++) {
        const struct conf_node *kid = n ? conf_get(n, f->key) : NULL;
        void *data = (unsigned char *)obj + f->data_offset;
        unsigned count = 1;

        if (f->value.type != CYAML_MAPPING && f->value.type != CYAML_SEQUENCE)
            continue;
        if (vi->ld && !kid)
            continue; /* absent: nothing was loaded */
        if (f->value.type == CYAML_SEQUENCE)
            count = (unsigned)read_count(obj, f);
        if ((rc = visit_value(vi, &f->value, data, count, kid)) < 0)
            return rc;
    }
    if (!sec)
        return 0;
    if (vi->ld)
        return sec->finish ? sec->finish(vi->ld, n, obj) : 0;
    if (sec->release)
        sec->release(obj);
    return 0;
}

static int visit_value(const struct visit *vi, const cyaml_schema_value_t *v, void *data,
                       unsigned count, const struct conf_node *n)
{
    int rc;

    if (v->flags & CYAML_FLAG_POINTER) {
        data = *(void **)data;
        if (!data)
            return 0;
    }
    if (v->type == CYAML_MAPPING)
        return visit_mapping(vi, v, data, n);
    if (v->type != CYAML_SEQUENCE)
        return 0;
    for (unsigned i = 0; i < count; i++) {
        const cyaml_schema_value_t *e = v->sequence.entry;
        void *item = (unsigned char *)data + (size_t)i * e->data_size;

        if (e->flags & CYAML_FLAG_POINTER)
            item = (unsigned char *)data + (size_t)i * sizeof(void *);
        if ((rc = visit_value(vi, e, item, 1, n ? conf_at(n, i) : NULL)) < 0)
            return rc;
    }
    return 0;
}

/* --- documents --------------------------------------------------------- */

static void *cy_mem(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, size);
}

__attribute__((format(printf, 3, 0))) static void cy_log(cyaml_log_t level, void *ctx,
                                                         const char *fmt, va_list args)
{
    struct conf_load *ld = ctx;

    if (ld && level >= CYAML_LOG_ERROR && ld->cymsg[0] == '\0')
        vsnprintf(ld->cymsg, sizeof(ld->cymsg), fmt, args);
}

static void doc_free(struct conf_doc *d)
{
    cyaml_config_t cc = { .mem_fn = cy_mem, .log_fn = cy_log, .log_level = CYAML_LOG_ERROR };
    struct visit vi = { .schema = d->schema };

    if (d->data) {
        void *top = d->data;

        visit_value(&vi, d->schema->top, &top, 1, NULL);
        cyaml_free(&cc, d->schema->top, d->data, 0);
    }
    for (size_t i = 0; i < d->n_warnings; i++)
        free(d->warnings[i]);
    free(d->name);
    free(d);
}

struct conf_doc *conf_doc_ref(struct conf_doc *d)
{
    if (d)
        d->refs++;
    return d;
}

void conf_doc_unref(struct conf_doc *d)
{
    if (d && --d->refs == 0)
        doc_free(d);
}

struct conf_doc *conf_doc_unref_last(struct conf_doc *d)
{
    if (!d || d->refs == 1)
        return d;
    d->refs--;
    return NULL;
}

void *conf_doc_data(const struct conf_doc *d)
{
    return d->data;
}

const char *conf_doc_name(const struct conf_doc *d)
{
    return d->name;
}

const char *conf_doc_warning(const struct conf_doc *d, size_t i)
{
    return i < d->n_warnings ? d->warnings[i] : NULL;
}

/* The document is the value of the envelope key when that key is the only
 * one at the top (Helm values wrap a configuration this way). */
static int unwrap(struct conf_load *ld)
{
    const char *env = ld->schema->envelope;
    struct conf_node *in;

    if (!env || !conf_is_map(ld->root) || !(in = conf_get(ld->root, env)))
        return 0;
    if (ld->root->n != 2) {
        struct conf_node *other = ld->root->kids[strcmp(ld->root->kids[0]->s, env) ? 0 : 2];

        return conf_fail(ld, other,
                         "%s must be the only top-level key, but \"%.80s\" is also "
                         "given",
                         env, other->s);
    }
    ld->root = conf_null(in) ? conf_new_map(ld, in) : in;
    return ld->root ? 0 : conf_oom(ld);
}

int conf_load_string(const struct conf_schema *schema, const char *text, size_t len,
                     const char *name, unsigned flags, struct conf_doc **out, char *err,
                     size_t errlen)
{
    static char dummy[1];
    struct conf_load ld = { .schema = schema,
                            .name = name ? name : "<config>",
                            .flags = flags,
                            .err = err ? err : dummy,
                            .errlen = err ? errlen : sizeof(dummy) };
    cyaml_config_t cc = { .log_fn = cy_log,
                          .log_ctx = &ld,
                          .mem_fn = cy_mem,
                          .log_level = CYAML_LOG_ERROR,
                          .flags = CYAML_CFG_DEFAULT };
    struct visit vi = { .ld = &ld, .schema = schema };
    struct conf_doc *d;
    struct buf emitted;
    cyaml_err_t ce;
    void *top;
    int rc;

    *out = NULL;
    if (ld.errlen)
        ld.err[0] = '\0';
    if (!(d = calloc(1, sizeof(*d))) || !(d->name = strdup(ld.name))) {
        free(d);
        snprintf(ld.err, ld.errlen, "%s: out of memory", ld.name);
        return -ENOMEM;
    }
    d->refs = 1;
    d->schema = schema;
    buf_init(&emitted, CONF__MAX_EMIT);
    if (len > CONF_MAX_FILE) {
        rc = conf_fail(&ld, NULL, "config larger than %u MiB", CONF_MAX_FILE >> 20);
        goto done;
    }
    if ((rc = conf__parse(&ld, text ? text : "", text ? len : 0)) < 0)
        goto done;
    if (!ld.root || conf_null(ld.root)) {
        if (!(ld.root = conf_new_map(&ld, NULL))) {
            rc = conf_oom(&ld);
            goto done;
        }
    }
    if ((rc = unwrap(&ld)) < 0 || (rc = conf__walk(&ld, &ld.root, schema->top)) < 0)
        goto done;
    if (ld.env_seen)
        conf_warn(&ld, NULL,
                  "values contain \"${\" but environment expansion is off; they are "
                  "read literally (start proflet with --config.expand-env to expand them)");
    if ((rc = conf__emit(&ld, &emitted)) < 0)
        goto done;
    ce = cyaml_load_data((const uint8_t *)emitted.data, emitted.len, &cc, schema->top,
                         (cyaml_data_t **)&d->data, NULL);
    if (ce != CYAML_OK) {
        d->data = NULL;
        rc = ce == CYAML_ERR_OOM ? conf_oom(&ld)
                                 : conf_fail(&ld, NULL, "internal error loading config: %s %s",
                                             cyaml_strerror(ce), ld.cymsg);
        goto done;
    }
    top = d->data;
    if ((rc = visit_value(&vi, schema->top, &top, 1, ld.root)) < 0)
        goto done;
    rc = 0;
done:
    if (ld.oom && rc == 0)
        rc = conf_oom(&ld);
    for (size_t i = 0; i < ld.n_warnings; i++)
        d->warnings[i] = ld.warnings[i];
    d->n_warnings = ld.n_warnings;
    if (rc == 0)
        *out = d;
    else
        conf_doc_unref(d);
    buf_done(&emitted);
    conf__arena_free(&ld);
    return rc;
}

int conf_load_file(const struct conf_schema *schema, const char *path, unsigned flags,
                   struct conf_doc **out, char *err, size_t errlen)
{
    struct buf b;
    char chunk[65536];
    struct stat st;
    int fd, rc = 0;
    ssize_t n;

    *out = NULL;
    buf_init(&b, CONF_MAX_FILE);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    /* Refuse an oversized file before reading it, not after. */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > CONF_MAX_FILE) {
        rc = -E2BIG;
        snprintf(err, errlen, "%s: config file larger than %u MiB", path, CONF_MAX_FILE >> 20);
        goto done;
    }
    while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
            goto done;
        }
        if ((rc = buf_append(&b, chunk, (size_t)n)) < 0) {
            if (rc == -E2BIG)
                snprintf(err, errlen, "%s: config file larger than %u MiB", path,
                         CONF_MAX_FILE >> 20);
            else
                snprintf(err, errlen, "%s: out of memory", path);
            goto done;
        }
    }
    rc = conf_load_string(schema, b.data ? b.data : "", b.len, path, flags, out, err, errlen);
done:
    if (fd >= 0)
        close(fd);
    buf_done(&b);
    return rc;
}

/* --- signatures -------------------------------------------------------- */

static void sig_value(const cyaml_schema_value_t *v, const void *data, unsigned count,
                      struct buf *out);

static void sig_scalar(const cyaml_schema_value_t *v, const void *data, struct buf *out)
{
    uint64_t u = 0;

    switch (v->type) {
    case CYAML_STRING: {
        const char *s = (v->flags & CYAML_FLAG_POINTER) ? *(char *const *)data : data;

        if (s)
            buf_printf(out, "s%zu:%s;", strlen(s), s);
        else
            buf_puts(out, "s-;");
        return;
    }
    case CYAML_MAPPING:
    case CYAML_SEQUENCE:
    case CYAML_IGNORE:
        return;
    default:
        memcpy(&u, data, v->data_size < sizeof(u) ? v->data_size : sizeof(u));
        buf_printf(out, "n%" PRIu64 ";", u);
    }
}

static void sig_value(const cyaml_schema_value_t *v, const void *data, unsigned count,
                      struct buf *out)
{
    if (v->type == CYAML_STRING) {
        sig_scalar(v, data, out);
        return;
    }
    if (v->flags & CYAML_FLAG_POINTER) {
        data = *(void *const *)data;
        if (!data) {
            buf_puts(out, "-;");
            return;
        }
    }
    if (v->type == CYAML_MAPPING) {
        buf_puts(out, "{");
        for (const cyaml_schema_field_t *f = v->mapping.fields; f->key; f++) {
            const void *fd = (const unsigned char *)data + f->data_offset;

            buf_printf(out, "%s=", f->key);
            sig_value(&f->value, fd,
                      f->value.type == CYAML_SEQUENCE ? (unsigned)read_count(data, f) : 1, out);
        }
        buf_puts(out, "}");
    } else if (v->type == CYAML_SEQUENCE) {
        const cyaml_schema_value_t *e = v->sequence.entry;
        size_t step = (e->flags & CYAML_FLAG_POINTER) ? sizeof(void *) : e->data_size;

        buf_printf(out, "[%u:", count);
        for (unsigned i = 0; i < count; i++)
            sig_value(e, (const unsigned char *)data + (size_t)i * step, 1, out);
        buf_puts(out, "]");
    } else {
        sig_scalar(v, data, out);
    }
}

void conf_signature(const cyaml_schema_value_t *v, const void *data, struct buf *out)
{
    sig_value(v, data, 1, out);
}

/* --- dumps ------------------------------------------------------------- */

static void dump_str(struct buf *out, const char *s)
{
    buf_puts(out, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            buf_printf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            buf_printf(out, "\\x%02x", c);
        else
            buf_append(out, s, 1);
    }
    buf_puts(out, "\"");
}

/* Whether `v` at `data` holds anything worth printing. */
static bool dump_present(const cyaml_schema_value_t *v, const void *data, unsigned count)
{
    if (v->type == CYAML_SEQUENCE)
        return count > 0;
    if ((v->flags & CYAML_FLAG_POINTER) || v->type == CYAML_STRING)
        return *(void *const *)data != NULL || !(v->flags & CYAML_FLAG_POINTER);
    return true;
}

static void dump_value(const cyaml_schema_value_t *v, const void *data, unsigned count, int indent,
                       bool secret, bool (*is_secret)(const char *key), struct buf *out);

static void dump_scalar(const cyaml_schema_value_t *v, const void *data, bool secret,
                        struct buf *out)
{
    uint64_t u = 0;
    int64_t i = 0;

    if (secret) {
        buf_puts(out, "<secret>");
        return;
    }
    switch (v->type) {
    case CYAML_STRING: {
        const char *s = (v->flags & CYAML_FLAG_POINTER) ? *(char *const *)data : data;

        dump_str(out, s ? s : "");
        return;
    }
    case CYAML_BOOL:
        buf_puts(out, *(const bool *)data ? "true" : "false");
        return;
    case CYAML_INT:
        memcpy(&i, data, v->data_size < sizeof(i) ? v->data_size : sizeof(i));
        if (v->data_size < sizeof(i) && (i >> (8 * v->data_size - 1)) & 1)
            i |= -((int64_t)1 << (8 * v->data_size));
        buf_printf(out, "%" PRId64, i);
        return;
    case CYAML_ENUM:
        memcpy(&u, data, v->data_size < sizeof(u) ? v->data_size : sizeof(u));
        if (u < v->enumeration.count)
            dump_str(out, v->enumeration.strings[u].str);
        else
            buf_printf(out, "%" PRIu64, u);
        return;
    default:
        memcpy(&u, data, v->data_size < sizeof(u) ? v->data_size : sizeof(u));
        buf_printf(out, "%" PRIu64, u);
    }
}

static void dump_value(const cyaml_schema_value_t *v, const void *data, unsigned count, int indent,
                       bool secret, bool (*is_secret)(const char *key), struct buf *out)
{
    if (v->type != CYAML_STRING && (v->flags & CYAML_FLAG_POINTER)) {
        data = *(void *const *)data;
        if (!data) {
            buf_puts(out, " null\n");
            return;
        }
    }
    if (v->type == CYAML_MAPPING) {
        buf_puts(out, "\n");
        for (const cyaml_schema_field_t *f = v->mapping.fields; f->key; f++) {
            const void *fd = (const unsigned char *)data + f->data_offset;
            unsigned n = f->value.type == CYAML_SEQUENCE ? (unsigned)read_count(data, f) : 1;

            if (f->value.type == CYAML_IGNORE || !dump_present(&f->value, fd, n))
                continue;
            /* derived keys (".name") are shown under their plain name */
            buf_printf(out, "%*s%s:", indent, "", f->key[0] == '.' ? f->key + 1 : f->key);
            dump_value(&f->value, fd, n, indent + 2, secret || is_secret(f->key), is_secret, out);
        }
    } else if (v->type == CYAML_SEQUENCE) {
        const cyaml_schema_value_t *e = v->sequence.entry;
        size_t step = (e->flags & CYAML_FLAG_POINTER) ? sizeof(void *) : e->data_size;

        buf_puts(out, "\n");
        for (unsigned k = 0; k < count; k++) {
            buf_printf(out, "%*s-", indent, "");
            dump_value(e, (const unsigned char *)data + (size_t)k * step, 1, indent + 2, secret,
                       is_secret, out);
        }
    } else {
        buf_puts(out, " ");
        dump_scalar(v, data, secret, out);
        buf_puts(out, "\n");
    }
}

void conf_dump(const cyaml_schema_value_t *v, const void *data, bool (*is_secret)(const char *key),
               struct buf *out)
{
    cyaml_schema_value_t top = *v;

    top.flags &= ~CYAML_FLAG_POINTER; /* `data` is the object itself */
    dump_value(&top, data, 1, 0, false, is_secret, out);
}
