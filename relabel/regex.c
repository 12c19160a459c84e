/* SPDX-License-Identifier: Apache-2.0 */
/* Relabel regexes with Go's meaning, in linear time, on RE2
 * (docs/design.md "Relabeling").
 *
 * Prometheus compiles every relabel regex with Go as "^(?s:" + re + ")$".
 * Go's regexp package is a port of RE2, so RE2 (re2_shim.cc) has its
 * syntax, its leftmost-first submatch rules and its linear-time guarantee:
 * no input can make a match backtrack. This file bridges what still differs
 * between Debian's RE2 (2022-06-01) and the Go of Prometheus 3:
 *
 *  - `(?<name>re)` (Go >= 1.22) is handed to RE2 as `(?P<name>re)`;
 *  - `\C` (RE2: any byte) is an error in Go: it is handed over as `\Z`,
 *    which RE2 rejects at the same place, and reported as `\C`;
 *  - Go rejects a parse tree deeper than 1000 nodes. Captures nested that
 *    deep are rejected here too; Go's other nodes (concatenations,
 *    repeats) are not counted, so a few absurd patterns that Go rejects,
 *    such as 600 nested `(a(...))`, compile here;
 *  - errors carry Go's words ("error parsing regexp: <what>: `<expr>`"),
 *    with RE2's offending text mapped back onto the user's pattern;
 *  - Go reads each byte of invalid UTF-8 in a subject as one U+FFFD, where
 *    RE2 matches no rune at all: such a subject is matched as a copy with
 *    each bad byte replaced by EF BF BD, and the offsets are mapped back.
 *
 * Common shapes (literals, literal alternations, prefix(.*)) skip the
 * engine. Threads: a compiled regex is immutable and may be matched from any
 * number of threads at once. Ownership: relabel__regex_compile() returns an
 * owned object; everything else borrows. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/utf8.h"
#include "relabel/internal.h"
#include "relabel/relabel.h"

/* Go's maxHeight: a parse tree deeper than this is "expression nests too deeply". */
#define GO_MAX_HEIGHT 1000

/* ---------------------------------------------------------------------- */
/* Compiled regexes                                                       */
/* ---------------------------------------------------------------------- */

/* Shapes common in relabel configs that need no regex engine at all. */
enum rx_kind {
    RX_ENGINE,      /* anything else: RE2 */
    RX_LITERAL,     /* no metacharacters: byte equality */
    RX_ANY,         /* .* */
    RX_ANY_CAPTURE, /* (.*) */
    RX_PREFIX_ANY,  /* literal(.*) */
    RX_PREFIX_SOME, /* literal(.+) */
    RX_LITERAL_SET, /* literal|literal|...: byte equality with any */
};

struct relabel__regex {
    enum rx_kind kind;
    char *lit;
    size_t lit_len;
    size_t *alt_off, *alt_len; /* RX_LITERAL_SET alternatives inside lit */
    size_t n_alt;
    struct relabel__re2 *re2; /* RX_ENGINE only */
    uint32_t ngroups;
    char **names; /* [ngroups + 1] */
};

static bool is_plain_literal(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\.+*?()|[]{}^$", s[i]) || s[i] == '\0')
            return false;
        /* a literal U+FFFD also matches an invalid byte: leave that to the engine */
        if (i + 2 < n && (unsigned char)s[i] == 0xEF && (unsigned char)s[i + 1] == 0xBF &&
            (unsigned char)s[i + 2] == 0xBD)
            return false;
    }
    return utf8_valid(s, n);
}

