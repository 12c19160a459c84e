/* SPDX-License-Identifier: Apache-2.0 */
/** UTF-8 as Go reads it (unicode/utf8): decoding, encoding, validity.
 *
 * Prometheus is written in Go, so every place where proflet must agree with
 * it on text (label validation, relabel regexes and templates, Go's %q in
 * messages) decodes the way Go's utf8.DecodeRune does: an invalid or
 * truncated sequence, a surrogate or an overlong form is one U+FFFD, one
 * byte wide. Pure functions, any thread; callers own every buffer. */
#ifndef PROFLET_COMMON_UTF8_H
#define PROFLET_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The replacement character Go yields for each invalid byte. */
#define UTF8_RUNE_ERROR 0xFFFDu
/** Longest encoding of one rune, in bytes. */
#define UTF8_MAX_LEN 4

/** Decodes the rune at `s` (`n` > 0 bytes available) as Go's
 * utf8.DecodeRune does. Returns its width (1 to 4). `*invalid` is set when
 * the byte starts no valid sequence: `*rune` is then U+FFFD and the width 1,
 * which tells it apart from a literal U+FFFD (width 3). */
static inline size_t utf8_decode(const char *s, size_t n, uint32_t *rune, bool *invalid)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char c = p[0];
    uint32_t r;
    size_t w;

    *invalid = false;
    if (c < 0x80) {
        *rune = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        w = 2;
        r = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        w = 3;
        r = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        w = 4;
        r = c & 0x07;
    } else {
        goto bad;
    }
    if (n < w)
        goto bad;
    for (size_t i = 1; i < w; i++) {
        if ((p[i] & 0xC0) != 0x80)
            goto bad;
        r = (r << 6) | (p[i] & 0x3F);
    }
    if ((w == 3 && r < 0x800) || (w == 4 && (r < 0x10000 || r > 0x10FFFF)) ||
        (r >= 0xD800 && r <= 0xDFFF))
        goto bad;
    *rune = r;
    return w;
bad:
    *invalid = true;
    *rune = UTF8_RUNE_ERROR;
    return 1;
}

/** Writes the UTF-8 encoding of `r` to `out` (room for UTF8_MAX_LEN bytes,
 * not NUL-terminated) and returns its length. A surrogate or a value past
 * U+10FFFF is written as U+FFFD, as Go's utf8.EncodeRune does. */
size_t utf8_encode(uint32_t r, char *out);

/** Number of bytes of `s[0..len)` that start no valid sequence, each of
 * which Go reads as one U+FFFD. 0 means the string is valid UTF-8. */
size_t utf8_invalid_count(const char *s, size_t len);

/** True if `s[0..len)` is valid UTF-8 (Go's utf8.Valid). */
bool utf8_valid(const char *s, size_t len);

struct buf;

/** Appends `s[0..len)` to `out` as valid UTF-8: each byte that starts no
 * valid sequence becomes U+FFFD, as Go's encoding/json writes it (so a
 * strict JSON parser reads what a target sent). Returns 0 or the buffer's
 * negative code (over its cap, out of memory). */
int utf8_append_valid(struct buf *out, const char *s, size_t len);

/** Appends `s[0..len)` to `out` for a reader of text: invalid bytes as
 * U+FFFD, and every control character (C0, DEL, C1) in a visible form
 * (`\n`, `\r`, `\t`, `\x1b`, `\u009b`), so what a target sent stays on
 * its line and sends no terminal escapes. Returns 0 or the buffer's
 * negative code. */
int utf8_append_visible(struct buf *out, const char *s, size_t len);

#endif
