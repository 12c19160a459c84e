# SPDX-License-Identifier: Apache-2.0
"""Bytes a target controls reach the status server's outputs escaped.

A target on 127.0.0.1 answers 500 with a body holding invalid UTF-8
(\\xff\\xfe), terminal escapes (ESC) and a line feed that would forge a row
of the text table; file service discovery gives its targets label values
with control characters (file_sd refuses invalid UTF-8 in values, so the
error body carries that part). Then:

  - /api/v1/targets parses with a strict JSON parser (bytes, not text
    decoded leniently), shows U+FFFD for each invalid byte and keeps the
    control characters as JSON escapes;
  - /targets?format=text has exactly one line per (target, type) pair, no
    ESC byte and no invalid UTF-8, the error shown with visible escapes;
  - the HTML pages (/targets, /service-discovery) are valid UTF-8 with no
    ESC byte, and the markup a target sends is escaped;
  - `proflet targets` (the CLI's JSON) parses strictly too;
  - a profile whose function name holds the same bytes is drawn on its
    page with the name escaped.
"""
import http.server
import re
import json
import os
import subprocess
import threading

from lib import *
from badtarget import tiny_pprof

EVIL = b"boom \xff\xfe\x1b[2J\x1b[31mred\nFAKE  goroutine up  2026-01-01  http://forged/ <b>x</b>"
N_TARGETS = 2

CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: evil
    scrape-interval: 1s
    scrape-timeout: 1s
    enabled-profiles: [goroutine]
    file-sd-configs: [{{files: ["{sd}"], refresh-interval: 1s}}]
  - job-name: fn
    scrape-interval: 1s
    scrape-timeout: 1s
    enabled-profiles: [goroutine]
    path-prefix: /fn
    static-configs:
      - application: fn
        targets: [127.0.0.1:{tport}]
remote-write:
  - url: file://{sink}
