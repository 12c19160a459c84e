/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for relabel/: every action, every validation message, Go's
 * ExpandString edge cases, Go regexp semantics where other engines differ,
 * invalid UTF-8, limits, schemes, sanitising and concurrent use.
 *
 * Expected values come from Prometheus' model/relabel semantics (its tests
 * and documentation; docs/design.md "Relabeling") and the Go regexp/syntax
 * documentation (e.g.
 * `\s` is [\t\n\f\r ], `$1x` means ${1x}), never from our own output. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/macros.h"
#include "relabel/internal.h"
#include "relabel/relabel.h"
#include "test.h"

static char errbuf[1024];

static struct relabel_rules *compile(const struct relabel_cfg *c, size_t n,
                                     enum relabel_scheme scheme)
{
    struct relabel_rules *rs = NULL;
    int rc = relabel_rules_new(c, n, scheme, &rs, errbuf, sizeof(errbuf));

    if (rc != 0)
        test__fail(__FILE__, __LINE__, "compile failed (%d): %s", rc, errbuf);
    return rs;
}

/* The message compiling `c` fails with, or "" if it compiles. */
static const char *compile_err(const struct relabel_cfg *c, enum relabel_scheme scheme)
{
    struct relabel_rules *rs = NULL;

    errbuf[0] = '\0';
    if (relabel_rules_new(c, 1, scheme, &rs, errbuf, sizeof(errbuf)) == 0) {
        relabel_rules_free(rs);
        return "";
    }
    return errbuf;
}

static void set_kv(struct labels *ls, const char *const *kv)
{
    for (size_t i = 0; kv[i]; i += 2)
        ASSERT_EQ(labels_set(ls, kv[i], kv[i + 1]), 0);
}

/* Applies and renders the result as Labels.String(), or "DROP". */
static char out[4096];
static const char *apply(const struct relabel_rules *rs, const char *const *kv)
{
    struct labels ls = LABELS_INIT;
    int rc;

    set_kv(&ls, kv);
    rc = relabel_apply(rs, &ls);
    if (rc < 0)
        snprintf(out, sizeof(out), "ERROR %d", rc);
    else if (rc == 0)
        snprintf(out, sizeof(out), "DROP");
    else {
        char *s = labels_to_string(&ls);

        snprintf(out, sizeof(out), "%s", s);
        free(s);
    }
    labels_done(&ls);
    return out;
}

/* replace: source "s" = subject, target "t" = template expansion. Returns
 * t's value, "<nomatch>" if the regex did not match, "<error N>". */
static char rxbuf[4096];
static const char *rx(const char *regex, const char *subject, const char *repl)
{
    char *src[] = { "s" };
    struct relabel_cfg c = { .source_labels = src,
                             .n_source_labels = 1,
                             .regex = (char *)regex,
                             .target_label = "t",
                             .replacement = (char *)repl };
    struct relabel_rules *rs = NULL;
    struct labels ls = LABELS_INIT;
    const char *v;
    int rc;

    if (relabel_rules_new(&c, 1, RELABEL_SCHEME_UTF8, &rs, errbuf, sizeof(errbuf)) != 0)
        test__fail(__FILE__, __LINE__, "regex %s: %s", regex, errbuf);
    ASSERT_EQ(labels_set(&ls, "s", subject), 0);
    ASSERT_EQ(labels_set(&ls, "t", "<nomatch>"), 0);
    rc = relabel_apply(rs, &ls);
    if (rc < 0) {
        snprintf(rxbuf, sizeof(rxbuf), "<error %d>", rc);
    } else {
        v = labels_get(&ls, "t");
        snprintf(rxbuf, sizeof(rxbuf), "%s", v ? v : "<deleted>");
    }
    labels_done(&ls);
    relabel_rules_free(rs);
    return rxbuf;
}

static bool full_match(const char *regex, const char *subject)
{
    return strcmp(rx(regex, subject, "[$0]"), "<nomatch>") != 0;
}

static const char *regex_err(const char *regex)
{
    struct relabel_cfg c = { .regex = (char *)regex, .action = "keep" };

    return compile_err(&c, RELABEL_SCHEME_UTF8);
}

/* ---------------------------------------------------------------------- */
/* actions                                                                */

TEST(action_replace_and_defaults)
{
    char *src[] = { "a", "b" };
    struct relabel_cfg c[] = {
        { .source_labels = src,
          .n_source_labels = 2,
          .regex = "f(.*);(.*)r",
          .target_label = "d",
          .replacement = "x${1}y${2}z" },
        /* all defaults except target: regex (.*), replacement $1, separator ; */
        { .source_labels = src, .n_source_labels = 2, .target_label = "e" },
        /* no match: nothing happens */
        { .source_labels = src, .n_source_labels = 1, .regex = "nomatch", .target_label = "a" },
    };
    struct relabel_rules *rs = compile(c, 3, RELABEL_SCHEME_UNSET);

    ASSERT_EQ(relabel_rules_count(rs), 3);
    ASSERT_STR_EQ(apply(rs, (const char *[]){ "a", "foo", "b", "bar", NULL }),
                  "{a=\"foo\", b=\"bar\", d=\"xooybaz\", e=\"foo;bar\"}");
    relabel_rules_free(rs);
}

TEST(action_replace_empty_result_deletes)
{
    char *src[] = { "a" };
    struct relabel_cfg c = { .source_labels = src,
                             .n_source_labels = 1,
                             .regex = "(f).*",
                             .target_label = "$1",
                             .replacement = "$2" };
    struct relabel_rules *rs = compile(&c, 1, RELABEL_SCHEME_UTF8);

    ASSERT_STR_EQ(apply(rs, (const char *[]){ "a", "foo", "f", "x", NULL }), "{a=\"foo\"}");
    relabel_rules_free(rs);
}

TEST(action_replace_fast_path_sets_constant)
{
    /* val == "" with the default regex and no $: target = replacement */
    char *src[] = { "missing" };
    struct relabel_cfg c = {
        .source_labels = src, .n_source_labels = 1, .target_label = "t", .replacement = "const"
    };
    struct relabel_rules *rs = compile(&c, 1, RELABEL_SCHEME_UNSET);

    ASSERT_STR_EQ(apply(rs, (const char *[]){ "a", "1", NULL }), "{a=\"1\", t=\"const\"}");
    relabel_rules_free(rs);
}

