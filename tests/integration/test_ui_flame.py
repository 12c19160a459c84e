# SPDX-License-Identifier: Apache-2.0
"""The profile page in a real browser (Debian's chromium, headless,
loopback only, driven through lib.Browser), on profiles a fixture target
serves: first four of one shape (A), then another (B), so the page has a
history to merge and diff.

  - units: the total of a CPU column reads "1.79 s", values in the table
    in ms and s, a count column with thousands separators, a bytes column
    in GiB;
  - colours: two frames of one package have the same colour, two packages
    differ; in a diff, a frame whose share grew is red and one whose share
    shrank green;
  - zoom: after a click on a frame it spans the graph's width; Escape and
    the browser's Back zoom out;
  - search: the matching frames are marked and their share (the outermost
    ones, summed) shown in units and percent, text or /regexp/;
  - orientation: "flame" puts the root below its children, without a
    reload;
  - the table sorts by self or total, and a function's link opens its
    sandwich view (callers above, callees below);
  - a merged range's and a diff's JSON values are the sums and differences
    of what the fixture served;
  - a function named with <script> and quotes is text everywhere: frame,
    tooltip, table, sandwich page, JSON and collapsed stacks;
  - no page logs a console error or asks for anything but itself.
"""
import json
import re
import urllib.error
import urllib.request

from badtarget import pprof_profile
from http_peers import serve_bytes
from lib import *

EVIL = "<script>document.body.dataset.pwned='1'</script>\"'&x"
TYPES = [("samples", "count"), ("cpu", "nanoseconds")]
MS = 1000000


def shape(encode_ms, gc_ms):
    """A CPU-like profile: main.main -> main.handle -> store.(*DB).Get ->
    {runtime.mallocgc 400 ms, store.encode}; main.handle 200 ms itself;
    runtime.gcBgMarkWorker alone; the evil function under main.main."""
    get = ["github.com/acme/store.(*DB).Get", "main.handle", "main.main"]
    return pprof_profile(TYPES, [
        (["runtime.mallocgc"] + get, [1234567, 400 * MS]),
        (["github.com/acme/store.encode"] + get, [10, encode_ms * MS]),
        (["main.handle", "main.main"], [20, 200 * MS]),
        (["runtime.gcBgMarkWorker"], [30, gc_ms * MS]),
        ([EVIL, "main.main"], [1, 10 * MS]),
    ], default_type="cpu", period_type=("cpu", "nanoseconds"), period=10 * MS)


A, B = shape(600, 590), shape(1200, 190)
HEAP = pprof_profile([("alloc_space", "bytes")], [(["main.alloc", "main.main"], [3489660928])])


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.headers, r.read()


def clean(b, what):
    check(not b.console(), f"console messages on {what}: {b.console()}")
    asked = b.requests()
    check(asked and all(u == asked[0] for u in asked), f"{what} asked for more than itself: {asked}")
    check(b.eval("document.body.dataset.pwned") is None, f"a function name ran as script on {what}")


def frame(name):
    """JavaScript: the first frame of the first graph named `name`."""
    return (f"Array.from(document.querySelectorAll('.fg .fn')).find(f => "
            f"f.title.split('\\n')[0] === {json.dumps(name)})")


def colour(b, name):
    return b.eval(f"getComputedStyle({frame(name)}).backgroundColor")


def width(b, expr):
    return b.eval(f"{expr}.getBoundingClientRect().width")


def main():
    served = []

    def cpu():
        served.append(1)
        return A if len(served) <= 4 else B

    target = serve_bytes({"/debug/pprof/goroutine": cpu})
    heapy = serve_bytes({"/debug/pprof/goroutine": HEAP})
    try:
        with environment() as (tmp, procs):
            sport = free_port()
            tport = target.server_address[1]
            p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: shop
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: shop
        targets: [127.0.0.1:{tport}]
  - job-name: heapy
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: heapy
        targets: [127.0.0.1:{heapy.server_address[1]}]
remote-write:
  - url: file://{os.path.join(tmp, "sink")}
