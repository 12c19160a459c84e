/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus relabeling (model/relabel of Prometheus 3): rule validation
 * with Prometheus' exact messages, the eleven actions, Go's
 * Regexp.ExpandString templates, and labels.Builder's iteration order
 * (docs/design.md "Relabeling").
 *
 * Compile once, apply many: relabel_rules_new() validates every rule and
 * precompiles its regex (regex.c) and its `$` templates, so applying does no
 * parsing. A rule list is immutable afterwards and may be applied from any
 * number of threads at once.
 *
 * relabel_apply() mirrors labels.Builder: the input set stays untouched
 * while the rules run (it is the builder's base); sets and deletes go to an
 * overlay whose strings live in a per-call arena; when every rule has kept
 * the target the overlay is committed into the caller's set in place. The
 * overlay keeps Go's order (base labels by name, then labels added by
 * earlier rules in the order they were added), which labelmap, labeldrop and
 * labelkeep iterate. */
/* MD5() is deprecated in OpenSSL 3 in favour of EVP, see hashmod() */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <errno.h>
#include <locale.h>
#include <openssl/md5.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <wctype.h>

#include "common/utf8.h"
#include "relabel/internal.h"
#include "relabel/relabel.h"

enum action {
    A_REPLACE,
    A_KEEP,
    A_DROP,
    A_KEEPEQUAL,
    A_DROPEQUAL,
    A_HASHMOD,
    A_LABELMAP,
    A_LABELDROP,
    A_LABELKEEP,
    A_LOWERCASE,
    A_UPPERCASE,
};

static const char *const action_names[] = {
    [A_REPLACE] = "replace",     [A_KEEP] = "keep",           [A_DROP] = "drop",
    [A_KEEPEQUAL] = "keepequal", [A_DROPEQUAL] = "dropequal", [A_HASHMOD] = "hashmod",
    [A_LABELMAP] = "labelmap",   [A_LABELDROP] = "labeldrop", [A_LABELKEEP] = "labelkeep",
    [A_LOWERCASE] = "lowercase", [A_UPPERCASE] = "uppercase",
};

/* One piece of a precompiled `$` template. */
enum tpart_kind { T_LIT, T_NUM, T_NAME };

struct tpart {
    enum tpart_kind kind;
    const char *s; /* T_LIT text or T_NAME name, inside tmpl.text */
    size_t len;
    uint32_t num;
};

struct tmpl {
    char *text;
    size_t len;
    bool has_dollar;
    struct tpart *parts;
    size_t n;
};

struct rule {
    enum action action;
    char **src;
    size_t *src_len;
    unsigned n_src;
    char *sep;
    size_t sep_len;
    struct relabel__regex *re;
    bool regex_default;
    uint64_t modulus;
    struct tmpl target;
    struct tmpl repl;
    enum relabel_scheme scheme;
};

struct relabel_rules {
    struct rule *v;
    size_t n;
    uint32_t max_groups;
};

const char *relabel_strerror(int code)
{
    switch (code) {
    case RELABEL_EINVAL:
        return "invalid relabel rule";
    case RELABEL_EREGEX:
        return "invalid regex";
    case RELABEL_ELIMIT:
        return "regex match or depth limit exceeded";
    default:
        return code < 0 ? strerror(-code) : "success";
    }
}

/* ---------------------------------------------------------------------- */
/* Label names, UTF-8, sanitising                                         */
/* ---------------------------------------------------------------------- */

bool relabel_valid_utf8(const char *s, size_t len)
{
    return utf8_valid(s, len);
}

static bool legacy_first(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool word_char(char c)
{
    return legacy_first(c) || (c >= '0' && c <= '9');
}

bool relabel_valid_label_name(const char *name, size_t len, enum relabel_scheme scheme)
{
    if (len == 0)
        return false;
    if (scheme != RELABEL_SCHEME_LEGACY)
        return relabel_valid_utf8(name, len);
    if (!legacy_first(name[0]))
        return false;
    for (size_t i = 1; i < len; i++)
        if (!word_char(name[i]))
            return false;
    return true;
}

char *relabel_sanitize_label_name(const char *s, size_t len)
{
    char *out = malloc(len + 1);
    size_t o = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < len;) {
        uint32_t r;
        bool invalid;
        size_t w = utf8_decode(s + i, len - i, &r, &invalid);

        out[o++] = (r < 0x80 && word_char((char)r)) ? (char)r : '_';
        i += w;
    }
    out[o] = '\0';
    return out;
}