TEST(action_replace_invalid_expanded_target_is_skipped_under_legacy)
{
    char *src[] = { "a" };
    struct relabel_cfg c = { .source_labels = src,
                             .n_source_labels = 1,
                             .regex = "(.*)",
                             .target_label = "${1}",
                             .replacement = "v" };
    struct relabel_rules *legacy = compile(&c, 1, RELABEL_SCHEME_LEGACY);
    struct relabel_rules *utf8 = compile(&c, 1, RELABEL_SCHEME_UTF8);

    ASSERT_STR_EQ(apply(legacy, (const char *[]){ "a", "foo.bar", NULL }), "{a=\"foo.bar\"}");
    ASSERT_STR_EQ(apply(utf8, (const char *[]){ "a", "foo.bar", NULL }),
                  "{a=\"foo.bar\", foo.bar=\"v\"}");
    ASSERT_STR_EQ(apply(legacy, (const char *[]){ "a", "ok_name", NULL }),
                  "{a=\"ok_name\", ok_name=\"v\"}");
    relabel_rules_free(legacy);
    relabel_rules_free(utf8);
}

TEST(action_keep_drop)
{
    char *src[] = { "a" };
    struct relabel_cfg keep = {
        .source_labels = src, .n_source_labels = 1, .regex = "f.*", .action = "keep"
    };
    struct relabel_cfg drop = {
        .source_labels = src, .n_source_labels = 1, .regex = "f|o", .action = "DROP"
    };
    struct relabel_rules *k = compile(&keep, 1, RELABEL_SCHEME_UNSET);
    struct relabel_rules *d = compile(&drop, 1, RELABEL_SCHEME_UNSET);

    ASSERT_STR_EQ(apply(k, (const char *[]){ "a", "foo", NULL }), "{a=\"foo\"}");
    ASSERT_STR_EQ(apply(k, (const char *[]){ "a", "bar", NULL }), "DROP");
    /* the regex is anchored: "f|o" matches "f" and "o", not "foo" */
    ASSERT_STR_EQ(apply(d, (const char *[]){ "a", "foo", NULL }), "{a=\"foo\"}");
    ASSERT_STR_EQ(apply(d, (const char *[]){ "a", "o", NULL }), "DROP");
    relabel_rules_free(k);
    relabel_rules_free(d);
}

TEST(action_keepequal_dropequal)
{
    char *src[] = { "__tmp_port" };
    struct relabel_cfg ke = {
        .source_labels = src, .n_source_labels = 1, .target_label = "p", .action = "keepequal"
    };
    struct relabel_cfg de = {
        .source_labels = src, .n_source_labels = 1, .target_label = "p", .action = "dropequal"
    };
    struct relabel_rules *k = compile(&ke, 1, RELABEL_SCHEME_UNSET);
    struct relabel_rules *d = compile(&de, 1, RELABEL_SCHEME_UNSET);

    ASSERT_STR_EQ(apply(k, (const char *[]){ "__tmp_port", "1", "p", "1", NULL }),
                  "{__tmp_port=\"1\", p=\"1\"}");
    ASSERT_STR_EQ(apply(k, (const char *[]){ "__tmp_port", "1", "p", "2", NULL }), "DROP");
    /* missing target reads as "", equal to a missing source */
    ASSERT_STR_EQ(apply(k, (const char *[]){ "x", "1", NULL }), "{x=\"1\"}");
    ASSERT_STR_EQ(apply(d, (const char *[]){ "__tmp_port", "1", "p", "1", NULL }), "DROP");
    ASSERT_STR_EQ(apply(d, (const char *[]){ "__tmp_port", "1", NULL }), "{__tmp_port=\"1\"}");
    relabel_rules_free(k);
    relabel_rules_free(d);
}

TEST(action_hashmod_vectors)
{
    /* values computed with Prometheus' hashmod: md5, last 8 bytes, modulo */
    static const struct {
        const char *val;
        uint64_t mod;
        const char *want;
    } v[] = { { "baz", 1000, "976" },
              { "foo\nbar", 1000, "734" },
              { "10.132.183.40:80", 3, "1" },
              { "", 10, "8" } };

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char *src[] = { "a" };
        struct relabel_cfg c = { .source_labels = src,
                                 .n_source_labels = 1,
                                 .modulus = v[i].mod,
                                 .target_label = "h",
                                 .action = "hashmod" };
        struct relabel_rules *rs = compile(&c, 1, RELABEL_SCHEME_UNSET);
        struct labels ls = LABELS_INIT;

        if (*v[i].val)
            ASSERT_EQ(labels_set(&ls, "a", v[i].val), 0);
        ASSERT_EQ(relabel_apply(rs, &ls), 1);
        ASSERT_STR_EQ(labels_get(&ls, "h"), v[i].want);
        labels_done(&ls);
        relabel_rules_free(rs);
    }
}

TEST(action_lowercase_uppercase_unicode)
{
    char *src[] = { "a" };
    struct relabel_cfg c[] = {
        { .source_labels = src, .n_source_labels = 1, .target_label = "lo", .action = "lowercase" },
        { .source_labels = src, .n_source_labels = 1, .target_label = "up", .action = "uppercase" },
    };
    struct relabel_rules *rs = compile(c, 2, RELABEL_SCHEME_UNSET);
    struct labels ls = LABELS_INIT;

    /* Go's simple per-rune mapping: Ä->ä, ǅ (U+01C5) -> ǆ / Ǆ, ß has no
     * single-rune upper case; an invalid byte becomes U+FFFD. */
    ASSERT_EQ(labels_set(&ls, "a", "bAr\xc3\x84\xc7\x85\xc3\x9f\xff"), 0);
    ASSERT_EQ(relabel_apply(rs, &ls), 1);
    ASSERT_STR_EQ(labels_get(&ls, "lo"), "bar\xc3\xa4\xc7\x86\xc3\x9f\xef\xbf\xbd");
    ASSERT_STR_EQ(labels_get(&ls, "up"), "BAR\xc3\x84\xc7\x84\xc3\x9f\xef\xbf\xbd");
    labels_done(&ls);
    /* ASCII-only input is mapped without touching other bytes; empty deletes */
    ASSERT_STR_EQ(apply(rs, (const char *[]){ "a", "Q-1", "lo", "x", NULL }),
                  "{a=\"Q-1\", lo=\"q-1\", up=\"Q-1\"}");
    ASSERT_STR_EQ(apply(rs, (const char *[]){ "lo", "x", "up", "y", NULL }), "{}");
    relabel_rules_free(rs);
}

