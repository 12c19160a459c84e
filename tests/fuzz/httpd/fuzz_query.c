/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a request target (path?query#fragment) through the
 * status server's split and path decoding (httpd__req_get, fed a request
 * line as server.c feeds it) and its query lookup (httpd_query_get, which
 * the handlers use for ?job=, ?format=, ?key=, ?type=).
 *
 * Input: byte 0 picks the value buffer's size; then an optional key to
 * look up ending at the first '\n'; the rest is the request target.
 *
 * Invariants (httpd.h, internal.h): the decoded path has no NUL and is never
 * longer than the raw target; for an origin-form target it is the
 * percent-decoding of the part before '?' or '#', and the query is the raw
 * part between '?' and '#'. httpd_query_get returns the percent-decoded
 * value ('+' a space) of the first well-formed parameter whose decoded
 * name is `key` ("" for a bare key), terminated, or -E2BIG when it does
 * not fit (never a cut value); it writes nothing past its buffer (nothing
 * at all unless it returns 1) and ignores every other parameter. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz_invariants.h"
#include "httpd/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define GUARD 16

static int hexv(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reference decoder, written apart from httpd/: '+' is a space, %XY a
 * byte; NULL for a bad escape or %00 (the pair is then skipped). */
static char *ref_decode(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int hi, lo;

        if (s[i] == '+') {
            out[o++] = ' ';
        } else if (s[i] != '%') {
            out[o++] = s[i];
        } else if (n - i < 3 || (hi = hexv(s[i + 1])) < 0 || (lo = hexv(s[i + 2])) < 0 ||
                   (hi | lo) == 0) {
            free(out);
            return NULL;
        } else {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        }
    }
    out[o] = '\0';
    return out;
}

/* Reference: the decoded value of the first well-formed parameter whose
 * decoded name is `key`, malloc'd; NULL if absent. */
static char *ref_get(const char *q, const char *key)
{
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', n);
        size_t nl = eq ? (size_t)(eq - q) : n;
        char *name = ref_decode(q, nl), *val = NULL;

        if (name && strcmp(name, key) == 0)
            val = eq ? ref_decode(eq + 1, n - nl - 1) : strdup("");
        free(name);
        if (val)
            return val;
        if (!amp)
            break;
        q = amp + 1;
    }
    return NULL;
}

/* httpd_query_get into a buffer of vlen bytes with a guard after it. Returns
 * its result; *val gets the value (malloc'd) when it is 1. */
static int lookup(const char *q, const char *key, size_t vlen, char **val)
{
    char *b = malloc(vlen + GUARD);
    int r;

    memset(b, 0x5a, vlen + GUARD);
    r = httpd_query_get(q, key, b, vlen);
    FUZZ_ASSERT(r == 0 || r == 1 || r == -E2BIG);
    for (size_t i = vlen; i < vlen + GUARD; i++)
        FUZZ_ASSERT(b[i] == 0x5a); /* nothing past the buffer */
    if (r != 1)
        for (size_t i = 0; i < vlen; i++)
            FUZZ_ASSERT(b[i] == 0x5a); /* nothing written at all */
    *val = NULL;
    if (r == 1) {
        FUZZ_ASSERT(vlen > 0 && memchr(b, '\0', vlen) != NULL); /* terminated */
        FUZZ_ASSERT(strlen(b) <= strlen(q));
        *val = strdup(b);
    }
    free(b);
    return r;
}

static void check_query(const char *q, const char *key, size_t vlen)
{
    char *ref = ref_get(q, key), *val, *val2, *val3;
    size_t ql = strlen(q), kl = strlen(key);
    char *q2 = malloc(ql + kl + 32), *q3 = malloc(ql + kl + 32);
    int r = lookup(q, key, vlen, &val);

    if (!ref)
        FUZZ_ASSERT(r == 0);
    else if (strlen(ref) < vlen) /* the whole decoded value */
        FUZZ_ASSERT(r == 1 && strcmp(val, ref) == 0);
    else /* too long for the buffer: refused, never cut */
        FUZZ_ASSERT(r == -E2BIG);
    /* An unknown parameter before it changes nothing. */
    snprintf(q2, ql + kl + 32, "zz_unknown_param=1&%s", q);
    if (strcmp(key, "zz_unknown_param") != 0) {
        FUZZ_ASSERT(lookup(q2, key, vlen, &val2) == r);
        FUZZ_ASSERT((val == NULL) == (val2 == NULL) && (!val || strcmp(val, val2) == 0));
        free(val2);
    }
    /* The first one wins: a later parameter of the same name is ignored. */
    snprintf(q3, ql + kl + 32, "%s&%s=later", q, key);
    if (r != 0) {
        FUZZ_ASSERT(lookup(q3, key, vlen, &val3) == r);
        FUZZ_ASSERT((val == NULL) == (val3 == NULL) && (!val || strcmp(val, val3) == 0));
        free(val3);
    }
    free(val);
    free(ref);
    free(q2);
    free(q3);
}