int relabel_parse_scheme(const char *s)
{
    if (!s || !*s)
        return RELABEL_SCHEME_UNSET;
    if (strcmp(s, "utf8") == 0)
        return RELABEL_SCHEME_UTF8;
    if (strcmp(s, "legacy") == 0)
        return RELABEL_SCHEME_LEGACY;
    return -1;
}

/* relabelTargetLegacy: ^(?:(?:[a-zA-Z_]|\$(?:\{\w+\}|\w+))+\w*)+$, by hand:
 * a letter, '_' or $-reference first, then word characters and
 * $-references. */
static bool legacy_template_ok(const char *s, size_t len)
{
    size_t i = 0;
    bool first = true;

    if (len == 0)
        return false;
    while (i < len) {
        if (s[i] == '$') {
            size_t j = i + 1;

            if (j < len && s[j] == '{') {
                size_t k = j + 1;

                while (k < len && word_char(s[k]))
                    k++;
                if (k == j + 1 || k >= len || s[k] != '}')
                    return false;
                i = k + 1;
            } else {
                while (j < len && word_char(s[j]))
                    j++;
                if (j == i + 1)
                    return false;
                i = j;
            }
        } else if (first ? legacy_first(s[i]) : word_char(s[i])) {
            i++;
        } else {
            return false;
        }
        first = false;
    }
    return true;
}

static bool template_name_ok(const char *s, size_t len, enum relabel_scheme scheme)
{
    if (scheme == RELABEL_SCHEME_LEGACY)
        return legacy_template_ok(s, len);
    return relabel_valid_label_name(s, len, scheme);
}

/* Go's %q (strconv.Quote) for messages. */
static void go_quote(const char *s, char *out, size_t outlen)
{
    size_t o = 0;

    if (outlen < 3) {
        if (outlen)
            out[0] = '\0';
        return;
    }
    out[o++] = '"';
    for (size_t i = 0; s[i] && o + 8 < outlen;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t r;
        bool invalid;
        size_t w;

        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
            i++;
            continue;
        }
        if (c < 0x20 || c == 0x7F) {
            const char *esc = NULL;

            switch (c) {
            case '\a':
                esc = "\\a";
                break;
            case '\b':
                esc = "\\b";
                break;
            case '\f':
                esc = "\\f";
                break;
            case '\n':
                esc = "\\n";
                break;
            case '\r':
                esc = "\\r";
                break;
            case '\t':
                esc = "\\t";
                break;
            case '\v':
                esc = "\\v";
                break;
            default:
                break;
            }
            if (esc)
                o += (size_t)snprintf(out + o, outlen - o, "%s", esc);
            else
                o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
            i++;
            continue;
        }
        w = utf8_decode(s + i, strlen(s + i), &r, &invalid);
        if (invalid) {
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
            i++;
            continue;
        }
        memcpy(out + o, s + i, w);
        o += w;
        i += w;
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* ---------------------------------------------------------------------- */
/* Templates (Go Regexp.ExpandString, precompiled)                        */
/* ---------------------------------------------------------------------- */

static void tmpl_done(struct tmpl *t)
{
    free(t->text);
    free(t->parts);
    memset(t, 0, sizeof(*t));
}

static int tmpl_push(struct tmpl *t, enum tpart_kind kind, const char *s, size_t len, uint32_t num)
{
    struct tpart *p;

    if (kind == T_LIT && len == 0)
        return 0;
    if (kind == T_LIT && t->n && t->parts[t->n - 1].kind == T_LIT &&
        t->parts[t->n - 1].s + t->parts[t->n - 1].len == s) {
        t->parts[t->n - 1].len += len;
        return 0;
    }
    p = realloc(t->parts, (t->n + 1) * sizeof(*p));
    if (!p)
        return -ENOMEM;
    t->parts = p;
    p[t->n].kind = kind;
    p[t->n].s = s;
    p[t->n].len = len;
    p[t->n].num = num;
    t->n++;
    return 0;
}

/* Go's extract(): the name after '$' (or inside ${}), then its number. */
static bool tmpl_extract(const char *s, size_t len, size_t *name_off, size_t *name_len,
                         int64_t *num, size_t *consumed)
{
    bool brace = false;
    size_t i = 0, off = 0;

    if (len == 0)
        return false;
    if (s[0] == '{') {
        brace = true;
        off = 1;
    }
    while (off + i < len) {
        uint32_t r;
        bool invalid;
        size_t w = utf8_decode(s + off + i, len - off - i, &r, &invalid);

        if (invalid || !(r == '_' || relabel__is_letter_or_digit(r)))
            break;
        i += w;
    }
    if (i == 0)
        return false;
    *name_off = off;
    *name_len = i;
    if (brace) {
        if (off + i >= len || s[off + i] != '}')
            return false;
        *consumed = off + i + 1;
    } else {
        *consumed = off + i;
    }
    *num = 0;
    for (size_t k = 0; k < i; k++) {
        char c = s[off + k];

        if (c < '0' || c > '9' || *num >= 100000000) {
            *num = -1;
            break;
        }
        *num = *num * 10 + (c - '0');
    }
    if (s[off] == '0' && i > 1)
        *num = -1;
    return true;
}

static int tmpl_compile(struct tmpl *t, const char *src)
{
    size_t i = 0;
    int rc;

    memset(t, 0, sizeof(*t));
    t->len = strlen(src);
    t->text = strdup(src);
    if (!t->text)
        return -ENOMEM;
    t->has_dollar = memchr(src, '$', t->len) != NULL;
    while (i < t->len) {
        const char *d = memchr(t->text + i, '$', t->len - i);
        size_t name_off, name_len, consumed;
        int64_t num;

        if (!d)
            break;
        if ((rc = tmpl_push(t, T_LIT, t->text + i, (size_t)(d - t->text) - i, 0)) < 0)
            return rc;
        i = (size_t)(d - t->text) + 1;
        if (i < t->len && t->text[i] == '$') {
            if ((rc = tmpl_push(t, T_LIT, t->text + i, 1, 0)) < 0)
                return rc;
            i++;
            continue;
        }
        if (!tmpl_extract(t->text + i, t->len - i, &name_off, &name_len, &num, &consumed)) {
            if ((rc = tmpl_push(t, T_LIT, t->text + i - 1, 1, 0)) < 0)
                return rc;
            continue;
        }
        if (num >= 0)
            rc = tmpl_push(t, T_NUM, NULL, 0, (uint32_t)num);
        else
            rc = tmpl_push(t, T_NAME, t->text + i + name_off, name_len, 0);
        if (rc < 0)
            return rc;
        i += consumed;
    }
    return tmpl_push(t, T_LIT, t->text + i, t->len - i, 0);
}

/* ---------------------------------------------------------------------- */
/* Per-apply arena and label builder                                      */
/* ---------------------------------------------------------------------- */

struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    char data[];
};

