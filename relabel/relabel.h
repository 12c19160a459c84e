/* SPDX-License-Identifier: Apache-2.0 */
/** Prometheus relabeling, exactly as Prometheus 3 does it.
 *
 * A pure library: no libuv, no curl, no logging. Rules are compiled once
 * (regexes on RE2, the engine Go's regexp is a port of: Go's syntax and
 * matches, in time linear in the input) and are then immutable, so one
 * compiled rule list may be applied from any thread. */
#ifndef PROFLET_RELABEL_H
#define PROFLET_RELABEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/labels.h"
#include "conf/conf.h"

/** Label-name validation schemes (Prometheus `metric_name_validation_scheme`). */
enum relabel_scheme {
    RELABEL_SCHEME_UNSET = 0, /**< inherit (rules) / utf8 (default elsewhere) */
    RELABEL_SCHEME_UTF8,
    RELABEL_SCHEME_LEGACY,
};

/** One rule as written in YAML. Filled by the config loader; a NULL string
 * means the key was absent (so the Prometheus default applies) and
 * `regex_null` marks an explicit `regex:` with a null value (the empty
 * regex). Strings are borrowed by relabel_rules_new(), which copies what it
 * keeps. */
struct relabel_cfg {
    char **source_labels;
    unsigned n_source_labels;
    char *separator; /**< NULL: ";" */
    char *regex;     /**< NULL and !regex_null: "(.*)" (the default object) */
    bool regex_null; /**< `regex:` given as null: the empty regex */
    uint64_t modulus;
    char *target_label;           /**< NULL: "" */
    char *replacement;            /**< NULL: "$1" */
    char *action;                 /**< NULL: "replace"; compared case-insensitively */
    char *name_validation_scheme; /**< NULL: inherit; "utf8" or "legacy" */
};

/** The libcyaml value of one rule, for a module's `relabel-configs`
 * sequence, and its section (for the schema's section list). */
extern const cyaml_schema_value_t relabel_cfg_entry;
extern const struct conf_section relabel_cfg_section;

/** Compiled, immutable rule list. */
struct relabel_rules;

/** Error codes (negative). */
enum {
    RELABEL_EINVAL = -1000, /**< a rule failed validation; see the message */
    RELABEL_EREGEX = -1001, /**< a regex did not compile or uses syntax RE2 rejects */
    RELABEL_ELIMIT = -1002, /**< a regex hit a match limit. Not returned since regexes run in
                               linear time on RE2, which has none; kept for callers. */
};

/** Compiles `n` rules. `scheme` is the scrape config's scheme (UNSET means
 * utf8) inherited by rules that set none. On failure returns a negative code
 * and writes Prometheus' message (e.g. `relabel configuration for hashmod
 * requires non-zero modulus`) into `err`. `n` may be 0. */
int relabel_rules_new(const struct relabel_cfg *cfgs, size_t n, enum relabel_scheme scheme,
                      struct relabel_rules **out, char *err, size_t errlen);
/** Frees a rule list (NULL is fine). */
void relabel_rules_free(struct relabel_rules *r);
/** Number of rules. */
size_t relabel_rules_count(const struct relabel_rules *r);

/** Applies the rules in order to `ls` in place. Returns 1 if the target is
 * kept, 0 if a rule dropped it (ls is then unspecified), or a negative code
 * (-ENOMEM; treat it as that target's error). Time is linear in the size of
 * the labels for any regex. */
int relabel_apply(const struct relabel_rules *r, struct labels *ls);

/** A regex with the meaning relabel rules give theirs (Go syntax, fully
 * anchored), for other label filters. Immutable and thread-safe once
 * built. */
struct relabel_regex;

/** Compiles `src`. Returns 0, RELABEL_EREGEX (Go's message in err) or
 * -ENOMEM. */
int relabel_regex_new(const char *src, struct relabel_regex **out, char *err, size_t errlen);
/** 1 if `s[0..len)` matches as a whole, 0 if not, or -ENOMEM. Linear time. */
int relabel_regex_match(const struct relabel_regex *re, const char *s, size_t len);
/** Frees a regex (NULL is fine). */
void relabel_regex_free(struct relabel_regex *re);

/** True if `name` is a valid label name under `scheme` (UNSET = utf8). */
bool relabel_valid_label_name(const char *name, size_t len, enum relabel_scheme scheme);
/** True if `s` is valid UTF-8. */
bool relabel_valid_utf8(const char *s, size_t len);
/** Prometheus' SanitizeLabelName: each rune not in [a-zA-Z0-9_] becomes "_",
 * each invalid UTF-8 byte one "_". Returns a malloc'd string or NULL. */
char *relabel_sanitize_label_name(const char *s, size_t len);
/** Parses "utf8" / "legacy" (NULL or "" gives UNSET). Returns -1 on anything else. */
int relabel_parse_scheme(const char *s);

/** Short text for a RELABEL_E* code or a negative errno. Static string. */
const char *relabel_strerror(int code);
/** Frees per-thread match state. RE2 keeps none, so this does nothing now;
 * kept so that callers written for a per-thread cache need not change. */
void relabel_thread_cleanup(void);

#endif
