/* SPDX-License-Identifier: Apache-2.0 */
/** The web UI's pages, internal to agent/: what the list pages
 * (ui.c, which also routes) and the profile page (ui_flame.c) share,
 * written by ui_html.c: every page's head and tail, its stylesheet and
 * scripts (agent/assets/, built in as agent/ui_assets.h), HTML escaping.
 *
 * The escaping and formatting functions (ui_fmt.c) and UI_PAGE_TAIL may
 * be used by any thread on a buffer it owns (the profile page's job writes
 * with them); the rest is the loop thread's. Every function writes into a caller's buffer and
 * keeps nothing. */
#ifndef PROFLET_AGENT_UI_H
#define PROFLET_AGENT_UI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct agent;
struct buf;
struct httpd_request;
struct httpd_response;

/** The end of every page. */
#define UI_PAGE_TAIL "</main></body></html>\n"

/* ui_html.c */
/** Writes a page's head: the document's head with `title` (a constant,
 * written as it is) and the stylesheet, then the menu of every page. */
void agent__ui_head(struct buf *b, const char *title);

/** Writes a built-in script (agent/assets/) as a <script> element. */
void agent__ui_script(struct buf *b, const unsigned char *js, size_t len);

/** Writes `s` (NULL: nothing) as HTML text or attribute value: markup
 * characters as entities; the runs between them as valid UTF-8, control
 * characters shown (`\x1b`) unless `lines` keeps the text's line breaks
 * and tabs (the configuration). Returns 0 or the buffer's negative code. */
int agent__ui_esc_text(struct buf *b, const char *s, bool lines);

/** agent__ui_esc_text() without `lines`: one line of text. */
static inline int agent__ui_esc(struct buf *b, const char *s)
{
    return agent__ui_esc_text(b, s, false);
}

/** Labels shown before the rest of a set folds under "N more". */
#define UI_LABELS_SHOWN 6

struct labels;
/** Writes a label set as name=value chips, the labels past the first
 * UI_LABELS_SHOWN folded in a <details>; `meta`: also the "__" labels,
 * else of them only __name__, and that when `name`. */
void agent__ui_labels(struct buf *b, const struct labels *ls, bool meta, bool name);

/** A function name is shown on a frame in at most UI_NAME_SHOWN bytes of
 * HTML, and in a tooltip, a table or an option in at most UI_NAME_TITLE
 * (the fold keeps PPROF_FLAME_NAME_MAX bytes of it): a long name on every
 * one of 20,000 frames must not make a page grow with it. */
#define UI_NAME_SHOWN 96
#define UI_NAME_TITLE 256

/** agent__ui_esc() into at most `cap` bytes of HTML: cut at a character
 * (or entity) boundary and ended with U+2026 when it does not fit whole.
 * Any thread. */
void agent__ui_esc_cap(struct buf *b, const char *s, size_t cap);

/** Writes `s` as a JSON string: valid UTF-8 (a stray byte as U+FFFD),
 * controls, '<', '>', '&', U+2028 and U+2029 as \u escapes, so that no
 * reader takes any of it for markup or code. Any thread. Returns 0 or the
 * buffer's negative code. */
int agent__ui_json_str(struct buf *b, const char *s);

/** Writes the wall-clock time `ns` as "2026-01-02 15:04:05 UTC". Any
 * thread. */
void agent__ui_when(struct buf *b, int64_t ns);

/** Writes how long ago the wall-clock time `ns` was ("4 min 12 s ago";
 * "never" for 0), as agent__ui_fmt_ago() against the clock. */
void agent__ui_ago(struct buf *b, uint64_t ns);

/* ui_fmt.c: pure, any thread */
/** How a sample type's unit is written. */
enum agent__ui_unit {
    UI_UNIT_COUNT, /**< "count", and every unit not below: 1,234,567 */
    UI_UNIT_NS,    /**< "nanoseconds": 850 ns, 12.3 µs, 1.79 s, 2.50 min, 1.20 h */
    UI_UNIT_BYTES, /**< "bytes": 512 B, 1.50 KiB, 12.0 MiB, 3.25 GiB */
};
/** The unit named `unit` (a sample type's, after its '/'; NULL: count). */
enum agent__ui_unit agent__ui_unit_of(const char *unit);
/** Writes `v` in its unit, three significant digits (counts whole). */
void agent__ui_fmt_value(struct buf *b, int64_t v, enum agent__ui_unit u);
/** agent__ui_fmt_value() with a "+" before a positive value (a diff). */
void agent__ui_fmt_signed(struct buf *b, int64_t v, enum agent__ui_unit u);
/** Writes `v` with thousands separators: 51,299. */
void agent__ui_fmt_count(struct buf *b, uint64_t v);
/** Writes a size in binary units: 50.1 KiB. */
void agent__ui_fmt_bytes(struct buf *b, uint64_t v);
/** Writes part/whole as a percentage, two decimals ("<0.01%" for a
 * nonzero share below that; "0.00%" when whole is 0). */
