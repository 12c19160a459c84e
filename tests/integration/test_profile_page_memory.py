# SPDX-License-Identifier: Apache-2.0
"""A profile page streams from its flame graph's tree as the client reads
it, never built whole: a hostile goroutine profile (400 roots x 49 frames
of 1,500-character names, a few KB of gzip, whose page was 61 MB when it
was built whole and kept until read) is scraped from a fixture target,
then 30 clients ask for its page and never read. proflet's peak RSS grows
by less than limits.memory-budget (it grew by about 61 MB per client),
/-/healthy keeps answering fast meanwhile, and a client that reads gets
the whole page: well-formed HTML with every frame, each name cut to its
display length. With a budget whose half holds fewer trees than there
are clients, the pages past it say so, and a page is drawn again once the
unread ones are closed (what they held was given back)."""
import gzip
import html.parser
import os
import re
import socket
import time
import urllib.request

from http_peers import serve_bytes
from lib import *
from badtarget import field, varint

ROOTS, DEPTH, NAME_LEN = 400, 49, 1500
CLIENTS = 30
BUDGET = 96 << 20


def root_name(r):
    """Root r's name: characters HTML escapes, then its number (frames of
    one name are one frame, as pprof aggregates them), 1,500 long."""
    return (f"main.\"<&>'{r:03d}" + "main.\"<&>'" * NAME_LEN)[:NAME_LEN]


def hostile_profile():
    """A goroutine profile: ROOTS root functions, each calling the same
    chain of DEPTH - 1 functions (so 400 x 49 distinct frames from 449
    functions), every name 1,500 characters long; the roots' names are
    made of characters HTML escapes."""
    strings = [b"", b"goroutine", b"count"] + [root_name(r).encode() for r in range(ROOTS)]
    for d in range(1, DEPTH):
        strings.append((f"github.com/hostile/pkg{d}.(*T).Method" + "x" * NAME_LEN)[:NAME_LEN].encode())
    vt = varint(1 << 3) + varint(1) + varint(2 << 3) + varint(2)
    body = field(1, vt)
    chain = list(range(1, DEPTH))  # function and location ids 1..48: depths 48..1
    for r in range(ROOTS):
        root = DEPTH + r  # ids 49..448: the roots
        # location_id is leaf first: the root is the last one.
        packed = b"".join(varint(i) for i in reversed([root] + chain))
        body += field(2, field(1, packed) + varint(2 << 3) + varint(1))
    for i in range(1, DEPTH + ROOTS):
        name = 3 + ROOTS + i - 1 if i < DEPTH else 3 + i - DEPTH  # a chain's, or root i - 49's
        body += field(4, varint(1 << 3) + varint(i) + field(4, varint(1 << 3) + varint(i)))
        body += field(5, varint(1 << 3) + varint(i) + varint(2 << 3) + varint(name))
    for s in strings:
        body += field(6, s)
    return gzip.compress(body, 9)


class PageCheck(html.parser.HTMLParser):
    """Counts the flame graph's frames and checks that every element
    closes in order (the page is whole and well formed)."""
    VOID = {"meta", "input", "br", "img", "hr", "link"}

    def __init__(self):
        super().__init__()
        self.stack, self.frames, self.top, self.errors = [], [], 0, []
        self.longest_shown = self.longest_cell = 0
        self.in_frame = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.in_frame = tag == "div" and a.get("class") == "fn"
        if self.in_frame:
            self.frames.append(a.get("title", ""))
        if tag == "tr" and a.get("class") == "top":
            self.top += 1
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        self.in_frame = False
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] == "div" and self.in_frame:  # a frame's name
            self.longest_shown = max(self.longest_shown, len(data))
        if self.stack and self.stack[-1] == "td":  # the top table's
            self.longest_cell = max(self.longest_cell, len(data))


def start(tmp, procs, prof, name, limits=""):
    """A fixture target that serves `prof` once (later scrapes get a 404,
    so no more jobs run than the pages' own while they are counted), and
    a proflet scraping it; returns (proflet, fixture, base URL, page link,
    jobs completed once the scrape's are done)."""
    served = []

    def once():
        served.append(1)
        return prof if len(served) == 1 else b""

    target = serve_bytes({"/debug/pprof/goroutine": once})
    sport = free_port()
    p = start_proflet(tmp, procs, f"""
{limits}server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: hostile
    scrape-interval: 2s
    enabled-profiles: [goroutine]
    static-configs:
      - application: hostile
        targets: [127.0.0.1:{target.server_address[1]}]
remote-write:
  - url: file://{os.path.join(tmp, name + "-sink")}
""", name=name)
    wait_ready(sport)
    base = f"http://127.0.0.1:{sport}"
    link = wait_for("the profile's page link", lambda: (
        alive(p) and (m := re.search(r'href="(/profile\?key=[0-9a-f]+)"', http_get(base + "/")[1].decode()))
        and m.group(1)), timeout=30)
    jobs0 = wait_for("the scrape's jobs done", lambda: idle(sport))
    return p, target, sport, base, link, jobs0


def idle(sport, at_least=0):
    """The jobs completed when none runs or waits and at least `at_least`
    did, else None."""
    t = metrics(sport)
    done = metric_value(t, "proflet_worker_jobs_completed_total")
    if (metric_value(t, "proflet_worker_jobs_in_flight") == 0 and
            metric_value(t, "proflet_worker_jobs_backlog") == 0 and done >= at_least):
        return done
    return None


