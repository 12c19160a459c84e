/* SPDX-License-Identifier: Apache-2.0 */
/* Sorted label sets. Pure and single-owner. A label's name and value are
 * interned strings (common/intern.h): the many sets that hold the same
 * names and values share their bytes, and copying a set copies its array
 * and takes references, not strings. Sets are small (tens of labels) and a
 * binary search finds a name. The label-set hash is the one of
 * docs/design.md "Targets, labels and scheduling". */
#include "labels.h"
#include "common/array.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "buf.h"
#include "intern.h"

void labels_init(struct labels *ls)
{
    ls->v = NULL;
    ls->n = 0;
    ls->_cap = 0;
}

static void label_done(struct label *l)
{
    intern_unref(l->name);
    intern_unref(l->value);
}

void labels_done(struct labels *ls)
{
    for (size_t i = 0; i < ls->n; i++)
        label_done(&ls->v[i]);
    free(ls->v);
    labels_init(ls);
}

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t m = alen < blen ? alen : blen;
    int c = memcmp(a, b, m);

    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

long labels_find(const struct labels *ls, const char *name, size_t len)
{
    size_t lo = 0, hi = ls->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(ls->v[mid].name, label_name_len(&ls->v[mid]), name, len);

        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(long)lo - 1;
}

static int make_label(struct label *l, const char *name, size_t nlen, const char *value,
                      size_t vlen)
{
    if (nlen > UINT32_MAX || vlen > UINT32_MAX)
        return -E2BIG;
    l->name = intern(name, nlen);
    l->value = intern(value, vlen);
    if (!l->name || !l->value) {
        label_done(l);
        return -ENOMEM;
    }
    return 0;
}

static void del_at(struct labels *ls, size_t i)
{
    label_done(&ls->v[i]);
    memmove(&ls->v[i], &ls->v[i + 1], (ls->n - i - 1) * sizeof(ls->v[0]));
    ls->n--;
}

int labels_setn(struct labels *ls, const char *name, size_t nlen, const char *value, size_t vlen)
{
    long at = labels_find(ls, name, nlen);
    struct label l;
    int r;

    if (vlen == 0) {
        if (at >= 0)
            del_at(ls, (size_t)at);
        return 0;
    }
    if (at >= 0 && label_value_len(&ls->v[at]) == vlen && memcmp(ls->v[at].value, value, vlen) == 0)
        return 0;
    r = make_label(&l, name, nlen, value, vlen);
    if (r < 0)
        return r;
    if (at >= 0) {
        label_done(&ls->v[at]);
        ls->v[at] = l;
        return 0;
    }
    if (ls->n == ls->_cap) {
        struct label *v = array_grow(ls->v, &ls->_cap, ls->n, sizeof(*v), 8);

        if (!v) {
            label_done(&l);
            return -ENOMEM;
        }
        ls->v = v;
    }
    at = -at - 1;
    memmove(&ls->v[at + 1], &ls->v[at], (ls->n - (size_t)at) * sizeof(ls->v[0]));
    ls->v[at] = l;
    ls->n++;
    return 0;
}

int labels_set(struct labels *ls, const char *name, const char *value)
{
    return labels_setn(ls, name, strlen(name), value, value ? strlen(value) : 0);
}

const char *labels_get(const struct labels *ls, const char *name)
{
    long at = labels_find(ls, name, strlen(name));

    return at >= 0 ? ls->v[at].value : NULL;
}

int labels_del(struct labels *ls, const char *name)
{
    long at = labels_find(ls, name, strlen(name));

    if (at < 0)
        return 0;
    del_at(ls, (size_t)at);
    return 1;
}

int labels_copy(struct labels *dst, const struct labels *src)
{
    struct labels out;

    if (dst == src)
        return 0;
    labels_init(&out);
    if (src->n) {
        out.v = malloc(src->n * sizeof(out.v[0]));
        if (!out.v)
            goto oom;
        out._cap = src->n;
        for (size_t i = 0; i < src->n; i++) {
            out.v[i] = src->v[i];
            intern_ref(out.v[i].name);
            intern_ref(out.v[i].value);
            out.n++;
        }
    }
    labels_move(dst, &out);
    return 0;
oom:
    labels_done(&out);
    labels_done(dst);
    return -ENOMEM;
}

