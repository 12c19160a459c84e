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

#include "agent/ui.h"
#include "agent/ui_assets.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/utf8.h"
#include "proflet_version.h"

void agent__ui_head(struct buf *b, const char *title)
{
    buf_puts(b, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width\"><title>");
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
