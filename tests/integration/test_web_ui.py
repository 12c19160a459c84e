# SPDX-License-Identifier: Apache-2.0
"""The web UI in a real browser (Debian's chromium, headless, reaching
nothing but loopback, through lib.Browser): the targets page lists the demo
service's targets as up and loads without console errors or requests
beyond itself; ?q= filtering hides the other rows; a label and an error
message carrying HTML (a hostile target's labels, and a target that
answers 500 with a script) are shown as text, never run, on the page and
in its text view (?format=text, text/plain and nosniff); ages and
durations read as people write them; a target with many labels folds them;
the service discovery page lists kept and dropped targets with the reason;
the forwarding page shows the endpoint, its compression, and what it sent, sizes in binary
units and counts with separators; the configuration page shows the file as
loaded without its secrets; the latest CPU profile's page draws a flame
graph in which the demo's hottest function appears, and its top-functions
table names it, in milliseconds or seconds. Screenshots of every page are
the screenshot script's (test_ui_screenshots.py)."""
import json
import os
import re
import urllib.request

from http_peers import Target
from lib import *

EVIL = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
SCRIPT = "<script>document.body.setAttribute('data-pwned','2')</script>"
MANY = {f"label{i:02d}": f"value{i}" for i in range(10)}


def visit(b, url, what):
    """Opens `url`: no console message, nothing asked for but the page."""
    b.open(url)
    check(not b.console(), f"console messages on {what}: {b.console()}")
    asked = b.requests()
    check(all(u == asked[0] for u in asked), f"{what} asked for more than itself: {asked}")
    return b.dom()