struct arena {
    char *inl;
    size_t inl_used, inl_cap;
    struct arena_chunk *chunks;
};

static void *arena_alloc(struct arena *a, size_t n)
{
    struct arena_chunk *c;

    n = (n + 7) & ~(size_t)7;
    if (a->inl_cap - a->inl_used >= n) {
        void *p = a->inl + a->inl_used;

        a->inl_used += n;
        return p;
    }
    c = a->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 16384 ? n : 16384;

        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->next = a->chunks;
        c->used = 0;
        c->cap = cap;
        a->chunks = c;
    }
    c->used += n;
    return c->data + c->used - n;
}

static void arena_done(struct arena *a)
{
    while (a->chunks) {
        struct arena_chunk *n = a->chunks->next;

        free(a->chunks);
        a->chunks = n;
    }
}

static char *arena_strndup(struct arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);

    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

struct kv {
    const char *name;
    const char *value;
    size_t nlen, vlen;
};

struct kvlist {
    struct kv *v;
    size_t n, cap;
};

struct builder {
    const struct labels *base;
    struct kvlist add; /* set by rules, in the order first set */
    struct kvlist del; /* deleted names (value unused) */
    struct arena *a;
    /* base labels whose name is in add or del; once there a name stays in
     * one of the two lists, so this only ever grows */
    unsigned char *shadow;
};

static int kv_push(struct arena *a, struct kvlist *l, struct kv kv)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct kv *v = arena_alloc(a, cap * sizeof(*v));

        if (!v)
            return -ENOMEM;
        if (l->n)
            memcpy(v, l->v, l->n * sizeof(*v));
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = kv;
    return 0;
}

static bool name_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && memcmp(a, b, alen) == 0;
}

static long kv_find(const struct kvlist *l, const char *name, size_t nlen)
{
    for (size_t i = 0; i < l->n; i++)
        if (name_eq(l->v[i].name, l->v[i].nlen, name, nlen))
            return (long)i;
    return -1;
}

