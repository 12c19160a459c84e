/* Regexes with RE2 (Go regexp) meaning, run on PCRE2 with JIT.
 *
 * Prometheus compiles every relabel regex with Go as "^(?s:" + re + ")$".
 * We parse that same wrapped string with a port of Go's regexp/syntax
 * parser (same accepted language, same error messages) and emit a PCRE2
 * pattern that spells every construct out explicitly, so that PCRE2's own
 * defaults never leak in: `\d \w \s` become ASCII classes (PCRE's `\s` has
 * VT, Go's does not), `$` becomes `\z` (PCRE's `$` also matches before a
 * final newline), `.` without the s flag becomes `[^\n]`, `(?U)` is applied
 * by us, named groups become plain groups with a name table of ours (Go
 * accepts names such as "1a" that PCRE2 does not), and case folding is
 * requested per atom with `(?i:...)`. Everything RE2 rejects (backreferences,
 * lookaround, atomic groups, possessive quantifiers, `\C`, recursion,
 * conditionals, ...) fails to parse here, before PCRE2 ever sees it.
 *
 * Subjects: Go reads an invalid UTF-8 byte as U+FFFD, one byte wide. PCRE2
 * in UTF mode cannot match invalid UTF-8 at all, so an invalid subject is
 * copied with each bad byte replaced by EF BF BD and the offsets are mapped
 * back; valid subjects (the normal case) are matched in place.
 *
 * Threads: a compiled regex is immutable and shared. Each thread keeps its
 * own match data, match context (match/depth/heap limits) and JIT stack in a
 * thread-local cache, freed by a pthread key destructor or by
 * relabel_thread_cleanup(). Ownership: relabel__regex_compile() returns an
 * owned object; everything else borrows. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relabel/relabel.h"
#include "relabel/internal.h"
#include "common/utf8.h"

/* ---------------------------------------------------------------------- */
/* Translation: Go regexp/syntax (Perl flags) -> PCRE2                    */
/* ---------------------------------------------------------------------- */

enum {
    F_FOLD = 1,     /* (?i) */
    F_MULTI = 2,    /* (?m): Go clears OneLine */
    F_DOTNL = 4,    /* (?s) */
    F_UNGREEDY = 8, /* (?U) */
};

#define MAX_NEST 1000 /* Go's maxHeight: "expression nests too deeply" */
#define MAX_REPEAT 1000

struct range {
    uint32_t lo, hi;
};

static const struct range r_digit[] = {{'0', '9'}};
static const struct range r_perl_space[] = {{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}};
static const struct range r_word[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
static const struct range r_alnum[] = {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}};
static const struct range r_alpha[] = {{'A', 'Z'}, {'a', 'z'}};
static const struct range r_ascii[] = {{0, 0x7F}};
static const struct range r_blank[] = {{'\t', '\t'}, {' ', ' '}};
static const struct range r_cntrl[] = {{0, 0x1F}, {0x7F, 0x7F}};
static const struct range r_graph[] = {{'!', '~'}};
static const struct range r_lower[] = {{'a', 'z'}};
static const struct range r_print[] = {{' ', '~'}};
static const struct range r_punct[] = {{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}};
static const struct range r_space[] = {{'\t', '\r'}, {' ', ' '}};
static const struct range r_upper[] = {{'A', 'Z'}};
static const struct range r_xdigit[] = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};

struct ascii_group {
    const char *name;
    const struct range *r;
    size_t n;
};

#define GROUP(nm, tab) {nm, tab, sizeof(tab) / sizeof(tab[0])}
static const struct ascii_group posix_groups[] = {
    GROUP("alnum", r_alnum), GROUP("alpha", r_alpha), GROUP("ascii", r_ascii),
    GROUP("blank", r_blank), GROUP("cntrl", r_cntrl), GROUP("digit", r_digit),
    GROUP("graph", r_graph), GROUP("lower", r_lower), GROUP("print", r_print),
    GROUP("punct", r_punct), GROUP("space", r_space), GROUP("upper", r_upper),
    GROUP("word", r_word),   GROUP("xdigit", r_xdigit),
};
static const struct ascii_group perl_d = GROUP("d", r_digit);
static const struct ascii_group perl_s = GROUP("s", r_perl_space);
static const struct ascii_group perl_w = GROUP("w", r_word);

/* Go's unicode.Scripts keys (Unicode 15); PCRE2 must know them too. */
static const char *const scripts[] = {
    "Adlam", "Ahom", "Anatolian_Hieroglyphs", "Arabic", "Armenian", "Avestan", "Balinese",
    "Bamum", "Bassa_Vah", "Batak", "Bengali", "Bhaiksuki", "Bopomofo", "Brahmi", "Braille",
    "Buginese", "Buhid", "Canadian_Aboriginal", "Carian", "Caucasian_Albanian", "Chakma", "Cham",
    "Cherokee", "Chorasmian", "Common", "Coptic", "Cuneiform", "Cypriot", "Cypro_Minoan",
    "Cyrillic", "Deseret", "Devanagari", "Dives_Akuru", "Dogra", "Duployan",
    "Egyptian_Hieroglyphs", "Elbasan", "Elymaic", "Ethiopic", "Georgian", "Glagolitic", "Gothic",
    "Grantha", "Greek", "Gujarati", "Gunjala_Gondi", "Gurmukhi", "Han", "Hangul",
    "Hanifi_Rohingya", "Hanunoo", "Hatran", "Hebrew", "Hiragana", "Imperial_Aramaic", "Inherited",
    "Inscriptional_Pahlavi", "Inscriptional_Parthian", "Javanese", "Kaithi", "Kannada",
    "Katakana", "Kawi", "Kayah_Li", "Kharoshthi", "Khitan_Small_Script", "Khmer", "Khojki",
    "Khudawadi", "Lao", "Latin", "Lepcha", "Limbu", "Linear_A", "Linear_B", "Lisu", "Lycian",
    "Lydian", "Mahajani", "Makasar", "Malayalam", "Mandaic", "Manichaean", "Marchen",
    "Masaram_Gondi", "Medefaidrin", "Meetei_Mayek", "Mende_Kikakui", "Meroitic_Cursive",
    "Meroitic_Hieroglyphs", "Miao", "Modi", "Mongolian", "Mro", "Multani", "Myanmar", "Nabataean",
    "Nag_Mundari", "Nandinagari", "New_Tai_Lue", "Newa", "Nko", "Nushu", "Nyiakeng_Puachue_Hmong",
    "Ogham", "Ol_Chiki", "Old_Hungarian", "Old_Italic", "Old_North_Arabian", "Old_Permic",
    "Old_Persian", "Old_Sogdian", "Old_South_Arabian", "Old_Turkic", "Old_Uyghur", "Oriya",
    "Osage", "Osmanya", "Pahawh_Hmong", "Palmyrene", "Pau_Cin_Hau", "Phags_Pa", "Phoenician",
    "Psalter_Pahlavi", "Rejang", "Runic", "Samaritan", "Saurashtra", "Sharada", "Shavian",
    "Siddham", "SignWriting", "Sinhala", "Sogdian", "Sora_Sompeng", "Soyombo", "Sundanese",
    "Syloti_Nagri", "Syriac", "Tagalog", "Tagbanwa", "Tai_Le", "Tai_Tham", "Tai_Viet", "Takri",
    "Tamil", "Tangsa", "Tangut", "Telugu", "Thaana", "Thai", "Tibetan", "Tifinagh", "Tirhuta",
    "Toto", "Ugaritic", "Vai", "Vithkuqi", "Wancho", "Warang_Citi", "Yezidi", "Yi",
    "Zanabazar_Square",
};

