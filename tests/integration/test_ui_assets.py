# SPDX-License-Identifier: Apache-2.0
"""The web UI's pages, as proflet serves them, carry the files of
agent/assets/ as they are on disk: every HTML page (the targets, service
discovery, forwarding, configuration and profile pages, and the profile
page's 404) has one <style> element whose text is agent/assets/ui.css, the
two filtered pages (targets, service discovery) one <script> element whose
text is agent/assets/filter.js, after the rows it filters, the profile
page one whose text is agent/assets/flame.js, after its flame graph, and
the other pages no script. A binary built from stale assets, or a page that lost or
doubled one, fails here; tests/agent/test_ui_assets.c checks the
generated arrays themselves."""
import os
import re
import urllib.error
import urllib.request

from badtarget import tiny_pprof
from http_peers import serve_bytes
from lib import *

ASSETS = os.path.join(SRC, "agent", "assets")


def asset(name):
    with open(os.path.join(ASSETS, name), encoding="utf-8") as f:
        return f.read()


def get(url):
    """(status, content type, text) of a GET, 4xx answers included."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def elements(page, tag):
    """The text of every <tag>...</tag> element of the page."""
    return re.findall(rf"<{tag}\b[^>]*>(.*?)</{tag}>", page, re.S | re.I)


def main():
    css, js, flame_js = asset("ui.css"), asset("filter.js"), asset("flame.js")
    target = serve_bytes({"/debug/pprof/goroutine": tiny_pprof()})
    try:
        with environment() as (tmp, procs):
            sport = free_port()
            p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: assets
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: assets
        targets: [127.0.0.1:{target.server_address[1]}]
      - targets: [127.0.0.1:2]
        labels: {{drop_me: "yes"}}
    relabel-configs:
      - {{source-labels: [drop_me], regex: "yes", action: drop}}
remote-write:
  - url: file://{os.path.join(tmp, "sink")}
""")
            wait_ready(sport)
            base = f"http://127.0.0.1:{sport}"
            link = wait_for("the profile's page link", lambda: (
                m := re.search(r'href="(/profile\?key=[0-9a-f]+)"', get(base + "/")[2])) and m.group(1),
                timeout=30)

            pages = {
                "/": (200, js, "</table>"),
                "/targets": (200, js, "</table>"),
                "/service-discovery": (200, js, "<h3>Dropped</h3>"),
                "/forwarding": (200, None, None),
                "/config": (200, None, None),
                link: (200, flame_js, 'class="fg'),
                "/profile?key=0": (404, None, None),
            }
            for path, (status, script, before_script) in pages.items():
                code, ctype, page = get(base + path)
                check(code == status, f"{path} answered {code}")
                check(ctype.startswith("text/html"), f"{path}: {ctype}")
                check(page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>"),
                      f"{path} is not a whole page")
                styles = elements(page, "style")
                check(len(styles) == 1, f"{path} has {len(styles)} style elements")
                check(styles[0] == css, f"{path}'s stylesheet is not agent/assets/ui.css")
                check(page.index("<style>") < page.index("</head>") < page.index("<main>"),
                      f"{path}: the stylesheet is not in the head")
                scripts = elements(page, "script")
                if script:
                    check(len(scripts) == 1 and scripts[0] == script,
                          f"{path}'s script is not its file of agent/assets ({len(scripts)} scripts)")
                    check(page.index(before_script) < page.index("<script>"),
                          f"{path}: the script precedes what it works on")
                    if script == js:
                        check('id="q"' in page and 'id="h"' in page, f"{path}: the filter's inputs")
                else:
                    check(not scripts, f"{path} has {len(scripts)} scripts")
            check('class="fg ' in get(base + link)[2], "the profile page draws no flame graph")
            code = stop(p)
            check(code == 0, f"exit status {code}")
    finally:
        target.shutdown()


run_test(main)