TEST(action_labelmap_labeldrop_labelkeep)
{
    struct relabel_cfg map = { .regex = "__meta_(my.*)",
                               .replacement = "${1}",
                               .action = "labelmap" };
    struct relabel_cfg ldrop = { .regex = "(b.*)", .action = "labeldrop" };
    struct relabel_cfg lkeep = { .regex = "(b.*)", .action = "labelkeep" };
    struct relabel_rules *m = compile(&map, 1, RELABEL_SCHEME_UNSET);
    struct relabel_rules *d = compile(&ldrop, 1, RELABEL_SCHEME_UNSET);
    struct relabel_rules *k = compile(&lkeep, 1, RELABEL_SCHEME_UNSET);

    ASSERT_STR_EQ(apply(m, (const char *[]){ "__meta_my_a", "1", "__meta_x", "2", NULL }),
                  "{__meta_my_a=\"1\", __meta_x=\"2\", my_a=\"1\"}");
    ASSERT_STR_EQ(apply(d, (const char *[]){ "a", "1", "b1", "2", "bb", "3", NULL }), "{a=\"1\"}");
    ASSERT_STR_EQ(apply(k, (const char *[]){ "a", "1", "b1", "2", "bb", "3", NULL }),
                  "{b1=\"2\", bb=\"3\"}");
    relabel_rules_free(m);
    relabel_rules_free(d);
    relabel_rules_free(k);
}

/* The regex is anchored on both ends: `b` names the label b only, never a
 * label that merely contains or starts with b. */
TEST(labeldrop_labelkeep_match_whole_names)
{
    /* "b" takes the literal fast path, "[b]" the regex engine. */
    char *regexes[] = { "b", "[b]" };
    const char *in[] = { "ab", "1", "b", "2", "bc", "3", NULL };

    for (size_t i = 0; i < ARRAY_SIZE(regexes); i++) {
        struct relabel_cfg ldrop = { .regex = regexes[i], .action = "labeldrop" };
        struct relabel_cfg lkeep = { .regex = regexes[i], .action = "labelkeep" };
        struct relabel_rules *d = compile(&ldrop, 1, RELABEL_SCHEME_UNSET);
        struct relabel_rules *k = compile(&lkeep, 1, RELABEL_SCHEME_UNSET);

        ASSERT_STR_EQ(apply(d, in), "{ab=\"1\", bc=\"3\"}");
        ASSERT_STR_EQ(apply(k, in), "{b=\"2\"}");
        relabel_rules_free(d);
        relabel_rules_free(k);
    }
}

TEST(labelmap_name_is_not_validated_under_utf8)
{
    /* replacement expands to "" for every label: the new name is "" */
    struct relabel_cfg map = { .regex = "(a)", .replacement = "${2}x", .action = "labelmap" };
    struct relabel_rules *rs = compile(&map, 1, RELABEL_SCHEME_UTF8);

    ASSERT_STR_EQ(apply(rs, (const char *[]){ "a", "1", NULL }), "{a=\"1\", x=\"1\"}");
    relabel_rules_free(rs);
}

/* §1.2 iteration order: base labels by name, skipping modified ones, then
 * labels set by earlier rules in the order they were (re)added; on a
 * labelmap collision the later one wins. */
TEST(label_iteration_order_follows_builder)
{
    char *none[] = { "nope" };
    struct relabel_cfg add_first[] = {
        { .source_labels = none, .n_source_labels = 1, .target_label = "0_x", .replacement = "3" },
        { .regex = ".(_x)", .replacement = "y", .action = "labelmap" },
    };
    struct relabel_cfg modify_base[] = {
        { .source_labels = none, .n_source_labels = 1, .target_label = "a_x", .replacement = "9" },
        { .regex = ".(_x)", .replacement = "y", .action = "labelmap" },
    };
    struct relabel_cfg readd_moves_last[] = {
        { .source_labels = none, .n_source_labels = 1, .target_label = "z_x", .replacement = "1" },
        { .source_labels = none, .n_source_labels = 1, .target_label = "c_x", .replacement = "2" },
        { .regex = "z_x", .action = "labeldrop" },
        { .source_labels = none, .n_source_labels = 1, .target_label = "z_x", .replacement = "3" },
        { .regex = "[cz](_x)", .replacement = "y", .action = "labelmap" },
    };
    struct relabel_rules *r1 = compile(add_first, 2, RELABEL_SCHEME_UTF8);
    struct relabel_rules *r2 = compile(modify_base, 2, RELABEL_SCHEME_UTF8);
    struct relabel_rules *r3 = compile(readd_moves_last, 5, RELABEL_SCHEME_UTF8);
    struct labels ls = LABELS_INIT;

    /* sorted order would end with b_x ("2"); the builder ends with 0_x */
    set_kv(&ls, (const char *[]){ "a_x", "1", "b_x", "2", NULL });
    ASSERT_EQ(relabel_apply(r1, &ls), 1);
    ASSERT_STR_EQ(labels_get(&ls, "y"), "3");
    labels_done(&ls);
    set_kv(&ls, (const char *[]){ "a_x", "1", "b_x", "2", NULL });
    ASSERT_EQ(relabel_apply(r2, &ls), 1);
    ASSERT_STR_EQ(labels_get(&ls, "y"), "9");
    labels_done(&ls);
    set_kv(&ls, (const char *[]){ "q", "0", NULL });
    ASSERT_EQ(relabel_apply(r3, &ls), 1);
    ASSERT_STR_EQ(labels_get(&ls, "y"), "3");
    labels_done(&ls);
    relabel_rules_free(r1);
    relabel_rules_free(r2);
    relabel_rules_free(r3);
}

TEST(labelmap_uses_values_from_rule_start)
{
    /* a -> b and b -> c in one rule: c gets b's old value */
    struct relabel_cfg c = { .regex = "([ab])", .replacement = "${1}x", .action = "labelmap" };
    struct relabel_cfg chain[] = {
        { .regex = "a", .replacement = "b", .action = "labelmap" },
    };
    struct relabel_rules *rs = compile(&c, 1, RELABEL_SCHEME_UTF8);
    struct relabel_rules *ch = compile(chain, 1, RELABEL_SCHEME_UTF8);

    ASSERT_STR_EQ(apply(rs, (const char *[]){ "a", "1", "b", "2", NULL }),
                  "{a=\"1\", ax=\"1\", b=\"2\", bx=\"2\"}");
    ASSERT_STR_EQ(apply(ch, (const char *[]){ "a", "1", "b", "2", NULL }), "{a=\"1\", b=\"1\"}");
    relabel_rules_free(rs);
    relabel_rules_free(ch);
}

TEST(first_drop_stops_processing)
{
    char *src[] = { "a" };
    struct relabel_cfg c[] = {
        { .source_labels = src, .n_source_labels = 1, .regex = "x", .action = "keep" },
        { .regex = "((", .action = "drop" }, /* never reached: but must compile... */
    };
    struct relabel_rules *rs = NULL;

    /* the second rule does not compile, so the list is rejected as a whole */
    ASSERT_EQ(relabel_rules_new(c, 2, RELABEL_SCHEME_UNSET, &rs, errbuf, sizeof(errbuf)),
              RELABEL_EREGEX);
    ASSERT_NULL(rs);
    c[1].regex = ".*";
    rs = compile(c, 2, RELABEL_SCHEME_UNSET);
    ASSERT_STR_EQ(apply(rs, (const char *[]){ "a", "y", NULL }), "DROP");
    ASSERT_STR_EQ(apply(rs, (const char *[]){ "a", "x", NULL }), "DROP");
    relabel_rules_free(rs);
    ASSERT_EQ(relabel_apply(NULL, NULL), 1);
}

