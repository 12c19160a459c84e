/* SPDX-License-Identifier: Apache-2.0 */
/* What every page of the web UI is made of: its head (the stylesheet,
 * then the menu) and the escaping of everything that comes from
 * targets, discovery or the configuration (labels, URLs, errors, function
 * names).
 *
 * The escaping runs on any thread, on the caller's buffer (the profile
 * page's job uses it on the pool); the head and times are written on the
 * loop thread. Nothing is kept: callers own their buffers. (docs/design.md
 * "Modules") */
#include <stdint.h>

#include "agent/ui.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/utf8.h"
#include "proflet_version.h"

static const char page_head[] =
    "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<meta name=\"viewport\" content=\"width=device-width\"><title>%s - proflet</title><style>"
    "body{font:14px system-ui,sans-serif;margin:0;color:#222}"
    "header{background:#2b3a4a;color:#fff;padding:8px 16px}"
    "header a{color:#cde;margin-right:16px;text-decoration:none}"
    "main{padding:8px 16px}table{border-collapse:collapse;width:100%%}"
    "td,th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}.counts td{color:#555;font-size:12px}.up{color:#176f2c}.down{color:#b3261e}.unknown{color:#777}"
    ".l{display:inline-block;background:#eef;border-radius:3px;padding:0 4px;margin:1px;"
    "font-size:12px}.err{color:#b3261e;font-size:12px}.job{background:#e8eef5;font-weight:600}"
    ".fg{font:11px monospace;width:100%%}.fn{overflow:hidden}.fn>span{display:block;"
    "white-space:nowrap;overflow:hidden;background:#f5b26b;border:1px solid #fff;"
    "padding:1px 2px}.fc{display:flex}"
    "</style></head><body><header><b>proflet</b> %s &nbsp; <a href=\"/targets\">Targets</a>"
    "<a href=\"/service-discovery\">Service discovery</a><a href=\"/forwarding\">Forwarding</a><a href=\"/config\">Configuration</a>"
    "<a href=\"/metrics\">Metrics</a><a href=\"/api/v1/targets\">API</a></header><main>";

void agent__ui_head(struct buf *b, const char *title)
{
    buf_printf(b, page_head, title, PROFLET_VERSION);
}

int agent__ui_esc_text(struct buf *b, const char *s, bool lines)
{
    const char *run = s;
    int rc = 0;

    for (; s && *s && rc == 0; s++) {
        const char *ent;

        switch (*s) {
        case '<': ent = "&lt;"; break;
        case '>': ent = "&gt;"; break;
        case '&': ent = "&amp;"; break;
        case '"': ent = "&quot;"; break;
        case '\'': ent = "&#39;"; break;
        default: continue;
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
    uint64_t now = clock_wall_ns();

    if (!ns)
        buf_puts(b, "never");
    else if (now <= ns)
        buf_puts(b, "now");
    else
        buf_printf(b, "%.1fs ago", (double)(now - ns) / 1e9);
}
