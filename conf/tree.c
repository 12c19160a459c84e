/* SPDX-License-Identifier: Apache-2.0 */
/* The positioned YAML tree of one load: libyaml events become nodes that
 * keep their line and column, so every later check can name FILE:LINE:COL;
 * the normalised tree is emitted back as YAML for libcyaml (docs/design.md
 * "Configuration").
 *
 * Nodes live in an arena owned by the load (capped, freed in one go).
 * Single-threaded per load; no global state. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "conf/internal.h"

struct conf__block {
    struct conf__block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *conf_alloc(struct conf_load *ld, size_t n)
{
    struct conf__block *b = ld->arena;

    n = (n + 15) & ~(size_t)15;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;

        if (ld->arena_bytes + cap > CONF__MAX_ARENA || !(b = malloc(sizeof(*b) + cap))) {
            ld->oom = true;
            return NULL;
        }
        ld->arena_bytes += cap;
        b->next = ld->arena;
        b->used = 0;
        b->cap = cap;
        ld->arena = b;
    }
    b->used += n;
    return memset(b->data + b->used - n, 0, n);
}

void conf__arena_free(struct conf_load *ld)
{
    while (ld->arena) {
        struct conf__block *b = ld->arena;

        ld->arena = b->next;
        free(b);
    }
}

char *conf__strndup(struct conf_load *ld, const char *s, size_t len)
{
    char *p = conf_alloc(ld, len + 1);

    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

struct conf_node *conf__node_new(struct conf_load *ld, int type, const struct conf_node *at)
{
    struct conf_node *n = conf_alloc(ld, sizeof(*n));

    if (n) {
        n->type = (unsigned char)type;
        n->line = at ? at->line : 1;
        n->col = at ? at->col : 1;
        n->synth = true;
    }
    return n;
}

struct conf_node *conf_new_map(struct conf_load *ld, const struct conf_node *at)
{
    return conf__node_new(ld, CONF__MAP, at);
}

struct conf_node *conf_new_seq(struct conf_load *ld, const struct conf_node *at)
{
    return conf__node_new(ld, CONF__SEQ, at);
}

struct conf_node *conf_new_str(struct conf_load *ld, const char *s, const struct conf_node *at)
{
    struct conf_node *n = conf__node_new(ld, CONF__SCALAR, at);

    if (!n || conf__set_text(ld, n, s) < 0)
        return NULL;
    return n;
}

int conf__set_text(struct conf_load *ld, struct conf_node *n, const char *s)
{
    size_t len = strlen(s);

    if (!(n->s = conf__strndup(ld, s, len)))
        return conf_oom(ld);
    n->len = len;
    return 0;
}

int conf__kid_add(struct conf_load *ld, struct conf_node *p, struct conf_node *k)
{
    if (!k)
        return conf_oom(ld);
    if (p->n == p->cap) {
        unsigned cap = p->cap ? p->cap * 2 : 8;
        struct conf_node **v = conf_alloc(ld, cap * sizeof(*v));

        if (!v)
            return conf_oom(ld);
        if (p->n)
            memcpy(v, p->kids, p->n * sizeof(*v));
        p->kids = v;
        p->cap = cap;
    }
    p->kids[p->n++] = k;
    return 0;
}

int conf__pair_add(struct conf_load *ld, struct conf_node *map, struct conf_node *k,
                   struct conf_node *v)
{
    if (!k || !v)
        return conf_oom(ld);
    if (conf__kid_add(ld, map, k) < 0 || conf__kid_add(ld, map, v) < 0)
        return -ENOMEM;
    return 0;
}

int conf_append(struct conf_load *ld, struct conf_node *seq, struct conf_node *item)
{
    return conf__kid_add(ld, seq, item);
}

/* Index of the key `key` in a map, or -1. */
int conf__map_idx(const struct conf_node *m, const char *key)
{
    if (!m || m->type != CONF__MAP)
        return -1;
    for (unsigned i = 0; i + 1 < m->n; i += 2) {
        if (strcmp(m->kids[i]->s, key) == 0)
            return (int)i;
    }
    return -1;
}

struct conf_node *conf_get(const struct conf_node *m, const char *key)
{
    int i = conf__map_idx(m, key);

    return i < 0 ? NULL : m->kids[i + 1];
}

struct conf_node *conf_user_key(const struct conf_node *m, const char *key)
{
    int i = conf__map_idx(m, key);

    return i < 0 || m->kids[i + 1]->synth ? NULL : m->kids[i];
}

int conf_replace_value(struct conf_node *map, const char *key, struct conf_node *value)
{
    int i = conf__map_idx(map, key);

    if (i < 0)
        return -ENOENT;
    map->kids[i + 1] = value;
    return 0;
}

