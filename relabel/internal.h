/** Internal interface between relabel.c (rules, actions, templates) and
 * regex.c (RE2 syntax on PCRE2). Not installed; tests include it to reach
 * the translator directly. */
#ifndef PROFLET_RELABEL_INTERNAL_H
#define PROFLET_RELABEL_INTERNAL_H

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
