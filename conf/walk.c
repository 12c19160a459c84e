/* SPDX-License-Identifier: Apache-2.0 */
/* The schema walk (docs/design.md "Configuration"): checks the positioned
 * tree against the libcyaml schema and normalises it so libcyaml can load it
 * as is. Keys are matched in kebab-case whatever the user wrote (snake_case
 * and a section's aliases are accepted); unknown or doubled keys, wrong
 * shapes, bad scalars and missing keys are reported at their node; `${VAR}`
 * is expanded when asked; durations and sizes become integers; defaults are
 * inserted; user maps become sequences of entries; each section's hooks run
 * around its mappings.
 *
 * Single-threaded per load; no global state besides getenv(). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/duration.h"
#include "conf/internal.h"

const struct conf_section *conf__section(const struct conf_schema *s,
                                         const cyaml_schema_field_t *fields)
{
    for (size_t l = 0; s->sections && s->sections[l]; l++) {
        for (size_t i = 0; s->sections[l][i]; i++) {
            if (s->sections[l][i]->fields == fields)
                return s->sections[l][i];
        }
    }
    return NULL;
}

static const struct conf_key no_key = { 0 };

/* The metadata of `key` in a section; an all-default entry if none. */
static const struct conf_key *key_meta(const struct conf_section *sec, const char *key)
{
    for (size_t t = 0; sec && sec->keys && sec->keys[t]; t++) {
        for (const struct conf_key *k = sec->keys[t]; k->key; k++) {
            if (strcmp(k->key, key) == 0)
                return k;
        }
    }
    return &no_key;
}

/* The canonical key an alias stands for, or NULL. */
static const char *alias_of(const struct conf_section *sec, const char *key)
{
    for (size_t t = 0; sec && sec->keys && sec->keys[t]; t++) {
        for (const struct conf_key *k = sec->keys[t]; k->key; k++) {
            for (size_t a = 0; k->aliases && k->aliases[a]; a++) {
                if (strcmp(k->aliases[a], key) == 0)
                    return k->key;
            }
        }
    }
    return NULL;
}

/* --- env expansion ----------------------------------------------------- */

static bool name_start(char c)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* ${VAR}, ${VAR:-default} (default when unset or empty), $$ -> $. Any other
 * `$` is literal, so relabel templates like $1 and ${1} pass through. */
static int expand_env(struct conf_load *ld, struct conf_node *n)
{
    struct buf b;
    int rc = 0;

    if (!memchr(n->s, '$', n->len))
        return 0;
    if (!(ld->flags & CONF_EXPAND_ENV)) {
        if (strstr(n->s, "${"))
            ld->env_seen = true;
        return 0;
    }
    buf_init(&b, CONF_MAX_FILE);
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
                    rc = conf_fail(ld, n, "unterminated \"${\" in value \"%.80s\"", s);
                    break;
                }
                def = s + j + 2;
                deflen = (size_t)(close - def);
                j = (size_t)(close - s);
            } else if (j >= n->len || s[j] != '}') {
                rc = conf_fail(ld, n,
                               "malformed \"${...}\" in value \"%.80s\": expected "
                               "${NAME} or ${NAME:-default}",
                               s);
                break;
            }
            if (name_end - i - 2 >= sizeof(var)) {
                rc = conf_fail(ld, n, "environment variable name too long");
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
        char *s = conf__strndup(ld, b.data ? b.data : "", b.len);

        if (!s) {
            rc = conf_oom(ld);
        } else {
            n->s = s;
            n->len = b.len;
        }
    } else if (rc == -E2BIG) {
        rc = conf_fail(ld, n, "value too long after ${...} expansion");
    } else if (rc == -ENOMEM) {
        rc = conf_oom(ld);
    }
    buf_done(&b);
    return rc;
}

/* --- scalars ----------------------------------------------------------- */