static void detect_shape(struct relabel__regex *re, const char *src, size_t len)
{
    if (len == 2 && memcmp(src, ".*", 2) == 0) {
        re->kind = RX_ANY;
        return;
    }
    if (len >= 4 &&
        (memcmp(src + len - 4, "(.*)", 4) == 0 || memcmp(src + len - 4, "(.+)", 4) == 0) &&
        is_plain_literal(src, len - 4)) {
        re->lit_len = len - 4;
        re->kind = len == 4 && src[2] == '*' ? RX_ANY_CAPTURE
                   : src[len - 2] == '*'     ? RX_PREFIX_ANY
                                             : RX_PREFIX_SOME;
        return;
    }
    if (is_plain_literal(src, len)) {
        re->kind = RX_LITERAL;
        re->lit_len = len;
        return;
    }
    if (memchr(src, '|', len)) {
        size_t start = 0, n = 1;

        for (size_t i = 0; i < len; i++) {
            if (src[i] != '|')
                continue;
            if (!is_plain_literal(src + start, i - start))
                return;
            start = i + 1;
            n++;
        }
        if (!is_plain_literal(src + start, len - start))
            return;
        re->alt_off = calloc(n, sizeof(size_t));
        re->alt_len = calloc(n, sizeof(size_t));
        if (!re->alt_off || !re->alt_len)
            return; /* the engine still works; relabel__regex_free frees */
        start = 0;
        for (size_t i = 0; i <= len; i++) {
            if (i < len && src[i] != '|')
                continue;
            re->alt_off[re->n_alt] = start;
            re->alt_len[re->n_alt++] = i - start;
            start = i + 1;
        }
        re->kind = RX_LITERAL_SET;
        re->lit_len = len;
    }
}

/* ---------------------------------------------------------------------- */
/* From Go's syntax to RE2's                                              */
/* ---------------------------------------------------------------------- */

/* The pattern handed to RE2 and how to map it back to the user's. */
struct prep {
    struct buf pat; /* "^(?s:" + rewritten source + ")$" */
    size_t *ins;    /* offsets in pat of each 'P' we inserted, ascending */
    size_t n_ins;
    bool first_z_is_c;     /* the first `\Z` RE2 will see was the user's `\C` */
    uint32_t max_captures; /* deepest nesting of capture groups */
};

static void prep_done(struct prep *p)
{
    buf_done(&p->pat);
    free(p->ins);
}

static int prep_insert_p(struct prep *p)
{
    size_t *n = realloc(p->ins, (p->n_ins + 1) * sizeof(*n));

    if (!n)
        return -ENOMEM;
    p->ins = n;
    p->ins[p->n_ins++] = p->pat.len;
    return buf_append(&p->pat, "P", 1);
}

/* Walks the user's pattern with Go's lexical rules (escapes, \Q...\E,
 * character classes with their [:name:] parts, groups) and writes what RE2
 * should see. Syntax errors are left for RE2 to find: the walk only has to
 * keep its place, and both engines stop at the same first error. */
static int prep_scan(struct prep *p, const char *s, size_t n)
{
    unsigned char *capture = malloc(n + 1); /* per open group: is it a capture */
    size_t depth = 0, i = 0, class_body = 0;
    uint32_t captures = 0;
    bool in_class = false, seen_z = false;
    int rc = 0;

    if (!capture)
        return -ENOMEM;
    while (i < n && rc == 0) {
        char c = s[i];
        size_t take = 1;

        if (c == '\\' && i + 1 < n) {
            char d = s[i + 1];

            take = 2;
            if (d == 'Q' && !in_class) {
                /* literal text up to the first \E, or to the end */
                const char *e = memmem(s + i + 2, n - i - 2, "\\E", 2);

                take = e ? (size_t)(e - s) + 2 - i : n - i;
            } else if (d == 'C' && !in_class) {
                if (!seen_z)
                    p->first_z_is_c = seen_z = true;
                rc = buf_append(&p->pat, "\\Z", 2);
                i += 2;
                continue;
            } else if (d == 'Z') {
                seen_z = true;
            }
        } else if (in_class) {
            if (c == '[' && i + 1 < n && s[i + 1] == ':') {
                const char *e = memmem(s + i + 2, n - i - 2, ":]", 2);

                if (e)
                    take = (size_t)(e - s) + 2 - i;
            } else if (c == ']' && i > class_body) {
                in_class = false;
            }
        } else if (c == '[') {
            in_class = true;
            class_body = i + 1 < n && s[i + 1] == '^' ? i + 2 : i + 1;
            take = class_body - i;
        } else if (c == '(') {
            bool cap = true;

            if (i + 2 < n && s[i + 1] == '?' && s[i + 2] == '<') {
                /* Go's (?<name>: RE2 spells it (?P<name> */
                if ((rc = buf_append(&p->pat, "(?", 2)) < 0 || (rc = prep_insert_p(p)) < 0)
                    break;
                i += 2;
                take = 1;
            } else if (i + 1 < n && s[i + 1] == '?') {
                size_t j = i + 2;

                cap = j + 1 < n && s[j] == 'P' && s[j + 1] == '<';
                if (!cap) {
                    while (j < n && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                                     s[j] == '-'))
                        j++;
                    if (j < n && s[j] == ')') {
                        take = j + 1 - i; /* (?flags): no group */
                        goto copy;
                    }
                }
                take = 2;
            }
            capture[depth++] = cap;
            captures += cap;
            if (captures > p->max_captures)
                p->max_captures = captures;
        } else if (c == ')' && depth > 0) {
            captures -= capture[--depth];
        }
    copy:
        if (rc == 0)
            rc = buf_append(&p->pat, s + i, take);
        i += take;
    }
    free(capture);
    return rc;
}