/* Go's unicode.Categories keys. */
static const char *const categories[] = {
    "C",  "Cc", "Cf", "Co", "Cs", "L",  "Ll", "Lm", "Lo", "Lt", "Lu", "M",
    "Mc", "Me", "Mn", "N",  "Nd", "Nl", "No", "P",  "Pc", "Pd", "Pe", "Pf",
    "Pi", "Po", "Ps", "S",  "Sc", "Sk", "Sm", "So", "Z",  "Zl", "Zp", "Zs",
};

struct xl_frame {
    unsigned flags;   /* flags to restore at ')' */
    size_t out_start; /* where this group's '(' was emitted */
    unsigned inner;   /* max repeat factor of any committed atom inside */
};

struct xl {
    const char *s;
    size_t len;
    size_t pos;
    struct buf *out;
    unsigned flags;
    struct xl_frame stack[MAX_NEST + 2];
    size_t depth; /* stack[0] is the top level */
    /* the last atom of the current concatenation, the one a quantifier binds to */
    bool have_atom;
    size_t atom_start;
    bool atom_quantified;
    unsigned atom_factor;
    size_t last_repeat_start; /* SIZE_MAX when the previous token was not a repeat */
    uint32_t ngroups;
    char **names;
    size_t names_cap;
    char *err;
    size_t errlen;
};

/* Go's Error.Error(): "error parsing regexp: <code>: `<expr>`". */
static int xl_fail(struct xl *x, const char *code, const char *expr, size_t exprlen)
{
    if (x->errlen)
        snprintf(x->err, x->errlen, "error parsing regexp: %s: `%.*s`", code, (int)exprlen, expr);
    return RELABEL_EREGEX;
}

static int xl_oom(struct xl *x)
{
    if (x->errlen)
        snprintf(x->err, x->errlen, "out of memory");
    return -ENOMEM;
}

static int out_puts(struct xl *x, const char *s)
{
    return buf_puts(x->out, s) < 0 ? xl_oom(x) : 0;
}

static int out_printf(struct xl *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int out_printf(struct xl *x, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = buf_vprintf(x->out, fmt, ap);
    va_end(ap);
    return r < 0 ? xl_oom(x) : 0;
}

/* Inserts `ins` at byte `at` of the output (to wrap an atom in a group). */
static int out_insert(struct xl *x, size_t at, const char *ins)
{
    size_t n = strlen(ins);

    if (buf_reserve(x->out, n) < 0)
        return xl_oom(x);
    memmove(x->out->data + at + n, x->out->data + at, x->out->len - at);
    memcpy(x->out->data + at, ins, n);
    x->out->len += n;
    x->out->data[x->out->len] = '\0';
    return 0;
}

/* Go's nextRune: decodes one rune of the pattern; invalid UTF-8 is an error. */
static int next_rune(struct xl *x, size_t at, uint32_t *r, size_t *w)
{
    bool invalid;

    if (at >= x->len) {
        *r = 0xFFFD;
        *w = 0;
        return 0;
    }
    *w = utf8_decode(x->s + at, x->len - at, r, &invalid);
    if (invalid)
        return xl_fail(x, "invalid UTF-8", x->s + at, x->len - at);
    return 0;
}

static bool is_alnum(uint32_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static int unhex(uint32_t c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

/* The previous atom is complete: account its repeat factor to the group. */
static void commit_atom(struct xl *x)
{
    struct xl_frame *f = &x->stack[x->depth];

    if (x->have_atom && x->atom_factor > f->inner)
        f->inner = x->atom_factor;
    x->have_atom = false;
}

static void begin_atom(struct xl *x)
{
    commit_atom(x);
    x->have_atom = true;
    x->atom_start = x->out->len;
    x->atom_quantified = false;
    x->atom_factor = 1;
}

/* Emits one code point as PCRE2 syntax, usable in and out of classes. */
static int emit_cp(struct xl *x, uint32_t c)
{
    if (is_alnum(c))
        return out_printf(x, "%c", (char)c);
    return out_printf(x, "\\x{%x}", c);
}

static int emit_literal(struct xl *x, uint32_t c)
{
    int r;

    begin_atom(x);
    if (c >= 0xD800 && c <= 0xDFFF) /* Go accepts \x{D800}; no text can contain it */
        return out_puts(x, "(?!)");
    if ((x->flags & F_FOLD) && (c > 0x7F || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))) {
        if ((r = out_puts(x, "(?i:")) < 0 || (r = emit_cp(x, c)) < 0)
            return r;
        return out_puts(x, ")");
    }
    return emit_cp(x, c);
}

/* A character class under construction: PCRE2 class items as text. */
struct cls {
    struct buf items;
    unsigned n;
};

static int cls_range(struct xl *x, struct cls *c, uint32_t lo, uint32_t hi)
{
    int r = 0;

    /* Surrogates cannot occur in text; PCRE2 refuses them in UTF mode. */
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800 && (r = cls_range(x, c, lo, 0xD7FF)) < 0)
            return r;
        if (hi > 0xDFFF)
            r = cls_range(x, c, 0xE000, hi);
        return r;
    }
    if (lo == hi)
        r = buf_printf(&c->items, "\\x{%x}", lo);
    else
        r = buf_printf(&c->items, "\\x{%x}-\\x{%x}", lo, hi);
    if (r < 0)
        return xl_oom(x);
    c->n++;
    return 0;
}