def unread_pages(p, sport, link, jobs0):
    """CLIENTS connections that ask for the page and never read, once
    their pages' jobs are done."""
    conns = []
    try:
        for _ in range(CLIENTS):
            conns.append(unread_request(sport, f"GET {link} HTTP/1.1\r\nHost: t\r\n\r\n".encode()))
        wait_for(f"the {CLIENTS} pages' flame graphs built",
                 lambda: alive(p) and idle(sport, jobs0 + CLIENTS), timeout=120)
    except BaseException:
        for s in conns:
            s.close()
        raise
    return conns


def check_page(code, page):
    """The whole page, well formed, every frame drawn, every name cut."""
    check(code == 200, f"the page answered {code}")
    text = page.decode()
    check(text.rstrip().endswith("</html>"), "the page is cut short")
    check(len(page) < 13 << 20, f"the page is {len(page)} bytes")
    pc = PageCheck()
    pc.feed(text)
    pc.close()
    check(not pc.errors, f"the page is not well formed: {pc.errors[:5]}")
    check(pc.stack == [], f"elements left open: {pc.stack[:10]}")
    # The root and every root's stack: each frame is 1/400 of the
    # whole, wide enough to be drawn.
    check(len(pc.frames) == 1 + ROOTS * DEPTH, f"{len(pc.frames)} frames, want {1 + ROOTS * DEPTH}")
    names = [f.split("\n", 1)[0] for f in pc.frames[1:]]  # a tooltip's first line
    check(all(n.startswith(("github.com/hostile/pkg", "main.")) for n in names), "a frame without its name")
    # A cut name is a prefix of the name, then an ellipsis: never
    # half an entity.
    roots = [n for n in names if n.startswith("main.")]
    check(len(roots) == ROOTS, f"{len(roots)} root frames")
    check(all(n.endswith("\u2026") and root_name(int(n[10:13])).startswith(n[:-1]) for n in roots),
          f"a root's tooltip is not its name cut: {roots[0]!r}")
    check(len(set(roots)) == ROOTS, "two roots share a frame")
    check(max(len(n) for n in names) < 300, "a frame's tooltip carries the whole name")
    check(pc.longest_shown <= 96, f"a frame shows a name in {pc.longest_shown} characters")
    check(pc.longest_cell <= 256, f"the top table shows a name in {pc.longest_cell} characters")
    check(pc.top >= 1, "no top functions")


def main():
    prof = hostile_profile()
    print(f"hostile profile: {len(prof)} bytes gzip")
    with environment() as (tmp, procs):
        p, target, sport, base, link, jobs0 = start(tmp, procs, prof, "proflet")
        try:
            rest = peak_rss(p.pid)
            conns = unread_pages(p, sport, link, jobs0)
            try:
                lat = []
                for _ in range(20):
                    t0 = time.monotonic()
                    code, _ = http_get(base + "/-/healthy", timeout=5)
                    lat.append(time.monotonic() - t0)
                    check(code == 200, f"/-/healthy answered {code}")
                peak = peak_rss(p.pid)

                t0 = time.monotonic()
                code, page = http_get(base + link, timeout=60)
                secs = time.monotonic() - t0
                peak = max(peak, peak_rss(p.pid))
            finally:
                for s in conns:
                    s.close()
            grown = peak - rest
            print(f"{CLIENTS} unread profile pages: peak RSS {rest / 2**20:.1f} -> {peak / 2**20:.1f} MiB "
                  f"(+{grown / 2**20:.1f}); /-/healthy at most {max(lat) * 1000:.0f} ms; "
                  f"a full read: {len(page)} bytes in {secs:.2f} s")
            check(grown < (BUDGET + (256 << 20) if sanitized() else BUDGET),
                  f"peak RSS grew by {grown / 2**20:.1f} MiB with {CLIENTS} unread pages")
            check(max(lat) < 1.0, f"/-/healthy took {max(lat):.2f} s while the pages waited")

            check_page(code, page)
            code = stop(p)
            check(code == 0, f"exit status {code}")
        finally:
            target.shutdown()

        # A budget whose half holds fewer trees than CLIENTS: the pages past
        # it say so, and the trees are given back as their connections close.
        p, target, sport, base, link, jobs0 = start(tmp, procs, prof, "proflet-small",
                                                   "limits: {memory-budget: 12MiB}\n")
        try:
            conns = unread_pages(p, sport, link, jobs0)
            try:
                code, page = http_get(base + link, timeout=60)
            finally:
                for s in conns:
                    s.close()
            check(code == 200 and b"Too many profile pages" in page and b'class="fn"' not in page,
                  "a page past half the budget was drawn")
            code, page = wait_for("a page drawn once the unread ones are closed", lambda: (
                alive(p) and (r := http_get(base + link, timeout=60)) and b'class="fn"' in r[1] and r), timeout=60)
            check_page(code, page)
            # Clients that leave before their page's job is done: the job
            # finds the page closed and keeps nothing (the sanitized build
            # checks the memory; the exit status, the leaks).
            jobs1 = wait_for("the jobs so far done", lambda: idle(sport))
            for _ in range(10):
                with socket.create_connection(("127.0.0.1", sport), timeout=10) as c:
                    c.sendall(f"GET {link} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
                    check(c.recv(1), "no answer")  # the head: the job is queued
            wait_for("their jobs done", lambda: alive(p) and idle(sport, jobs1 + 10), timeout=60)
            check_page(*http_get(base + link, timeout=60))
            # And a shutdown while pages hold their trees: a clean exit.
            jobs1 = wait_for("the jobs so far done", lambda: idle(sport))
            conns = [unread_request(sport, f"GET {link} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
                     for _ in range(3)]
            try:
                wait_for("their jobs done", lambda: alive(p) and idle(sport, jobs1 + 3), timeout=60)
                code = stop(p)
            finally:
                for s in conns:
                    s.close()
            check(code == 0, f"exit status {code}")
        finally:
            target.shutdown()


run_test(main)