void agent__ui_fmt_pct(struct buf *b, int64_t part, int64_t whole);
/** Writes a duration as people write it: 850 ms, 3.2 s, 42 s, 4 min 12 s,
 * 2 h 5 min, 3 d 4 h. */
void agent__ui_fmt_duration(struct buf *b, uint64_t ns);
/** Writes how long before `now_ns` the wall-clock time `then_ns` was
 * ("4 min 12 s ago"; "never" for 0; "just now" for the future). */
void agent__ui_fmt_ago(struct buf *b, uint64_t then_ns, uint64_t now_ns);
/** The length of the package part of a function name: Go's import path
 * up to the first dot after its last slash, else the first C++ or Rust
 * namespace, else the whole name. */
size_t agent__ui_package(const char *fn);
/** The hue (0-359) of a function's package: the same package has the
 * same colour on every page and in every run. */
unsigned agent__ui_package_hue(const char *fn);

/* ui_query.c: pure, any thread */
/** A time of the profile page's query. */
struct agent__ui_time {
    enum { UI_TIME_NONE, UI_TIME_NOW, UI_TIME_AGO, UI_TIME_MS } kind;
    uint64_t v; /**< AGO: milliseconds before now; MS: Unix milliseconds */
};

/** The profile page's query, every field bounded. */
struct agent__ui_query {
    uint64_t key, bkey; /**< the target (pair) and the baseline's */
    bool has_key, has_bkey;
    struct agent__ui_time from, to;   /**< the range (none: the newest profile) */
    struct agent__ui_time bfrom, bto; /**< the baseline's range (a diff) */
    char type[128];                   /**< sample type ("": the default) */
    char fn[260];                     /**< the function of a sandwich view ("": none) */
    int sort;                         /**< 0 self, 1 total */
    int view;                         /**< 0 icicle (root on top), 1 flame (root below) */
    int format;                       /**< 0 html, 1 json, 2 collapsed */
    int side;                         /**< collapsed of a diff: 0 comparison, 1 baseline */
};

/** Parses a raw query string (NULL: empty). Returns 0, or -EINVAL with
 * what is wrong in `err` (the parameter named). */
int agent__ui_query_parse(const char *query, struct agent__ui_query *q, char *err, size_t errlen);
/** Writes `q` as a query string that parses back to it, percent-encoded,
 * its separators as "&amp;" when `html` (for an attribute). */
void agent__ui_query_write(struct buf *b, const struct agent__ui_query *q, bool html);
/** The time `t` in Unix nanoseconds at `now_ns` (`dflt` when absent). */
int64_t agent__ui_time_ns(const struct agent__ui_time *t, int64_t now_ns, int64_t dflt);
/** Writes the opening of a link to the profile page with `q`
 * (`<a href="/profile?...">`). */
void agent__ui_query_link(struct buf *b, const struct agent__ui_query *q);
/** True when the query asks for a diff (a baseline target or range). */
bool agent__ui_query_diff(const struct agent__ui_query *q);

/* ui_profile.c */
struct recent_profile;
/** Writes the profile page's text before its graphs into `b`: labels, the
 * newest profile's age and size, downloads, the range and baseline form,
 * the history of `key` (whose newest is `newest`). Loop thread. */
void agent__ui_profile_head(struct buf *b, struct agent *a, uint64_t key,
                            const struct agent__ui_query *q, const struct recent_profile *newest);

/* ui_flame.c */
/** /profile?key=K (a flame graph and the top functions, streamed) and,
 * with `download`, /profile.pb.gz?key=K (the profile as delivered). */
void agent__ui_profile_page(struct agent *a, const struct httpd_request *req,
                            struct httpd_response *resp, bool download);

#endif