static int cls_text(struct xl *x, struct cls *c, const char *t)
{
    if (buf_puts(&c->items, t) < 0)
        return xl_oom(x);
    c->n++;
    return 0;
}

/* Adds an ASCII group (perl or POSIX). A negated group is added as its
 * explicit complement. Under (?i) Go negates the case-folded group, and
 * folding ASCII letters also reaches U+017F (s) and U+212A (k). */
static int cls_group(struct xl *x, struct cls *c, const struct ascii_group *g, bool negate)
{
    bool in[128] = {false};
    bool long_s = false, kelvin = false;
    uint32_t lo;
    int r;

    if (!negate) {
        for (size_t i = 0; i < g->n; i++)
            if ((r = cls_range(x, c, g->r[i].lo, g->r[i].hi)) < 0)
                return r;
        return 0;
    }
    for (size_t i = 0; i < g->n; i++)
        for (uint32_t ch = g->r[i].lo; ch <= g->r[i].hi; ch++)
            in[ch] = true;
    if (x->flags & F_FOLD) {
        for (int ch = 'a'; ch <= 'z'; ch++)
            if (in[ch] || in[ch - 32])
                in[ch] = in[ch - 32] = true;
        long_s = in['s'];
        kelvin = in['k'];
    }
    for (uint32_t ch = 0; ch < 128;) {
        if (in[ch]) {
            ch++;
            continue;
        }
        lo = ch;
        while (ch < 128 && !in[ch])
            ch++;
        if ((r = cls_range(x, c, lo, ch - 1)) < 0)
            return r;
    }
    lo = 0x80;
    if (long_s) {
        if ((r = cls_range(x, c, lo, 0x17E)) < 0)
            return r;
        lo = 0x180;
    }
    if (kelvin) {
        if ((r = cls_range(x, c, lo, 0x2129)) < 0)
            return r;
        lo = 0x212B;
    }
    return cls_range(x, c, lo, 0x10FFFF);
}

/* Is `name` one of Go's script names that this PCRE2 also knows? (PCRE2
 * 10.42 has Unicode 14, so the two Unicode 15 scripts are rejected.) */
static bool pcre_knows_script(const char *name)
{
    char pat[128];
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *code;
    bool go_knows = false;

    for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++)
        if (strcmp(scripts[i], name) == 0)
            go_knows = true;
    if (!go_knows)
        return false;
    snprintf(pat, sizeof(pat), "\\p{%s}", name);
    code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &errcode, &erroff,
                         NULL);
    if (!code)
        return false;
    pcre2_code_free(code);
    return true;
}

/* Go's parseUnicodeClass at x->pos ("\p..." or "\P..."). Returns 1 if it
 * added an item, 0 if not a Unicode class, or a negative error. */
static int parse_unicode_class(struct xl *x, struct cls *c)
{
    const char *s = x->s + x->pos;
    size_t rest = x->len - x->pos, seqlen, namelen, w;
    const char *name;
    bool negate;
    uint32_t r;
    char nm[96], item[112];
    int rc;

    if (rest < 2 || s[0] != '\\' || (s[1] != 'p' && s[1] != 'P'))
        return 0;
    negate = s[1] == 'P';
    if ((rc = next_rune(x, x->pos + 2, &r, &w)) < 0)
        return rc;
    if (r != '{' || w == 0) {
        seqlen = 2 + w;
        name = s + 2;
        namelen = w;
    } else {
        const char *end = memchr(s, '}', rest);

        if (!end) {
            for (size_t i = x->pos; i < x->len;) {
                if ((rc = next_rune(x, i, &r, &w)) < 0)
                    return rc;
                i += w;
            }
            return xl_fail(x, "invalid character class range", s, rest);
        }
        seqlen = (size_t)(end - s) + 1;
        name = s + 3;
        namelen = (size_t)(end - s) - 3;
        for (size_t i = 0; i < namelen;) {
            bool invalid;

            i += utf8_decode(name + i, namelen - i, &r, &invalid);
            if (invalid)
                return xl_fail(x, "invalid UTF-8", name, namelen);
        }
    }
    if (namelen && name[0] == '^') {
        negate = !negate;
        name++;
        namelen--;
    }
    if (namelen == 0 || namelen >= sizeof(nm))
        return xl_fail(x, "invalid character class range", s, seqlen);
    memcpy(nm, name, namelen);
    nm[namelen] = '\0';
    if (strcmp(nm, "Any") == 0) {
        /* \P{Any} matches nothing: it contributes no item */
        rc = negate ? 0 : cls_range(x, c, 0, 0x10FFFF);
    } else {
        bool known = false;

        for (size_t i = 0; i < sizeof(categories) / sizeof(categories[0]); i++)
            if (strcmp(categories[i], nm) == 0)
                known = true;
        if (!known && !pcre_knows_script(nm))
            return xl_fail(x, "invalid character class range", s, seqlen);
        if (strcmp(nm, "C") == 0) {
            /* Go's C is Cc|Cf|Co|Cs; PCRE2's also has Cn (unassigned). */
            rc = cls_text(x, c, negate ? "\\P{C}\\p{Cn}" : "\\p{Cc}\\p{Cf}\\p{Co}\\p{Cs}");
        } else {
            /* Under (?i) Go case-folds Lu/Ll/Lt; PCRE2 ignores caseless for \p. */
            if ((x->flags & F_FOLD) &&
                (strcmp(nm, "Lu") == 0 || strcmp(nm, "Ll") == 0 || strcmp(nm, "Lt") == 0))
                strcpy(nm, "L&");
            snprintf(item, sizeof(item), "\\%c{%s}", negate ? 'P' : 'p', nm);
            rc = cls_text(x, c, item);
        }
    }
    if (rc < 0)
        return rc;
    x->pos += seqlen;
    return 1;
}