"""

EVIL_FN = b"main.\x1b[31mred\xff<script>alert(1)</script>"


def evil_profile():
    """A valid goroutine profile of one sample in one function whose name
    holds ESC, an invalid byte and markup."""
    return tiny_pprof(EVIL_FN)


class Evil(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        fn = self.path.startswith("/fn/")
        body = evil_profile() if fn else EVIL
        self.send_response(200 if fn else 500)
        self.send_header("Content-Type", "application/octet-stream" if fn else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def strict_json(raw, what):
    """Parses bytes as JSON the strict way: valid UTF-8 first, then JSON."""
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise TestFailure(f"{what} is not valid UTF-8: {e}: {raw[max(0, e.start - 40):e.end + 40]!r}")
    try:
        return json.loads(text)
    except ValueError as e:
        raise TestFailure(f"{what} is not JSON: {e}")


def valid_utf8(raw, what):
    try:
        return raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise TestFailure(f"{what} is not valid UTF-8: {e}")


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with environment() as (tmp, procs):
            run(tmp, procs, srv.server_address[1])
    finally:
        srv.shutdown()


def run(tmp, procs, tport):
    sport = free_port()
    sd = os.path.join(tmp, "sd.json")
    # ESC, BEL and LF in file_sd values; a query parameter the target
    # ignores makes N_TARGETS distinct targets of one address.
    groups = b"[" + b",".join(
        b'{"targets": ["127.0.0.1:%d"], "labels": {"__meta_evil": "m\\u001b[31m\\nrow%d", '
        b'"team": "t\\u001b]0;pwn\\u0007\\nrow%d", "__address__": "127.0.0.1:%d", '
        b'"__param_x": "%d"}}' % (tport, i, i, tport, i)
        for i in range(N_TARGETS)) + b"]"
    with open(sd, "wb") as f:
        f.write(groups)
    cfg = CONFIG.format(sport=sport, sd=sd, sink=os.path.join(tmp, "sink"), tport=tport)
    p = start_proflet(tmp, procs, cfg)
    base = f"http://127.0.0.1:{sport}"

    def scraped():
        alive(p)
        d = strict_json(http_get(base + "/api/v1/targets")[1], "/api/v1/targets")
        act = [t for t in d["data"]["activeTargets"] if t["scrapePool"] == "evil"]
        return len(act) == N_TARGETS and all(t["lastError"] for t in act) and d

    data = wait_for("both targets scraped and down", scraped, timeout=30)["data"]

    # JSON: U+FFFD for each invalid byte, control characters kept (escaped).
    for t in data["activeTargets"]:
        if t["scrapePool"] != "evil":
            continue
        err = t["lastError"]
        check("\ufffd\ufffd" in err, f"U+FFFD for \\xff\\xfe in lastError: {err!r}")
        check("\x1b[2J" in err and "\nFAKE" in err, f"ESC and LF kept as JSON escapes: {err!r}")
        check("<b>x</b>" in err, f"the body's text otherwise intact: {err!r}")
        meta = t["discoveredLabels"].get("__meta_evil", "")
        check(meta.startswith("m\x1b[31m\nrow"), f"discovered label kept, escaped: {meta!r}")
        check(t["labels"]["team"].startswith("t\x1b]0;pwn\x07\nrow"),
              f"final label kept, control characters escaped: {t['labels']!r}")
    raw = http_get(base + "/api/v1/targets")[1]
    check(b"\x1b" not in raw and b"\xff" not in raw, "no raw ESC or invalid byte in the JSON")
    check(b"\\u001b" in raw, "ESC written as \\u001b")

    # Text: one line per pair (plus the header), no ESC, visible escapes.
    raw = http_get(base + "/targets?format=text")[1]
    text = valid_utf8(raw, "/targets?format=text")
    lines = text.splitlines()
    check(len(lines) == 1 + N_TARGETS + 1, f"one line per pair: {lines!r}")
    check(not any(ord(c) < 0x20 or ord(c) == 0x7F for c in text.replace("\n", "")),
          f"no control character but the line ends: {text!r}")
    for line in lines[1:]:
        if line.startswith("fn "):
            continue
        check(line.startswith("evil "), f"a row of job evil: {line!r}")
        check("\\x1b[2J" in line and "\\nFAKE" in line and "\ufffd\ufffd" in line,
              f"the error shown escaped: {line!r}")

    # HTML: valid UTF-8, no ESC, markup escaped.
    for path in ("/targets", "/service-discovery"):
        raw = http_get(base + path)[1]
        page = valid_utf8(raw, path)
        check("\x1b" not in page, f"no ESC in {path}")
        check("<b>x</b>" not in page, f"the target's markup escaped in {path}")
        check("\\x1b" in page, f"ESC shown as \\x1b in {path}")

    # The CLI's JSON (`proflet targets`) reads the same bytes.
    r = subprocess.run([PROFLET, "targets", "--config", p.config_path], capture_output=True,
                       timeout=60)
    check(r.returncode == 0, f"proflet targets exited {r.returncode}: {r.stderr[-400:]!r}")
    listed = strict_json(r.stdout, "proflet targets")
    check(len(listed) == N_TARGETS + 1, f"proflet targets lists all: {listed!r}")
    for t in listed:
        if "__meta_evil" not in t["discoveredLabels"]:
            continue
        check(t["discoveredLabels"]["__meta_evil"].startswith("m\x1b[31m\nrow"),
              f"CLI: the discovered label kept: {t!r}")
    # The profile page: the function name escaped in the flame graph and
    # the top functions.
    def key():
        m = re.search(r'href="/profile\?key=([0-9a-f]+)"', http_get(base + "/targets")[1].decode())
        return m and m.group(1)

    k = wait_for("the fn profile kept for the UI", key, timeout=30)

    def drawn():
        page = valid_utf8(http_get(base + f"/profile?key={k}")[1], "/profile")
        return "Top functions" in page and page

    page = wait_for("the profile page drawn", drawn, timeout=30)
    check("\x1b" not in page and "<script>alert" not in page,
          "no ESC and no live markup from a function name")
    check("main.\\x1b[31mred\ufffd&lt;script&gt;alert(1)&lt;/script&gt;" in page,
          "the function name shown escaped")
    check(alive(p), "proflet is alive")
    check(stop(p) == 0, "proflet exits 0")


if __name__ == "__main__":
    run_test(main)