void labels_compact(struct labels *ls)
{
    struct label *v;

    if (ls->_cap == ls->n)
        return;
    if (ls->n == 0) {
        free(ls->v);
        labels_init(ls);
        return;
    }
    if ((v = realloc(ls->v, ls->n * sizeof(*v)))) {
        ls->v = v;
        ls->_cap = ls->n;
    }
}

void labels_move(struct labels *dst, struct labels *src)
{
    if (dst == src)
        return;
    labels_done(dst);
    *dst = *src;
    labels_init(src);
}

int labels_cmp(const struct labels *a, const struct labels *b)
{
    size_t n = a->n < b->n ? a->n : b->n;

    for (size_t i = 0; i < n; i++) {
        int c = name_cmp(a->v[i].name, label_name_len(&a->v[i]), b->v[i].name,
                         label_name_len(&b->v[i]));

        if (c)
            return c;
        c = name_cmp(a->v[i].value, label_value_len(&a->v[i]), b->v[i].value,
                     label_value_len(&b->v[i]));
        if (c)
            return c;
    }
    return a->n < b->n ? -1 : a->n > b->n;
}

bool labels_equal(const struct labels *a, const struct labels *b)
{
    return a->n == b->n && labels_cmp(a, b) == 0;
}

static void hash_len(XXH64_state_t *st, size_t len)
{
    unsigned char b[4];

    if (len < 255) {
        b[0] = (unsigned char)len;
        XXH64_update(st, b, 1);
        return;
    }
    b[0] = 0xFF;
    b[1] = (unsigned char)(len & 0xFF);
    b[2] = (unsigned char)((len >> 8) & 0xFF);
    b[3] = (unsigned char)((len >> 16) & 0xFF);
    XXH64_update(st, b, 4);
}

static uint64_t hash_filtered(const struct labels *ls, bool public_only)
{
    XXH64_state_t st;

    XXH64_reset(&st, 0);
    for (size_t i = 0; i < ls->n; i++) {
        const struct label *l = &ls->v[i];

        if (public_only && label_name_len(l) >= 2 && l->name[0] == '_' && l->name[1] == '_')
            continue;
        hash_len(&st, label_name_len(l));
        XXH64_update(&st, l->name, label_name_len(l));
        hash_len(&st, label_value_len(l));
        XXH64_update(&st, l->value, label_value_len(l));
    }
    return XXH64_digest(&st);
}

uint64_t labels_hash(const struct labels *ls)
{
    return hash_filtered(ls, false);
}

uint64_t labels_hash_public(const struct labels *ls)
{
    return hash_filtered(ls, true);
}

/* Go's strconv.Quote for the common case: escapes quotes, backslashes and
 * control bytes; other bytes are copied. */
static int quote(struct buf *b, const char *s, size_t n)
{
    int r = buf_append(b, "\"", 1);

    for (size_t i = 0; r == 0 && i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"' || c == '\\')
            r = buf_printf(b, "\\%c", c);
        else if (c == '\n')
            r = buf_puts(b, "\\n");
        else if (c == '\t')
            r = buf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f)
            r = buf_printf(b, "\\x%02x", c);
        else
            r = buf_append(b, &s[i], 1);
    }
    return r ? r : buf_append(b, "\"", 1);
}

char *labels_to_string(const struct labels *ls)
{
    struct buf b;
    int r;

    buf_init(&b, SIZE_MAX / 2);
    r = buf_append(&b, "{", 1);
    for (size_t i = 0; r == 0 && i < ls->n; i++) {
        if (i)
            r = buf_puts(&b, ", ");
        if (r == 0)
            r = buf_append(&b, ls->v[i].name, label_name_len(&ls->v[i]));
        if (r == 0)
            r = buf_append(&b, "=", 1);
        if (r == 0)
            r = quote(&b, ls->v[i].value, label_value_len(&ls->v[i]));
    }
    if (r == 0)
        r = buf_append(&b, "}", 1);
    if (r) {
        buf_done(&b);
        return NULL;
    }
    return buf_steal(&b, NULL);
}