/* Go's parsePerlClassEscape: \d \D \s \S \w \W. */
static int parse_perl_class(struct xl *x, struct cls *c)
{
    const char *s = x->s + x->pos;
    const struct ascii_group *g;
    int rc;

    if (x->len - x->pos < 2 || s[0] != '\\')
        return 0;
    switch (s[1] | 0x20) {
    case 'd':
        g = &perl_d;
        break;
    case 's':
        g = &perl_s;
        break;
    case 'w':
        g = &perl_w;
        break;
    default:
        return 0;
    }
    if (s[1] != 'd' && s[1] != 's' && s[1] != 'w' && s[1] != 'D' && s[1] != 'S' && s[1] != 'W')
        return 0;
    if ((rc = cls_group(x, c, g, s[1] >= 'A' && s[1] <= 'Z')) < 0)
        return rc;
    x->pos += 2;
    return 1;
}

/* Go's parseEscape at x->pos (a backslash). Advances past it. */
static int parse_escape(struct xl *x, uint32_t *out)
{
    size_t start = x->pos, w;
    uint32_t c;
    int rc;

    if (x->pos + 1 >= x->len)
        return xl_fail(x, "trailing backslash at end of expression", "", 0);
    if ((rc = next_rune(x, x->pos + 1, &c, &w)) < 0)
        return rc;
    x->pos += 1 + w;
    switch (c) {
    case '1': case '2': case '3': case '4': case '5': case '6': case '7':
        /* a single non-zero digit is a backreference: not supported */
        if (x->pos >= x->len || x->s[x->pos] < '0' || x->s[x->pos] > '7')
            break;
        /* fall through */
    case '0': {
        uint32_t v = c - '0';

        for (int i = 1; i < 3; i++) {
            if (x->pos >= x->len || x->s[x->pos] < '0' || x->s[x->pos] > '7')
                break;
            v = v * 8 + (uint32_t)(x->s[x->pos] - '0');
            x->pos++;
        }
        *out = v;
        return 0;
    }
    case 'x': {
        uint32_t v = 0;
        int nhex = 0;

        if (x->pos >= x->len)
            break;
        if ((rc = next_rune(x, x->pos, &c, &w)) < 0)
            return rc;
        x->pos += w;
        if (c == '{') {
            for (;;) {
                int h;

                if (x->pos >= x->len)
                    goto bad;
                if ((rc = next_rune(x, x->pos, &c, &w)) < 0)
                    return rc;
                x->pos += w;
                if (c == '}')
                    break;
                if ((h = unhex(c)) < 0)
                    goto bad;
                v = v * 16 + (uint32_t)h;
                if (v > 0x10FFFF)
                    goto bad;
                nhex++;
            }
            if (nhex == 0)
                goto bad;
            *out = v;
            return 0;
        } else {
            int hi = unhex(c), lo;

            if ((rc = next_rune(x, x->pos, &c, &w)) < 0)
                return rc;
            x->pos += w;
            lo = unhex(c);
            if (hi < 0 || lo < 0)
                goto bad;
            *out = (uint32_t)(hi * 16 + lo);
            return 0;
        }
    }
    case 'a':
        *out = 7;
        return 0;
    case 'f':
        *out = '\f';
        return 0;
    case 'n':
        *out = '\n';
        return 0;
    case 'r':
        *out = '\r';
        return 0;
    case 't':
        *out = '\t';
        return 0;
    case 'v':
        *out = 0x0B;
        return 0;
    default:
        if (c < 0x80 && !is_alnum(c)) {
            *out = c;
            return 0;
        }
        break;
    }
bad:
    return xl_fail(x, "invalid escape sequence", x->s + start, x->pos - start);
}

/* Go's parseClass at x->pos ('['). */
static int parse_class(struct xl *x)
{
    size_t start = x->pos;
    struct cls c;
    bool negated = false, first = true;
    int rc;

    buf_init(&c.items, (size_t)1 << 24);
    c.n = 0;
    x->pos++;
    if (x->pos < x->len && x->s[x->pos] == '^') {
        negated = true;
        x->pos++;
    }
    while (x->pos >= x->len || x->s[x->pos] != ']' || first) {
        uint32_t lo, hi;
        size_t rng = x->pos, wz;

        first = false;
        if (x->len - x->pos > 2 && x->s[x->pos] == '[' && x->s[x->pos + 1] == ':') {
            const char *t = x->s + x->pos + 2;
            const char *end = memmem(t, x->len - x->pos - 2, ":]", 2);

            if (end) {
                size_t nlen = (size_t)(end - t);
                bool neg = nlen && t[0] == '^';
                const struct ascii_group *g = NULL;

                for (size_t i = 0; i < sizeof(posix_groups) / sizeof(posix_groups[0]); i++) {
                    const char *gn = posix_groups[i].name;

                    if (strlen(gn) == nlen - neg && memcmp(gn, t + neg, nlen - neg) == 0)
                        g = &posix_groups[i];
                }
                if (!g) {
                    rc = xl_fail(x, "invalid character class range", x->s + x->pos, nlen + 4);
                    goto out;
                }
                if ((rc = cls_group(x, &c, g, neg)) < 0)
                    goto out;
                x->pos += nlen + 4;
                continue;
            }
        }
        if ((rc = parse_unicode_class(x, &c)) < 0)
            goto out;
        if (rc)
            continue;
        if ((rc = parse_perl_class(x, &c)) < 0)
            goto out;
        if (rc)
            continue;
        /* a single character or a range */
        if (x->pos >= x->len) {
            rc = xl_fail(x, "missing closing ]", x->s + start, x->len - start);
            goto out;
        }
        if (x->s[x->pos] == '\\') {
            if ((rc = parse_escape(x, &lo)) < 0)
                goto out;
        } else {
            if ((rc = next_rune(x, x->pos, &lo, &wz)) < 0)
                goto out;
            x->pos += wz;
        }
        hi = lo;
        if (x->len - x->pos >= 2 && x->s[x->pos] == '-' && x->s[x->pos + 1] != ']') {
            x->pos++;
            if (x->pos >= x->len) {
                rc = xl_fail(x, "missing closing ]", x->s + start, x->len - start);
                goto out;
            }
            if (x->s[x->pos] == '\\') {
                if ((rc = parse_escape(x, &hi)) < 0)
                    goto out;
            } else {
                if ((rc = next_rune(x, x->pos, &hi, &wz)) < 0)
                    goto out;
                x->pos += wz;
            }
            if (hi < lo) {
                rc = xl_fail(x, "invalid character class range", x->s + rng, x->pos - rng);
                goto out;
            }
        }
        if ((rc = cls_range(x, &c, lo, hi)) < 0)
            goto out;
    }
    x->pos++; /* ']' */
    begin_atom(x);
    if (c.n == 0) {
        rc = out_puts(x, negated ? "[\\x{0}-\\x{d7ff}\\x{e000}-\\x{10ffff}]" : "(?!)");
        goto out;
    }
    rc = out_printf(x, "%s[%s%s]%s", (x->flags & F_FOLD) ? "(?i:" : "", negated ? "^" : "",
                    c.items.data, (x->flags & F_FOLD) ? ")" : "");
out:
    buf_done(&c.items);
    return rc;
}