/* Maps an offset in the rewritten pattern to the user's wrapped pattern. */
static size_t prep_unmap(const struct prep *p, size_t off)
{
    size_t k = 0;

    while (k < p->n_ins && p->ins[k] < off)
        k++;
    return off - k;
}

/* Go's regexp/syntax ErrorCode strings, by RE2 error code. */
static const char *go_error_text(int code)
{
    switch (code) {
    case RELABEL__RE2_BAD_ESCAPE:
        return "invalid escape sequence";
    case RELABEL__RE2_BAD_CHAR_CLASS:
        return "invalid character class";
    case RELABEL__RE2_BAD_CHAR_RANGE:
        return "invalid character class range";
    case RELABEL__RE2_MISSING_BRACKET:
        return "missing closing ]";
    case RELABEL__RE2_MISSING_PAREN:
        return "missing closing )";
    case RELABEL__RE2_UNEXPECTED_PAREN:
        return "unexpected )";
    case RELABEL__RE2_TRAILING_BACKSLASH:
        return "trailing backslash at end of expression";
    case RELABEL__RE2_REPEAT_ARGUMENT:
        return "missing argument to repetition operator";
    case RELABEL__RE2_REPEAT_SIZE:
        return "invalid repeat count";
    case RELABEL__RE2_REPEAT_OP:
        return "invalid nested repetition operator";
    case RELABEL__RE2_BAD_PERL_OP:
        return "invalid or unsupported Perl syntax";
    case RELABEL__RE2_BAD_UTF8:
        return "invalid UTF-8";
    case RELABEL__RE2_BAD_NAMED_CAPTURE:
        return "invalid named capture";
    case RELABEL__RE2_PATTERN_TOO_LARGE:
        return "expression too large";
    default:
        return "regexp/syntax: internal error";
    }
}

/* If `arg` ends with a counted repeat `{n}`, `{n,}` or `{n,m}`, perhaps
 * followed by the non-greedy `?`, sets [*start, *end) to the braces and
 * *bad if its counts are out of Go's range, and returns true. */
static bool trailing_repeat(const char *arg, size_t len, size_t *start, size_t *end, bool *bad)
{
    long v[2] = { -1, -1 };
    int k = 0;
    size_t i;

    *end = len && arg[len - 1] == '?' ? len - 1 : len;
    if (*end < 3 || arg[*end - 1] != '}')
        return false;
    for (i = *end - 1; i > 0 && arg[i - 1] != '{'; i--)
        ;
    if (i == 0 || i == *end - 1)
        return false;
    *start = i - 1;
    for (size_t j = i; j < *end - 1; j++) {
        if (arg[j] == ',' && k == 0) {
            k = 1;
            v[1] = -2; /* {n,}: no maximum */
        } else if (arg[j] >= '0' && arg[j] <= '9') {
            v[k] = (v[k] < 0 ? 0 : v[k]) * 10 + (arg[j] - '0');
            if (v[k] > 100000)
                v[k] = 100000;
        } else {
            return false;
        }
    }
    *bad = v[0] < 0 || v[0] > 1000 || v[1] > 1000 || (v[1] >= 0 && v[0] > v[1]);
    return true;
}