int conf_set_node(struct conf_load *ld, struct conf_node *map, const char *key,
                  struct conf_node *value)
{
    conf_del(map, key);
    return conf__pair_add(ld, map, conf_new_str(ld, key, map), value);
}

int conf_set(struct conf_load *ld, struct conf_node *map, const char *key, const char *value)
{
    return conf_set_node(ld, map, key, conf_new_str(ld, value, map));
}

void conf_del(struct conf_node *m, const char *key)
{
    int i = conf__map_idx(m, key);

    if (i < 0)
        return;
    memmove(&m->kids[i], &m->kids[i + 2], (m->n - (unsigned)i - 2) * sizeof(m->kids[0]));
    m->n -= 2;
}

const char *conf_str(const struct conf_node *n)
{
    return n && n->type == CONF__SCALAR ? n->s : "";
}

uint64_t conf_uint(const struct conf_node *n)
{
    return n && n->type == CONF__SCALAR ? strtoull(n->s, NULL, 10) : 0;
}

bool conf_true(const struct conf_node *n)
{
    return n && n->type == CONF__SCALAR && strcmp(n->s, "true") == 0;
}

bool conf_null(const struct conf_node *n)
{
    if (!n || n->type != CONF__SCALAR || !n->plain)
        return false;
    return n->len == 0 || strcmp(n->s, "~") == 0 || strcmp(n->s, "null") == 0 ||
           strcmp(n->s, "Null") == 0 || strcmp(n->s, "NULL") == 0;
}

bool conf_is_map(const struct conf_node *n)
{
    return n && n->type == CONF__MAP;
}

bool conf_is_seq(const struct conf_node *n)
{
    return n && n->type == CONF__SEQ;
}

size_t conf_len(const struct conf_node *n)
{
    return n && n->type != CONF__SCALAR ? n->n : 0;
}

struct conf_node *conf_at(const struct conf_node *n, size_t i)
{
    return n && n->type != CONF__SCALAR && i < n->n ? n->kids[i] : NULL;
}

unsigned conf_line(const struct conf_node *n)
{
    return n ? n->line : 0;
}

const char *conf_describe(const struct conf_node *n, char *b, size_t blen)
{
    if (n->type == CONF__MAP)
        return "a mapping";
    if (n->type == CONF__SEQ)
        return "a list";
    if (conf_null(n))
        return "null";
    snprintf(b, blen, "\"%.*s%s\"", n->len > 80 ? 80 : (int)n->len, n->s, n->len > 80 ? "..." : "");
    return b;
}

/* --- errors ------------------------------------------------------------ */

__attribute__((format(printf, 5, 0))) static void locate(const struct conf_load *ld,
                                                         const struct conf_node *at, char *out,
                                                         size_t outlen, const char *fmt, va_list ap)
{
    char msg[768];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (at)
        snprintf(out, outlen, "%s:%u:%u: %s", ld->name, at->line, at->col, msg);
    else
        snprintf(out, outlen, "%s: %s", ld->name, msg);
}

int conf_fail(struct conf_load *ld, const struct conf_node *at, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    locate(ld, at, ld->err, ld->errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

void conf_warn(struct conf_load *ld, const struct conf_node *at, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    if (ld->n_warnings == CONF__MAX_WARNINGS)
        return;
    va_start(ap, fmt);
    locate(ld, at, text, sizeof(text), fmt, ap);
    va_end(ap);
    ld->warnings[ld->n_warnings] = strdup(text);
    if (ld->warnings[ld->n_warnings])
        ld->n_warnings++;
}

int conf_oom(struct conf_load *ld)
{
    if (ld->arena_bytes + 65536 <= CONF__MAX_ARENA)
        snprintf(ld->err, ld->errlen, "%s: out of memory", ld->name);
    else if (ld->at_line)
        snprintf(ld->err, ld->errlen,
                 "%s:%u:%u: config too large: its parsed form passes %u MiB "
                 "here",
                 ld->name, ld->at_line, ld->at_col, CONF__MAX_ARENA >> 20);
    else
        snprintf(ld->err, ld->errlen, "%s: config too large: its parsed form passes %u MiB",
                 ld->name, CONF__MAX_ARENA >> 20);
    ld->oom = true;
    return -ENOMEM;
}

/* --- libyaml -> tree --------------------------------------------------- */

/* Line and column (in characters) of byte `off` of `text`. */
static void position_of(const char *text, size_t off, struct conf_node *at)
{
    at->line = 1;
    at->col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            at->line++;
            at->col = 1;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
            at->col++;
        }
    }
}