/* Go's parseInt for repeat counts: no leading zeros; >= 1e8 gives -1. */
static bool parse_int(struct xl *x, size_t *at, int *n)
{
    size_t p = *at;
    long v = 0;

    if (p >= x->len || x->s[p] < '0' || x->s[p] > '9')
        return false;
    if (x->len - p >= 2 && x->s[p] == '0' && x->s[p + 1] >= '0' && x->s[p + 1] <= '9')
        return false;
    while (p < x->len && x->s[p] >= '0' && x->s[p] <= '9') {
        if (v >= 100000000)
            v = -1;
        else if (v >= 0)
            v = v * 10 + (x->s[p] - '0');
        p++;
    }
    *n = (int)v;
    *at = p;
    return true;
}

/* Go's parseRepeat at x->pos ('{'): false means "a literal {". */
static bool parse_repeat(struct xl *x, int *min, int *max, size_t *after)
{
    size_t p = x->pos + 1;

    if (!parse_int(x, &p, min))
        return false;
    if (p >= x->len)
        return false;
    if (x->s[p] != ',') {
        *max = *min;
    } else {
        p++;
        if (p >= x->len)
            return false;
        if (x->s[p] == '}') {
            *max = -1;
        } else {
            if (!parse_int(x, &p, max))
                return false;
            if (*max < 0)
                *min = -1;
        }
    }
    if (p >= x->len || x->s[p] != '}')
        return false;
    *after = p + 1;
    return true;
}

/* Applies a quantifier (text x->s[op..after)) to the last atom: Go's repeat(). */
static int apply_repeat(struct xl *x, size_t op, size_t after, int min, int max, char kind)
{
    bool lazy = (x->flags & F_UNGREEDY) != 0;
    int rc;

    if (after < x->len && x->s[after] == '?') {
        after++;
        lazy = !lazy;
    }
    if (x->last_repeat_start != SIZE_MAX)
        return xl_fail(x, "invalid nested repetition operator", x->s + x->last_repeat_start,
                       after - x->last_repeat_start);
    if (!x->have_atom)
        return xl_fail(x, "missing argument to repetition operator", x->s + op, after - op);
    if (kind == '{') {
        unsigned m = (unsigned)(max >= 0 ? max : min);

        if ((min >= 2 || max >= 2) && m > 0 && (uint64_t)m * x->atom_factor > MAX_REPEAT)
            return xl_fail(x, "invalid repeat count", x->s + op, after - op);
        x->atom_factor = m == 0 ? 0 : m * x->atom_factor;
    }
    if (x->atom_quantified) {
        if ((rc = out_insert(x, x->atom_start, "(?:")) < 0 || (rc = out_puts(x, ")")) < 0)
            return rc;
    }
    switch (kind) {
    case '*':
    case '+':
    case '?':
        rc = out_printf(x, "%c", kind);
        break;
    default:
        if (max == min)
            rc = out_printf(x, "{%d}", min);
        else if (max < 0)
            rc = out_printf(x, "{%d,}", min);
        else
            rc = out_printf(x, "{%d,%d}", min, max);
        break;
    }
    if (rc == 0 && lazy)
        rc = out_puts(x, "?");
    x->atom_quantified = true;
    x->last_repeat_start = op;
    x->pos = after;
    return rc;
}

static int open_group(struct xl *x, bool capture, const char *name, size_t namelen)
{
    struct xl_frame *f;

    begin_atom(x);
    x->have_atom = false; /* the group becomes the atom when it closes */
    if (x->depth >= MAX_NEST)
        return xl_fail(x, "expression nests too deeply", x->s, x->len);
    f = &x->stack[++x->depth];
    f->flags = x->flags;
    f->out_start = x->out->len;
    f->inner = 0;
    if (!capture)
        return out_puts(x, "(?:");
    if (x->ngroups >= RELABEL__MAX_GROUPS)
        return xl_fail(x, "expression too large", x->s, x->len);
    x->ngroups++;
    if (x->names && x->ngroups + 1 > x->names_cap) {
        size_t cap = x->names_cap * 2;
        char **nn = realloc(x->names, cap * sizeof(*nn));

        if (!nn)
            return xl_oom(x);
        memset(nn + x->names_cap, 0, (cap - x->names_cap) * sizeof(*nn));
        x->names = nn;
        x->names_cap = cap;
    }
    if (name && x->names) {
        x->names[x->ngroups] = strndup(name, namelen);
        if (!x->names[x->ngroups])
            return xl_oom(x);
    }
    return out_puts(x, "(");
}