""")
            wait_ready(sport)
            base = f"http://127.0.0.1:{sport}"

            def keys():
                page = http_get(base + "/targets")[1].decode()
                rows = re.findall(r'<tr class="t".*?</tr>', page, re.S)
                out = {}
                for r in rows:
                    m = re.search(r'href="/profile\?key=([0-9a-f]+)"', r)
                    if m:
                        out["heapy" if "job=heapy" in r else "shop"] = m.group(1)
                return len(out) == 2 and out

            k = wait_for("both targets' profiles kept", keys, timeout=40)
            key = k["shop"]
            wait_for("six profiles of the shop kept", lambda: json.loads(
                get(f"{base}/profile?key={key}&range=all&format=json")[1])["comparison"]["merged"] >= 6,
                timeout=40)

            with Browser(tmp) as b:
                url = f"{base}/profile?key={key}&from=0&to=now"
                page = f"{base}/profile?key={key}"
                # The newest profile (B): units, colours, the table.
                b.open(page)
                clean(b, "the profile page")
                check(b.eval("document.querySelector('.sum b').textContent") == "2.00 s",
                      "the total in seconds: " + b.eval("document.querySelector('.sum').textContent"))
                cells = b.eval("Array.from(document.querySelectorAll('tr.top td')).map(t => t.textContent)")
                check("1.20 s" in cells and "400 ms" in cells and "190 ms" in cells,
                      f"the table's values in their units: {cells[:20]}")
                check(not any(re.fullmatch(r"\d{7,}", c) for c in cells), f"a raw number in the table: {cells}")
                main_c, handle_c = colour(b, "main.main"), colour(b, "main.handle")
                get_c, enc_c = colour(b, "github.com/acme/store.(*DB).Get"), colour(b, "github.com/acme/store.encode")
                rt_c = colour(b, "runtime.mallocgc")
                check(main_c == handle_c and get_c == enc_c, f"one package, one colour: {main_c} {handle_c} {get_c} {enc_c}")
                check(len({main_c, get_c, rt_c}) == 3, f"three packages, three colours: {main_c} {get_c} {rt_c}")
                title = b.eval(f"{frame('github.com/acme/store.encode')}.title")
                check("total 1.20 s (60.00%)" in title and "self 1.20 s (60.00%)" in title,
                      f"the tooltip in units and percent: {title!r}")

                # Zoom, and back out with Escape and with Back.
                whole = width(b, "document.querySelector('.fg')")
                handle = frame("main.handle")
                before = width(b, handle)
                check(before < whole * 0.95, f"main.handle is narrower than the graph: {before} of {whole}")
                b.click(handle)
                after = width(b, handle)
                check(abs(after - whole) <= 2, f"zoomed, main.handle spans the width: {after} of {whole}")
                outside = b.eval(f"""(() => {{ const g = document.querySelector('.fg').getBoundingClientRect();
                    const r = {frame('runtime.gcBgMarkWorker')}.getBoundingClientRect();
                    return r.right <= g.left + 1 || r.left >= g.right - 1; }})()""")
                check(outside, "a frame outside the zoomed one is out of sight")
                check(abs(width(b, frame("main.main")) - whole) <= 2, "its ancestor spans the width")
                b.key("Escape")
                check(abs(width(b, handle) - before) <= 1, "Escape zooms out")
                b.click(frame('github.com/acme/store.(*DB).Get'))
                check(abs(width(b, frame("github.com/acme/store.(*DB).Get")) - whole) <= 2, "zoomed again")
                b.eval("history.back()")
                wait_for("Back zooms out", lambda: abs(width(b, handle) - before) <= 1, timeout=10)

                # Search: marked frames and their share.
                b.type("document.getElementById('search')", "store")
                marked = b.eval("Array.from(document.querySelectorAll('.fg .fn.m')).map(f => f.title.split('\\n')[0])")
                check(sorted(marked) == ["github.com/acme/store.(*DB).Get", "github.com/acme/store.encode"],
                      f"the matching frames are marked: {marked}")
                share = b.eval("document.getElementById('share').textContent")
                check(share == "2 frames match: 1.60 s of 2.00 s (80.00%)", f"their share: {share!r}")
                b.eval("(() => { const s = document.getElementById('search'); s.value = '';"
                       " s.dispatchEvent(new Event('input')); })()")
                b.type("document.getElementById('search')", "/^main\\./")
                share = b.eval("document.getElementById('share').textContent")
                check(share == "2 frames match: 1.81 s of 2.00 s (90.50%)", f"a regexp's share: {share!r}")
                check(not b.console(), f"console messages while searching: {b.console()}")

                # Orientation: the root below its children, no reload.
                b.eval("window.stayed = 1")
                b.click("document.querySelectorAll('a.orient')[1]")
                root_y = b.eval("document.querySelector('.fg .fn').getBoundingClientRect().y")
                child_y = b.eval(f"{frame('main.main')}.getBoundingClientRect().y")
                check(b.eval("window.stayed") == 1 and b.eval("location.search").endswith("view=flame"),
                      "the switch reloaded the page")
                check(child_y < root_y, f"flame: main.main above the root ({child_y} < {root_y})")

                # Sorting, and a sandwich view.
                b.open(page + "&sort=total")
                first = b.eval("document.querySelector('tr.top td:last-child').textContent")
                check(first == "main.main", f"sorted by total, main.main first: {first}")
                b.open(page + "&sort=self")
                first = b.eval("document.querySelector('tr.top td:last-child').textContent")
                check(first == "github.com/acme/store.encode", f"sorted by self: {first}")
                b.follow("Array.from(document.querySelectorAll('tr.top a')).find(a => "
                         "a.textContent === 'github.com/acme/store.(*DB).Get')")
                check("fn=" in b.eval("location.search"), "the function's link opens its sandwich")
                clean(b, "the sandwich page")
                graphs = b.eval("Array.from(document.querySelectorAll('.fg')).map(g => "
                                "Array.from(g.querySelectorAll('.fn')).map(f => f.title.split('\\n')[0]))")
                check(len(graphs) == 2, f"callers and callees: {len(graphs)} graphs")
                check(graphs[0][1:] == ["github.com/acme/store.(*DB).Get", "main.handle", "main.main"],
                      f"the callers, inverted: {graphs[0]}")
                check(set(graphs[1][1:]) == {"github.com/acme/store.(*DB).Get", "runtime.mallocgc",
                                              "github.com/acme/store.encode"}, f"the callees: {graphs[1]}")

                # Counts and bytes.
                b.open(page + "&type=samples")
                check(b.eval("document.querySelector('.sum b').textContent") == "1,234,628",
                      "a count with separators: " + b.eval("document.querySelector('.sum').textContent"))
                b.open(f"{base}/profile?key={k['heapy']}")
                check(b.eval("document.querySelector('.sum b').textContent") == "3.25 GiB",
                      "bytes in GiB: " + b.eval("document.querySelector('.sum').textContent"))

                # The merged range: every profile summed.
                b.open(url)
                clean(b, "a merged range")
                doc = json.loads(get(url + "&format=json")[1])
                n = doc["comparison"]["merged"]
                fns = {f["name"]: f for f in doc["functions"]}
                nb = n - 4
                check(fns["github.com/acme/store.encode"]["total"] == (4 * 600 + nb * 1200) * MS,
                      f"the merge sums its {n} profiles: {fns['github.com/acme/store.encode']}")
                check(fns["main.main"]["total"] == 4 * 1210 * MS + nb * 1810 * MS,
                      f"main.main merged: {fns['main.main']}")

                # A diff: the newest (B) against the first four (A).
                ends = [x["end_ns"] for x in doc["comparison"]["profiles"]]
                lo, hi = ends[0] // MS, (ends[3] + MS - 1) // MS
                diff = f"{base}/profile?key={key}&bfrom={lo}&bto={hi}"
                b.open(diff)
                clean(b, "the diff page")
                grew = colour(b, "github.com/acme/store.encode")
                shrank = colour(b, "runtime.gcBgMarkWorker")
                r, g, _ = (int(x) for x in re.findall(r"\d+", grew)[:3])
                check(r > g + 40, f"a frame whose share grew is red: {grew}")
                r, g, _ = (int(x) for x in re.findall(r"\d+", shrank)[:3])
                check(g > r + 40, f"a frame whose share shrank is green: {shrank}")
                d = json.loads(get(diff + "&format=json")[1])
                check(d["baseline"]["merged"] == 4 and d["comparison"]["merged"] == 1,
                      f"the diff's sides: {d['baseline']['merged']} and {d['comparison']['merged']}")
                enc = {f["name"]: f for f in d["functions"]}["github.com/acme/store.encode"]
                check(enc["base_total"] == 2400 * MS and enc["total"] == 1200 * MS and
                      enc["diff_total"] == -1200 * MS, f"the diff's values: {enc}")

                # The evil name: text in the frame, the tooltip, the table.
                b.open(page)
                shown = b.eval(f"{frame(EVIL)}.textContent")
                check(shown == EVIL, f"the name shown as text: {shown!r}")
                check(b.eval("document.scripts.length") == 1, "a function name became a script element")
                link = b.eval(f"Array.from(document.querySelectorAll('tr.top a')).find(a => a.textContent === {json.dumps(EVIL)}).href")
                b.open(link)
                clean(b, "the evil function's sandwich")
                check(EVIL in b.eval("document.querySelector('h3 code').textContent"), "the sandwich names it as text")
                hdrs, body = get(page + "&format=collapsed")
                check(hdrs["Content-Type"].startswith("text/plain") and hdrs["X-Content-Type-Options"] == "nosniff",
                      f"collapsed stacks are plain text: {hdrs['Content-Type']}")
                check(("main.main;" + EVIL + " 10000000").encode() in body.splitlines(),
                      f"the collapsed line of the evil name: {body[:400]!r}")
                hdrs, body = get(page + "&format=json")
                check(b"<script" not in body and EVIL in [f["name"] for f in json.loads(body)["functions"]],
                      "JSON: the name intact, no markup")
                # A range with nothing in it: a download says so before it starts.
                for fmt in ("&format=json", "&format=collapsed"):
                    try:
                        get(f"{page}&from=1&to=2{fmt}")
                        check(False, f"an empty range's {fmt} answered 200")
                    except urllib.error.HTTPError as e:
                        check(e.code == 404, f"an empty range's {fmt}: {e.code}")
                b.open(f"{page}&from=1&to=2")
                check("No profile kept in this range" in b.eval("document.body.textContent"),
                      "an empty range's page says so")
            code = stop(p)
            check(code == 0, f"exit status {code}")
    finally:
        target.shutdown()
        heapy.shutdown()


run_test(main)