/* ---------------------------------------------------------------------- */
/* validation (§1.5), exact messages                                      */

TEST(validation_messages)
{
    static char *src[] = { "a" };
    static char *empty_name[] = { "" };
    static const struct {
        struct relabel_cfg c;
        const char *want;
    } v[] = {
        { { .action = "" }, "relabel action cannot be empty" },
        { { .action = "Explode" }, "unknown relabel action \"Explode\"" },
        { { .action = "hashmod", .target_label = "t" },
          "relabel configuration for hashmod requires non-zero modulus" },
        { { .action = "replace" },
          "relabel configuration for replace action requires 'target_label' value" },
        { { .action = "uppercase" },
          "relabel configuration for uppercase action requires 'target_label' value" },
        { { .action = "keepequal" },
          "relabel configuration for keepequal action requires 'target_label' value" },
        { { .action = "replace", .target_label = "t", .name_validation_scheme = "ascii" },
          "unknown relabel config name validation method specified, must be either '', "
          "'legacy' or 'utf8', got ascii" },
        { { .action = "replace", .target_label = "a-b", .name_validation_scheme = "legacy" },
          "\"a-b\" is invalid 'target_label' for replace action" },
        { { .action = "replace", .target_label = "-${1}", .name_validation_scheme = "legacy" },
          "\"-${1}\" is invalid 'target_label' for replace action" },
        { { .action = "lowercase", .target_label = "a b", .name_validation_scheme = "legacy" },
          "\"a b\" is invalid 'target_label' for lowercase action" },
        { { .action = "lowercase", .target_label = "t", .replacement = "x" },
          "'replacement' can not be set for lowercase action" },
        { { .action = "labelmap", .replacement = "a.${1}", .name_validation_scheme = "legacy" },
          "\"a.${1}\" is invalid 'replacement' for labelmap action" },
        { { .action = "hashmod",
            .modulus = 2,
            .target_label = "1x",
            .name_validation_scheme = "legacy" },
          "\"1x\" is invalid 'target_label' for hashmod action" },
        { { .action = "keepequal", .target_label = "t", .regex = "(.*)" },
          "keepequal action requires only 'source_labels' and `target_label`, and no other "
          "fields" },
        { { .action = "dropequal", .target_label = "t", .separator = "," },
          "dropequal action requires only 'source_labels' and `target_label`, and no other "
          "fields" },
        { { .action = "labeldrop", .target_label = "t" },
          "labeldrop action requires only 'regex', and no other fields" },
        { { .action = "labelkeep", .source_labels = src, .n_source_labels = 1 },
          "labelkeep action requires only 'regex', and no other fields" },
        { { .action = "labelkeep", .modulus = 3 },
          "labelkeep action requires only 'regex', and no other fields" },
        { { .action = "keep", .source_labels = empty_name, .n_source_labels = 1 },
          "\"\" is not a valid label name" },
        /* keep, drop and labelmap ignore extra fields */
        { { .action = "keep", .target_label = "x", .modulus = 5, .replacement = "y" }, "" },
        { { .action = "labelmap", .target_label = "x", .separator = "," }, "" },
        /* utf8 target names may contain anything valid */
        { { .action = "replace", .target_label = "a-b.c" }, "" },
    };

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        const char *got = compile_err(&v[i].c, RELABEL_SCHEME_UNSET);

        if (strcmp(got, v[i].want) != 0)
            test__fail(__FILE__, __LINE__, "case %zu: got \"%s\" want \"%s\"", i, got, v[i].want);
    }
}

TEST(rule_scheme_inherits_scrape_scheme)
{
    struct relabel_cfg c = { .action = "replace", .target_label = "a.b" };
    struct relabel_cfg own = { .action = "replace",
                               .target_label = "a.b",
                               .name_validation_scheme = "utf8" };

    ASSERT_STR_EQ(compile_err(&c, RELABEL_SCHEME_UTF8), "");
    ASSERT_STR_EQ(compile_err(&c, RELABEL_SCHEME_UNSET), "");
    ASSERT_STR_EQ(compile_err(&c, RELABEL_SCHEME_LEGACY),
                  "\"a.b\" is invalid 'target_label' for replace action");
    ASSERT_STR_EQ(compile_err(&own, RELABEL_SCHEME_LEGACY), "");
}

TEST(null_regex_is_the_empty_regex)
{
    char *src[] = { "a" };
    struct relabel_cfg c = {
        .source_labels = src, .n_source_labels = 1, .regex_null = true, .action = "keep"
    };
    struct relabel_cfg e = {
        .source_labels = src, .n_source_labels = 1, .regex = "", .action = "keep"
    };
    struct relabel_rules *rn = compile(&c, 1, RELABEL_SCHEME_UNSET);
    struct relabel_rules *re = compile(&e, 1, RELABEL_SCHEME_UNSET);

    ASSERT_STR_EQ(apply(rn, (const char *[]){ "b", "1", NULL }), "{b=\"1\"}");
    ASSERT_STR_EQ(apply(rn, (const char *[]){ "a", "1", NULL }), "DROP");
    ASSERT_STR_EQ(apply(re, (const char *[]){ "a", "1", NULL }), "DROP");
    relabel_rules_free(rn);
    relabel_rules_free(re);
}

/* ---------------------------------------------------------------------- */
/* $ expansion (Go Regexp.ExpandString, §1.3)                             */

TEST(expand_edge_cases)
{
    ASSERT_STR_EQ(rx("(a)(b)?(?P<n>c)", "ac",
                     "[$1][$2][$n][${n}][$0][${0}][$$][$][$-][${][${}][${1][$1x][$01][$10][$nope]"),
                  "[a][][c][c][ac][ac][$][$][$-][${][${}][${1][][][][]");
    /* $1_suffix reads as ${1_suffix} */
    ASSERT_STR_EQ(rx("(a)", "a", "$1_suffix|${1}_suffix"), "|a_suffix");
    /* the name is the longest run of Unicode letters, digits, _: `$éx` is a
     * (missing) name, not a malformed `$` */
    ASSERT_STR_EQ(rx("(x)", "x", "[$1\xc3\xa9][${1}\xc3\xa9][$\xc3\xa9x][$.]"),
                  "[][x\xc3\xa9][][$.]");
    /* $10 is group 10 when there are 10 groups */
    ASSERT_STR_EQ(rx("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", "abcdefghij", "$10,$1,${1}0"), "j,a,a0");
    /* a named group with an all-digit name is reached by index, not name */
    ASSERT_STR_EQ(rx("(x)(?P<1>y)", "xy", "$1"), "x");
    /* a template ending in $ keeps it; a trailing $ at the end of the target */
    ASSERT_STR_EQ(rx("(.*)", "v", "${1}$"), "v$");
}

