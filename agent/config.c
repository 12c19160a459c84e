/* Configuration loader: YAML text -> immutable struct cfg.
 *
 * Three passes, so that every error can name FILE:LINE:COL:
 *
 *  1. libyaml parses the text into a small positioned node tree (arena
 *     allocated, freed in one go). Syntax errors carry libyaml's mark.
 *  2. The tree is walked against the libcyaml schema of config_schema.c:
 *     keys are normalised (snake_case -> kebab-case, aliases), unknown or
 *     doubled keys, wrong shapes, bad scalars and missing keys are reported
 *     at their node; `${VAR}` is expanded in scalar values; durations and
 *     sizes become integers; defaults are inserted; user maps (labels,
 *     headers, params, profiles) become sequences of entries; profile types
 *     are resolved; cross-field rules are checked.
 *  3. The normalised tree is emitted as YAML and libcyaml loads it straight
 *     into the structs of agent/config.h with malloc/realloc, so cfg_free()
 *     owns every byte. Relabel rules are then compiled once to validate them.
 *
 * Pure library: no logging, no global state besides getenv(). Any thread,
 * one load per call. The returned tree is owned by the caller and never
 * modified afterwards. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cyaml/cyaml.h>
#include <yaml.h>

#include "agent/config.h"
#include "agent/config_int.h"
#include "common/buf.h"
#include "common/duration.h"

#define CFG_MAX_FILE (16u << 20)    /* config text */
#define CFG_MAX_ARENA (256u << 20)  /* parse tree */
#define CFG_MAX_EMIT (64u << 20)    /* normalised text handed to libcyaml */
#define CFG_MAX_DEPTH 64
#define CFG_MAX_MAP 65536           /* entries of one user map (labels...) */

/* --- arena and node tree ----------------------------------------------- */