/* labels.Builder.Get: add first (Set does not clear del), then del, then
 * base. An unshadowed base label is in neither list, so it answers at once;
 * otherwise only add can hold a value. */
static const char *b_get(const struct builder *b, const char *name, size_t nlen, size_t *vlen)
{
    long i = labels_find(b->base, name, nlen);

    if (i >= 0 && !b->shadow[i]) {
        *vlen = label_value_len(&b->base->v[i]);
        return b->base->v[i].value;
    }
    i = kv_find(&b->add, name, nlen);
    if (i < 0)
        return NULL;
    *vlen = b->add.v[i].vlen;
    return b->add.v[i].value;
}

static void b_shadow(struct builder *b, const char *name, size_t nlen)
{
    long i = labels_find(b->base, name, nlen);

    if (i >= 0)
        b->shadow[i] = 1;
}

/* Appends `name` (copied into the arena) with kv's value to `list`, add or
 * del, and shadows the base label of that name. */
static int b_record(struct builder *b, struct kvlist *list, const char *name, size_t nlen,
                    struct kv kv)
{
    b_shadow(b, name, nlen);
    kv.name = arena_strndup(b->a, name, nlen);
    if (!kv.name)
        return -ENOMEM;
    kv.nlen = nlen;
    return kv_push(b->a, list, kv);
}

static int b_del(struct builder *b, const char *name, size_t nlen)
{
    long i = kv_find(&b->add, name, nlen);
    struct kv kv = { 0 };

    if (i >= 0) {
        memmove(&b->add.v[i], &b->add.v[i + 1], (b->add.n - (size_t)i - 1) * sizeof(struct kv));
        b->add.n--;
    }
    if (kv_find(&b->del, name, nlen) >= 0)
        return 0;
    return b_record(b, &b->del, name, nlen, kv);
}

static int b_set(struct builder *b, const char *name, size_t nlen, const char *value, size_t vlen)
{
    long i;
    struct kv kv;

    if (vlen == 0)
        return b_del(b, name, nlen);
    kv.value = arena_strndup(b->a, value, vlen);
    if (!kv.value)
        return -ENOMEM;
    kv.vlen = vlen;
    i = kv_find(&b->add, name, nlen);
    if (i >= 0) {
        b->add.v[i].value = kv.value;
        b->add.v[i].vlen = vlen;
        return 0;
    }
    return b_record(b, &b->add, name, nlen, kv);
}

/* labels.Builder.Range's snapshot: base labels neither deleted nor set,
 * in name order, then the set ones in order. */
static int b_snapshot(const struct builder *b, struct kvlist *out)
{
    out->n = 0;
    for (size_t i = 0; i < b->base->n; i++) {
        const struct label *l = &b->base->v[i];
        struct kv kv = { l->name, l->value, label_name_len(l), label_value_len(l) };
        int rc;

        if (b->shadow[i])
            continue;
        if ((rc = kv_push(b->a, out, kv)) < 0)
            return rc;
    }
    for (size_t i = 0; i < b->add.n; i++) {
        int rc = kv_push(b->a, out, b->add.v[i]);

        if (rc < 0)
            return rc;
    }
    return 0;
}

