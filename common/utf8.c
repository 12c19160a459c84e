/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 as Go reads it (docs/design.md "Modules"): the one decoder behind
 * label validation, relabel regexes and templates, Go-style quoting in
 * messages, and the writers that put bytes from targets into JSON and text
 * the agent serves. Pure functions, no state, any thread; callers own every
 * buffer. */
#include "utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"

/* Length of the all-ASCII run at the start of s[0..len), found eight bytes at
 * a time: label values are mostly ASCII, and this runs on every regex
 * subject. */
static size_t ascii_prefix(const char *s, size_t len)
{
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w;

        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull)
            break;
    }
    while (i < len && (unsigned char)s[i] < 0x80)
        i++;
    return i;
}

size_t utf8_encode(uint32_t r, char *out)
{
    if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))
        r = UTF8_RUNE_ERROR;
    if (r < 0x80) {
        out[0] = (char)r;
        return 1;
    }
    if (r < 0x800) {
        out[0] = (char)(0xC0 | (r >> 6));
        out[1] = (char)(0x80 | (r & 0x3F));
        return 2;
    }
    if (r < 0x10000) {
        out[0] = (char)(0xE0 | (r >> 12));
        out[1] = (char)(0x80 | ((r >> 6) & 0x3F));
        out[2] = (char)(0x80 | (r & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (r >> 18));
    out[1] = (char)(0x80 | ((r >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((r >> 6) & 0x3F));
    out[3] = (char)(0x80 | (r & 0x3F));
    return 4;
}

/* Counts the bytes Go reads as U+FFFD, stopping once `enough` are found. */
static size_t count_invalid(const char *s, size_t len, size_t enough)
{
    size_t bad = 0;

    for (size_t i = ascii_prefix(s, len); i < len && bad < enough;) {
        uint32_t r;
        bool invalid;

        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        i += utf8_decode(s + i, len - i, &r, &invalid);
        bad += invalid;
    }
    return bad;
}

size_t utf8_invalid_count(const char *s, size_t len)
{
    return count_invalid(s, len, SIZE_MAX);
}

bool utf8_valid(const char *s, size_t len)
{
    return count_invalid(s, len, 1) == 0;
}

/* Both appenders: copies runs that need nothing, and hands each rune that
 * does (an invalid byte; a control character when `visible`) to its own
 * form. */
static int append(struct buf *out, const char *s, size_t len, bool visible)
{
    static const char fffd[] = "\xEF\xBF\xBD";
    size_t i = 0, run = 0;
    int rc = 0;

    while (i < len && rc == 0) {
        unsigned char c = (unsigned char)s[i];
        uint32_t r;
        bool invalid;
        size_t w;
        char esc[8];

        if (c >= 0x20 && c < 0x7F) {
            i++;
            continue;
        }
        w = utf8_decode(s + i, len - i, &r, &invalid);
        if (!invalid && (!visible || (r >= 0x20 && r != 0x7F && (r < 0x80 || r > 0x9F)))) {
            i += w;
            continue;
        }
        rc = buf_append(out, s + run, i - run);
        if (rc < 0)
            break;
        if (invalid)
            rc = buf_append(out, fffd, 3);
        else if (r == '\n')
            rc = buf_append(out, "\\n", 2);
        else if (r == '\r')
            rc = buf_append(out, "\\r", 2);
        else if (r == '\t')
            rc = buf_append(out, "\\t", 2);
        else if (r < 0x80)
            rc = buf_append(out, esc, (size_t)snprintf(esc, sizeof(esc), "\\x%02x", r));
        else
            rc = buf_append(out, esc, (size_t)snprintf(esc, sizeof(esc), "\\u%04x", r));
        i += w;
        run = i;
    }
    if (rc == 0)
        rc = buf_append(out, s + run, len - run);
    return rc;
}

int utf8_append_valid(struct buf *out, const char *s, size_t len)
{
    return append(out, s, len, false);
}

int utf8_append_visible(struct buf *out, const char *s, size_t len)
{
    return append(out, s, len, true);
}