/* Go's parsePerlFlags at x->pos ("(?"). */
static int parse_perl_flags(struct xl *x)
{
    const char *t = x->s + x->pos;
    size_t rest = x->len - x->pos, p, w;
    unsigned flags = x->flags;
    int sign = 1;
    bool saw_flag = false;
    uint32_t c;
    int rc;

    bool starts_p = rest > 4 && t[2] == 'P' && t[3] == '<';
    bool starts_name = rest > 3 && t[2] == '<';

    if (starts_p || starts_name) {
        size_t expr_start = starts_p ? 4 : 3;
        const char *end = memchr(t, '>', rest);
        size_t namelen;

        if (!end) {
            for (size_t i = x->pos; i < x->len;) {
                if ((rc = next_rune(x, i, &c, &w)) < 0)
                    return rc;
                i += w;
            }
            return xl_fail(x, "invalid named capture", t, rest);
        }
        namelen = (size_t)(end - t) - expr_start;
        for (size_t i = 0; i < namelen;) {
            bool invalid;

            i += utf8_decode(t + expr_start + i, namelen - i, &c,
                                 &invalid);
            if (invalid)
                return xl_fail(x, "invalid UTF-8", t + expr_start, namelen);
        }
        if (namelen == 0)
            return xl_fail(x, "invalid named capture", t, (size_t)(end - t) + 1);
        for (size_t i = 0; i < namelen; i++) {
            char ch = t[expr_start + i];

            if (ch != '_' && !is_alnum((unsigned char)ch))
                return xl_fail(x, "invalid named capture", t, (size_t)(end - t) + 1);
        }
        x->pos += (size_t)(end - t) + 1;
        return open_group(x, true, t + expr_start, namelen);
    }
    p = x->pos + 2;
    while (p < x->len) {
        if ((rc = next_rune(x, p, &c, &w)) < 0)
            return rc;
        p += w;
        switch (c) {
        case 'i':
            flags |= F_FOLD;
            saw_flag = true;
            continue;
        case 'm':
            flags |= F_MULTI;
            saw_flag = true;
            continue;
        case 's':
            flags |= F_DOTNL;
            saw_flag = true;
            continue;
        case 'U':
            flags |= F_UNGREEDY;
            saw_flag = true;
            continue;
        case '-':
            if (sign < 0)
                break;
            sign = -1;
            flags = ~flags; /* so that |= above clears, as Go does */
            saw_flag = false;
            continue;
        case ':':
        case ')':
            if (sign < 0) {
                if (!saw_flag)
                    break;
                flags = ~flags;
            }
            flags &= F_FOLD | F_MULTI | F_DOTNL | F_UNGREEDY;
            x->pos = p;
            if (c == ':') {
                rc = open_group(x, false, NULL, 0);
                x->flags = flags; /* the frame keeps the old flags */
                return rc;
            }
            x->flags = flags;
            return 0;
        default:
            break;
        }
        break;
    }
    return xl_fail(x, "invalid or unsupported Perl syntax", t, p - x->pos);
}

static int emit_assertion(struct xl *x, const char *pcre)
{
    begin_atom(x);
    return out_puts(x, pcre);
}

