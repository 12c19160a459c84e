/* Small pure helpers: UTF-8 decoding as Go does it, and Prometheus'
 * SanitizeLabelName (reference/prometheus.md §3.1).
 *
 * Kept here rather than taken from relabel/ so that discovery's pure parts
 * build and test on their own; the rules are the same. Pure, any thread. */
#include <stdlib.h>
#include <string.h>

#include "discovery/util.h"

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 if the byte at
 * s starts no valid sequence (Go then yields RuneError of width 1). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;

        return n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;

        return n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 &&
                       (s[3] & 0xc0) == 0x80
                   ? 4
                   : 0;
    }
    return 0;
}

bool disc__valid_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;

    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, n - i);

        if (!k)
            return false;
        i += k;
    }
    return true;
}

char *disc__sanitize(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    char *out = malloc(n + 1), *o = out;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t k = utf8_seq(p + i, n - i);

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_')
            *o++ = (char)c;
        else
            *o++ = '_';
        i += k ? k : 1;
    }
    *o = '\0';
    return out;
}