TEST(expand_duplicate_names_take_first_participating)
{
    ASSERT_STR_EQ(rx("(?P<n>a)|(?P<n>b)", "b", "[$n]"), "[b]");
    ASSERT_STR_EQ(rx("(?P<n>a)|(?P<n>b)", "a", "[$n]"), "[a]");
}

/* ---------------------------------------------------------------------- */
/* Go regexp semantics on RE2                                            */

TEST(regex_anchored_and_dotall)
{
    ASSERT_TRUE(full_match("foo", "foo"));
    ASSERT_FALSE(full_match("foo", "xfoo"));
    ASSERT_FALSE(full_match("foo", "foox"));
    /* `.` matches newline (the wrapper sets s), (?-s) turns it off */
    ASSERT_TRUE(full_match("line1.*line2", "line1\nline2"));
    ASSERT_FALSE(full_match("(?-s:line1.*line2)", "line1\nline2"));
    /* `$` does not match before a trailing newline (Perl's and PCRE's would) */
    ASSERT_FALSE(full_match("a$\n?", "a\n"));
    ASSERT_FALSE(full_match("a$", "a\n"));
    ASSERT_TRUE(full_match("a\n$", "a\n"));
    /* multiline ^ and $ */
    ASSERT_TRUE(full_match("a(?m:$)\n(?m:^)b", "a\nb"));
    ASSERT_TRUE(full_match("a\n(?m:^)", "a\n"));
    /* a $ in the middle never matches */
    ASSERT_FALSE(full_match("a$b", "ab"));
    /* ^ and $ may be repeated in RE2 */
    ASSERT_TRUE(full_match("^*a$*", "a"));
}

TEST(regex_leftmost_first_submatches)
{
    /* Perl semantics, not POSIX leftmost-longest */
    ASSERT_STR_EQ(rx("(a|aa)(a*)", "aa", "$1,$2"), "a,a");
    ASSERT_STR_EQ(rx("(a|ab)(c|bcd)(d*)", "abcd", "$1,$2,$3"), "a,bcd,");
    ASSERT_STR_EQ(rx("(a+?)(a*)", "aaa", "$1,$2"), "a,aa");
    ASSERT_STR_EQ(rx("(?U)(a+)(a*)", "aaa", "$1,$2"), "a,aa");
    ASSERT_STR_EQ(rx("(?U)(a+?)(a*)", "aaa", "$1,$2"), "aaa,");
    /* last iteration of a repeated group */
    ASSERT_STR_EQ(rx("(a|b)*", "ab", "$1"), "b");
}

TEST(regex_ascii_perl_classes)
{
    /* \d, \w, \s are ASCII; RE2's \s has no \v */
    ASSERT_TRUE(full_match("\\d+", "0123456789"));
    ASSERT_FALSE(full_match("\\d", "\xd9\xa3")); /* ARABIC-INDIC DIGIT THREE */
    ASSERT_FALSE(full_match("\\w", "\xc3\xa9"));
    ASSERT_TRUE(full_match("\\W", "\xc3\xa9"));
    ASSERT_TRUE(full_match("\\s\\s\\s\\s\\s", "\t\n\f\r "));
    ASSERT_FALSE(full_match("\\s", "\v"));
    ASSERT_TRUE(full_match("\\S", "\v"));
    ASSERT_FALSE(full_match("[\\s]", "\v"));
    ASSERT_TRUE(full_match("[^\\s]", "\v"));
    ASSERT_TRUE(full_match("[\\S]", "\v"));
    ASSERT_FALSE(full_match("[\\S]", " "));
    ASSERT_TRUE(full_match("[\\D]", "x"));
    ASSERT_FALSE(full_match("[\\W\\d]", "a"));
    ASSERT_TRUE(full_match("[\\W\\d]", "5"));
    /* \v is a literal VT in Go, not Perl's vertical-space class */
    ASSERT_TRUE(full_match("\\v", "\v"));
    ASSERT_FALSE(full_match("\\v", "\n"));
    /* POSIX classes are ASCII too, [:space:] has \v */
    ASSERT_TRUE(full_match("[[:alpha:]]+", "abcXYZ"));
    ASSERT_FALSE(full_match("[[:alpha:]]", "\xc3\xa9"));
    ASSERT_TRUE(full_match("[[:space:]]", "\v"));
    ASSERT_TRUE(full_match("[[:^digit:]]", "a"));
    /* word boundary is ASCII-based */
    ASSERT_TRUE(full_match("x\\b\xc3\xa9", "x\xc3\xa9"));
    ASSERT_FALSE(full_match("x\\B\xc3\xa9", "x\xc3\xa9"));
}

TEST(regex_unicode_and_case_folding)
{
    ASSERT_TRUE(full_match("\\pL+", "h\xc3\xa9llo\xe4\xb8\xad"));
    ASSERT_FALSE(full_match("\\pL", "1"));
    ASSERT_TRUE(full_match("\\p{Greek}", "\xce\xa9"));
    ASSERT_TRUE(full_match("\\P{Greek}", "a"));
    ASSERT_TRUE(full_match("\\p{^Greek}", "a"));
    ASSERT_TRUE(full_match("[\\p{Lu}\\d]+", "A1\xc3\x84"));
    ASSERT_TRUE(full_match("\\p{Any}", "\xe4\xb8\xad"));
    ASSERT_TRUE(full_match("(?i)abc", "AbC"));
    ASSERT_TRUE(full_match("(?i)\xc3\xa4", "\xc3\x84"));
    ASSERT_TRUE(full_match("(?i)k", "\xe2\x84\xaa")); /* KELVIN SIGN folds to k */
    ASSERT_TRUE(full_match("(?i)[a-c]+", "ABC"));
    ASSERT_FALSE(full_match("(?i:a)b", "aB"));
    ASSERT_TRUE(full_match("a(?i)b|c", "C"));
    ASSERT_TRUE(full_match("\\x41\\x{42}\\103", "ABC"));
    ASSERT_TRUE(full_match("\\Qa.b\\E", "a.b"));
    ASSERT_FALSE(full_match("\\Qa.b\\E", "axb"));
    ASSERT_TRUE(full_match("a{,2}", "a{,2}")); /* not a repeat in RE2: literal */
    ASSERT_TRUE(full_match("x{2,3}", "xxx"));
    ASSERT_FALSE(full_match("x{2,3}", "xxxx"));
    ASSERT_TRUE(full_match("[]a]+", "]a"));
    ASSERT_TRUE(full_match("[a-]+", "a-"));
}