int relabel__translate(const char *src, size_t len, struct buf *out, uint32_t *ngroups,
                       char ***names, char *err, size_t errlen)
{
    struct xl *x = calloc(1, sizeof(*x));
    int rc = 0;

    if (!x)
        return -ENOMEM;
    x->s = src;
    x->len = len;
    x->out = out;
    x->err = err;
    x->errlen = errlen;
    x->last_repeat_start = SIZE_MAX;
    if (names) {
        x->names_cap = 16;
        x->names = calloc(x->names_cap, sizeof(char *));
        if (!x->names) {
            rc = xl_oom(x);
            goto done;
        }
    }
    while (x->pos < x->len && rc == 0) {
        size_t before = x->last_repeat_start, op = x->pos, w;
        unsigned char c = (unsigned char)x->s[x->pos];
        uint32_t r;

        x->last_repeat_start = SIZE_MAX;
        switch (c) {
        case '(':
            if (x->len - x->pos >= 2 && x->s[x->pos + 1] == '?') {
                rc = parse_perl_flags(x);
            } else {
                x->pos++;
                rc = open_group(x, true, NULL, 0);
            }
            break;
        case '|':
            commit_atom(x);
            x->pos++;
            rc = out_puts(x, "|");
            break;
        case ')': {
            struct xl_frame *f;

            if (x->depth == 0) {
                rc = xl_fail(x, "unexpected )", x->s, x->len);
                break;
            }
            commit_atom(x);
            f = &x->stack[x->depth--];
            x->flags = f->flags;
            x->pos++;
            rc = out_puts(x, ")");
            commit_atom(x);
            x->have_atom = true;
            x->atom_start = f->out_start;
            x->atom_quantified = false;
            x->atom_factor = f->inner ? f->inner : 1;
            break;
        }
        case '^':
            x->pos++;
            rc = emit_assertion(x, (x->flags & F_MULTI) ? "(?m:^)" : "(?:\\A)");
            break;
        case '$':
            x->pos++;
            rc = emit_assertion(x, (x->flags & F_MULTI) ? "(?m:$)" : "(?:\\z)");
            break;
        case '.':
            x->pos++;
            begin_atom(x);
            rc = out_puts(x, (x->flags & F_DOTNL) ? "." : "[^\\n]");
            break;
        case '[':
            rc = parse_class(x);
            break;
        case '*':
        case '+':
        case '?':
            x->last_repeat_start = before;
            rc = apply_repeat(x, op, op + 1, c == '+', c == '?' ? 1 : -1, (char)c);
            break;
        case '{': {
            int min, max;
            size_t after;

            if (!parse_repeat(x, &min, &max, &after)) {
                x->pos++;
                rc = emit_literal(x, '{');
                break;
            }
            if (min < 0 || min > MAX_REPEAT || max > MAX_REPEAT || (max >= 0 && min > max)) {
                rc = xl_fail(x, "invalid repeat count", x->s + op, after - op);
                break;
            }
            x->last_repeat_start = before;
            rc = apply_repeat(x, op, after, min, max, '{');
            break;
        }
        case '\\':
            if (x->len - x->pos >= 2) {
                switch (x->s[x->pos + 1]) {
                case 'A':
                    x->pos += 2;
                    rc = emit_assertion(x, "(?:\\A)");
                    goto next;
                case 'b':
                    x->pos += 2;
                    rc = emit_assertion(x, "(?:\\b)");
                    goto next;
                case 'B':
                    x->pos += 2;
                    rc = emit_assertion(x, "(?:\\B)");
                    goto next;
                case 'C':
                    rc = xl_fail(x, "invalid escape sequence", x->s + x->pos, 2);
                    goto next;
                case 'z':
                    x->pos += 2;
                    rc = emit_assertion(x, "(?:\\z)");
                    goto next;
                case 'Q': {
                    const char *lit = x->s + x->pos + 2;
                    size_t litlen = x->len - x->pos - 2;
                    const char *e = memmem(lit, litlen, "\\E", 2);
                    size_t n = e ? (size_t)(e - lit) : litlen;

                    x->pos += 2;
                    for (size_t i = 0; i < n && rc == 0;) {
                        if ((rc = next_rune(x, x->pos, &r, &w)) < 0)
                            break;
                        x->pos += w;
                        i += w;
                        rc = emit_literal(x, r);
                    }
                    if (e && rc == 0)
                        x->pos += 2;
                    goto next;
                }
                default:
                    break;
                }
            }
            {
                struct cls cl;
                int got;

                buf_init(&cl.items, (size_t)1 << 24);
                cl.n = 0;
                got = parse_unicode_class(x, &cl);
                if (got == 0)
                    got = parse_perl_class(x, &cl);
                if (got > 0) {
                    begin_atom(x);
                    if (cl.n == 0)
                        rc = out_puts(x, "(?!)");
                    else
                        rc = out_printf(x, "%s[%s]%s", (x->flags & F_FOLD) ? "(?i:" : "",
                                        cl.items.data, (x->flags & F_FOLD) ? ")" : "");
                }
                buf_done(&cl.items);
                if (got < 0) {
                    rc = got;
                    break;
                }
                if (got > 0)
                    break;
            }
            if ((rc = parse_escape(x, &r)) < 0)
                break;
            rc = emit_literal(x, r);
            break;
        default:
            if ((rc = next_rune(x, x->pos, &r, &w)) < 0)
                break;
            x->pos += w;
            rc = emit_literal(x, r);
            break;
        }
next:;
    }
    if (rc == 0 && x->depth > 0)
        rc = xl_fail(x, "missing closing )", x->s, x->len);
done:
    if (rc == 0) {
        *ngroups = x->ngroups;
        if (names)
            *names = x->names;
    } else if (x->names) {
        for (size_t i = 0; i < x->names_cap; i++)
            free(x->names[i]);
        free(x->names);
    }
    free(x);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Compiled regexes                                                       */
/* ---------------------------------------------------------------------- */

/* Shapes common in relabel configs that need no regex engine at all. */
enum rx_kind {
    RX_PCRE,
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
    pcre2_code *code;
    bool jit;
    uint32_t ngroups;
    char **names; /* [ngroups + 1] */
};

static bool is_plain_literal(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\.+*?()|[]{}^$", s[i]) || s[i] == '\0')
            return false;
        /* a literal U+FFFD also matches an invalid byte: leave that to PCRE2 */
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
                   : src[len - 2] == '*'      ? RX_PREFIX_ANY
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

static pthread_once_t letter_once = PTHREAD_ONCE_INIT;
static pcre2_code *letter_code;

static void letter_init(void)
{
    int errcode;
    PCRE2_SIZE erroff;

    letter_code = pcre2_compile((PCRE2_SPTR) "[\\p{L}\\p{Nd}]", PCRE2_ZERO_TERMINATED,
                                PCRE2_UTF | PCRE2_ANCHORED, &errcode, &erroff, NULL);
}

bool relabel__is_letter_or_digit(uint32_t r)
{
    char enc[4];
    size_t n;
    pcre2_match_data *md;
    int rc;

    if (r < 0x80)
        return is_alnum(r);
    if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))
        return false;
    pthread_once(&letter_once, letter_init);
    if (!letter_code)
        return false;
    n = utf8_encode(r, enc);
    md = pcre2_match_data_create(1, NULL);
    if (!md)
        return false;
    rc = pcre2_match(letter_code, (PCRE2_SPTR)enc, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc > 0;
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
    pcre2_code_free(re->code);
    free(re->lit);
    free(re->alt_off);
    free(re->alt_len);
    free(re);
}

int relabel__regex_compile(const char *src, size_t len, struct relabel__regex **out, char *err,
                           size_t errlen)
{
    struct relabel__regex *re;
    struct buf wrapped, pat;
    pcre2_compile_context *cctx = NULL;
    int rc, errcode;
    PCRE2_SIZE erroff;

    *out = NULL;
    if (len > RELABEL__MAX_REGEX_LEN) {
        snprintf(err, errlen, "regex longer than %d bytes", RELABEL__MAX_REGEX_LEN);
        return RELABEL_EREGEX;
    }
    re = calloc(1, sizeof(*re));
    if (!re)
        return -ENOMEM;
    buf_init(&wrapped, RELABEL__MAX_REGEX_LEN + 16);
    buf_init(&pat, (size_t)64 << 20);
    if (buf_puts(&wrapped, "^(?s:") < 0 || buf_append(&wrapped, src, len) < 0 ||
        buf_puts(&wrapped, ")$") < 0) {
        rc = -ENOMEM;
        goto fail;
    }
    rc = relabel__translate(wrapped.data, wrapped.len, &pat, &re->ngroups, &re->names, err, errlen);
    if (rc < 0)
        goto fail;
    detect_shape(re, src, len);
    if (re->kind != RX_PCRE) {
        re->lit = strndup(src, re->lit_len);
        if (!re->lit) {
            rc = -ENOMEM;
            goto fail;
        }
        goto ok;
    }
    cctx = pcre2_compile_context_create(NULL);
    if (!cctx) {
        rc = -ENOMEM;
        goto fail;
    }
    pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
    pcre2_set_parens_nest_limit(cctx, 4 * MAX_NEST + 16);
    re->code = pcre2_compile((PCRE2_SPTR)pat.data, pat.len,
                             PCRE2_UTF | PCRE2_NO_UTF_CHECK | PCRE2_NEVER_UCP | PCRE2_DOTALL |
                                 PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_CIRCUMFLEX |
                                 PCRE2_NEVER_BACKSLASH_C,
                             &errcode, &erroff, cctx);
    if (!re->code) {
        PCRE2_UCHAR msg[160];

        pcre2_get_error_message(errcode, msg, sizeof(msg));
        snprintf(err, errlen, "error parsing regexp: %s: `%.*s`", (const char *)msg, (int)len,
                 src);
        rc = RELABEL_EREGEX;
        goto fail;
    }
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
ok:
    pcre2_compile_context_free(cctx);
    buf_done(&wrapped);
    buf_done(&pat);
    *out = re;
    return 0;
fail:
    pcre2_compile_context_free(cctx);
    buf_done(&wrapped);
    buf_done(&pat);
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

struct match_tls {
    pcre2_match_data *md;
    uint32_t pairs;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static __thread struct match_tls *tls_cur;

static void tls_free(void *p)
{
    struct match_tls *t = p;

    if (!t)
        return;
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->mc);
    pcre2_jit_stack_free(t->js);
    free(t);
}

static void tls_key_init(void)
{
    pthread_key_create(&tls_key, tls_free);
}

void relabel_thread_cleanup(void)
{
    pthread_once(&tls_once, tls_key_init);
    tls_free(tls_cur);
    tls_cur = NULL;
    pthread_setspecific(tls_key, NULL);
}

static struct match_tls *tls_get(uint32_t pairs)
{
    struct match_tls *t = tls_cur;

    if (!t) {
        pthread_once(&tls_once, tls_key_init);
        t = calloc(1, sizeof(*t));
        if (!t)
            return NULL;
        t->mc = pcre2_match_context_create(NULL);
        t->js = pcre2_jit_stack_create(32 * 1024, RELABEL__JIT_STACK_MAX, NULL);
        if (!t->mc || !t->js) {
            tls_free(t);
            return NULL;
        }
        pcre2_set_match_limit(t->mc, RELABEL__MATCH_LIMIT);
        pcre2_set_depth_limit(t->mc, RELABEL__DEPTH_LIMIT);
        pcre2_set_heap_limit(t->mc, RELABEL__HEAP_LIMIT_KIB);
        pcre2_jit_stack_assign(t->mc, NULL, t->js);
        tls_cur = t;
        pthread_setspecific(tls_key, t);
    }
    if (t->pairs < pairs) {
        pcre2_match_data *md = pcre2_match_data_create(pairs < 16 ? 16 : pairs, NULL);

        if (!md)
            return NULL;
        pcre2_match_data_free(t->md);
        t->md = md;
        t->pairs = pairs < 16 ? 16 : pairs;
    }
    return t;
}

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

static int pcre_exec(const struct relabel__regex *re, struct match_tls *t, const char *s,
                     size_t len, size_t start)
{
    int rc;

    if (re->jit)
        rc = pcre2_jit_match(re->code, (PCRE2_SPTR)s, len, start, 0, t->md, t->mc);
    else
        rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, start, PCRE2_NO_UTF_CHECK, t->md, t->mc);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc == PCRE2_ERROR_NOMEMORY)
        return -ENOMEM;
    if (rc < 0)
        return RELABEL_ELIMIT; /* match, depth, heap or JIT stack limit */
    return rc;
}