struct ablock {
    struct ablock *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

enum { YN_SCALAR, YN_MAP, YN_SEQ };

struct yn {
    unsigned char type;
    bool synth;          /* made by the loader: no env expansion, internal keys allowed */
    bool plain;          /* plain scalar: may be a YAML null */
    unsigned line, col;  /* 1-based */
    char *s;             /* scalar text, NUL-terminated */
    size_t len;
    struct yn **kids;    /* seq: items; map: key, value, key, value... */
    unsigned n, cap;
};

struct ld {
    const char *name;
    char *err;
    size_t errlen;
    struct ablock *arena;
    size_t arena_bytes;
    bool oom;
    struct yn *root;
    char cymsg[256];
};

static void *aalloc(struct ld *ld, size_t n)
{
    struct ablock *b = ld->arena;

    n = (n + 15) & ~(size_t)15;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;

        if (ld->arena_bytes + cap > CFG_MAX_ARENA || !(b = malloc(sizeof(*b) + cap))) {
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

static char *astrndup(struct ld *ld, const char *s, size_t len)
{
    char *p = aalloc(ld, len + 1);

    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

static struct yn *node_new(struct ld *ld, int type, const struct yn *at)
{
    struct yn *n = aalloc(ld, sizeof(*n));

    if (n) {
        n->type = (unsigned char)type;
        n->line = at ? at->line : 1;
        n->col = at ? at->col : 1;
    }
    return n;
}

static struct yn *scalar_new(struct ld *ld, const char *s, const struct yn *at, bool synth)
{
    struct yn *n = node_new(ld, YN_SCALAR, at);

    if (!n || !(n->s = astrndup(ld, s, strlen(s))))
        return NULL;
    n->len = strlen(s);
    n->synth = synth;
    return n;
}

static int kid_add(struct ld *ld, struct yn *p, struct yn *k)
{
    if (!k)
        return -ENOMEM;
    if (p->n == p->cap) {
        unsigned cap = p->cap ? p->cap * 2 : 8;
        struct yn **v = aalloc(ld, cap * sizeof(*v));

        if (!v)
            return -ENOMEM;
        if (p->n)
            memcpy(v, p->kids, p->n * sizeof(*v));
        p->kids = v;
        p->cap = cap;
    }
    p->kids[p->n++] = k;
    return 0;
}

static int pair_add(struct ld *ld, struct yn *map, struct yn *k, struct yn *v)
{
    if (!k || !v)
        return -ENOMEM;
    if (kid_add(ld, map, k) < 0 || kid_add(ld, map, v) < 0)
        return -ENOMEM;
    return 0;
}

/* Index of the key `key` in a map, or -1. */
static int map_idx(const struct yn *m, const char *key)
{
    if (!m || m->type != YN_MAP)
        return -1;
    for (unsigned i = 0; i + 1 < m->n; i += 2) {
        if (strcmp(m->kids[i]->s, key) == 0)
            return (int)i;
    }
    return -1;
}

static struct yn *map_get(const struct yn *m, const char *key)
{
    int i = map_idx(m, key);

    return i < 0 ? NULL : m->kids[i + 1];
}

static void map_del(struct yn *m, const char *key)
{
    int i = map_idx(m, key);

    if (i < 0)
        return;
    memmove(&m->kids[i], &m->kids[i + 2], (m->n - (unsigned)i - 2) * sizeof(m->kids[0]));
    m->n -= 2;
}

static bool is_null(const struct yn *n)
{
    if (n->type != YN_SCALAR || !n->plain)
        return false;
    return n->len == 0 || strcmp(n->s, "~") == 0 || strcmp(n->s, "null") == 0 ||
           strcmp(n->s, "Null") == 0 || strcmp(n->s, "NULL") == 0;
}

static bool is_true(const struct yn *n)
{
    return n && n->type == YN_SCALAR && strcmp(n->s, "true") == 0;
}

static uint64_t num(const struct yn *n)
{
    return n ? strtoull(n->s, NULL, 10) : 0;
}

/* --- errors ------------------------------------------------------------ */

__attribute__((format(printf, 3, 4))) static int fail(struct ld *ld, const struct yn *at,
                                                      const char *fmt, ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (at)
        snprintf(ld->err, ld->errlen, "%s:%u:%u: %s", ld->name, at->line, at->col, msg);
    else
        snprintf(ld->err, ld->errlen, "%s: %s", ld->name, msg);
    return -EINVAL;
}

static int oom(struct ld *ld)
{
    snprintf(ld->err, ld->errlen, "%s: %s", ld->name,
             ld->arena_bytes + 65536 > CFG_MAX_ARENA ? "config too large" : "out of memory");
    return -ENOMEM;
}

/* What a node is, for "got ..." in messages; long values are cut. */
static const char *got(const struct yn *n, char *b, size_t blen)
{
    if (n->type == YN_MAP)
        return "a mapping";
    if (n->type == YN_SEQ)
        return "a list";
    if (is_null(n))
        return "null";
    snprintf(b, blen, "\"%.*s%s\"", n->len > 80 ? 80 : (int)n->len, n->s,
             n->len > 80 ? "..." : "");
    return b;
}

/* --- pass 1: libyaml -> tree ------------------------------------------- */

static int parse(struct ld *ld, const char *text, size_t len)
{
    yaml_parser_t p;
    yaml_event_t ev;
    struct yn *stk[CFG_MAX_DEPTH];
    int depth = 0, rc = 0;
    bool done = false, doc_seen = false;

    if (!yaml_parser_initialize(&p))
        return oom(ld);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    while (!done && rc == 0) {
        struct yn *n = NULL, at;

        if (!yaml_parser_parse(&p, &ev)) {
            if (p.error == YAML_MEMORY_ERROR) {
                rc = oom(ld);
                break;
            }
            at.line = (unsigned)p.problem_mark.line + 1;
            at.col = (unsigned)p.problem_mark.column + 1;
            rc = fail(ld, &at, "YAML syntax error: %s%s%s", p.problem ? p.problem : "unknown",
                      p.context ? " " : "", p.context ? p.context : "");
            break;
        }
        at.line = (unsigned)ev.start_mark.line + 1;
        at.col = (unsigned)ev.start_mark.column + 1;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (doc_seen)
                rc = fail(ld, &at, "only one YAML document is allowed");
            doc_seen = true;
            break;
        case YAML_ALIAS_EVENT:
            rc = fail(ld, &at, "YAML aliases (*%s) are not supported", ev.data.alias.anchor);
            break;
        case YAML_SCALAR_EVENT:
            if (!(n = node_new(ld, YN_SCALAR, &at)) ||
                !(n->s = astrndup(ld, (const char *)ev.data.scalar.value,
                                  ev.data.scalar.length))) {
                rc = oom(ld);
                break;
            }
            n->len = ev.data.scalar.length;
            n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (!(n = node_new(ld, ev.type == YAML_MAPPING_START_EVENT ? YN_MAP : YN_SEQ, &at)))
                rc = oom(ld);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        default:
            break;
        }
        if (n && rc == 0) {
            if (depth == 0) {
                ld->root = n;
            } else {
                struct yn *parent = stk[depth - 1];

                if (parent->type == YN_MAP && parent->n % 2 == 0 && n->type != YN_SCALAR)
                    rc = fail(ld, n, "mapping keys must be plain strings");
                else if (kid_add(ld, parent, n) < 0)
                    rc = oom(ld);
            }
            if (rc == 0 && n->type != YN_SCALAR) {
                if (depth == CFG_MAX_DEPTH)
                    rc = fail(ld, n, "nesting deeper than %d levels", CFG_MAX_DEPTH);
                else
                    stk[depth++] = n;
            }
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* --- env expansion ----------------------------------------------------- */

static bool name_start(char c)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* ${VAR}, ${VAR:-default} (default when unset or empty), $$ -> $. Any other
 * `$` is literal, so relabel templates like $1 and ${1} pass through. */
static int expand_env(struct ld *ld, struct yn *n)
{
    struct buf b;
    int rc = 0;

    if (!memchr(n->s, '$', n->len))
        return 0;
    buf_init(&b, CFG_MAX_FILE);
    for (size_t i = 0; i < n->len && rc == 0; i++) {
        const char *s = n->s;

        if (s[i] != '$') {
            rc = buf_append(&b, &s[i], 1);
        } else if (i + 1 < n->len && s[i + 1] == '$') {
            rc = buf_append(&b, "$", 1);
            i++;
        } else if (i + 2 < n->len && s[i + 1] == '{' && name_start(s[i + 2])) {
            size_t j = i + 2, name_end;
            const char *def = NULL, *val;
            size_t deflen = 0;
            char var[256];

            while (j < n->len && (name_start(s[j]) || isdigit((unsigned char)s[j])))
                j++;
            name_end = j;
            if (j + 1 < n->len && s[j] == ':' && s[j + 1] == '-') {
                const char *close = memchr(s + j + 2, '}', n->len - j - 2);

                if (!close) {
                    rc = fail(ld, n, "unterminated \"${\" in value \"%.80s\"", s);
                    break;
                }
                def = s + j + 2;
                deflen = (size_t)(close - def);
                j = (size_t)(close - s);
            } else if (j >= n->len || s[j] != '}') {
                rc = fail(ld, n, "malformed \"${...}\" in value \"%.80s\": expected ${NAME} or "
                          "${NAME:-default}", s);
                break;
            }
            if (name_end - i - 2 >= sizeof(var)) {
                rc = fail(ld, n, "environment variable name too long");
                break;
            }
            memcpy(var, s + i + 2, name_end - i - 2);
            var[name_end - i - 2] = '\0';
            val = getenv(var);
            if (def && (!val || !*val))
                rc = buf_append(&b, def, deflen);
            else if (val)
                rc = buf_puts(&b, val);
            i = j;
        } else {
            rc = buf_append(&b, "$", 1);
        }
    }
    if (rc == 0) {
        char *s = b.len ? astrndup(ld, b.data, b.len) : astrndup(ld, "", 0);

        if (!s)
            rc = oom(ld);
        else {
            n->s = s;
            n->len = b.len;
        }
    } else if (rc == -E2BIG) {
        rc = fail(ld, n, "value too long after ${...} expansion");
    } else if (rc == -ENOMEM) {
        rc = oom(ld);
    }
    buf_done(&b);
    return rc;
}

/* --- pass 2: schema walk ----------------------------------------------- */

static int walk_value(struct ld *ld, struct yn **slot, const cyaml_schema_value_t *sv,
                      const struct cfg__meta *m);

static const char *expected(const cyaml_schema_value_t *sv, const struct cfg__meta *m, char *b,
                            size_t blen)
{
    size_t off;

    if (m && m->check && sv->type == CYAML_IGNORE)
        sv = m->check;
    switch (sv->type) {
    case CYAML_STRING:
        if (!m || !m->choices)
            return "a string";
        off = (size_t)snprintf(b, blen, "one of");
        for (int i = 0; m->choices[i] && off < blen; i++)
            off += (size_t)snprintf(b + off, blen - off, "%s %s", i ? "," : "", m->choices[i]);
        return b;
    case CYAML_ENUM:
        off = (size_t)snprintf(b, blen, "one of");
        for (uint32_t i = 0, k = 0; i < sv->enumeration.count && off < blen; i++) {
            if (sv->enumeration.strings[i].str[0] != '.')
                off += (size_t)snprintf(b + off, blen - off, "%s %s", k++ ? "," : "",
                                        sv->enumeration.strings[i].str);
        }
        return b;
    case CYAML_UINT:
        if (m && m->unit == CFG__UNIT_DURATION)
            return "a duration like 15s";
        if (m && m->unit == CFG__UNIT_BYTES)
            return "a size like 64MiB";
        return "a non-negative integer";
    case CYAML_INT:
        return "an integer";
    case CYAML_BOOL:
        return "true or false";
    case CYAML_MAPPING:
        return "a mapping";
    case CYAML_SEQUENCE:
        return "a list";
    default:
        return "a value";
    }
}

static int type_error(struct ld *ld, const struct yn *n, const cyaml_schema_value_t *sv,
                      const struct cfg__meta *m)
{
    char e[256], g[128];

    return fail(ld, n, "expected %s, got %s", expected(sv, m, e, sizeof(e)), got(n, g, sizeof(g)));
}

static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (!*s)
        return -1;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s) || v > (max - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* "64MiB", "4096", "1GB": KB and KiB both mean 1024, as Prometheus' units. */
static int parse_bytes(const char *s, uint64_t *out)
{
    static const struct {
        const char *u;
        unsigned shift;
    } units[] = {
        { "", 0 },     { "b", 0 },    { "k", 10 },   { "kb", 10 },  { "kib", 10 },
        { "m", 20 },   { "mb", 20 },  { "mib", 20 }, { "g", 30 },   { "gb", 30 },
        { "gib", 30 }, { "t", 40 },   { "tb", 40 },  { "tib", 40 },
    };
    char digits[32];
    size_t i = 0;
    uint64_t v;

    while (isdigit((unsigned char)s[i]) && i < sizeof(digits) - 1) {
        digits[i] = s[i];
        i++;
    }
    digits[i] = '\0';
    if (parse_uint(digits, UINT64_MAX, &v) < 0)
        return -1;
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        if (strcasecmp(s + i, units[u].u) == 0) {
            if (units[u].shift && v > (UINT64_MAX >> units[u].shift))
                return -1;
            *out = v << units[u].shift;
            return 0;
        }
    }
    return -1;
}

static int set_text(struct ld *ld, struct yn *n, const char *s)
{
    if (!(n->s = astrndup(ld, s, strlen(s))))
        return oom(ld);
    n->len = strlen(s);
    return 0;
}

static int walk_scalar(struct ld *ld, struct yn *n, const cyaml_schema_value_t *sv,
                       const struct cfg__meta *m)
{
    uint64_t v, max;
    char tmp[32];
    int rc;

    if (n->type != YN_SCALAR || (!n->synth && is_null(n)))
        return type_error(ld, n, sv, m);
    if (!n->synth && (rc = expand_env(ld, n)) < 0)
        return rc;
    if (memchr(n->s, '\0', n->len))
        return fail(ld, n, "NUL characters are not allowed in values");
    switch (sv->type) {
    case CYAML_STRING:
        if (m && m->choices) {
            for (int i = 0; m->choices[i]; i++) {
                if (strcmp(n->s, m->choices[i]) == 0)
                    return 0;
            }
            return type_error(ld, n, sv, m);
        }
        return 0;
    case CYAML_BOOL:
        if (!strcasecmp(n->s, "true") || !strcasecmp(n->s, "yes") || !strcasecmp(n->s, "on"))
            return set_text(ld, n, "true");
        if (!strcasecmp(n->s, "false") || !strcasecmp(n->s, "no") || !strcasecmp(n->s, "off"))
            return set_text(ld, n, "false");
        return type_error(ld, n, sv, m);
    case CYAML_ENUM:
        for (uint32_t i = 0; i < sv->enumeration.count; i++) {
            const char *e = sv->enumeration.strings[i].str;

            if ((e[0] != '.' || n->synth) && strcmp(n->s, e) == 0)
                return 0;
        }
        return type_error(ld, n, sv, m);
    case CYAML_UINT:
        max = sv->data_size >= 8 ? UINT64_MAX : ((uint64_t)1 << (8 * sv->data_size)) - 1;
        if (m && m->unit == CFG__UNIT_DURATION)
            rc = duration_parse(n->s, &v);
        else if (m && m->unit == CFG__UNIT_BYTES)
            rc = parse_bytes(n->s, &v);
        else
            rc = parse_uint(n->s, max, &v);
        if (rc < 0 || v > max)
            return type_error(ld, n, sv, m);
        snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
        return set_text(ld, n, tmp);
    case CYAML_INT:
        if (parse_uint(n->s[0] == '-' ? n->s + 1 : n->s, INT32_MAX, &v) < 0)
            return type_error(ld, n, sv, m);
        snprintf(tmp, sizeof(tmp), "%s%" PRIu64, n->s[0] == '-' ? "-" : "", v);
        return set_text(ld, n, tmp);
    default:
        return fail(ld, n, "internal error: unexpected schema type");
    }
}

/* Turns a YAML map with user-chosen keys into the sequence of entries the
 * schema has: {k: v} -> [{.key: k, .value: v}] (or .values, or for profiles
 * {.name: k, <v's keys>}). Keys are not expanded. */
static int convert_map(struct ld *ld, struct yn **slot, enum cfg__mapkind kind)
{
    struct yn *m = *slot, *seq = node_new(ld, YN_SEQ, m);

    if (!seq)
        return oom(ld);
    if (m->n / 2 > CFG_MAX_MAP)
        return fail(ld, m, "more than %d entries in one mapping", CFG_MAX_MAP);
    for (unsigned i = 0; i + 1 < m->n; i += 2) {
        struct yn *k = m->kids[i], *v = m->kids[i + 1], *e = node_new(ld, YN_MAP, k), *kn;

        if (!e)
            return oom(ld);
        e->synth = true;
        for (unsigned j = 0; j < i; j += 2) {
            if (strcmp(m->kids[j]->s, k->s) == 0)
                return fail(ld, k, "key \"%.80s\" given twice", k->s);
        }
        if (!(kn = scalar_new(ld, k->s, k, true)))
            return oom(ld);
        switch (kind) {
        case CFG__MAP_KV:
            if (is_null(v) && !(v = scalar_new(ld, "", v, true)))
                return oom(ld);
            if (pair_add(ld, e, scalar_new(ld, ".key", k, true), kn) < 0 ||
                pair_add(ld, e, scalar_new(ld, ".value", k, true), v) < 0)
                return oom(ld);
            break;
        case CFG__MAP_PARAM:
            if (is_null(v) || v->type == YN_SCALAR) {
                struct yn *l = node_new(ld, YN_SEQ, v);

                if (!l || (!is_null(v) && kid_add(ld, l, v) < 0))
                    return oom(ld);
                v = l;
            }
            if (pair_add(ld, e, scalar_new(ld, ".key", k, true), kn) < 0 ||
                pair_add(ld, e, scalar_new(ld, ".values", k, true), v) < 0)
                return oom(ld);
            break;
        case CFG__MAP_PROFILE:
            if (!is_null(v) && v->type != YN_MAP) {
                char g[128];

                return fail(ld, v, "expected a mapping, got %s", got(v, g, sizeof(g)));
            }
            if (pair_add(ld, e, scalar_new(ld, ".name", k, true), kn) < 0)
                return oom(ld);
            for (unsigned j = 0; !is_null(v) && j < v->n; j++) {
                if (kid_add(ld, e, v->kids[j]) < 0)
                    return oom(ld);
            }
            break;
        default:
            break;
        }
        if (kid_add(ld, seq, e) < 0)
            return oom(ld);
    }
    *slot = seq;
    return 0;
}

static int hook_pre(struct ld *ld, struct yn *n, const cyaml_schema_field_t *fields);
static int hook_post(struct ld *ld, struct yn *n, const cyaml_schema_field_t *fields);

static int walk_map(struct ld *ld, struct yn **slot, const cyaml_schema_value_t *sv)
{
    const cyaml_schema_field_t *fields = sv->mapping.fields;
    const char *what = cfg__mapping_name(fields);
    struct yn *n = *slot, *seen[64] = { 0 };
    unsigned nf = 0, out = 0;
    int rc;

    while (fields[nf].key)
        nf++;
    if (n->type != YN_MAP || nf > 64)
        return type_error(ld, n, sv, NULL);
    if ((rc = hook_pre(ld, n, fields)) < 0)
        return rc;
    for (unsigned i = 0; i + 1 < n->n; i += 2) {
        struct yn *k = n->kids[i], *v = n->kids[i + 1];
        char norm[128];
        const char *key = k->s;
        unsigned f;

        if (!k->synth) {
            size_t l = strlen(k->s);

            if (k->s[0] == '.' || l >= sizeof(norm))
                return fail(ld, k, "unknown key \"%.80s\" in %s", k->s, what);
            for (size_t c = 0; c <= l; c++)
                norm[c] = k->s[c] == '_' ? '-' : k->s[c];
            key = cfg__key_alias(norm);
        }
        for (f = 0; f < nf && strcmp(fields[f].key, key) != 0; f++)
            ;
        if (f == nf)
            return fail(ld, k, "unknown key \"%.80s\" in %s", k->s, what);
        if (seen[f]) {
            if (strcmp(seen[f]->s, k->s) == 0)
                return fail(ld, k, "key \"%s\" given twice in %s", k->s, what);
            return fail(ld, k, "both \"%s\" and \"%s\" given in %s (they are the same key)",
                        seen[f]->s, k->s, what);
        }
        seen[f] = k;
        if (!v->synth && is_null(v))
            continue; /* `key:` with no value means the key is absent */
        if (!k->synth) {
            struct yn *kk = node_new(ld, YN_SCALAR, k);

            if (!kk)
                return oom(ld);
            kk->s = (char *)fields[f].key;
            kk->len = strlen(kk->s);
            kk->synth = true;
            n->kids[out] = kk;
        } else {
            n->kids[out] = k;
        }
        n->kids[out + 1] = v;
        out += 2;
    }
    n->n = out;
    for (unsigned i = 0; i + 1 < n->n; i += 2) {
        unsigned f;

        for (f = 0; strcmp(fields[f].key, n->kids[i]->s) != 0; f++)
            ;
        rc = walk_value(ld, &n->kids[i + 1], &fields[f].value,
                        cfg__meta_find(fields, fields[f].key));
        if (rc < 0)
            return rc;
    }
    for (unsigned f = 0; f < nf; f++) {
        const cyaml_schema_field_t *fd = &fields[f];
        const struct cfg__meta *m;
        struct yn *v;

        if (map_idx(n, fd->key) >= 0)
            continue;
        if (!(fd->value.flags & CYAML_FLAG_OPTIONAL) && fd->value.type != CYAML_IGNORE)
            return fail(ld, seen[f] ? seen[f] : n, "missing required key \"%s\" in %s", fd->key,
                        what);
        m = cfg__meta_find(fields, fd->key);
        if (m->def)
            v = scalar_new(ld, m->def, n, true);
        else if (fd->value.type == CYAML_MAPPING && !(fd->value.flags & CYAML_FLAG_POINTER))
            v = node_new(ld, YN_MAP, n);
        else
            continue;
        if (!v)
            return oom(ld);
        v->synth = true;
        if (pair_add(ld, n, scalar_new(ld, fd->key, n, true), v) < 0)
            return oom(ld);
        if ((rc = walk_value(ld, &n->kids[n->n - 1], &fd->value, m)) < 0)
            return rc;
    }
    return hook_post(ld, n, fields);
}

static int walk_value(struct ld *ld, struct yn **slot, const cyaml_schema_value_t *sv,
                      const struct cfg__meta *m)
{
    struct yn *n = *slot;
    int rc;

    if (m && m->check && sv->type == CYAML_IGNORE)
        sv = m->check;
    if (m && m->mapkind != CFG__MAP_NONE) {
        if (n->type != YN_MAP) {
            char g[128];

            return fail(ld, n, "expected a mapping, got %s", got(n, g, sizeof(g)));
        }
        if ((rc = convert_map(ld, slot, m->mapkind)) < 0)
            return rc;
        n = *slot;
    }
    switch (sv->type) {
    case CYAML_MAPPING:
        return walk_map(ld, slot, sv);
    case CYAML_SEQUENCE:
        if (n->type != YN_SEQ)
            return type_error(ld, n, sv, m);
        for (unsigned i = 0; i < n->n; i++) {
            if ((rc = walk_value(ld, &n->kids[i], sv->sequence.entry, NULL)) < 0)
                return rc;
        }
        return 0;
    case CYAML_IGNORE:
        return 0;
    default:
        return walk_scalar(ld, n, sv, m);
    }
}

/* --- profile types ----------------------------------------------------- */

static const struct builtin {
    const char *name;
    const char *path;
    enum cfg_profile_kind kind;
    bool on;
    bool delta;
    const char *send;
    const char *delta_path; /* with use-delta-profiles */
} builtins[] = {
    { "process_cpu", "/debug/pprof/profile", CFG_KIND_DURATION, true, true, "process_cpu", NULL },
    { "memory", "/debug/pprof/allocs", CFG_KIND_CUMULATIVE_MEMORY, true, false, "memory",
      "/debug/pprof/delta_heap" },
    { "goroutine", "/debug/pprof/goroutine", CFG_KIND_GAUGE, true, false, "goroutine", NULL },
    { "mutex", "/debug/pprof/mutex", CFG_KIND_CUMULATIVE_CONTENTION, true, false, "mutex",
      "/debug/pprof/delta_mutex" },
    { "block", "/debug/pprof/block", CFG_KIND_CUMULATIVE_CONTENTION, true, false, "block",
      "/debug/pprof/delta_block" },
    { "fgprof", "/debug/fgprof", CFG_KIND_DURATION, false, true, "fgprof", NULL },
    { "godeltaprof_memory", "/debug/pprof/delta_heap", CFG_KIND_DELTA, false, false, "memory",
      NULL },
    { "godeltaprof_mutex", "/debug/pprof/delta_mutex", CFG_KIND_DELTA, false, false, "mutex",
      NULL },
    { "godeltaprof_block", "/debug/pprof/delta_block", CFG_KIND_DELTA, false, false, "block",
      NULL },
};
#define N_BUILTIN (sizeof(builtins) / sizeof(builtins[0]))

static const char *const kind_names[] = {
    [CFG_KIND_DURATION] = ".duration",
    [CFG_KIND_GAUGE] = ".gauge",
    [CFG_KIND_CUMULATIVE_MEMORY] = ".cumulative-memory",
    [CFG_KIND_CUMULATIVE_CONTENTION] = ".cumulative-contention",
    [CFG_KIND_DELTA] = ".delta",
    [CFG_KIND_CUSTOM] = ".custom",
};

const char *cfg_profile_canonical(const char *name)
{
    static const char *const aliases[][2] = {
        { "cpu", "process_cpu" },
        { "mem", "memory" },
        { "heap", "memory" },
        { "goroutines", "goroutine" },
    };

    if (!name)
        return NULL;
    for (size_t i = 0; i < N_BUILTIN; i++) {
        if (strcmp(name, builtins[i].name) == 0)
            return builtins[i].name;
    }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(name, aliases[i][0]) == 0)
            return aliases[i][1];
    }
    return NULL;
}

struct rprof {
    const char *name, *path, *send;
    enum cfg_profile_kind kind;
    bool enabled, delta, declared, enabled_set;
    bool path_set;
    struct yn *params, *decl;
};

static bool valid_profile_name(const char *s)
{
    if (!name_start(*s))
        return false;
    for (; *s; s++) {
        if (!name_start(*s) && !isdigit((unsigned char)*s))
            return false;
    }
    return true;
}

static int resolve_profiles(struct ld *ld, struct yn *sc)
{
    struct yn *decl = map_get(sc, "profiles"), *ep = map_get(sc, "enabled-profiles"), *seq;
    unsigned nd = decl ? decl->n : 0, np = N_BUILTIN;
    bool use_delta = is_true(map_get(sc, "use-delta-profiles"));
    struct rprof *rp = aalloc(ld, (N_BUILTIN + nd) * sizeof(*rp));

    if (!rp)
        return oom(ld);
    for (unsigned i = 0; i < N_BUILTIN; i++) {
        const struct builtin *b = &builtins[i];

        rp[i] = (struct rprof){ .name = b->name, .path = b->path, .send = b->send,
                                .kind = b->kind, .enabled = b->on, .delta = b->delta };
    }
    for (unsigned i = 0; i < nd; i++) {
        struct yn *e = decl->kids[i], *v;
        const char *name = map_get(e, ".name")->s, *canon = cfg_profile_canonical(name);
        struct rprof *r = NULL;

        for (unsigned j = 0; j < np; j++) {
            if (strcmp(rp[j].name, canon ? canon : name) == 0)
                r = &rp[j];
        }
        if (r && r->declared)
            return fail(ld, e, "profile \"%s\" declared twice (as \"%s\" and \"%s\")",
                        r->name, map_get(r->decl, ".name")->s, name);
        if (!r) {
            if (!valid_profile_name(name))
                return fail(ld, e, "custom profile name \"%.80s\" must match "
                            "[a-zA-Z_][a-zA-Z0-9_]*", name);
            if (!map_get(e, "path"))
                return fail(ld, e, "profile \"%.80s\" is not a built-in type and needs a path",
                            name);
            r = &rp[np++];
            *r = (struct rprof){ .name = name, .send = name, .kind = CFG_KIND_CUSTOM,
                                 .enabled = true };
        }
        r->declared = true;
        r->decl = e;
        if ((v = map_get(e, "path"))) {
            r->path = v->s;
            r->path_set = true;
        }
        if ((v = map_get(e, "delta")))
            r->delta = is_true(v);
        if ((v = map_get(e, "enabled"))) {
            r->enabled = is_true(v);
            r->enabled_set = true;
        }
        r->params = map_get(e, "params");
    }
    if (ep) {
        for (unsigned j = 0; j < N_BUILTIN; j++) {
            if (!rp[j].enabled_set)
                rp[j].enabled = false;
        }
        for (unsigned i = 0; i < ep->n; i++) {
            const char *name = ep->kids[i]->s, *canon = cfg_profile_canonical(name);
            unsigned j;

            for (j = 0; j < np && strcmp(rp[j].name, canon ? canon : name) != 0; j++)
                ;
            if (j == np)
                return fail(ld, ep->kids[i], "unknown profile type \"%.80s\" in enabled-profiles "
                            "(not a built-in type and not declared under profiles)", name);
            if (!rp[j].enabled_set)
                rp[j].enabled = true;
        }
    }
    if (!(seq = node_new(ld, YN_SEQ, sc)))
        return oom(ld);
    seq->synth = true;
    for (unsigned j = 0; j < np; j++) {
        struct rprof *r = &rp[j];
        struct yn *e = node_new(ld, YN_MAP, sc);

        if (use_delta && j < N_BUILTIN && builtins[j].delta_path) {
            r->kind = CFG_KIND_DELTA;
            if (!r->path_set)
                r->path = builtins[j].delta_path;
        }
        if (!e || pair_add(ld, e, scalar_new(ld, ".name", sc, true),
                           scalar_new(ld, r->name, sc, true)) < 0 ||
            pair_add(ld, e, scalar_new(ld, "path", sc, true), scalar_new(ld, r->path, sc, true)) ||
            pair_add(ld, e, scalar_new(ld, ".kind", sc, true),
                     scalar_new(ld, kind_names[r->kind], sc, true)) < 0 ||
            pair_add(ld, e, scalar_new(ld, "enabled", sc, true),
                     scalar_new(ld, r->enabled ? "true" : "false", sc, true)) < 0 ||
            pair_add(ld, e, scalar_new(ld, "delta", sc, true),
                     scalar_new(ld, r->delta ? "true" : "false", sc, true)) < 0 ||
            pair_add(ld, e, scalar_new(ld, ".send-name", sc, true),
                     scalar_new(ld, r->send, sc, true)) < 0 ||
            (r->params && pair_add(ld, e, scalar_new(ld, "params", sc, true), r->params) < 0) ||
            kid_add(ld, seq, e) < 0)
            return oom(ld);
        e->synth = true;
    }
    map_del(sc, "profiles");
    map_del(sc, "enabled-profiles");
    if (pair_add(ld, sc, scalar_new(ld, "profiles", sc, true), seq) < 0)
        return oom(ld);
    return 0;
}

/* --- cross-field rules ------------------------------------------------- */

static struct yn *user_key(const struct yn *m, const char *key)
{
    int i = map_idx(m, key);

    return i < 0 || m->kids[i + 1]->synth ? NULL : m->kids[i];
}

static int check_auth(struct ld *ld, struct yn *n, const char *what)
{
    static const char *const keys[] = { "basic-auth", "bearer-token", "bearer-token-file" };
    struct yn *first = NULL, *ba = map_get(n, "basic-auth");

    for (size_t i = 0; i < 3; i++) {
        struct yn *k = user_key(n, keys[i]);

        if (k && first)
            return fail(ld, k, "at most one of basic-auth, bearer-token and bearer-token-file "
                        "may be given in %s (\"%s\" conflicts with \"%s\")", what, keys[i],
                        first->s);
        if (k)
            first = k;
    }
    if (ba && map_get(ba, "password") && map_get(ba, "password-file"))
        return fail(ld, user_key(ba, "password-file"),
                    "basic-auth takes password or password-file, not both");
    return 0;
}

static bool prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* http(s)://host... */
static bool http_url(const char *s)
{
    const char *h = prefix(s, "http://") ? s + 7 : prefix(s, "https://") ? s + 8 : NULL;

    return h && *h && *h != '/' && *h != '?' && *h != '#';
}

static int hook_scrape(struct ld *ld, struct yn *n)
{
    struct yn *iv = map_get(n, "scrape-interval"), *to = map_get(n, "scrape-timeout");
    uint64_t interval = num(iv);
    char a[32], b[32];

    if (interval == 0)
        return fail(ld, iv, "scrape-interval must be greater than 0");
    if (!to) {
        /* Prometheus: the default timeout, capped at the interval. */
        snprintf(a, sizeof(a), "%" PRIu64, interval < 10000 ? interval : 10000);
        if (pair_add(ld, n, scalar_new(ld, "scrape-timeout", n, true),
                     scalar_new(ld, a, n, true)) < 0)
            return oom(ld);
    } else if (num(to) == 0) {
        return fail(ld, to, "scrape-timeout must be greater than 0");
    } else if (num(to) > interval) {
        duration_format(num(to), a, sizeof(a));
        duration_format(interval, b, sizeof(b));
        return fail(ld, to, "scrape-timeout (%s) cannot be greater than scrape-interval (%s)", a,
                    b);
    }
    if (check_auth(ld, n, "scrape config") < 0)
        return -EINVAL;
    return resolve_profiles(ld, n);
}

static int hook_k8s(struct ld *ld, struct yn *n)
{
    static const char *const http_keys[] = { "basic-auth", "bearer-token", "bearer-token-file",
                                             "tls-config", "proxy-url", "enable-http2",
                                             "follow-redirects" };
    struct yn *api = user_key(n, "api-server"), *kc = user_key(n, "kubeconfig-file");
    struct yn *ns = map_get(n, "namespaces"), *own = ns ? user_key(ns, "own-namespace") : NULL;
    struct yn *http = NULL;

    if (api && kc)
        return fail(ld, kc, "api-server and kubeconfig-file cannot both be given in "
                    "kubernetes-sd config");
    if (api && !http_url(map_get(n, "api-server")->s))
        return fail(ld, map_get(n, "api-server"), "expected a URL like https://host:6443, got "
                    "\"%.80s\"", map_get(n, "api-server")->s);
    if (own && is_true(map_get(ns, "own-namespace")) && (api || kc))
        return fail(ld, own, "namespaces.own-namespace needs in-cluster access and cannot be "
                    "used with %s", api ? "api-server" : "kubeconfig-file");
    for (size_t i = 0; i < sizeof(http_keys) / sizeof(http_keys[0]) && !http; i++)
        http = user_key(n, http_keys[i]);
    if (http && kc)
        return fail(ld, http, "\"%s\" cannot be combined with kubeconfig-file (the kubeconfig "
                    "holds the client settings)", http->s);
    if (http && !api)
        return fail(ld, http, "\"%s\" needs api-server in kubernetes-sd config (in-cluster "
                    "access uses the service account)", http->s);
    if (http && pair_add(ld, n, scalar_new(ld, ".http-set", n, true),
                         scalar_new(ld, "true", n, true)) < 0)
        return oom(ld);
    return check_auth(ld, n, "kubernetes-sd config");
}

static int hook_remote(struct ld *ld, struct yn *n)
{
    struct yn *url = map_get(n, "url"), *proto = map_get(n, "protocol");
    struct yn *minb = map_get(n, "min-backoff"), *maxb = map_get(n, "max-backoff");
    const char *u = url->s;
    char host[256];

    if (prefix(u, "file://")) {
        const char *d = u + 7;

        if (!(d[0] == '/' || (d[0] == '.' && (d[1] == '/' || d[1] == '\0')) ||
              prefix(d, "../")))
            return fail(ld, url, "expected file:///absolute/dir or file://./relative/dir, got "
                        "\"%.80s\"", u);
        if (proto && !proto->synth && strcmp(proto->s, "ingest") == 0)
            return fail(ld, proto, "protocol ingest does not apply to a file:// url");
        map_del(n, "protocol");
        if (pair_add(ld, n, scalar_new(ld, "protocol", n, true), scalar_new(ld, ".dir", n, true)))
            return oom(ld);
        snprintf(host, sizeof(host), "dir");
    } else if (http_url(u)) {
        const char *h = strstr(u, "://") + 3, *at;
        size_t l = strcspn(h, "/?#");

        if ((at = memchr(h, '@', l)) != NULL) {
            l -= (size_t)(at + 1 - h);
            h = at + 1;
        }
        snprintf(host, sizeof(host), "%.*s", (int)(l < 255 ? l : 255), h);
    } else {
        return fail(ld, url, "expected a URL starting with http://, https:// or file://, got "
                    "\"%.80s\"", u);
    }
    if (!map_get(n, "name") && pair_add(ld, n, scalar_new(ld, "name", n, true),
                                        scalar_new(ld, host, n, true)) < 0)
        return oom(ld);
    if (num(minb) > num(maxb))
        return fail(ld, user_key(n, "min-backoff") ? minb : maxb,
                    "min-backoff cannot be greater than max-backoff");
    return check_auth(ld, n, "remote-write");
}

static int hook_top(struct ld *ld, struct yn *n)
{
    struct yn *sc = map_get(n, "scrape-configs"), *rw = map_get(n, "remote-write");
    struct yn *lim = map_get(n, "limits"), *v;

    for (unsigned i = 0; sc && i < sc->n; i++) {
        struct yn *a = map_get(sc->kids[i], "job-name");

        for (unsigned j = 0; j < i; j++) {
            if (strcmp(map_get(sc->kids[j], "job-name")->s, a->s) == 0)
                return fail(ld, a, "duplicate job-name \"%.80s\" (also at line %u)", a->s,
                            map_get(sc->kids[j], "job-name")->line);
        }
    }
    for (unsigned i = 0; rw && i < rw->n; i++) {
        struct yn *a = map_get(rw->kids[i], "name");

        for (unsigned j = 0; j < i; j++) {
            if (strcmp(map_get(rw->kids[j], "name")->s, a->s) == 0)
                return fail(ld, a, "duplicate remote-write name \"%.80s\"; set name: to tell "
                            "them apart", a->s);
        }
    }
    if ((v = map_get(lim, "gzip-level")) && (atoi(v->s) < 0 || atoi(v->s) > 12))
        return fail(ld, v, "gzip-level must be between 0 and 12, got %s", v->s);
    if ((v = map_get(lim, "workers")) && num(v) == 0)
        return fail(ld, v, "workers must be at least 1");
    return 0;
}

static int hook_pre(struct ld *ld, struct yn *n, const cyaml_schema_field_t *fields)
{
    if (fields == cfg__relabel_fields) {
        int i = map_idx(n, "regex");

        /* `regex:` (null) is the empty regex, not the default (.*). */
        if (i >= 0 && is_null(n->kids[i + 1])) {
            struct yn *e = scalar_new(ld, "", n->kids[i + 1], true);

            if (!e || pair_add(ld, n, scalar_new(ld, ".regex-null", n, true),
                               scalar_new(ld, "true", n, true)) < 0)
                return oom(ld);
            n->kids[i + 1] = e;
        }
    } else if (fields == cfg__top_fields) {
        int i = map_idx(n, "workers");
        struct yn *lim = map_get(n, "limits");

        /* `workers:` at the top level is short for limits.workers. */
        if (i >= 0) {
            struct yn *k = n->kids[i], *v = n->kids[i + 1];

            if (lim && lim->type == YN_MAP && map_get(lim, "workers"))
                return fail(ld, k, "workers given both at the top level and under limits");
            if (!lim || is_null(lim)) {
                map_del(n, "limits");
                if (!(lim = node_new(ld, YN_MAP, k)) ||
                    pair_add(ld, n, scalar_new(ld, "limits", k, true), lim) < 0)
                    return oom(ld);
            }
            if (lim->type == YN_MAP && pair_add(ld, lim, k, v) < 0)
                return oom(ld);
            map_del(n, "workers");
        }
    }
    return 0;
}

static int hook_post(struct ld *ld, struct yn *n, const cyaml_schema_field_t *fields)
{
    if (fields == cfg__scrape_fields)
        return hook_scrape(ld, n);
    if (fields == cfg__k8s_fields)
        return hook_k8s(ld, n);
    if (fields == cfg__remote_fields)
        return hook_remote(ld, n);
    if (fields == cfg__top_fields)
        return hook_top(ld, n);
    return 0;
}

/* --- pass 3: emit and load with libcyaml ------------------------------- */

static int emit_write(void *data, unsigned char *p, size_t n)
{
    return buf_append(data, p, n) == 0;
}

static int emit_node(yaml_emitter_t *em, const struct yn *n)
{
    yaml_event_t ev;

    if (n->type == YN_SCALAR) {
        yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)n->s, (int)n->len, 1, 1,
                                     YAML_DOUBLE_QUOTED_SCALAR_STYLE);
        return yaml_emitter_emit(em, &ev) ? 0 : -1;
    }
    if (n->type == YN_MAP)
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
    else
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
    if (!yaml_emitter_emit(em, &ev))
        return -1;
    for (unsigned i = 0; i < n->n; i++) {
        if (emit_node(em, n->kids[i]) < 0)
            return -1;
    }
    if (n->type == YN_MAP)
        yaml_mapping_end_event_initialize(&ev);
    else
        yaml_sequence_end_event_initialize(&ev);
    return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

static int emit(struct ld *ld, struct buf *out)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    int rc = -1;

    if (!yaml_emitter_initialize(&em))
        return oom(ld);
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
        rc = fail(ld, NULL, "config too large after normalisation (%s)",
                  em.problem ? em.problem : "output cap");
    yaml_emitter_delete(&em);
    return rc;
}

__attribute__((format(printf, 3, 0))) static void cy_log(cyaml_log_t level, void *ctx,
                                                         const char *fmt, va_list args)
{
    struct ld *ld = ctx;

    if (level >= CYAML_LOG_ERROR && ld->cymsg[0] == '\0')
        vsnprintf(ld->cymsg, sizeof(ld->cymsg), fmt, args);
}

static void *cy_mem(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, size);
}