int conf__parse(struct conf_load *ld, const char *text, size_t len)
{
    yaml_parser_t p;
    yaml_event_t ev;
    struct conf_node *stk[CONF__MAX_DEPTH];
    int depth = 0, rc = 0;
    bool done = false, doc_seen = false;

    if (!yaml_parser_initialize(&p))
        return conf_oom(ld);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    while (!done && rc == 0) {
        struct conf_node *n = NULL, at;

        if (!yaml_parser_parse(&p, &ev)) {
            if (p.error == YAML_MEMORY_ERROR) {
                rc = conf_oom(ld);
                break;
            }
            at.line = (unsigned)p.problem_mark.line + 1;
            at.col = (unsigned)p.problem_mark.column + 1;
            if (p.error == YAML_READER_ERROR) {
                /* libyaml gives a reader error (bad UTF-8, a control
                 * character) as a byte offset, not a mark. */
                position_of(text, p.problem_offset < len ? p.problem_offset : len, &at);
                rc = conf_fail(ld, &at, "%s (byte 0x%02x)", p.problem ? p.problem : "bad input",
                               p.problem_offset < len ? (unsigned char)text[p.problem_offset] : 0);
                break;
            }
            rc = conf_fail(ld, &at, "YAML syntax error: %s%s%s", p.problem ? p.problem : "unknown",
                           p.context ? " " : "", p.context ? p.context : "");
            break;
        }
        at.line = (unsigned)ev.start_mark.line + 1;
        at.col = (unsigned)ev.start_mark.column + 1;
        ld->at_line = at.line;
        ld->at_col = at.col;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (doc_seen)
                rc = conf_fail(ld, &at, "only one YAML document is allowed");
            doc_seen = true;
            break;
        case YAML_ALIAS_EVENT:
            rc = conf_fail(ld, &at, "YAML aliases (*%s) are not supported", ev.data.alias.anchor);
            break;
        case YAML_SCALAR_EVENT:
            if (!(n = conf__node_new(ld, CONF__SCALAR, &at)) ||
                !(n->s = conf__strndup(ld, (const char *)ev.data.scalar.value,
                                       ev.data.scalar.length))) {
                rc = conf_oom(ld);
                break;
            }
            n->len = ev.data.scalar.length;
            n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (!(n = conf__node_new(
                      ld, ev.type == YAML_MAPPING_START_EVENT ? CONF__MAP : CONF__SEQ, &at)))
                rc = conf_oom(ld);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        default:
            break;
        }
        if (n && rc == 0) {
            n->synth = false;
            if (depth == 0) {
                ld->root = n;
            } else {
                struct conf_node *parent = stk[depth - 1];

                if (parent->type == CONF__MAP && parent->n % 2 == 0 && n->type != CONF__SCALAR)
                    rc = conf_fail(ld, n, "mapping keys must be plain strings");
                else if (conf__kid_add(ld, parent, n) < 0)
                    rc = -ENOMEM;
            }
            if (rc == 0 && n->type != CONF__SCALAR) {
                if (depth == CONF__MAX_DEPTH)
                    rc = conf_fail(ld, n, "nesting deeper than %d levels", CONF__MAX_DEPTH);
                else
                    stk[depth++] = n;
            }
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* --- tree -> YAML for libcyaml ----------------------------------------- */

static int emit_write(void *data, unsigned char *p, size_t n)
{
    return buf_append(data, p, n) == 0;
}

static int emit_node(yaml_emitter_t *em, const struct conf_node *n)
{
    yaml_event_t ev;

    if (n->type == CONF__SCALAR) {
        yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)n->s, (int)n->len, 1, 1,
                                     YAML_DOUBLE_QUOTED_SCALAR_STYLE);
        return yaml_emitter_emit(em, &ev) ? 0 : -1;
    }
    if (n->type == CONF__MAP)
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
    else
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
    if (!yaml_emitter_emit(em, &ev))
        return -1;
    for (unsigned i = 0; i < n->n; i++) {
        if (emit_node(em, n->kids[i]) < 0)
            return -1;
    }
    if (n->type == CONF__MAP)
        yaml_mapping_end_event_initialize(&ev);
    else
        yaml_sequence_end_event_initialize(&ev);
    return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

int conf__emit(struct conf_load *ld, struct buf *out)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    int rc = -1;

    if (!yaml_emitter_initialize(&em))
        return conf_oom(ld);
    yaml_emitter_set_output(&em, emit_write, out);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    if (!yaml_emitter_emit(&em, &ev))
        goto done;
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    if (!yaml_emitter_emit(&em, &ev) || emit_node(&em, ld->root) < 0)
        goto done;
    yaml_document_end_event_initialize(&ev, 1);
    if (!yaml_emitter_emit(&em, &ev))
        goto done;
    yaml_stream_end_event_initialize(&ev);
    if (!yaml_emitter_emit(&em, &ev) || !yaml_emitter_flush(&em))
        goto done;
    rc = 0;
done:
    if (rc < 0)
        rc = conf_fail(ld, NULL, "config too large after normalisation (%s)",
                       em.problem ? em.problem : "output cap");
    yaml_emitter_delete(&em);
    return rc;
}
