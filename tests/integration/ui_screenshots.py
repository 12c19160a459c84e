#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Screenshots of every page of the web UI at two window sizes, for
docs/ui.md, taken in Debian's chromium (headless, loopback only, through
lib.Browser) from a proflet that scrapes the demo service and a fixture
whose profiles change after four scrapes (so a diff has something to
show).

    python3 tests/integration/ui_screenshots.py OUT_DIR

writes OUT_DIR/<page>-<size>.png for every page of PAGES and size of
SIZES (shoot() returns {file: [width, height]}). The test
test_ui_screenshots.py runs it into the build directory and checks that
docs/ui.md shows exactly these files, checked in under docs/ui/; to
refresh them, run it with docs/ui as OUT_DIR."""
import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from badtarget import pprof_profile  # noqa: E402
from http_peers import serve_bytes  # noqa: E402
from lib import *  # noqa: E402,F403

SIZES = {"desktop": (1280, 900), "phone": (412, 915)}
PAGES = ["targets", "service-discovery", "forwarding", "config", "profile", "profile-search",
         "profile-range", "diff", "sandwich"]
MS = 1000000
MANY = {"team": "checkout", "tier": "web", "region": "eu-west-1", "zone": "eu-west-1b",
        "version": "2026.11.3", "canary": "false", "owner": "payments", "cost_center": "cc-1234"}


def shape(encode_ms, gc_ms):
    get = ["github.com/acme/store.(*DB).Get", "main.handle", "main.main"]
    return pprof_profile([("samples", "count"), ("cpu", "nanoseconds")], [
        (["runtime.mallocgc"] + get, [40, 400 * MS]),
        (["github.com/acme/store.encode"] + get, [60, encode_ms * MS]),
        (["encoding/json.Marshal", "main.handle", "main.main"], [15, 150 * MS]),
        (["main.handle", "main.main"], [20, 200 * MS]),
        (["runtime.gcBgMarkWorker"], [59, gc_ms * MS]),
    ], default_type="cpu", period_type=("cpu", "nanoseconds"), period=10 * MS)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    check(head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG")
    return list(struct.unpack(">II", head[16:24]))


def shoot(out):
    os.makedirs(out, exist_ok=True)
    served = []

    def shop():
        served.append(1)
        return shape(600, 590) if len(served) <= 4 else shape(1200, 190)

    target = serve_bytes({"/debug/pprof/goroutine": shop})
    manifest = {}
    try:
        with environment() as (tmp, procs):
            port = start_demoapp(tmp, procs)
            sport = free_port()
            p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: demo
    scrape-interval: 2s
    enabled-profiles: [cpu, mem, goroutine]
    static-configs:
      - application: demo
        targets: [127.0.0.1:{port}]
        labels: {json.dumps(MANY)}
      - targets: [127.0.0.1:2]
        labels: {{drop_me: "yes"}}
    relabel-configs:
      - {{source-labels: [drop_me], regex: "yes", action: drop}}
  - job-name: shop
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: shop
        targets: [127.0.0.1:{target.server_address[1]}]
remote-write:
  - url: file://{os.path.join(tmp, "sink")}
""")
            wait_ready(sport)
            base = f"http://127.0.0.1:{sport}"

            def links():
                out = {}
                for row in re.findall(r'<tr class="t".*?</tr>', http_get(base + "/targets")[1].decode(), re.S):
                    m = re.search(r'href="/profile\?key=([0-9a-f]+)"', row)
                    kind = re.search(r'__name__=(\w+)', row)
                    if m and kind:
                        out[("shop-" if "job=shop" in row else "") + kind.group(1)] = m.group(1)
                return out

            keys = wait_for("profiles of every kind kept", lambda: alive(p) and (
                k := links()) and {"process_cpu", "memory", "shop-goroutine"} <= set(k) and k, timeout=60)
            shop_key = keys["shop-goroutine"]
            wait_for("the shop's history", lambda: len(served) >= 7 and json.loads(http_get(
                f"{base}/profile?key={shop_key}&range=all&format=json")[1])["comparison"]["merged"] >= 6, timeout=40)
            wait_for("three memory profiles", lambda: json.loads(http_get(
                f"{base}/profile?key={keys['memory']}&range=all&format=json")[1])["comparison"]["merged"] >= 3,
                timeout=40)
            doc = json.loads(http_get(f"{base}/profile?key={shop_key}&range=all&format=json")[1])
            ends = [x["end_ns"] for x in doc["comparison"]["profiles"]]
            urls = {
                "targets": "/targets",
                "service-discovery": "/service-discovery",
                "forwarding": "/forwarding",
                "config": "/config",
                "profile": f"/profile?key={keys['process_cpu']}",
                "profile-search": f"/profile?key={keys['process_cpu']}&view=flame",
                "profile-range": f"/profile?key={keys['memory']}&range=all&type=alloc_space",
                "diff": f"/profile?key={shop_key}&bfrom={ends[0] // MS}&bto={(ends[3] + MS - 1) // MS}",
                "sandwich": f"/profile?key={shop_key}&fn=github.com%2Facme%2Fstore.%28%2ADB%29.Get",
            }
            check(list(urls) == PAGES, "every page has its address")
            with Browser(tmp) as b:
                for size, (w, h) in SIZES.items():
                    b.size(w, h)
                    for page in PAGES:
                        b.open(base + urls[page])
                        check(not b.console(), f"console messages on {page}: {b.console()}")
                        if page.startswith(("profile", "diff", "sandwich")):
                            b.eval("document.querySelector('details.history') && "
                                   "(document.querySelector('details.history').open = false)")
                            b.eval("document.querySelector('.fgbar').scrollIntoView()")
                        if page == "profile-search":
                            b.type("document.getElementById('search')", "runtime")
                        name = f"{page}-{size}.png"
                        b.screenshot(os.path.join(out, name), w, h)
                        manifest[name] = png_size(os.path.join(out, name))
                        check(manifest[name] == [w, h], f"{name} is {manifest[name]}, not {w}x{h}")
            check(stop(p) == 0, "proflet did not exit cleanly")
    finally:
        target.shutdown()
    return manifest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    run_test(lambda: print(f"{len(shoot(sys.argv[1]))} screenshots in {sys.argv[1]}"))