TEST(regex_named_groups_both_syntaxes)
{
    ASSERT_STR_EQ(rx("(?P<first>\\w+)-(?<second>\\w+)", "ab-cd", "${second}.${first}"), "cd.ab");
    /* Go accepts names Perl would not (a leading digit) */
    ASSERT_STR_EQ(rx("(?P<1a>x)", "x", "${1a}"), "x");
}

TEST(regex_invalid_utf8_is_one_byte_fffd)
{
    /* each invalid byte is one rune: `.` matches it; captures keep the bytes */
    ASSERT_TRUE(full_match(".", "\xff"));
    ASSERT_FALSE(full_match("..", "\xff"));
    ASSERT_TRUE(full_match("..", "\xe2\x82"));      /* truncated sequence: two runes */
    ASSERT_TRUE(full_match("...", "\xed\xa0\x80")); /* a surrogate: three */
    ASSERT_TRUE(full_match("\\x{fffd}", "\xff"));
    ASSERT_TRUE(full_match("\\x{fffd}", "\xef\xbf\xbd"));
    ASSERT_STR_EQ(rx("(.)(.*)",
                     "\xff"
                     "abc",
                     "[$1][$2]"),
                  "[\xff][abc]");
    ASSERT_STR_EQ(rx("a(.)c",
                     "a\xc3"
                     "c",
                     "<$1>"),
                  "<\xc3>");
    ASSERT_FALSE(full_match("\\pL", "\xff"));
    ASSERT_TRUE(full_match("[^a]", "\xff"));
}

TEST(regex_fast_paths_agree_with_engine)
{
    /* literal / prefix shapes skip the engine; the (?:) forms go through it */
    static const char *subjects[] = { "",    "foo",  "fo",      "foox",       "xfoo",
                                      "pre", "prex", "pre\xff", "pr\xc3\xa9", "pre\n",
                                      "a",   "bc",   "abc" };
    static const char *pairs[][2] = {
        { "foo", "(?:foo)" },     { "pre(.*)", "(?:pre)(.*)" },     { "pre(.+)", "(?:pre)(.+)" },
        { ".*", "(?:.*)" },       { "(.*)", "(?:)(.*)" },           { "", "(?:)" },
        { "a|bc|", "(?:a|bc|)" }, { "foo|pre", "(?:foo)|(?:pre)" },
    };

    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++)
        for (size_t s = 0; s < sizeof(subjects) / sizeof(subjects[0]); s++) {
            char a[256];

            snprintf(a, sizeof(a), "%s", rx(pairs[p][0], subjects[s], "[$0|$1]"));
            if (strcmp(a, rx(pairs[p][1], subjects[s], "[$0|$1]")) != 0)
                test__fail(__FILE__, __LINE__, "%s vs %s on \"%s\": %s vs %s", pairs[p][0],
                           pairs[p][1], subjects[s], a, rxbuf);
        }
}

/* A regex and (part of) the message compiling it must fail with. */
struct rx_err {
    const char *re;
    const char *msg;
};

static void expect_regex_errors(const struct rx_err *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *e = regex_err(v[i].re);

        if (!*e || !strstr(e, v[i].msg) || strncmp(e, "error parsing regexp: ", 22) != 0)
            test__fail(__FILE__, __LINE__, "regex %s: got \"%s\", want \"%s\"", v[i].re, e,
                       v[i].msg);
    }
}

TEST(regex_rejects_what_re2_rejects)
{
    static const struct rx_err v[] = {
        { "(a)\\1", "invalid escape sequence: `\\1`" },
        { "(?=a)", "invalid or unsupported Perl syntax: `(?=`" },
        { "(?!a)", "invalid or unsupported Perl syntax: `(?!`" },
        { "(?<=a)b", "invalid named capture" },
        { "(?<!a)b", "invalid named capture" },
        { "(?>a)", "invalid or unsupported Perl syntax: `(?>`" },
        { "a++", "invalid nested repetition operator: `++`" },
        { "a*+", "invalid nested repetition operator: `*+`" },
        { "a**", "invalid nested repetition operator: `**`" },
        { "a\\C", "invalid escape sequence: `\\C`" },
        { "(?R)", "invalid or unsupported Perl syntax: `(?R`" },
        { "(a)(?1)", "invalid or unsupported Perl syntax: `(?1`" },
        { "(?(1)a|b)", "invalid or unsupported Perl syntax: `(?(`" },
        { "(?#comment)", "invalid or unsupported Perl syntax: `(?#`" },
        { "\\Z", "invalid escape sequence: `\\Z`" },
        { "\\k<n>", "invalid escape sequence: `\\k`" },
        { "\\g1", "invalid escape sequence: `\\g`" },
        { "(?P=n)", "invalid or unsupported Perl syntax: `(?P`" },
        { "x{1001}", "invalid repeat count: `{1001}`" },
        { "(a{100}){11}", "invalid repeat count: `{11}`" },
        { "x{2,1}", "invalid repeat count: `{2,1}`" },
        { "*a", "missing argument to repetition operator: `*`" },
        { "a|*", "missing argument to repetition operator: `*`" },
        { "[z-a]", "invalid character class range: `z-a`" },
        { "\\pX", "invalid character class range: `\\pX`" },
        { "\\p{greek}", "invalid character class range: `\\p{greek}`" },
        { "[[:foo:]]", "invalid character class range: `[:foo:]`" },
        { "\\8", "invalid escape sequence: `\\8`" },
        { "(?i-)", "invalid or unsupported Perl syntax: `(?i-)`" },
        { "(?P<a-b>x)", "invalid named capture: `(?P<a-b>`" },
        { "\xff", "invalid UTF-8" },
        { "(", "missing closing ): `^(?s:()$`" },
        { "[a", "missing closing ]: `[a)$`" },
        /* the wrapper's ")" is escaped by a trailing backslash, as in Go */
        { "\\", "missing closing ): `^(?s:\\)$`" },
    };

    expect_regex_errors(v, sizeof(v) / sizeof(v[0]));
    /* Prometheus wraps the regex textually, so a stray ")" can close its group */
    ASSERT_STR_EQ(regex_err("a)|(b"), "");
    ASSERT_STR_EQ(regex_err("a)"), "error parsing regexp: unexpected ): `^(?s:a))$`");
}

