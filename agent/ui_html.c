/* SPDX-License-Identifier: Apache-2.0 */
/* What every page of the web UI is made of: its head (the stylesheet
 * agent/assets/ui.css, built in by scripts/embed.py, then the menu), the
 * built-in scripts, and the escaping of everything that comes from
 * targets, discovery or the configuration (labels, URLs, errors, function
 * names).
 *
 * The escaping runs on any thread, on the caller's buffer (the profile
 * page's job uses it on the pool); the head and times are written on the
 * loop thread. Nothing is kept: callers own their buffers, the assets are
 * constants. (docs/design.md "Modules") */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "agent/ui.h"
#include "agent/ui_assets.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/labels.h"
#include "common/utf8.h"
#include "proflet_version.h"

void agent__ui_head(struct buf *b, const char *title)
{
    buf_puts(b, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width\">"
                "<link rel=\"icon\" href=\"data:,\"><title>");
    buf_puts(b, title);
    buf_puts(b, " - proflet</title><style>");
    buf_append(b, agent__ui_asset_ui_css, agent__ui_asset_ui_css_len);
    buf_puts(b, "</style></head><body><header><b>proflet</b> " PROFLET_VERSION " &nbsp; "
                "<a href=\"/targets\">Targets</a>"
                "<a href=\"/service-discovery\">Service discovery</a>"
                "<a href=\"/forwarding\">Forwarding</a><a href=\"/config\">Configuration</a>"
                "<a href=\"/metrics\">Metrics</a><a href=\"/api/v1/targets\">API</a></header>"
                "<main>");
}

void agent__ui_script(struct buf *b, const unsigned char *js, size_t len)
{
    buf_puts(b, "<script>");
    buf_append(b, js, len);
    buf_puts(b, "</script>");
}

int agent__ui_esc_text(struct buf *b, const char *s, bool lines)
{
    const char *run = s;
    int rc = 0;

    for (; s && *s && rc == 0; s++) {
        const char *ent;

        switch (*s) {
        case '<':
            ent = "&lt;";
            break;
        case '>':
            ent = "&gt;";
            break;
        case '&':
            ent = "&amp;";
            break;
        case '"':
            ent = "&quot;";
            break;
        case '\'':
            ent = "&#39;";
            break;
        default:
            continue;
        }
        rc = lines ? utf8_append_valid(b, run, (size_t)(s - run))
                   : utf8_append_visible(b, run, (size_t)(s - run));
        if (rc == 0)
            rc = buf_puts(b, ent);
        run = s + 1;
    }
    if (rc == 0 && s)
        rc = lines ? utf8_append_valid(b, run, (size_t)(s - run))
                   : utf8_append_visible(b, run, (size_t)(s - run));
    return rc;
}

void agent__ui_ago(struct buf *b, uint64_t ns)
{
    agent__ui_fmt_ago(b, ns, clock_wall_ns());
}

void agent__ui_labels(struct buf *b, const struct labels *ls, bool meta, bool name)
{
    size_t shown = 0, hidden = 0;

    for (size_t i = 0; i < ls->n; i++) {
        if (!meta && strncmp(ls->v[i].name, "__", 2) == 0 &&
            !(name && strcmp(ls->v[i].name, "__name__") == 0))
            continue;
        if (shown == UI_LABELS_SHOWN) {
            for (size_t j = i; j < ls->n; j++)
                hidden += meta || strncmp(ls->v[j].name, "__", 2) != 0 ||
                          (name && strcmp(ls->v[j].name, "__name__") == 0);
            buf_printf(b, "<details class=\"more\"><summary>%zu more</summary>", hidden);
        }
        buf_puts(b, "<span class=\"l\">");
        agent__ui_esc(b, ls->v[i].name);
        buf_puts(b, "=");
        agent__ui_esc(b, ls->v[i].value);
        buf_puts(b, "</span>");
        shown++;
    }
    if (hidden)
        buf_puts(b, "</details>");
}

int agent__ui_json_str(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = s ? strlen(s) : 0, i = 0;
    int rc = buf_append(b, "\"", 1);

    while (rc == 0 && i < n) {
        uint32_t r;
        bool bad;
        size_t w = utf8_decode(s + i, n - i, &r, &bad);

        if (r == '"' || r == '\\') {
            char e[2] = { '\\', (char)r };

            rc = buf_append(b, e, 2);
        } else if (r < 0x20 || r == '<' || r == '>' || r == '&' || r == 0x7f || r == 0x2028 ||
                   r == 0x2029 || bad) {
            /* Controls, and what HTML or a JavaScript parser would read
             * otherwise, as \u escapes; a byte that starts no character as
             * U+FFFD. */
            char e[6] = {
                '\\', 'u', hex[(r >> 12) & 15], hex[(r >> 8) & 15], hex[(r >> 4) & 15], hex[r & 15]
            };

            rc = buf_append(b, e, 6);
        } else {
            rc = buf_append(b, s + i, w);
        }
        i += w;
    }
    if (rc == 0)
        rc = buf_append(b, "\"", 1);
    return rc;
}

void agent__ui_when(struct buf *b, int64_t ns)
{
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    char text[32];

    if (ns <= 0 || !gmtime_r(&t, &tm) || !strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm))
        buf_puts(b, "?");
    else
        buf_printf(b, "%s UTC", text);
}

/* The bytes agent__ui_esc() writes for the byte `c`. */
static size_t esc_len(unsigned char c)
{
    return c == '<' || c == '>' ? 4 : c == '&' ? 5 : c == '"' || c == '\'' ? 6 : 1;
}

void agent__ui_esc_cap(struct buf *b, const char *s, size_t cap)
{
    static const char ell[] = "\xe2\x80\xa6";
    size_t used = 0, i = 0, whole = 0;

    for (size_t j = 0; s && s[j] && whole <= cap; j++)
        whole += esc_len((unsigned char)s[j]);
    if (whole <= cap) {
        agent__ui_esc(b, s);
        return;
    }
    while (s[i]) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 1;
        size_t k = 1;

        while (k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80)
            k++;
        n = k; /* a cut sequence: its bytes as they are */
        if (used + (c < 0x80 ? esc_len(c) : n) + sizeof(ell) - 1 > cap)
            break;
        if (c < 0x80) {
            char one[2] = { s[i], '\0' };

            agent__ui_esc(b, one);
        } else {
            buf_append(b, s + i, n);
        }
        used += c < 0x80 ? esc_len(c) : n;
        i += n;
    }
    buf_puts(b, ell);
}