/* Writes Go's message for RE2's error `code` on `arg`, a piece of the
 * rewritten pattern, shown as the same piece of the user's `orig`. */
static int go_error(const struct prep *p, const char *orig, size_t olen, int code, const char *arg,
                    char *err, size_t errlen)
{
    const char *piece = arg, *shown;
    size_t plen = strlen(arg), shown_len, start, end;
    bool bad = false;

    /* Go checks a counted repeat's numbers before anything else about it,
     * and shows the braces without the non-greedy `?`: `a*{1001}?` is an
     * invalid count `{1001}` in Go, a nested repetition `*{1001}?` in RE2. */
    if ((code == RELABEL__RE2_REPEAT_SIZE || code == RELABEL__RE2_REPEAT_OP) &&
        trailing_repeat(arg, plen, &start, &end, &bad) &&
        (code == RELABEL__RE2_REPEAT_SIZE || bad)) {
        code = RELABEL__RE2_REPEAT_SIZE;
        piece = arg + start;
        plen = end - start;
    }
    shown = piece;
    shown_len = plen;
    if (code == RELABEL__RE2_PATTERN_TOO_LARGE) {
        shown = orig;
        shown_len = olen;
    } else if (code == RELABEL__RE2_BAD_ESCAPE && plen == 2 && memcmp(piece, "\\Z", 2) == 0) {
        shown = p->first_z_is_c ? "\\C" : "\\Z";
    } else if (plen > 0) {
        const char *at = memmem(p->pat.data, p->pat.len, piece, plen);

        if (at) {
            size_t a = prep_unmap(p, (size_t)(at - p->pat.data));
            size_t b = prep_unmap(p, (size_t)(at - p->pat.data) + plen);

            shown = orig + a;
            shown_len = b - a;
        }
    }
    if (errlen)
        snprintf(err, errlen, "error parsing regexp: %s: `%.*s`", go_error_text(code),
                 (int)shown_len, shown);
    return RELABEL_EREGEX;
}

void relabel__regex_free(struct relabel__regex *re)
{
    if (!re)
        return;
    if (re->names) {
        for (uint32_t i = 0; i <= re->ngroups; i++)
            free(re->names[i]);
        free(re->names);
    }
    relabel__re2_free(re->re2);
    free(re->lit);
    free(re->alt_off);
    free(re->alt_len);
    free(re);
}

/* Compiles `re`'s pattern with RE2: small budget first, the large one only
 * for a pattern whose program does not fit the small one. */