/* The target is origin-form: path is its percent-decoding up to '?' or
 * '#', query its raw part between '?' and '#'. */
static void check_origin_form(const char *t, size_t tl, const char *path, size_t plen,
                              const char *query)
{
    size_t pe = 0, i, o = 0;
    char *dec = malloc(tl + 1);

    while (pe < tl && t[pe] != '?' && t[pe] != '#')
        pe++;
    for (i = 0; i < pe; i++) {
        char c = t[i];

        if (c == '%') {
            int hi = i + 2 < pe ? hexv(t[i + 1]) : -1, lo = i + 2 < pe ? hexv(t[i + 2]) : -1;

            FUZZ_ASSERT(hi >= 0 && lo >= 0); /* a bad escape is a 400 */
            c = (char)(hi << 4 | lo);
            FUZZ_ASSERT(c != '\0'); /* so is %00 */
            i += 2;
        }
        dec[o++] = c;
    }
    FUZZ_ASSERT(o == plen && memcmp(dec, path, o) == 0);
    if (pe < tl && t[pe] == '?') {
        size_t qe = pe + 1;

        while (qe < tl && t[qe] != '#')
            qe++;
        FUZZ_ASSERT(strlen(query) == qe - pe - 1 && memcmp(query, t + pe + 1, qe - pe - 1) == 0);
    } else {
        FUZZ_ASSERT(query[0] == '\0');
    }
    free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const keys[] = { "job", "format", "key", "type" };
    static const size_t sizes[] = { 0, 1, 16, 32, 256 };
    const char *nl, *t;
    char *key = NULL, *line, *target;
    size_t tl, vlen, ll;
    struct httpd__req q;
    struct buf path;

    if (size < 1 || size > 8192)
        return 0;
    vlen = data[0];
    data++;
    size--;
    nl = memchr(data, '\n', size);
    if (nl) {
        key = strndup((const char *)data, (size_t)(nl - (const char *)data));
        t = nl + 1;
    } else {
        t = (const char *)data;
    }
    tl = size - (size_t)(t - (const char *)data);
    /* A key the handlers could use: non-empty, no '=' or '&' or NUL. */
    if (key && (!*key || strpbrk(key, "=&") || strlen(key) >= HTTPD_QUERY_MAX_KEY ||
                strlen(key) != (size_t)(nl - (const char *)data))) {
        free(key);
        key = NULL;
    }

    /* The request line as a client sends it. */
    ll = tl + 64;
    line = malloc(ll);
    memcpy(line, "GET ", 4);
    memcpy(line + 4, t, tl);
    memcpy(line + 4 + tl, " HTTP/1.1\r\nHost: x\r\n\r\n", 23);
    httpd__req_init(&q);
    buf_init(&path, HTTPD__MAX_HEAD);
    target = strndup(t, tl); /* as a C string: up to a NUL */
    (void)httpd__req_feed(&q, line, 4 + tl + 23);
    if (q.complete) {
        struct httpd_request hr;
        /* The target as the parser kept it (httpd__req_get ends the query
         * in place). */
        size_t ul = q.url.len;
        char *url = ul ? malloc(ul) : NULL;

        FUZZ_ASSERT(ul <= tl);
        if (ul)
            memcpy(url, q.url.data, ul);
        if (httpd__req_get(&q, &hr, &path) == 0) {
            FUZZ_ASSERT(hr.path && hr.query && hr.path == path.data);
            FUZZ_ASSERT(strlen(hr.path) == path.len); /* no NUL inside */
            FUZZ_ASSERT(path.len <= tl || (path.len == 1 && hr.path[0] == '/'));
            FUZZ_ASSERT(strlen(hr.query) <= tl);
            FUZZ_ASSERT(strchr(hr.query, '#') == NULL); /* the fragment is dropped */
            if (ul > 0 && url[0] == '/')
                check_origin_form(url, ul, hr.path, path.len, hr.query);
            free(target);
            target = strdup(hr.query);
        }
        free(url);
    }
    /* The query the handlers get, or else the raw bytes as one. */
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
            check_query(target, keys[k], sizes[s]);
    if (key) {
        check_query(target, key, vlen);
        check_query(target, key, 256);
    }
    free(target);
    free(key);
    free(line);
    buf_done(&path);
    httpd__req_done(&q);
    return 0;
}
