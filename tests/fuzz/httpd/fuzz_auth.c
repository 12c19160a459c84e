/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: an Authorization header's value through the status
 * server's Basic-auth parser (httpd__basic_parse, which the server runs on
 * the header it kept, at most 511 bytes).
 *
 * Invariants: the parser agrees with an independent RFC 7617 / RFC 4648
 * decoder (scheme "Basic" in any case, then spaces, then padded base64 of
 * "user:password", the user without ':', no NUL anywhere): it accepts
 * exactly what the reference accepts and gives the same user and
 * password. On success "user:password" base64-encodes back to the token,
 * except for the unused low bits of the last character before the padding,
 * which a decoder drops. The value is copied to a buffer of its exact size,
 * so a read past it is an ASan finding. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../fuzz_invariants.h"
#include "httpd/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64v(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;

    return p ? (int)(p - b64) : -1;
}

/* Reference decoder: 0 and a malloc'd user and password, or -1. */
static int ref_parse(const char *h, char **user, char **pass)
{
    size_t len, pad, n = 0;
    unsigned char *dec;
    const char *colon;

    *user = *pass = NULL;
    if (strncasecmp(h, "Basic ", 6) != 0)
        return -1;
    h += 6;
    while (*h == ' ')
        h++;
    len = strlen(h);
    if (len == 0 || len % 4 != 0)
        return -1;
    pad = h[len - 1] == '=' ? (h[len - 2] == '=' ? 2 : 1) : 0;
    dec = malloc(len / 4 * 3 + 1);
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;

        for (size_t j = 0; j < 4; j++) {
            int d = b64v(h[i + j]);

            if (d < 0 && !(h[i + j] == '=' && i + j >= len - pad)) {
                free(dec);
                return -1;
            }
            v = v << 6 | (uint32_t)(d < 0 ? 0 : d);
        }
        dec[n++] = (unsigned char)(v >> 16);
        dec[n++] = (unsigned char)(v >> 8);
        dec[n++] = (unsigned char)v;
    }
    n -= pad;
    dec[n] = '\0';
    if (memchr(dec, '\0', n) || !(colon = strchr((char *)dec, ':'))) {
        free(dec);
        return -1;
    }
    *user = strndup((char *)dec, (size_t)(colon - (char *)dec));
    *pass = strdup(colon + 1);
    free(dec);
    return 0;
}

/* base64 of s, padded. */
static char *encode(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *e = malloc((n + 2) / 3 * 4 + 1);

    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)s[i] << 16;

        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        e[o++] = b64[v >> 18 & 63];
        e[o++] = b64[v >> 12 & 63];
        e[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        e[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    e[o] = '\0';
    return e;
}

static void check_success(const char *h, const char *user, const char *pass)
{
    const char *tok = h + 6;
    size_t ul = strlen(user), pl = strlen(pass), tl, pad;
    char *up = malloc(ul + pl + 2), *enc;

    while (*tok == ' ')
        tok++;
    tl = strlen(tok);
    FUZZ_ASSERT(strchr(user, ':') == NULL);
    FUZZ_ASSERT(ul + 1 + pl <= tl / 4 * 3); /* never more than the header holds */
    memcpy(up, user, ul);
    up[ul] = ':';
    memcpy(up + ul + 1, pass, pl + 1);
    enc = encode(up);
    FUZZ_ASSERT(strlen(enc) == tl);
    pad = tok[tl - 1] == '=' ? (tok[tl - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < tl; i++) {
        if (enc[i] == tok[i])
            continue;
        /* Only the last data character may differ, in its unused bits. */
        FUZZ_ASSERT(pad > 0 && i == tl - pad - 1);
        FUZZ_ASSERT((b64v(enc[i]) >> (pad * 2)) == (b64v(tok[i]) >> (pad * 2)));
    }
    free(enc);
    free(up);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *h, *user, *pass, *ruser, *rpass;
    int rc, ref;

    if (size > 511) /* the server keeps no longer a value */
        return 0;
    /* A header value is a C string: up to the first NUL, in a buffer of
     * exactly its size. */
    h = strndup((const char *)data, size);
    rc = httpd__basic_parse(h, &user, &pass);
    ref = ref_parse(h, &ruser, &rpass);
    FUZZ_ASSERT(rc == 0 || rc == -1);
    FUZZ_ASSERT(rc == 0 ? (user && pass) : (!user && !pass));
    FUZZ_ASSERT(rc == ref);
    if (rc == 0) {
        FUZZ_ASSERT(strcmp(user, ruser) == 0 && strcmp(pass, rpass) == 0);
        check_success(h, user, pass);
    }
    free(user);
    free(pass);
    free(ruser);
    free(rpass);
    free(h);
    return 0;
}