int relabel__regex_search(const struct relabel__regex *re, const char *s, size_t len, size_t start,
                          size_t *ov)
{
    uint32_t pairs = re->ngroups + 1;
    struct match_tls *t;
    PCRE2_SIZE *pv;
    size_t bad;
    int rc;

    if (re->kind != RX_PCRE)
        return fast_search(re, s, len, start, ov);
    if (start > len)
        return 0;
    t = tls_get(pairs);
    if (!t)
        return -ENOMEM;
    bad = utf8_invalid_count(s, len);
    if (!bad) {
        rc = pcre_exec(re, t, s, len, start);
        if (rc <= 0)
            return rc;
        pv = pcre2_get_ovector_pointer(t->md);
        if (ov)
            for (uint32_t i = 0; i < 2 * pairs; i++)
                ov[i] = i < 2 * (uint32_t)rc && pv[i] != PCRE2_UNSET ? pv[i] : RELABEL__UNSET;
        return 1;
    }
    /* Invalid UTF-8: match a copy where each bad byte is U+FFFD (3 bytes),
     * then map offsets back to the caller's bytes. */
    {
        size_t slen = len + 2 * bad;
        char *san = malloc(slen + 1);
        size_t *s2o = malloc((slen + 1) * sizeof(size_t));
        size_t *o2s = malloc((len + 1) * sizeof(size_t));
        size_t j = 0;

        if (!san || !s2o || !o2s) {
            rc = -ENOMEM;
            goto out;
        }
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
        rc = pcre_exec(re, t, san, slen, o2s[start]);
        if (rc > 0) {
            pv = pcre2_get_ovector_pointer(t->md);
            if (ov)
                for (uint32_t i = 0; i < 2 * pairs; i++)
                    ov[i] = i < 2 * (uint32_t)rc && pv[i] != PCRE2_UNSET ? s2o[pv[i]]
                                                                        : RELABEL__UNSET;
            rc = 1;
        }
out:
        free(san);
        free(s2o);
        free(o2s);
        return rc;
    }
}

int relabel__regex_match(const struct relabel__regex *re, const char *s, size_t len)
{
    return relabel__regex_search(re, s, len, 0, NULL);
}