/* Relabel rules are compiled here only to reject bad ones at load time. */
static int check_relabel(struct ld *ld, const struct cfg *c)
{
    struct yn *scs = map_get(ld->root, "scrape-configs");

    for (unsigned i = 0; i < c->n_scrape; i++) {
        const struct cfg_scrape *s = &c->scrape[i];
        enum relabel_scheme scheme = s->name_validation ? s->name_validation : c->name_validation;
        struct relabel_rules *rr = NULL;
        char msg[512];

        for (unsigned j = 0; j < s->n_relabel; j++) {
            int rc = relabel_rules_new(&s->relabel[j], 1, scheme, &rr, msg, sizeof(msg));

            relabel_rules_free(rr);
            rr = NULL;
            if (rc < 0) {
                struct yn *rules = map_get(scs->kids[i], "relabel-configs");

                return fail(ld, rules->kids[j], "relabel config %u of job \"%s\": %s", j + 1,
                            s->job_name, msg);
            }
        }
    }
    return 0;
}

int cfg_load_string(const char *yaml, size_t len, const char *name, struct cfg **out, char *err,
                    size_t errlen)
{
    static char dummy[1];
    struct ld ld = { .name = name ? name : "<config>", .err = err ? err : dummy,
                     .errlen = err ? errlen : sizeof(dummy) };
    cyaml_config_t cc = { .log_fn = cy_log, .log_ctx = &ld, .mem_fn = cy_mem,
                          .log_level = CYAML_LOG_ERROR, .flags = CYAML_CFG_DEFAULT };
    struct cfg *c = NULL;
    struct buf text;
    cyaml_err_t ce;
    int rc;

    *out = NULL;
    if (ld.errlen)
        ld.err[0] = '\0';
    buf_init(&text, CFG_MAX_EMIT);
    if (len > CFG_MAX_FILE) {
        rc = fail(&ld, NULL, "config larger than %u MiB", CFG_MAX_FILE >> 20);
        goto done;
    }
    if ((rc = parse(&ld, yaml ? yaml : "", yaml ? len : 0)) < 0)
        goto done;
    if (!ld.root || is_null(ld.root)) {
        if (!(ld.root = node_new(&ld, YN_MAP, NULL))) {
            rc = oom(&ld);
            goto done;
        }
    }
    if (ld.root->type == YN_MAP && map_get(ld.root, "pyroscopeConfigs")) {
        /* Pyroscope helm values wrap the server config in pyroscopeConfigs. */
        struct yn *in = map_get(ld.root, "pyroscopeConfigs");

        if (ld.root->n != 2) {
            struct yn *other = ld.root->kids[strcmp(ld.root->kids[0]->s, "pyroscopeConfigs")
                                                 ? 0 : 2];

            rc = fail(&ld, other, "pyroscopeConfigs must be the only top-level key, but \"%.80s\" "
                      "is also given", other->s);
            goto done;
        }
        ld.root = is_null(in) ? node_new(&ld, YN_MAP, in) : in;
        if (!ld.root) {
            rc = oom(&ld);
            goto done;
        }
    }
    if ((rc = walk_value(&ld, &ld.root, &cfg__top_schema, NULL)) < 0)
        goto done;
    if ((rc = emit(&ld, &text)) < 0)
        goto done;
    ce = cyaml_load_data((const uint8_t *)text.data, text.len, &cc, &cfg__top_schema,
                         (cyaml_data_t **)&c, NULL);
    if (ce != CYAML_OK) {
        c = NULL;
        rc = ce == CYAML_ERR_OOM ? oom(&ld)
                                 : fail(&ld, NULL, "internal error loading config: %s %s",
                                        cyaml_strerror(ce), ld.cymsg);
        goto done;
    }
    if (!(c->source = strdup(ld.name))) {
        rc = oom(&ld);
        goto done;
    }
    if ((rc = check_relabel(&ld, c)) < 0)
        goto done;
    *out = c;
    c = NULL;
    rc = 0;
done:
    if (ld.oom && rc == 0)
        rc = oom(&ld);
    cfg_free(c);
    buf_done(&text);
    while (ld.arena) {
        struct ablock *b = ld.arena;

        ld.arena = b->next;
        free(b);
    }
    return rc;
}