TEST(regex_go_syntax_re2_spells_differently)
{
    static const struct rx_err v[] = {
        /* Go >= 1.22 names groups (?<n>...); RE2 2022 knows only (?P<n>...):
         * messages still show what the user wrote */
        { "(?<a-b>x)", "error parsing regexp: invalid named capture: `(?<a-b>`" },
        { "(?<n>x", "error parsing regexp: missing closing ): `^(?s:(?<n>x)$`" },
        { "(?<=a)b", "error parsing regexp: invalid named capture: `(?<=a)b)$`" },
        /* \C is any byte in RE2, an error in Go; the first bad escape wins */
        { "a\\C(", "error parsing regexp: invalid escape sequence: `\\C`" },
        { "\\C\\Z", "error parsing regexp: invalid escape sequence: `\\C`" },
        { "\\Z\\C", "error parsing regexp: invalid escape sequence: `\\Z`" },
        { "[\\C]", "error parsing regexp: invalid escape sequence: `\\C`" },
        { "(\\C", "error parsing regexp: invalid escape sequence: `\\C`" },
        { "(?<n>a)\\C(", "error parsing regexp: invalid escape sequence: `\\C`" },
        /* Go checks a repeat's counts first and shows them without `?` */
        { "a*{1001}", "error parsing regexp: invalid repeat count: `{1001}`" },
        { "a{1001}?", "error parsing regexp: invalid repeat count: `{1001}`" },
        { "a{2}{3,1}", "error parsing regexp: invalid repeat count: `{3,1}`" },
        { "a**{2}", "error parsing regexp: invalid nested repetition operator: `**`" },
        { "a*{2}", "error parsing regexp: invalid nested repetition operator: `*{2}`" },
    };
    char deep[2 * 1000 + 2];

    expect_regex_errors(v, sizeof(v) / sizeof(v[0]));
    /* \C inside \Q...\E, or after an escaped backslash, is plain text */
    ASSERT_TRUE(full_match("\\Qa\\C\\E", "a\\C"));
    ASSERT_TRUE(full_match("\\\\C", "\\C"));
    ASSERT_TRUE(full_match("[\\\\C]+", "C\\"));
    ASSERT_STR_EQ(rx("(?<n>a+)(?P<m>b)", "aab", "${n}-${m}"), "aa-b");
    ASSERT_TRUE(full_match("\\Q(?<n>\\E", "(?<n>"));
    ASSERT_TRUE(full_match("[(?<n>]+", "(?<n>"));
    /* 998 nested captures are Go's deepest (with the ^(?s:...)$ wrapper) */
    memset(deep, '(', 998);
    deep[998] = 'a';
    memset(deep + 999, ')', 998);
    deep[1997] = '\0';
    ASSERT_STR_EQ(regex_err(deep), "");
    memmove(deep + 1, deep, 1998);
    deep[0] = '(';
    deep[1998] = ')';
    deep[1999] = '\0';
    ASSERT(strstr(regex_err(deep),
                  "error parsing regexp: expression nests too deeply: `^(?s:((((") == errbuf);
    /* a flag group opens no group: 500 + 499 captures around it still nest 999 deep */
    {
        static char flags_deep[2 * 999 + 8];

        memset(flags_deep, '(', 500);
        memcpy(flags_deep + 500, "(?i)", 4);
        memset(flags_deep + 504, '(', 499);
        flags_deep[1003] = 'a';
        memset(flags_deep + 1004, ')', 999);
        ASSERT(strstr(regex_err(flags_deep), "expression nests too deeply") != NULL);
    }
}

TEST(regex_large_program_gets_the_large_budget)
{
    /* 80 x `.{1000}` is 560,000 RE2 instructions, past the 8 MiB budget:
     * Go compiles it, so must we */
    static char big[80 * 7 + 1];

    for (int i = 0; i < 80; i++)
        memcpy(big + 7 * i, ".{1000}", 7);
    ASSERT_STR_EQ(regex_err(big), "");
}

TEST(regex_injected_alternation_searches_like_go)
{
    /* "^(?s:a)|(b)$" is an unanchored alternation: keep matches "ab" via `a` */
    char *src[] = { "s" };
    struct relabel_cfg c = {
        .source_labels = src, .n_source_labels = 1, .regex = "a)|(b", .action = "keep"
    };
    struct relabel_cfg m = { .regex = "x)|(y", .replacement = "<$1>", .action = "labelmap" };
    struct relabel_rules *rs = compile(&c, 1, RELABEL_SCHEME_UTF8);
    struct relabel_rules *ms = compile(&m, 1, RELABEL_SCHEME_UTF8);

    ASSERT_STR_EQ(apply(rs, (const char *[]){ "s", "abc", NULL }), "{s=\"abc\"}");
    ASSERT_STR_EQ(apply(rs, (const char *[]){ "s", "cab", NULL }), "{s=\"cab\"}");
    ASSERT_STR_EQ(apply(rs, (const char *[]){ "s", "ba", NULL }), "DROP");
    /* ReplaceAllString replaces each match and keeps the rest: "xay" -> "<>a<y>" */
    ASSERT_STR_EQ(apply(ms, (const char *[]){ "xay", "1", NULL }), "{<>a<y>=\"1\", xay=\"1\"}");
    relabel_rules_free(rs);
    relabel_rules_free(ms);
}

/* CPU time of the calling thread, in ms: what a loop-thread stall costs,
 * unaffected by other work on the machine. */
static double thread_cpu_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

