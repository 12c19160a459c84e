/* SPDX-License-Identifier: Apache-2.0 */
/* Capped growable buffer (docs/design.md "Modules"). Pure, single-owner, no
 * threads. Growth doubles so appends are amortised O(1); the cap is checked
 * before any allocation. */
#include "buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->_cap = 0;
    b->_max = max;
}

void buf_done(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->_cap = 0;
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

int buf_reserve(struct buf *b, size_t n)
{
    size_t need, cap;
    char *p;

    if (n > b->_max || b->len > b->_max - n)
        return -E2BIG;
    need = b->len + n + 1;
    if (need <= b->_cap)
        return 0;
    cap = b->_cap ? b->_cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > b->_max + 1)
        cap = b->_max + 1;
    p = realloc(b->data, cap);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->_cap = cap;
    return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
    int r = buf_reserve(b, n);

    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int buf_append_pct(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    int r = 0;

    for (size_t i = 0; i < n && r == 0; i++) {
        unsigned char c = (unsigned char)s[i];

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            r = buf_append(b, &s[i], 1);
        } else {
            char e[3] = { '%', hex[c >> 4], hex[c & 15] };

            r = buf_append(b, e, 3);
        }
    }
    return r;
}

int buf_puts(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    va_list aq;
    int n, r;

    va_copy(aq, ap);
    n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0)
        return -EINVAL;
    r = buf_reserve(b, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

char *buf_steal(struct buf *b, size_t *len)
{
    char *p = b->data;

    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = 0;
    b->_cap = 0;
    return p;
}
