# SPDX-License-Identifier: Apache-2.0
"""The web UI in a real browser (Debian's chromium, headless, reaching
nothing but loopback): the targets page lists the demo service's targets as
up and loads without console errors; ?q= filtering hides the other rows; a
label and an error message carrying HTML (a hostile target's labels, and a
target that answers 500 with a script) are shown as text, never run, on the
page and in its text view (?format=text, text/plain and nosniff); the service discovery page lists kept and dropped targets with the reason;
the forwarding page shows the endpoint and what it sent; the
configuration page shows the file as loaded without its secrets;
the latest CPU profile's page draws a flame graph
in which the demo's hottest function appears, and its top-functions table
names it. Screenshots of each page go to the build directory (not
committed)."""
import json
import os
import re
import subprocess
import urllib.request

from http_peers import Target
from lib import *

CHROMIUM = ["chromium", "--headless", "--disable-gpu", "--no-sandbox",
            "--proxy-server=http://127.0.0.1:9", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--enable-logging=stderr", "--v=0"]
EVIL = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
SCRIPT = "<script>document.body.setAttribute('data-pwned','2')</script>"


def browse(tmp, url, shot=None):
    """The DOM after load (scripts run), and the console lines chromium logged."""
    profile = os.path.join(tmp, "chromium-profile")
    args = CHROMIUM + [f"--user-data-dir={profile}", "--virtual-time-budget=3000"]
    if shot:
        args += ["--window-size=1280,900", f"--screenshot={shot}"]
    else:
        args += ["--dump-dom"]
    r = subprocess.run(args + [url], capture_output=True, text=True, timeout=90)
    check(r.returncode == 0, f"chromium failed on {url}: {r.stderr[-2000:]}")
    console = [l for l in r.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    return r.stdout, console


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        scripted = Target(auth=lambda headers: 500, refused_body=SCRIPT.encode())
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        shots = os.path.join(BUILD, "ui-screenshots")
        os.makedirs(shots, exist_ok=True)
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

        dom, console = browse(tmp, base + "/")
        check(not console, f"console messages on the targets page: {console}")
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
        wait_for("the scripted target's error", lambda: "&lt;script&gt;document.body" in
                 http_get(base + "/")[1].decode(), timeout=20)
        dom, _ = browse(tmp, base + "/")
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
        dom, _ = browse(tmp, base + "/targets?format=text")
        check(not re.search(r"<body[^>]*data-pwned", dom), "the text view was run as HTML")

        dom, _ = browse(tmp, base + "/targets?q=goroutine")
        shown = [r for r in re.findall(r'<tr class="t"([^>]*)>', dom) if "display: none" not in r]
        check(len(shown) == 3, f"filtering by 'goroutine' leaves its 3 rows, got {len(shown)}")

        dom, console = browse(tmp, base + "/service-discovery")
        check(not console, f"console messages on the service discovery page: {console}")
        kept, dropped = dom.split("<h3>Dropped</h3>", 1)
        check(f"127.0.0.1:{port}" in kept and "127.0.0.1:2" not in kept, "kept targets listed")
        check("127.0.0.1:2" in dropped and "dropped by relabeling" in dropped,
              "the dropped target is listed with its reason")
        check(not re.search(r"<body[^>]*data-pwned", dom) and "<img" not in dom,
              "a label's HTML ran on the service discovery page")
        browse(tmp, base + "/service-discovery", shot=os.path.join(shots, "service-discovery.png"))

        dom, console = browse(tmp, base + "/forwarding")
        check(not console, f"console messages on the forwarding page: {console}")
        rows = re.findall(r'<tr class="t">(.*?)</tr>', dom, re.S)
        check(len(rows) == 1 and f"file://{sink}" in rows[0], f"the one endpoint is listed: {rows}")
        cells = re.findall(r"<td>(.*?)</td>", rows[0], re.S)
        check(int(cells[4].split()[0]) > 0, f"the endpoint has sent profiles: {cells}")
        browse(tmp, base + "/forwarding", shot=os.path.join(shots, "forwarding.png"))

        dom, console = browse(tmp, base + "/config")
        check(not console, f"console messages on the configuration page: {console}")
        check("pw-sekrit-123" not in dom, "a password is shown on the configuration page")
        check("&lt;secret&gt;" in dom and "ui-user" in dom and "job-name" in dom,
              "the configuration is shown, its secrets masked")
        browse(tmp, base + "/config", shot=os.path.join(shots, "config.png"))

        links = re.findall(r'href="(/profile\?key=[0-9a-f]+)"', browse(tmp, base + "/")[0])
        cpu = None
        for link in links:
            d, console = browse(tmp, base + link)
            if "cpu/nanoseconds" in d:
                cpu = d
                check(not console, f"console messages on the profile page: {console}")
                browse(tmp, base + link, shot=os.path.join(shots, "profile.png"))
                break
        check(cpu, f"no profile page shows a CPU profile ({len(links)} links)")
        flame = cpu.split('class="fg"', 1)[1].split("Top functions", 1)[0]
        check("main.burnCPU" in flame, "the demo's hottest function is in the flame graph")
        top = re.findall(r'<tr class="top">(.*?)</tr>', cpu, re.S)
        check(any("main.burnCPU" in t for t in top), "and in the top functions")
        browse(tmp, base + "/", shot=os.path.join(shots, "targets.png"))
        for page in ("targets", "service-discovery", "forwarding", "config", "profile"):
            check(os.path.getsize(os.path.join(shots, page + ".png")) > 1000, f"a screenshot of the {page} page")
        code = stop(p)
        check(code == 0, f"exit status {code}")


run_test(main)