def pages(b, base, port, sink):
    dom = visit(b, base + "/", "the targets page")
    rows = re.findall(r'<tr class="t" data-health="(\w+)"[^>]*>(.*?)</tr>', dom, re.S)
    demo = [h for h, r in rows if f"127.0.0.1:{port}" in r]
    check(len(demo) == 2 and set(demo) == {"up"}, f"the demo's two targets up: {demo}")
    counts = re.findall(r'<tr class="counts"><td[^>]*>(\d+) up, (\d+) down', dom)
    check(("2", "0") in counts and ("0", "2") in counts, f"counts per job: {counts}")
    check(not re.search(r"<body[^>]*data-pwned", dom), "a label's HTML ran in the page")
    check("<img" not in dom, "a label's HTML became an element")
    check("&lt;img src=x onerror=" in dom, "the hostile label is shown as text")
    hostile = [r for h, r in rows if "127.0.0.1:1/" in r]
    check(hostile and 'class="err"' in hostile[0], "the hostile target's error is shown")
    # Ages and durations as people write them; exact values stay in the text view.
    cells = b.eval("Array.from(document.querySelectorAll('tr.t')).filter(r => r.dataset.health === 'up')"
                   ".map(r => [r.cells[2].textContent, r.cells[3].textContent])")
    check(cells and all(re.fullmatch(r"(just now|\d+(\.\d)? (s|ms|\u00b5s|min \d+ s) ago)", a) and
                        re.fullmatch(r"\d+(\.\d)? (s|ms|\u00b5s)", d) for a, d in cells),
          f"last scrape and duration as people write them: {cells}")
    # A target with many labels folds the rest under "N more".
    many = b.eval("Array.from(document.querySelectorAll('tr.t')).filter(r => "
                  "r.textContent.includes('127.0.0.1:3/')).map(r => r.querySelector('details.more > summary')"
                  " && r.querySelector('details.more > summary').textContent)")
    check(many and all(m and re.fullmatch(r"\d+ more", m) for m in many), f"long label sets fold: {many}")
    check(b.eval("Array.from(document.querySelectorAll('tr.t')).find(r => r.textContent.includes('127.0.0.1:3/'))"
                 ".querySelector('details.more').open") is False, "folded labels start closed")

    wait_for("the scripted target's error", lambda: "&lt;script&gt;document.body" in
             http_get(base + "/")[1].decode(), timeout=20)
    dom = visit(b, base + "/", "the targets page")
    check("<script>document.body" not in dom and "&lt;script&gt;document.body" in dom,
          "an error quoting a script is shown as text")
    check(not re.search(r"<body[^>]*data-pwned", dom), "a script in an error ran in the page")

    with urllib.request.urlopen(base + "/targets?format=text", timeout=10) as r:
        ctype, nosniff, text = (r.headers.get("Content-Type"), r.headers.get("X-Content-Type-Options"),
                                r.read().decode())
    check(ctype.startswith("text/plain") and nosniff == "nosniff", f"text view headers: {ctype}, {nosniff}")
    lines = [l.split() for l in text.splitlines()[1:]]
    check(sum(1 for l in lines if l[0] == "demo" and l[2] == "up") == 2, f"text view:\n{text}")
    check(SCRIPT in text, "the text view quotes the error as the target sent it")
    b.open(base + "/targets?format=text")
    check(b.eval("document.body.getAttribute('data-pwned')") is None, "the text view was run as HTML")

    dom = visit(b, base + "/targets?q=goroutine", "a filtered targets page")
    shown = [r for r in re.findall(r'<tr class="t"([^>]*)>', dom) if "display: none" not in r]
    check(len(shown) == 4, f"filtering by 'goroutine' leaves its 4 rows, got {len(shown)}")

    dom = visit(b, base + "/service-discovery", "the service discovery page")
    kept, dropped = dom.split("<h3>Dropped</h3>", 1)
    check(f"127.0.0.1:{port}" in kept and "127.0.0.1:2" not in kept, "kept targets listed")
    check("127.0.0.1:2" in dropped and "dropped by relabeling" in dropped,
          "the dropped target is listed with its reason")
    check(not re.search(r"<body[^>]*data-pwned", dom) and "<img" not in dom,
          "a label's HTML ran on the service discovery page")

    dom = visit(b, base + "/forwarding", "the forwarding page")
    rows = b.eval("Array.from(document.querySelectorAll('tr.t')).map(r => Array.from(r.cells).map(c => "
                  "[c.textContent, c.title]))")
    check(len(rows) == 1 and f"file://{sink}" in rows[0][0][0], f"the one endpoint is listed: {rows}")
    check(re.search(r"compression balanced \((igzip|libdeflate) level \d\)", rows[0][0][0]),
          f"the endpoint's compression and what it runs as: {rows[0][0][0]!r}")
    sent, title = rows[0][4]
    m = re.fullmatch(r"([\d,]+) \((\d+(\.\d+)? (B|KiB|MiB|GiB))\)", sent)
    check(m and int(m.group(1).replace(",", "")) > 0, f"the endpoint has sent profiles, in units: {sent!r}")
    exact = re.fullmatch(r"(\d+) profiles, (\d+) bytes", title)
    check(exact and int(exact.group(1)) == int(m.group(1).replace(",", "")),
          f"the exact figures in the cell's title: {title!r}")

    dom = visit(b, base + "/config", "the configuration page")
    check("pw-sekrit-123" not in dom, "a password is shown on the configuration page")
    check("&lt;secret&gt;" in dom and "ui-user" in dom and "job-name" in dom,
          "the configuration is shown, its secrets masked")

    b.open(base + "/")
    links = re.findall(r'href="(/profile\?key=[0-9a-f]+)"', b.dom())
    cpu = None
    for link in links:
        d = visit(b, base + link, "a profile page")
        if "cpu/nanoseconds" in d:
            cpu = d
            break
    check(cpu, f"no profile page shows a CPU profile ({len(links)} links)")
    flame = cpu.split('class="fg', 1)[1].split("Top functions", 1)[0]
    check("main.burnCPU" in flame, "the demo's hottest function is in the flame graph")
    top = re.findall(r'<tr class="top">(.*?)</tr>', cpu, re.S)
    burn = [t for t in top if "main.burnCPU" in t]
    check(burn, "and in the top functions")
    check(re.search(r">\d+(\.\d+)? (ms|s)<", burn[0]), f"its time in ms or s: {burn[0][:300]}")


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        scripted = Target(auth=lambda headers: 500, refused_body=SCRIPT.encode())
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: demo
    scrape-interval: 3s
    enabled-profiles: [cpu, goroutine]
    static-configs:
      - application: demo
        targets: [127.0.0.1:{port}]
      - targets: [127.0.0.1:2]
        labels: {{drop_me: "yes"}}
    relabel-configs:
      - {{source-labels: [drop_me], regex: "yes", action: drop}}
  - job-name: wide
    scrape-interval: 3s
    enabled-profiles: [goroutine]
    static-configs:
      - targets: [127.0.0.1:3]
        labels: {json.dumps(MANY)}
  - job-name: hostile
    scrape-interval: 3s
    enabled-profiles: [goroutine]
    basic-auth: {{username: ui-user, password: pw-sekrit-123}}
    static-configs:
      - application: hostile
        targets: [127.0.0.1:1, 127.0.0.1:{scripted.port}]
        labels:
          evil: {json.dumps(EVIL)}
remote-write:
  - url: file://{sink}
""")
        wait_ready(sport)
        wait_for("a CPU profile delivered", lambda: any(
            labels_of(m).get("__name__") == "process_cpu" for _, m in sink_profiles(sink)), timeout=40)
        base = f"http://127.0.0.1:{sport}"

        b = Browser(tmp)
        try:
            pages(b, base, port, sink)
        finally:
            b.close()
        code = stop(p)
        check(code == 0, f"exit status {code}")


run_test(main)
