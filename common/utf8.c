/* UTF-8 as Go reads it: the one decoder behind label validation, relabel
 * regexes and templates, and Go-style quoting in messages. Pure functions,
 * no state, any thread; callers own every buffer. */
#include "utf8.h"

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

size_t utf8_invalid_count(const char *s, size_t len)
{
    size_t bad = 0;

    for (size_t i = 0; i < len;) {
        uint32_t r;
        bool invalid;

        /* label values are mostly ASCII: skip it without decoding */
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        i += utf8_decode(s + i, len - i, &r, &invalid);
        bad += invalid;
    }
    return bad;
}

bool utf8_valid(const char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        uint32_t r;
        bool invalid;

        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        i += utf8_decode(s + i, len - i, &r, &invalid);
        if (invalid)
            return false;
    }
    return true;
}
