/* UTF-8 as Go reads it: the one decoder behind label validation, relabel
 * regexes and templates, and Go-style quoting in messages. Pure functions,
 * no state, any thread; callers own every buffer. */
#include "utf8.h"

#include <stdint.h>
#include <string.h>

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