int cfg_load_file(const char *path, struct cfg **out, char *err, size_t errlen)
{
    struct buf b;
    char chunk[65536];
    int fd, rc = 0;
    ssize_t n;

    *out = NULL;
    buf_init(&b, CFG_MAX_FILE);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
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
            snprintf(err, errlen, rc == -E2BIG ? "%s: config file larger than 16 MiB"
                                               : "%s: out of memory", path);
            goto done;
        }
    }
    rc = cfg_load_string(b.data ? b.data : "", b.len, path, out, err, errlen);
done:
    if (fd >= 0)
        close(fd);
    buf_done(&b);
    return rc;
}

/* --- free -------------------------------------------------------------- */

static void free_strv(char **v, unsigned n)
{
    for (unsigned i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static void free_kv(struct cfg_kv *kv, unsigned n)
{
    for (unsigned i = 0; kv && i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

static void free_params(struct cfg_param *p, unsigned n)
{
    for (unsigned i = 0; p && i < n; i++) {
        free(p[i].key);
        free_strv(p[i].values, p[i].n_values);
    }
    free(p);
}

static void free_http(struct cfg_http *h)
{
    if (h->basic_auth) {
        free(h->basic_auth->username);
        free(h->basic_auth->password);
        free(h->basic_auth->password_file);
        free(h->basic_auth);
    }
    free(h->bearer_token);
    free(h->bearer_token_file);
    free(h->tls.ca_file);
    free(h->tls.cert_file);
    free(h->tls.key_file);
    free(h->tls.server_name);
    free(h->proxy_url);
}

static void free_scrape(struct cfg_scrape *s)
{
    free(s->job_name);
    free(s->scheme);
    free(s->path_prefix);
    free_params(s->params, s->n_params);
    for (unsigned i = 0; s->profiles && i < s->n_profiles; i++) {
        free(s->profiles[i].name);
        free(s->profiles[i].path);
        free(s->profiles[i].send_name);
        free_params(s->profiles[i].params, s->profiles[i].n_params);
    }
    free(s->profiles);
    for (unsigned i = 0; s->static_configs && i < s->n_static; i++) {
        free(s->static_configs[i].application);
        free(s->static_configs[i].spy_name);
        free_strv(s->static_configs[i].targets, s->static_configs[i].n_targets);
        free_kv(s->static_configs[i].labels, s->static_configs[i].n_labels);
    }
    free(s->static_configs);
    for (unsigned i = 0; s->file_sd && i < s->n_file_sd; i++)
        free_strv(s->file_sd[i].files, s->file_sd[i].n_files);
    free(s->file_sd);
    for (unsigned i = 0; s->k8s_sd && i < s->n_k8s_sd; i++) {
        struct cfg_k8s_sd *k = &s->k8s_sd[i];

        free(k->role);
        free(k->api_server);
        free(k->kubeconfig_file);
        free_strv(k->namespaces, k->n_namespaces);
        for (unsigned j = 0; k->selectors && j < k->n_selectors; j++) {
            free(k->selectors[j].role);
            free(k->selectors[j].label);
            free(k->selectors[j].field);
        }
        free(k->selectors);
        free_http(&k->http);
        free(k->service_account_dir);
    }
    free(s->k8s_sd);
    for (unsigned i = 0; s->relabel && i < s->n_relabel; i++) {
        struct relabel_cfg *r = &s->relabel[i];

        free_strv(r->source_labels, r->n_source_labels);
        free(r->separator);
        free(r->regex);
        free(r->target_label);
        free(r->replacement);
        free(r->action);
        free(r->name_validation_scheme);
    }
    free(s->relabel);
    free_http(&s->http);
}

void cfg_free(struct cfg *c)
{
    if (!c)
        return;
    free(c->source);
    free(c->log_level);
    free(c->listen_address);
    free_kv(c->external_labels, c->n_external_labels);
    for (unsigned i = 0; c->scrape && i < c->n_scrape; i++)
        free_scrape(&c->scrape[i]);
    free(c->scrape);
    for (unsigned i = 0; c->remote && i < c->n_remote; i++) {
        struct cfg_remote *r = &c->remote[i];

        free(r->name);
        free(r->url);
        free_kv(r->headers, r->n_headers);
        free(r->tenant_id);
        free_http(&r->http);
        free_kv(r->external_labels, r->n_external_labels);
    }
    free(c->remote);
    free(c->spool.dir);
    free(c->spool.fsync);
    free(c);
}

/* --- settings signatures ----------------------------------------------- */

void cfg_sig_str(struct buf *out, const char *key, const char *value)
{
    buf_printf(out, "%s=%zu:%s;", key, value ? strlen(value) : (size_t)-1, value ? value : "");
}

void cfg_http_signature(const struct cfg_http *h, struct buf *out)
{
    if (h->basic_auth) {
        cfg_sig_str(out, "user", h->basic_auth->username);
        cfg_sig_str(out, "pass", h->basic_auth->password);
        cfg_sig_str(out, "passfile", h->basic_auth->password_file);
    }
    cfg_sig_str(out, "bearer", h->bearer_token);
    cfg_sig_str(out, "bearerfile", h->bearer_token_file);
    cfg_sig_str(out, "ca", h->tls.ca_file);
    cfg_sig_str(out, "cert", h->tls.cert_file);
    cfg_sig_str(out, "key", h->tls.key_file);
    cfg_sig_str(out, "sni", h->tls.server_name);
    cfg_sig_str(out, "proxy", h->proxy_url);
    buf_printf(out, "http=%d%d%d;", h->tls.insecure_skip_verify, h->enable_http2,
               h->follow_redirects);
}
