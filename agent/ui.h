/* SPDX-License-Identifier: Apache-2.0 */
/** The web UI's pages, internal to agent/: what the list pages
 * (ui.c, which also routes) and the profile page (ui_flame.c) share,
 * written by ui_html.c: every page's head and tail, its stylesheet and
 * scripts (agent/assets/, built in as agent/ui_assets.h), HTML escaping.
 *
 * The escaping functions and UI_PAGE_TAIL may be used by any thread on a
 * buffer it owns (the profile page's job writes with them); the rest is
 * the loop thread's. Every function writes into a caller's buffer and
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

/** Writes how long ago the wall-clock time `ns` was ("3.2s ago"; "never"
 * for 0). */
void agent__ui_ago(struct buf *b, uint64_t ns);

/* ui_flame.c */
/** /profile?key=K (a flame graph and the top functions, streamed) and,
 * with `download`, /profile.pb.gz?key=K (the profile as delivered). */
void agent__ui_profile_page(struct agent *a, const struct httpd_request *req,
                            struct httpd_response *resp, bool download);

#endif