TEST(regex_pathological_patterns_are_linear_and_exact)
{
    /* Exponential for a backtracking engine, linear for Go's (and ours):
     * every target gets Go's answer, none an error, and 2,000 of them cost
     * milliseconds, not the seconds a backtracking match limit took. */
    char *src[] = { "__meta_kubernetes_pod_annotation_x" };
    struct relabel_cfg c = {
        .source_labels = src, .n_source_labels = 1, .regex = "(a+)+$", .action = "keep"
    };
    struct relabel_rules *rs = compile(&c, 1, RELABEL_SCHEME_UTF8);
    char no[32], yes[32];
    unsigned kept = 0, dropped = 0;
    double t0;

    memset(no, 'a', 30);
    memcpy(no + 30, "!", 2); /* 31 characters that almost match */
    memset(yes, 'a', 31);
    yes[31] = '\0';
    t0 = thread_cpu_ms();
    for (unsigned i = 0; i < 2000; i++) {
        struct labels ls = LABELS_INIT;
        int rc;

        ASSERT_EQ(labels_set(&ls, src[0], i % 2 ? no : yes), 0);
        rc = relabel_apply(rs, &ls);
        ASSERT_GE(rc, 0);
        if (rc == 1)
            kept++;
        else
            dropped++;
        labels_done(&ls);
    }
    ASSERT_EQ(kept, 1000);
    ASSERT_EQ(dropped, 1000);
    ASSERT_LT(thread_cpu_ms() - t0, 1000.0);
    relabel_rules_free(rs);
    /* submatches too: the group holds its last iteration, as in Go */
    ASSERT_STR_EQ(rx("(a+)+$", yes, "$1"), yes);
    ASSERT_STR_EQ(rx("(a+)+$", no, "$1"), "<nomatch>");
    ASSERT_STR_EQ(rx("(x+x+)+y", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxzy", "m"), "<nomatch>");
    ASSERT_STR_EQ(rx("(x+x+)+y", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy", "[$1]"),
                  "[xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx]");
    ASSERT_STR_EQ(rx("(a|aa)*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "m"),
                  "<nomatch>");
    ASSERT_STR_EQ(relabel_strerror(RELABEL_ELIMIT), "regex match or depth limit exceeded");
}

TEST(regex_group_table)
{
    struct relabel__regex *re = NULL;
    char err[256];

    ASSERT_EQ(relabel__regex_compile("(a)(?P<x>b)(?:c)(?i:d)(?<y>e)", 29, &re, err, sizeof(err)),
              0);
    ASSERT_EQ(relabel__regex_groups(re), 3);
    ASSERT_NULL(relabel__regex_group_name(re, 1));
    ASSERT_STR_EQ(relabel__regex_group_name(re, 2), "x");
    ASSERT_STR_EQ(relabel__regex_group_name(re, 3), "y");
    ASSERT_NULL(relabel__regex_group_name(re, 4));
    relabel__regex_free(re);
    /* the fast shapes have Go's groups too */
    ASSERT_EQ(relabel__regex_compile("pre(.*)", 7, &re, err, sizeof(err)), 0);
    ASSERT_EQ(relabel__regex_groups(re), 1);
    relabel__regex_free(re);
    ASSERT_EQ(relabel__regex_compile("a|b", 3, &re, err, sizeof(err)), 0);
    ASSERT_EQ(relabel__regex_groups(re), 0);
    relabel__regex_free(re);
}

/* ---------------------------------------------------------------------- */
/* names, UTF-8, sanitising, schemes                                      */

TEST(label_name_schemes)
{
    ASSERT_TRUE(relabel_valid_label_name("a_1", 3, RELABEL_SCHEME_LEGACY));
    ASSERT_TRUE(relabel_valid_label_name("_", 1, RELABEL_SCHEME_LEGACY));
    ASSERT_FALSE(relabel_valid_label_name("1a", 2, RELABEL_SCHEME_LEGACY));
    ASSERT_FALSE(relabel_valid_label_name("a.b", 3, RELABEL_SCHEME_LEGACY));
    ASSERT_FALSE(relabel_valid_label_name("", 0, RELABEL_SCHEME_LEGACY));
    ASSERT_TRUE(relabel_valid_label_name("a.b", 3, RELABEL_SCHEME_UTF8));
    ASSERT_TRUE(relabel_valid_label_name("1 \xc3\xa9", 4, RELABEL_SCHEME_UNSET));
    ASSERT_FALSE(relabel_valid_label_name("", 0, RELABEL_SCHEME_UTF8));
    ASSERT_FALSE(relabel_valid_label_name("a\xff", 2, RELABEL_SCHEME_UTF8));
    ASSERT_EQ(relabel_parse_scheme(NULL), RELABEL_SCHEME_UNSET);
    ASSERT_EQ(relabel_parse_scheme(""), RELABEL_SCHEME_UNSET);
    ASSERT_EQ(relabel_parse_scheme("utf8"), RELABEL_SCHEME_UTF8);
    ASSERT_EQ(relabel_parse_scheme("legacy"), RELABEL_SCHEME_LEGACY);
    ASSERT_EQ(relabel_parse_scheme("UTF8"), -1);
}

TEST(utf8_validity_like_go)
{
    ASSERT_TRUE(relabel_valid_utf8("", 0));
    ASSERT_TRUE(relabel_valid_utf8("h\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 10));
    ASSERT_FALSE(relabel_valid_utf8("\xc0\xaf", 2));         /* overlong */
    ASSERT_FALSE(relabel_valid_utf8("\xed\xa0\x80", 3));     /* surrogate */
    ASSERT_FALSE(relabel_valid_utf8("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
    ASSERT_FALSE(relabel_valid_utf8("\xe2\x82", 2));         /* truncated */
}

TEST(sanitize_label_name)
{
    char *s = relabel_sanitize_label_name("app.kubernetes.io/name", 22);

    ASSERT_STR_EQ(s, "app_kubernetes_io_name");
    free(s);
    s = relabel_sanitize_label_name("\xc3\xa9t\xc3\xa9", 5); /* one _ per rune */
    ASSERT_STR_EQ(s, "_t_");
    free(s);
    s = relabel_sanitize_label_name("a\xff\xfe", 3); /* one _ per invalid byte */
    ASSERT_STR_EQ(s, "a__");
    free(s);
}

/* ---------------------------------------------------------------------- */
/* one compiled list, many threads                                        */

struct thread_arg {
    const struct relabel_rules *rs;
    int mismatches;
};

static void *worker(void *p)
{
    struct thread_arg *a = p;

    for (int i = 0; i < 2000; i++) {
        struct labels ls = LABELS_INIT;
        char v[32];

        snprintf(v, sizeof(v), "host-%d:%d", i, 6000 + i % 7);
        labels_set(&ls, "__address__", v);
        labels_set(&ls, "__meta_kubernetes_pod_label_app", "web");
        if (relabel_apply(a->rs, &ls) != 1 || !labels_get(&ls, "app") ||
            strcmp(labels_get(&ls, "port"), v + strlen(v) - 4) != 0)
            a->mismatches++;
        labels_done(&ls);
    }
    relabel_thread_cleanup();
    return NULL;
}

TEST(concurrent_apply)
{
    char *src[] = { "__address__" };
    struct relabel_cfg c[] = {
        { .regex = "__meta_kubernetes_pod_label_(.+)", .action = "labelmap" },
        { .source_labels = src,
          .n_source_labels = 1,
          .regex = "[^:]+:(\\d+)",
          .target_label = "port" },
    };
    struct relabel_rules *rs = compile(c, 2, RELABEL_SCHEME_UNSET);
    struct thread_arg args[4];
    pthread_t th[4];

    for (int i = 0; i < 4; i++) {
        args[i].rs = rs;
        args[i].mismatches = 0;
        ASSERT_EQ(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(pthread_join(th[i], NULL), 0);
        ASSERT_EQ(args[i].mismatches, 0);
    }
    relabel_rules_free(rs);
}

int main(int argc, char **argv)
{
    int rc = test_main(argc, argv);

    relabel_thread_cleanup();
    return rc;
}