static int engine_compile(struct relabel__regex *re, const char *src, size_t len, char *err,
                          size_t errlen)
{
    struct prep p = { 0 };
    struct buf orig;
    char *arg = NULL;
    int rc;

    buf_init(&p.pat, 2 * (size_t)RELABEL__MAX_REGEX_LEN + 16);
    buf_init(&orig, (size_t)RELABEL__MAX_REGEX_LEN + 16);
    if (buf_puts(&orig, "^(?s:") < 0 || buf_append(&orig, src, len) < 0 ||
        buf_puts(&orig, ")$") < 0 || buf_puts(&p.pat, "^(?s:") < 0 || prep_scan(&p, src, len) < 0 ||
        buf_puts(&p.pat, ")$") < 0 || !(arg = malloc(p.pat.len + 1))) {
        rc = -ENOMEM;
        goto out;
    }
    rc = relabel__re2_new(p.pat.data, p.pat.len, RELABEL__RE2_MEM, &re->re2, arg, p.pat.len + 1);
    if (rc == RELABEL__RE2_PATTERN_TOO_LARGE)
        rc = relabel__re2_new(p.pat.data, p.pat.len, RELABEL__RE2_MEM_LARGE, &re->re2, arg,
                              p.pat.len + 1);
    if (rc > 0) {
        rc = go_error(&p, orig.data, orig.len, rc, arg, err, errlen);
        goto out;
    }
    if (rc < 0)
        goto out;
    /* the wrapper's concatenation, the captures, and at least one node inside */
    if (p.max_captures + 2 > GO_MAX_HEIGHT) {
        snprintf(err, errlen, "error parsing regexp: expression nests too deeply: `%.*s`",
                 (int)orig.len, orig.data);
        rc = RELABEL_EREGEX;
        goto out;
    }
    re->ngroups = relabel__re2_groups(re->re2);
    re->names = calloc((size_t)re->ngroups + 1, sizeof(char *));
    if (!re->names || relabel__re2_group_names(re->re2, re->names, re->ngroups) < 0)
        rc = -ENOMEM;
out:
    free(arg);
    buf_done(&orig);
    prep_done(&p);
    return rc;
}