static int b_commit(struct builder *b, struct labels *ls)
{
    for (size_t i = 0; i < b->del.n; i++) {
        if (kv_find(&b->add, b->del.v[i].name, b->del.v[i].nlen) >= 0)
            continue;
        labels_del(ls, b->del.v[i].name);
    }
    for (size_t i = 0; i < b->add.n; i++) {
        int rc = labels_setn(ls, b->add.v[i].name, b->add.v[i].nlen, b->add.v[i].value,
                             b->add.v[i].vlen);

        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A growable string in the arena (Go's []byte append). */
struct sbuf {
    struct arena *a;
    char *p;
    size_t len, cap;
};

static int sb_append(struct sbuf *s, const char *p, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 128;
        char *np;

        while (cap < s->len + n + 1)
            cap *= 2;
        np = arena_alloc(s->a, cap);
        if (!np)
            return -ENOMEM;
        if (s->len)
            memcpy(np, s->p, s->len);
        s->p = np;
        s->cap = cap;
    }
    if (n)
        memcpy(s->p + s->len, p, n);
    s->len += n;
    s->p[s->len] = '\0';
    return 0;
}

static int tmpl_expand(const struct tmpl *t, const struct relabel__regex *re, const char *src,
                       const size_t *ov, struct sbuf *out)
{
    uint32_t ng = relabel__regex_groups(re);
    int rc = 0;

    for (size_t i = 0; i < t->n && rc == 0; i++) {
        const struct tpart *p = &t->parts[i];

        switch (p->kind) {
        case T_LIT:
            rc = sb_append(out, p->s, p->len);
            break;
        case T_NUM:
            if (p->num <= ng && ov[2 * p->num] != RELABEL__UNSET)
                rc = sb_append(out, src + ov[2 * p->num], ov[2 * p->num + 1] - ov[2 * p->num]);
            break;
        case T_NAME:
            for (uint32_t g = 1; g <= ng; g++) {
                const char *n = relabel__regex_group_name(re, g);

                if (n && strlen(n) == p->len && memcmp(n, p->s, p->len) == 0 &&
                    ov[2 * g] != RELABEL__UNSET) {
                    rc = sb_append(out, src + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
                    break;
                }
            }
            break;
        }
    }
    if (rc == 0 && !out->p)
        rc = sb_append(out, "", 0);
    return rc;
}

/* Go's Regexp.ReplaceAllString(src, template). */
static int replace_all(const struct tmpl *t, const struct relabel__regex *re, const char *src,
                       size_t len, size_t *ov, struct sbuf *out)
{
    size_t search = 0, last_end = 0;
    int rc;

    while (search <= len) {
        size_t width;

        rc = relabel__regex_search(re, src, len, search, ov);
        if (rc < 0)
            return rc;
        if (rc == 0)
            break;
        if ((rc = sb_append(out, src + last_end, ov[0] - last_end)) < 0)
            return rc;
        if (ov[1] > last_end || ov[0] == 0)
            if ((rc = tmpl_expand(t, re, src, ov, out)) < 0)
                return rc;
        last_end = ov[1];
        if (search < len) {
            uint32_t r;
            bool invalid;

            width = utf8_decode(src + search, len - search, &r, &invalid);
        } else {
            width = 0;
        }
        if (search + width > ov[1])
            search += width;
        else if (search + 1 > ov[1])
            search++;
        else
            search = ov[1];
    }
    rc = sb_append(out, src + last_end, len - last_end);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Case mapping (Go strings.ToLower / ToUpper)                            */
/* ---------------------------------------------------------------------- */

static pthread_once_t locale_once = PTHREAD_ONCE_INIT;
static locale_t utf8_locale;

static void locale_init(void)
{
    utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

static uint32_t map_rune(uint32_t r, bool upper)
{
    if (r < 0x80) {
        if (upper && r >= 'a' && r <= 'z')
            return r - 32;
        if (!upper && r >= 'A' && r <= 'Z')
            return r + 32;
        return r;
    }
    if (!utf8_locale)
        return r;
    return upper ? (uint32_t)towupper_l((wint_t)r, utf8_locale)
                 : (uint32_t)towlower_l((wint_t)r, utf8_locale);
}

static int change_case(const char *s, size_t len, bool upper, struct sbuf *out)
{
    bool ascii = true;
    int rc = 0;

    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] >= 0x80)
            ascii = false;
    if (ascii) {
        if ((rc = sb_append(out, s, len)) < 0)
            return rc;
        for (size_t i = 0; i < len; i++)
            out->p[i] = (char)map_rune((unsigned char)out->p[i], upper);
        return 0;
    }
    pthread_once(&locale_once, locale_init);
    for (size_t i = 0; i < len && rc == 0;) {
        uint32_t r;
        bool invalid;
        size_t w = utf8_decode(s + i, len - i, &r, &invalid);
        char enc[4];
        uint32_t m = map_rune(r, upper);

        if (m > 0x10FFFF || (m >= 0xD800 && m <= 0xDFFF))
            m = r;
        rc = sb_append(out, enc, utf8_encode(m, enc));
        i += w;
    }
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Compilation and validation                                             */
/* ---------------------------------------------------------------------- */

static void rule_done(struct rule *r)
{
    for (unsigned i = 0; i < r->n_src; i++)
        free(r->src[i]);
    free(r->src);
    free(r->src_len);
    free(r->sep);
    relabel__regex_free(r->re);
    tmpl_done(&r->target);
    tmpl_done(&r->repl);
}

void relabel_rules_free(struct relabel_rules *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->n; i++)
        rule_done(&rs->v[i]);
    free(rs->v);
    free(rs);
}

size_t relabel_rules_count(const struct relabel_rules *rs)
{
    return rs ? rs->n : 0;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return RELABEL_EINVAL;
}

/* Config.Validate, in Prometheus' order, on the defaulted fields. */
static int validate(const struct relabel_cfg *c, const struct rule *r, const char *target,
                    const char *repl, const char *sep, bool src_given, char *err, size_t errlen)
{
    const char *a = action_names[r->action];
    enum action act = r->action;
    bool has_dollar = strchr(target, '$') != NULL;
    char q[600];

    if (act == A_HASHMOD && c->modulus == 0)
        return fail(err, errlen, "relabel configuration for hashmod requires non-zero modulus");
    if ((act == A_REPLACE || act == A_HASHMOD || act == A_LOWERCASE || act == A_UPPERCASE ||
         act == A_KEEPEQUAL || act == A_DROPEQUAL) &&
        target[0] == '\0')
        return fail(err, errlen,
                    "relabel configuration for %s action requires 'target_label' value", a);
    go_quote(target, q, sizeof(q));
    if (act == A_REPLACE && has_dollar && !template_name_ok(target, strlen(target), r->scheme))
        return fail(err, errlen, "%s is invalid 'target_label' for %s action", q, a);
    if (act == A_REPLACE && !has_dollar &&
        !relabel_valid_label_name(target, strlen(target), r->scheme))
        return fail(err, errlen, "%s is invalid 'target_label' for %s action", q, a);
    if ((act == A_LOWERCASE || act == A_UPPERCASE || act == A_KEEPEQUAL || act == A_DROPEQUAL) &&
        !relabel_valid_label_name(target, strlen(target), r->scheme))
        return fail(err, errlen, "%s is invalid 'target_label' for %s action", q, a);
    if ((act == A_LOWERCASE || act == A_UPPERCASE || act == A_KEEPEQUAL || act == A_DROPEQUAL) &&
        strcmp(repl, "$1") != 0)
        return fail(err, errlen, "'replacement' can not be set for %s action", a);
    if (act == A_LABELMAP && !template_name_ok(repl, strlen(repl), r->scheme)) {
        go_quote(repl, q, sizeof(q));
        return fail(err, errlen, "%s is invalid 'replacement' for %s action", q, a);
    }
    if (act == A_HASHMOD && !relabel_valid_label_name(target, strlen(target), r->scheme))
        return fail(err, errlen, "%s is invalid 'target_label' for %s action", q, a);
    if ((act == A_KEEPEQUAL || act == A_DROPEQUAL) &&
        (!r->regex_default || c->modulus != 0 || strcmp(sep, ";") != 0 || strcmp(repl, "$1") != 0))
        return fail(err, errlen,
                    "%s action requires only 'source_labels' and `target_label`, and no other "
                    "fields",
                    a);
    if ((act == A_LABELDROP || act == A_LABELKEEP) &&
        (src_given || target[0] != '\0' || c->modulus != 0 || strcmp(sep, ";") != 0 ||
         strcmp(repl, "$1") != 0))
        return fail(err, errlen, "%s action requires only 'regex', and no other fields", a);
    return 0;
}

static int compile_rule(const struct relabel_cfg *c, enum relabel_scheme inherited, struct rule *r,
                        char *err, size_t errlen)
{
    const char *sep = c->separator ? c->separator : ";";
    const char *target = c->target_label ? c->target_label : "";
    const char *repl = c->replacement ? c->replacement : "$1";
    bool src_given = c->source_labels != NULL || c->n_source_labels > 0;
    char q[600];
    int rc, sch;

    memset(r, 0, sizeof(*r));
    /* source labels (LabelName.UnmarshalYAML) */
    if (c->n_source_labels) {
        r->src = calloc(c->n_source_labels, sizeof(char *));
        r->src_len = calloc(c->n_source_labels, sizeof(size_t));
        if (!r->src || !r->src_len)
            return -ENOMEM;
    }
    for (unsigned i = 0; i < c->n_source_labels; i++) {
        const char *s = c->source_labels[i] ? c->source_labels[i] : "";

        if (!relabel_valid_label_name(s, strlen(s), RELABEL_SCHEME_UTF8)) {
            go_quote(s, q, sizeof(q));
            return fail(err, errlen, "%s is not a valid label name", q);
        }
        r->src[i] = strdup(s);
        if (!r->src[i])
            return -ENOMEM;
        r->src_len[i] = strlen(s);
        r->n_src = i + 1;
    }
    /* regex: absent = the default object "(.*)"; null or "" = the empty regex */
    r->regex_default = !c->regex && !c->regex_null;
    {
        const char *rx = r->regex_default ? "(.*)" : (c->regex ? c->regex : "");

        rc = relabel__regex_compile(rx, strlen(rx), &r->re, err, errlen);
        if (rc < 0)
            return rc;
    }
    /* action (Action.UnmarshalYAML lower-cases it) */
    if (c->action && c->action[0] == '\0')
        return fail(err, errlen, "relabel action cannot be empty");
    {
        const char *a = c->action ? c->action : "replace";
        bool found = false;

        for (size_t i = 0; i < sizeof(action_names) / sizeof(action_names[0]); i++)
            if (strcasecmp(a, action_names[i]) == 0) {
                r->action = (enum action)i;
                found = true;
            }
        if (!found) {
            go_quote(a, q, sizeof(q));
            return fail(err, errlen, "unknown relabel action %s", q);
        }
    }
    sch = relabel_parse_scheme(c->name_validation_scheme);
    if (sch < 0)
        return fail(err, errlen,
                    "unknown relabel config name validation method specified, must be either "
                    "'', 'legacy' or 'utf8', got %s",
                    c->name_validation_scheme);
    r->scheme = sch != RELABEL_SCHEME_UNSET         ? (enum relabel_scheme)sch
                : inherited != RELABEL_SCHEME_UNSET ? inherited
                                                    : RELABEL_SCHEME_UTF8;
    if ((rc = validate(c, r, target, repl, sep, src_given, err, errlen)) < 0)
        return rc;
    r->sep = strdup(sep);
    if (!r->sep)
        return -ENOMEM;
    r->sep_len = strlen(sep);
    r->modulus = c->modulus;
    if ((rc = tmpl_compile(&r->target, target)) < 0 || (rc = tmpl_compile(&r->repl, repl)) < 0)
        return rc;
    return 0;
}

int relabel_rules_new(const struct relabel_cfg *cfgs, size_t n, enum relabel_scheme scheme,
                      struct relabel_rules **out, char *err, size_t errlen)
{
    struct relabel_rules *rs;
    int rc;

    *out = NULL;
    if (errlen)
        err[0] = '\0';
    rs = calloc(1, sizeof(*rs));
    if (!rs)
        return -ENOMEM;
    if (n) {
        rs->v = calloc(n, sizeof(*rs->v));
        if (!rs->v) {
            free(rs);
            return -ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        rs->n = i + 1;
        rc = compile_rule(&cfgs[i], scheme, &rs->v[i], err, errlen);
        if (rc < 0) {
            if (rc == -ENOMEM && errlen)
                snprintf(err, errlen, "out of memory");
            relabel_rules_free(rs);
            return rc;
        }
        if (relabel__regex_groups(rs->v[i].re) > rs->max_groups)
            rs->max_groups = relabel__regex_groups(rs->v[i].re);
    }
    *out = rs;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Applying                                                               */
/* ---------------------------------------------------------------------- */

/* MD5 through OpenSSL's one-shot call: EVP_Digest() looks the algorithm up
 * under a lock on every call, which costs more than hashing a short value. */
static int hashmod(const char *val, size_t len, uint64_t modulus, char *out, size_t outlen)
{
    unsigned char md[MD5_DIGEST_LENGTH];
    char tmp[24];
    size_t n = 0;
    uint64_t v = 0;

    MD5((const unsigned char *)val, len, md);
    for (int i = 8; i < 16; i++)
        v = (v << 8) | md[i];
    v %= modulus;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (n + 1 > outlen)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return 0;
}

/* Runs one rule. Returns 1 keep, 0 drop, or a negative error. */
static int apply_rule(const struct rule *r, struct builder *b, size_t *ov)
{
    struct sbuf val = { b->a, NULL, 0, 0 };
    struct kvlist snap = { 0 };
    const char *tv;
    int rc = 0;

    if (r->action != A_LABELMAP && r->action != A_LABELDROP && r->action != A_LABELKEEP) {
        for (unsigned i = 0; i < r->n_src && rc == 0; i++) {
            size_t vlen = 0;
            const char *v = b_get(b, r->src[i], r->src_len[i], &vlen);

            if (i)
                rc = sb_append(&val, r->sep, r->sep_len);
            if (rc == 0 && v)
                rc = sb_append(&val, v, vlen);
        }
        if (rc == 0 && !val.p)
            rc = sb_append(&val, "", 0);
        if (rc < 0)
            return rc;
    }
    switch (r->action) {
    case A_DROP:
    case A_KEEP:
        rc = relabel__regex_match(r->re, val.p, val.len);
        if (rc < 0)
            return rc;
        return (rc == 1) == (r->action == A_KEEP);
    case A_KEEPEQUAL:
    case A_DROPEQUAL: {
        size_t vlen = 0;
        bool eq;

        tv = b_get(b, r->target.text, r->target.len, &vlen);
        if (!tv)
            tv = "";
        eq = vlen == val.len && memcmp(tv, val.p, vlen) == 0;
        return eq == (r->action == A_KEEPEQUAL);
    }
    case A_REPLACE: {
        struct sbuf t = { b->a, NULL, 0, 0 }, res = { b->a, NULL, 0, 0 };

        if (val.len == 0 && r->regex_default && !r->target.has_dollar && !r->repl.has_dollar)
            return b_set(b, r->target.text, r->target.len, r->repl.text, r->repl.len) < 0 ? -ENOMEM
                                                                                          : 1;
        rc = relabel__regex_search(r->re, val.p, val.len, 0, ov);
        if (rc <= 0)
            return rc < 0 ? rc : 1;
        if ((rc = tmpl_expand(&r->target, r->re, val.p, ov, &t)) < 0)
            return rc;
        if (!relabel_valid_label_name(t.p, t.len, r->scheme))
            return 1;
        if ((rc = tmpl_expand(&r->repl, r->re, val.p, ov, &res)) < 0)
            return rc;
        rc = res.len == 0 ? b_del(b, t.p, t.len) : b_set(b, t.p, t.len, res.p, res.len);
        return rc < 0 ? rc : 1;
    }
    case A_LOWERCASE:
    case A_UPPERCASE: {
        struct sbuf res = { b->a, NULL, 0, 0 };

        if ((rc = change_case(val.p, val.len, r->action == A_UPPERCASE, &res)) < 0)
            return rc;
        rc = b_set(b, r->target.text, r->target.len, res.p ? res.p : "", res.len);
        return rc < 0 ? rc : 1;
    }
    case A_HASHMOD: {
        char num[24];

        if ((rc = hashmod(val.p, val.len, r->modulus, num, sizeof(num))) < 0)
            return rc;
        rc = b_set(b, r->target.text, r->target.len, num, strlen(num));
        return rc < 0 ? rc : 1;
    }
    case A_LABELMAP:
    case A_LABELDROP:
    case A_LABELKEEP:
        if ((rc = b_snapshot(b, &snap)) < 0)
            return rc;
        for (size_t i = 0; i < snap.n; i++) {
            const struct kv *l = &snap.v[i];

            rc = relabel__regex_match(r->re, l->name, l->nlen);
            if (rc < 0)
                return rc;
            if (r->action == A_LABELMAP) {
                struct sbuf res = { b->a, NULL, 0, 0 };

                if (!rc)
                    continue;
                if ((rc = replace_all(&r->repl, r->re, l->name, l->nlen, ov, &res)) < 0)
                    return rc;
                rc = b_set(b, res.p, res.len, l->value, l->vlen);
            } else if ((rc == 1) == (r->action == A_LABELDROP)) {
                rc = b_del(b, l->name, l->nlen);
            } else {
                rc = 0;
            }
            if (rc < 0)
                return rc;
        }
        return 1;
    }
    return 1;
}

int relabel_apply(const struct relabel_rules *rs, struct labels *ls)
{
    char inl[4096] __attribute__((aligned(16)));
    struct arena a = { inl, 0, sizeof(inl), NULL };
    struct builder b = { ls, { 0 }, { 0 }, &a, NULL };
    size_t ovs[2 * 16], *ov = ovs;
    int rc = 1;

    if (!rs || rs->n == 0)
        return 1;
    b.shadow = arena_alloc(&a, ls->n + 1);
    if (!b.shadow)
        return -ENOMEM;
    memset(b.shadow, 0, ls->n + 1);
    if (2 * ((size_t)rs->max_groups + 1) > sizeof(ovs) / sizeof(ovs[0])) {
        ov = arena_alloc(&a, 2 * ((size_t)rs->max_groups + 1) * sizeof(size_t));
        if (!ov)
            return -ENOMEM;
    }
    for (size_t i = 0; i < rs->n; i++) {
        rc = apply_rule(&rs->v[i], &b, ov);
        if (rc <= 0)
            break;
    }
    if (rc == 1 && (b.add.n || b.del.n))
        rc = b_commit(&b, ls) < 0 ? -ENOMEM : 1;
    arena_done(&a);
    return rc;
}
