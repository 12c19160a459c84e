/* SPDX-License-Identifier: Apache-2.0 */
/** Internal interfaces of relabel/, in dependency order: re2_shim.cc (RE2
 * behind a C API) <- regex.c (Go regexp semantics on it) <- relabel.c
 * (rules, actions, templates). Not installed; the tests include it to reach
 * the regex layer directly. */
#ifndef PROFLET_RELABEL_INTERNAL_H
#define PROFLET_RELABEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Longest regex source accepted (bytes); longer ones are rejected at compile time. */
#define RELABEL__MAX_REGEX_LEN 65536
/** RE2 memory budget of one regex (program plus DFA cache); a pattern whose
 * program does not fit is compiled again with the large budget, so that
 * only huge patterns get a large DFA cache. */
#define RELABEL__RE2_MEM ((int64_t)8 << 20)
#define RELABEL__RE2_MEM_LARGE ((int64_t)32 << 20)

/** Unset group offset in an ovector. */
#define RELABEL__UNSET SIZE_MAX

/* ---------------------------------------------------------------------- */
/* re2_shim.cc                                                            */

/** A compiled RE2 object. Immutable; may be searched from any thread. */
struct relabel__re2;

/** RE2's error codes (re2::RE2::ErrorCode, checked at compile time). */
enum {
    RELABEL__RE2_INTERNAL = 1,
    RELABEL__RE2_BAD_ESCAPE,
    RELABEL__RE2_BAD_CHAR_CLASS,
    RELABEL__RE2_BAD_CHAR_RANGE,
    RELABEL__RE2_MISSING_BRACKET,
    RELABEL__RE2_MISSING_PAREN,
    RELABEL__RE2_UNEXPECTED_PAREN,
    RELABEL__RE2_TRAILING_BACKSLASH,
    RELABEL__RE2_REPEAT_ARGUMENT,
    RELABEL__RE2_REPEAT_SIZE,
    RELABEL__RE2_REPEAT_OP,
    RELABEL__RE2_BAD_PERL_OP,
    RELABEL__RE2_BAD_UTF8,
    RELABEL__RE2_BAD_NAMED_CAPTURE,
    RELABEL__RE2_PATTERN_TOO_LARGE,
};

/** Compiles `pat[0..len)` as RE2 with Go's options (UTF-8, Perl syntax,
 * leftmost-first) and a memory budget of `max_mem` bytes. Returns 0 and an
 * owned object in `*out`, -ENOMEM, or a RELABEL__RE2_* code with RE2's
 * error argument (the offending part of `pat`) copied into `arg`. */
int relabel__re2_new(const char *pat, size_t len, int64_t max_mem, struct relabel__re2 **out,
                     char *arg, size_t arglen);
/** Frees an object (NULL is fine). */
void relabel__re2_free(struct relabel__re2 *r);
/** Number of capture groups. */
uint32_t relabel__re2_groups(const struct relabel__re2 *r);
/** Stores a malloc'd copy of each group's name at names[i] (1 <= i <=
 * ngroups); unnamed groups are left alone. Returns 0 or -ENOMEM. */
int relabel__re2_group_names(const struct relabel__re2 *r, char **names, uint32_t ngroups);
/** Leftmost-first search of `s[start..len)` (the text before `start` is
 * context for `^` and `\b`). On a match fills 2 * `pairs` offsets into `ov`
 * (RELABEL__UNSET for groups that did not take part; `pairs` may be 0).
 * Returns 1, 0 (no match) or -ENOMEM. `s` must be valid UTF-8. */
int relabel__re2_search(const struct relabel__re2 *r, const char *s, size_t len, size_t start,
                        size_t *ov, uint32_t pairs);

/* ---------------------------------------------------------------------- */
/* regex.c                                                                */

/** A compiled regex with Go meaning. Immutable once built. */
struct relabel__regex;

/** Compiles the user's regex `src` as Prometheus does (`^(?s:src)$`),
 * failing with Go's message ("error parsing regexp: ...") wherever Go's
 * regexp.Compile fails. Returns 0, RELABEL_EREGEX (message in err) or
 * -ENOMEM. */
int relabel__regex_compile(const char *src, size_t len, struct relabel__regex **out, char *err,
                           size_t errlen);
/** Frees a compiled regex (NULL is fine). */
void relabel__regex_free(struct relabel__regex *re);
/** Number of capture groups. */
uint32_t relabel__regex_groups(const struct relabel__regex *re);
/** Name of group `i` (1-based) or NULL. */
const char *relabel__regex_group_name(const struct relabel__regex *re, uint32_t i);

/** Searches `s[0..len)` from byte `start` as Go's regexp does (leftmost-first,
 * invalid UTF-8 bytes read as U+FFFD), in time linear in `len`. On a match
 * fills `ov` (if not NULL) with 2 * (groups + 1) byte offsets into `s`
 * (RELABEL__UNSET for groups that did not take part). Returns 1 (match),
 * 0 (no match) or -ENOMEM. */
int relabel__regex_search(const struct relabel__regex *re, const char *s, size_t len, size_t start,
                          size_t *ov);
/** Full-match test used by keep/drop and the label actions. Same returns. */
int relabel__regex_match(const struct relabel__regex *re, const char *s, size_t len);

/** True if `r` is a Unicode letter or decimal digit (Go unicode.IsLetter || IsDigit). */
bool relabel__is_letter_or_digit(uint32_t r);

#ifdef __cplusplus
}
#endif

#endif