int relabel__regex_compile(const char *src, size_t len, struct relabel__regex **out, char *err,
                           size_t errlen)
{
    struct relabel__regex *re;
    int rc;

    *out = NULL;
    if (len > RELABEL__MAX_REGEX_LEN) {
        snprintf(err, errlen, "regex longer than %d bytes", RELABEL__MAX_REGEX_LEN);
        return RELABEL_EREGEX;
    }
    re = calloc(1, sizeof(*re));
    if (!re)
        return -ENOMEM;
    detect_shape(re, src, len);
    if (re->kind == RX_ENGINE) {
        rc = engine_compile(re, src, len, err, errlen);
        if (rc < 0)
            goto fail;
    } else {
        re->ngroups =
            re->kind == RX_ANY_CAPTURE || re->kind == RX_PREFIX_ANY || re->kind == RX_PREFIX_SOME;
        re->lit = strndup(src, re->lit_len);
        if (!re->lit) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    *out = re;
    return 0;
fail:
    relabel__regex_free(re);
    return rc;
}

uint32_t relabel__regex_groups(const struct relabel__regex *re)
{
    return re->ngroups;
}

const char *relabel__regex_group_name(const struct relabel__regex *re, uint32_t i)
{
    return re->names && i >= 1 && i <= re->ngroups ? re->names[i] : NULL;
}

/* ---------------------------------------------------------------------- */
/* Matching                                                               */
/* ---------------------------------------------------------------------- */

static int fast_search(const struct relabel__regex *re, const char *s, size_t len, size_t start,
                       size_t *ov)
{
    bool hit;

    if (start > 0)
        return 0; /* every fast shape is anchored at \A */
    switch (re->kind) {
    case RX_LITERAL:
        hit = len == re->lit_len && memcmp(s, re->lit, len) == 0;
        break;
    case RX_ANY:
    case RX_ANY_CAPTURE:
        hit = true;
        break;
    case RX_PREFIX_ANY:
        hit = len >= re->lit_len && memcmp(s, re->lit, re->lit_len) == 0;
        break;
    case RX_LITERAL_SET:
        hit = false;
        for (size_t i = 0; i < re->n_alt && !hit; i++)
            hit = len == re->alt_len[i] && memcmp(s, re->lit + re->alt_off[i], len) == 0;
        break;
    default:
        hit = len > re->lit_len && memcmp(s, re->lit, re->lit_len) == 0;
        break;
    }
    if (!hit)
        return 0;
    if (ov) {
        ov[0] = 0;
        ov[1] = len;
        if (re->ngroups) {
            ov[2] = re->lit_len;
            ov[3] = len;
        }
    }
    return 1;
}

/* Go reads each invalid byte as U+FFFD; RE2 cannot match it at all. Match a
 * copy where each bad byte is U+FFFD (3 bytes), then map offsets back to the
 * caller's bytes. */
static int search_invalid_utf8(const struct relabel__regex *re, const char *s, size_t len,
                               size_t bad, size_t start, size_t *ov, uint32_t pairs)
{
    size_t slen = len + 2 * bad, j = 0;
    char *san = malloc(slen + 1);
    size_t *s2o = malloc((slen + 1) * sizeof(size_t));
    size_t *o2s = malloc((len + 1) * sizeof(size_t));
    int rc = -ENOMEM;

    if (!san || !s2o || !o2s)
        goto out;
    for (size_t i = 0; i < len;) {
        uint32_t r;
        bool invalid;
        size_t w = utf8_decode(s + i, len - i, &r, &invalid);

        o2s[i] = j;
        if (invalid) {
            memcpy(san + j, "\xEF\xBF\xBD", 3);
            s2o[j] = s2o[j + 1] = s2o[j + 2] = i;
            j += 3;
        } else {
            for (size_t k = 0; k < w; k++) {
                if (k)
                    o2s[i + k] = j + k;
                san[j + k] = s[i + k];
                s2o[j + k] = i + k;
            }
            j += w;
        }
        i += w;
    }
    o2s[len] = j;
    s2o[j] = len;
    rc = relabel__re2_search(re->re2, san, slen, o2s[start], ov, pairs);
    if (rc > 0)
        for (uint32_t i = 0; i < 2 * pairs; i++)
            if (ov[i] != RELABEL__UNSET)
                ov[i] = s2o[ov[i]];
out:
    free(san);
    free(s2o);
    free(o2s);
    return rc;
}

int relabel__regex_search(const struct relabel__regex *re, const char *s, size_t len, size_t start,
                          size_t *ov)
{
    uint32_t pairs = ov ? re->ngroups + 1 : 0;
    size_t bad;

    if (re->kind != RX_ENGINE)
        return fast_search(re, s, len, start, ov);
    if (start > len)
        return 0;
    if (!s)
        s = "";
    bad = utf8_invalid_count(s, len);
    if (bad)
        return search_invalid_utf8(re, s, len, bad, start, ov, pairs);
    return relabel__re2_search(re->re2, s, len, start, ov, pairs);
}

int relabel__regex_match(const struct relabel__regex *re, const char *s, size_t len)
{
    return relabel__regex_search(re, s, len, 0, NULL);
}

/* ---------------------------------------------------------------------- */
/* Unicode letters (Go's template names)                                  */
/* ---------------------------------------------------------------------- */

static pthread_once_t letter_once = PTHREAD_ONCE_INIT;
static struct relabel__re2 *letter_re; /* lives until exit */

static void letter_init(void)
{
    static const char pat[] = "^[\\p{L}\\p{Nd}]$";
    char arg[64];

    relabel__re2_new(pat, sizeof(pat) - 1, RELABEL__RE2_MEM, &letter_re, arg, sizeof(arg));
}

bool relabel__is_letter_or_digit(uint32_t r)
{
    char enc[UTF8_MAX_LEN];

    if (r < 0x80)
        return (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z');
    if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))
        return false;
    pthread_once(&letter_once, letter_init);
    return letter_re && relabel__re2_search(letter_re, enc, utf8_encode(r, enc), 0, NULL, 0) == 1;
}

void relabel_thread_cleanup(void)
{
    /* RE2 keeps no per-thread state: nothing to free */
}

/* The public face of the same regex: struct relabel_regex is never
 * defined, only converted. */
int relabel_regex_new(const char *src, struct relabel_regex **out, char *err, size_t errlen)
{
    struct relabel__regex *re = NULL;
    int rc = relabel__regex_compile(src, strlen(src), &re, err, errlen);

    *out = (struct relabel_regex *)re;
    return rc;
}

int relabel_regex_match(const struct relabel_regex *re, const char *s, size_t len)
{
    return relabel__regex_match((const struct relabel__regex *)re, s, len);
}

void relabel_regex_free(struct relabel_regex *re)
{
    relabel__regex_free((struct relabel__regex *)re);
}
