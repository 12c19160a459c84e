/** Internal interface between relabel.c (rules, actions, templates) and
 * regex.c (RE2 syntax on PCRE2). Not installed; tests include it to reach
 * the translator directly. */
#ifndef PROFLET_RELABEL_INT_H
#define PROFLET_RELABEL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/** Longest regex source accepted (bytes); longer ones are rejected at compile time. */
#define RELABEL__MAX_REGEX_LEN 65536
/** Most capture groups one regex may have. */
#define RELABEL__MAX_GROUPS 1000
/** PCRE2 limits applied to every match (see relabel__regex_search()). */
#define RELABEL__MATCH_LIMIT 1000000u
#define RELABEL__DEPTH_LIMIT 10000u
#define RELABEL__HEAP_LIMIT_KIB 32768u
#define RELABEL__JIT_STACK_MAX (1024u * 1024u)

/** Unset group offset in an ovector. */
#define RELABEL__UNSET SIZE_MAX

/** Decodes one rune as Go's utf8.DecodeRune does: an invalid or truncated
 * sequence, a surrogate or an overlong form yields U+FFFD with width 1.
 * `n` must be > 0. Returns the width; `*invalid` tells the two U+FFFD apart. */
static inline size_t relabel__decode(const unsigned char *s, size_t n, uint32_t *rune,
                                     bool *invalid)
{
    unsigned char c = s[0];
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
        if ((s[i] & 0xC0) != 0x80)
            goto bad;
        r = (r << 6) | (s[i] & 0x3F);
    }
    if ((w == 3 && r < 0x800) || (w == 4 && (r < 0x10000 || r > 0x10FFFF)) ||
        (r >= 0xD800 && r <= 0xDFFF))
        goto bad;
    *rune = r;
    return w;
bad:
    *invalid = true;
    *rune = 0xFFFD;
    return 1;
}

/** Number of bytes of s[0..len) that start no valid UTF-8 sequence, each of
 * which Go reads as one U+FFFD (0: the string is valid UTF-8). */
size_t relabel__utf8_invalid(const char *s, size_t len);

/** Appends the UTF-8 encoding of `r` (a valid scalar value) to `out`; returns the length. */
static inline size_t relabel__encode(uint32_t r, char *out)
{
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

/** A compiled regex with RE2 meaning. Immutable once built. */
struct relabel__regex;

/** Translates the RE2 pattern `src` (already wrapped, e.g. "^(?s:x)$") into
 * an equivalent PCRE2 pattern appended to `out`, or fails with Go's message
 * ("error parsing regexp: ...") for syntax RE2 rejects. `names` (may be
 * NULL) receives a malloc'd array of `*ngroups` + 1 group names (index 0
 * unused, NULL = unnamed). Returns 0 or RELABEL_EREGEX / -ENOMEM. */
int relabel__translate(const char *src, size_t len, struct buf *out, uint32_t *ngroups,
                       char ***names, char *err, size_t errlen);

/** Compiles the user's regex `src` as Prometheus does (`^(?s:src)$`).
 * Returns 0, RELABEL_EREGEX (message in err) or -ENOMEM. */
int relabel__regex_compile(const char *src, size_t len, struct relabel__regex **out, char *err,
                           size_t errlen);
/** Frees a compiled regex (NULL is fine). */
void relabel__regex_free(struct relabel__regex *re);
/** Number of capture groups. */
uint32_t relabel__regex_groups(const struct relabel__regex *re);
/** Name of group `i` (1-based) or NULL. */
const char *relabel__regex_group_name(const struct relabel__regex *re, uint32_t i);

/** Searches `s[0..len)` from byte `start` as Go's regexp does (leftmost-first,
 * invalid UTF-8 bytes read as U+FFFD). On a match fills `ov` with
 * 2 * (groups + 1) byte offsets into `s` (RELABEL__UNSET for groups that did
 * not take part). Returns 1 (match), 0 (no match), RELABEL_ELIMIT or -ENOMEM. */
int relabel__regex_search(const struct relabel__regex *re, const char *s, size_t len, size_t start,
                          size_t *ov);
/** Full-match test used by keep/drop and the label actions. Same returns. */
int relabel__regex_match(const struct relabel__regex *re, const char *s, size_t len);

/** True if `r` is a Unicode letter or decimal digit (Go unicode.IsLetter || IsDigit). */
bool relabel__is_letter_or_digit(uint32_t r);

#endif