static const char *expected(const cyaml_schema_value_t *sv, const struct conf_key *m, char *b,
                            size_t blen)
{
    size_t off;

    if (m->shape && sv->type == CYAML_IGNORE)
        sv = m->shape;
    switch (sv->type) {
    case CYAML_STRING:
        if (!m->choices)
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
        if (m->unit == CONF_UNIT_DURATION)
            return "a duration like 15s";
        if (m->unit == CONF_UNIT_BYTES)
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

static int type_error(struct conf_load *ld, const struct conf_node *n,
                      const cyaml_schema_value_t *sv, const struct conf_key *m)
{
    char e[256], g[128];

    return conf_fail(ld, n, "expected %s, got %s", expected(sv, m, e, sizeof(e)),
                     conf_describe(n, g, sizeof(g)));
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
        { "", 0 },     { "b", 0 },   { "k", 10 },   { "kb", 10 },  { "kib", 10 },
        { "m", 20 },   { "mb", 20 }, { "mib", 20 }, { "g", 30 },   { "gb", 30 },
        { "gib", 30 }, { "t", 40 },  { "tb", 40 },  { "tib", 40 },
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

static int walk_scalar(struct conf_load *ld, struct conf_node *n, const cyaml_schema_value_t *sv,
                       const struct conf_key *m)
{
    uint64_t v, max;
    char tmp[32];
    int rc;

    if (n->type != CONF__SCALAR || (!n->synth && conf_null(n)))
        return type_error(ld, n, sv, m);
    if (n->converted)
        return 0;
    if (!n->synth && (rc = expand_env(ld, n)) < 0)
        return rc;
    if (memchr(n->s, '\0', n->len))
        return conf_fail(ld, n, "NUL characters are not allowed in values");
    switch (sv->type) {
    case CYAML_STRING:
        if (m->choices) {
            for (int i = 0; m->choices[i]; i++) {
                if (strcmp(n->s, m->choices[i]) == 0)
                    return 0;
            }
            return type_error(ld, n, sv, m);
        }
        return 0;
    case CYAML_BOOL:
        if (!strcasecmp(n->s, "true") || !strcasecmp(n->s, "yes") || !strcasecmp(n->s, "on"))
            return conf__set_text(ld, n, "true");
        if (!strcasecmp(n->s, "false") || !strcasecmp(n->s, "no") || !strcasecmp(n->s, "off"))
            return conf__set_text(ld, n, "false");
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
        if (m->unit == CONF_UNIT_DURATION)
            rc = duration_parse(n->s, &v);
        else if (m->unit == CONF_UNIT_BYTES)
            rc = parse_bytes(n->s, &v);
        else
            rc = parse_uint(n->s, max, &v);
        if (rc == -ERANGE)
            return conf_fail(ld, n, "duration \"%.40s\" out of range (at most 292y)", n->s);
        if (rc < 0 || v > max)
            return type_error(ld, n, sv, m);
        snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
        n->converted = true;
        return conf__set_text(ld, n, tmp);
    case CYAML_INT:
        if (parse_uint(n->s[0] == '-' ? n->s + 1 : n->s, INT32_MAX, &v) < 0)
            return type_error(ld, n, sv, m);
        snprintf(tmp, sizeof(tmp), "%s%" PRIu64, n->s[0] == '-' ? "-" : "", v);
        n->converted = true;
        return conf__set_text(ld, n, tmp);
    default:
        return conf_fail(ld, n, "internal error: unexpected schema type");
    }
}

/* --- user maps --------------------------------------------------------- */

/* Turns a YAML map with user-chosen keys into the sequence of entries the
 * schema has. Keys are not expanded. */
static int convert_map(struct conf_load *ld, struct conf_node **slot, enum conf_mapkind kind)
{
    struct conf_node *m = *slot, *seq = conf_new_seq(ld, m);

    if (!seq)
        return conf_oom(ld);
    seq->synth = false; /* still what the user wrote: conf_user_key() finds it */
    if (m->n / 2 > CONF__MAX_MAP)
        return conf_fail(ld, m, "more than %d entries in one mapping", CONF__MAX_MAP);
    for (unsigned i = 0; i + 1 < m->n; i += 2) {
        struct conf_node *k = m->kids[i], *v = m->kids[i + 1], *e = conf_new_map(ld, k), *kn;

        if (!e)
            return conf_oom(ld);
        for (unsigned j = 0; j < i; j += 2) {
            if (strcmp(m->kids[j]->s, k->s) == 0)
                return conf_fail(ld, k, "key \"%.80s\" given twice", k->s);
        }
        if (!(kn = conf_new_str(ld, k->s, k)))
            return conf_oom(ld);
        switch (kind) {
        case CONF_MAP_KV:
            if (conf_null(v) && !(v = conf_new_str(ld, "", v)))
                return conf_oom(ld);
            if (conf__pair_add(ld, e, conf_new_str(ld, ".key", k), kn) < 0 ||
                conf__pair_add(ld, e, conf_new_str(ld, ".value", k), v) < 0)
                return -ENOMEM;
            break;
        case CONF_MAP_PARAM:
            if (conf_null(v) || v->type == CONF__SCALAR) {
                struct conf_node *l = conf_new_seq(ld, v);

                if (!l || (!conf_null(v) && conf__kid_add(ld, l, v) < 0))
                    return conf_oom(ld);
                v = l;
            }
            if (conf__pair_add(ld, e, conf_new_str(ld, ".key", k), kn) < 0 ||
                conf__pair_add(ld, e, conf_new_str(ld, ".values", k), v) < 0)
                return -ENOMEM;
            break;
        case CONF_MAP_NAMED:
            if (!conf_null(v) && v->type != CONF__MAP) {
                char g[128];

                return conf_fail(ld, v, "expected a mapping, got %s",
                                 conf_describe(v, g, sizeof(g)));
            }
            if (conf__pair_add(ld, e, conf_new_str(ld, ".name", k), kn) < 0)
                return -ENOMEM;
            for (unsigned j = 0; !conf_null(v) && j < v->n; j++) {
                if (conf__kid_add(ld, e, v->kids[j]) < 0)
                    return -ENOMEM;
            }
            break;
        default:
            break;
        }
        if (conf__kid_add(ld, seq, e) < 0)
            return -ENOMEM;
    }
    *slot = seq;
    return 0;
}

/* --- mappings ---------------------------------------------------------- */

static int walk_value(struct conf_load *ld, struct conf_node **slot, const cyaml_schema_value_t *sv,
                      const struct conf_key *m);

/* The canonical key for what the user wrote: snake_case becomes
 * kebab-case, then a section alias maps to its key. NULL if too long or
 * internal. */
static const char *normalise_key(const struct conf_section *sec, const char *written, char *norm,
                                 size_t normlen)
{
    size_t l = strlen(written);
    const char *alias;

    if (written[0] == '.' || l >= normlen)
        return NULL;
    for (size_t c = 0; c <= l; c++)
        norm[c] = written[c] == '_' ? '-' : written[c];
    alias = alias_of(sec, norm);
    return alias ? alias : norm;
}

static int walk_map(struct conf_load *ld, struct conf_node **slot, const cyaml_schema_value_t *sv)
{
    const cyaml_schema_field_t *fields = sv->mapping.fields;
    const struct conf_section *sec = conf__section(ld->schema, fields);
    const char *what = sec ? sec->name : "mapping";
    struct conf_node *n = *slot, *seen[64] = { 0 };
    unsigned nf = 0, out = 0;
    int rc;

    while (fields[nf].key)
        nf++;
    if (n->type != CONF__MAP || nf > 64)
        return type_error(ld, n, sv, &no_key);
    if (sec && sec->pre && (rc = sec->pre(ld, n)) < 0)
        return rc;
    for (unsigned i = 0; i + 1 < n->n; i += 2) {
        struct conf_node *k = n->kids[i], *v = n->kids[i + 1];
        char norm[128];
        const char *key = k->s;
        unsigned f;

        if (!k->synth && !(key = normalise_key(sec, k->s, norm, sizeof(norm))))
            return conf_fail(ld, k, "unknown key \"%.80s\" in %s", k->s, what);
        for (f = 0; f < nf && strcmp(fields[f].key, key) != 0; f++)
            ;
        if (f == nf)
            return conf_fail(ld, k, "unknown key \"%.80s\" in %s", k->s, what);
        if (seen[f]) {
            if (strcmp(seen[f]->s, k->s) == 0)
                return conf_fail(ld, k, "key \"%s\" given twice in %s", k->s, what);
            return conf_fail(ld, k, "both \"%s\" and \"%s\" given in %s (they are the same key)",
                             seen[f]->s, k->s, what);
        }
        seen[f] = k;
        if (!v->synth && conf_null(v))
            continue; /* `key:` with no value means the key is absent */
        if (!k->synth) {
            struct conf_node *kk = conf__node_new(ld, CONF__SCALAR, k);

            if (!kk)
                return conf_oom(ld);
            kk->s = (char *)fields[f].key;
            kk->len = strlen(kk->s);
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
        rc = walk_value(ld, &n->kids[i + 1], &fields[f].value, key_meta(sec, fields[f].key));
        if (rc < 0)
            return rc;
    }
    for (unsigned f = 0; f < nf; f++) {
        const cyaml_schema_field_t *fd = &fields[f];
        const struct conf_key *m;
        struct conf_node *v;

        if (conf__map_idx(n, fd->key) >= 0)
            continue;
        if (!(fd->value.flags & CYAML_FLAG_OPTIONAL) && fd->value.type != CYAML_IGNORE)
            return conf_fail(ld, seen[f] ? seen[f] : n, "missing required key \"%s\" in %s",
                             fd->key, what);
        m = key_meta(sec, fd->key);
        if (m->has_num) {
            char num[24];

            snprintf(num, sizeof(num), "%" PRIu64, m->num);
            if ((v = conf_new_str(ld, num, n)))
                v->converted = true;
        } else if (m->def) {
            v = conf_new_str(ld, m->def, n);
        } else if (fd->value.type == CYAML_MAPPING && !(fd->value.flags & CYAML_FLAG_POINTER))
            v = conf_new_map(ld, n);
        else
            continue;
        if (!v)
            return conf_oom(ld);
        if (conf__pair_add(ld, n, conf_new_str(ld, fd->key, n), v) < 0)
            return -ENOMEM;
        if ((rc = walk_value(ld, &n->kids[n->n - 1], &fd->value, m)) < 0)
            return rc;
    }
    return sec && sec->post ? sec->post(ld, n) : 0;
}

static int walk_value(struct conf_load *ld, struct conf_node **slot, const cyaml_schema_value_t *sv,
                      const struct conf_key *m)
{
    struct conf_node *n = *slot;
    int rc;

    ld->at_line = n->line; /* where a "config too large" is noticed */
    ld->at_col = n->col;
    if (m->shape && sv->type == CYAML_IGNORE)
        sv = m->shape;
    if (m->mapkind != CONF_MAP_NONE) {
        if (n->type != CONF__MAP) {
            char g[128];

            return conf_fail(ld, n, "expected a mapping, got %s", conf_describe(n, g, sizeof(g)));
        }
        if ((rc = convert_map(ld, slot, m->mapkind)) < 0)
            return rc;
        n = *slot;
    }
    switch (sv->type) {
    case CYAML_MAPPING:
        return walk_map(ld, slot, sv);
    case CYAML_SEQUENCE:
        if (n->type != CONF__SEQ)
            return type_error(ld, n, sv, m);
        for (unsigned i = 0; i < n->n; i++) {
            if ((rc = walk_value(ld, &n->kids[i], sv->sequence.entry, &no_key)) < 0)
                return rc;
        }
        return 0;
    case CYAML_IGNORE:
        return 0;
    default:
        return walk_scalar(ld, n, sv, m);
    }
}

int conf__walk(struct conf_load *ld, struct conf_node **slot, const cyaml_schema_value_t *v)
{
    return walk_value(ld, slot, v, &no_key);
}
