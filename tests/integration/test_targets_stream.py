# SPDX-License-Identifier: Apache-2.0
"""/api/v1/targets with 10,000 targets is streamed target by target:
50 clients asking for it and reading nothing raise the peak RSS by a
bounded amount (it used to be built whole, ~10 MB of JSON plus its json-c
tree, per request), a full read is valid JSON with every target, ?job=
keeps one job, and scraping keeps its timing while it is served."""
import http.client
import json
import os
import signal
import socket
import time

from lib import *

N = 10000


def config(sport, dead, sink):
    targets = ", ".join(f"127.0.{i >> 8}.{i & 255}:{dead}" for i in range(N // 2))
    more = ", ".join(f"127.1.{i >> 8}.{i & 255}:{dead}" for i in range(N // 2))
    return f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: big
    scrape-interval: 1h
    enabled-profiles: [goroutine]
    static-configs:
      - application: big
        targets: [{targets}]
  - job-name: big2
    scrape-interval: 1h
    enabled-profiles: [goroutine]
    static-configs:
      - application: big2
        targets: [{more}]
  - job-name: ticker
    scrape-interval: 1s
    enabled-profiles: [goroutine, memory, mutex, block]
    static-configs:
      - application: ticker
        targets: [127.0.0.1:{dead}]
remote-write:
  - url: file://{sink}
"""



def main():
    with environment() as (tmp, procs):
        dead = free_port()
        sport = free_port()
        p = start_proflet(tmp, procs, config(sport, dead, os.path.join(tmp, "sink")))
        wait_ready(sport, timeout=60)
        wait_for("10k pairs", lambda: metric_value(metrics(sport), "proflet_scrape_pairs") == N + 4, timeout=60)

        # One full read: valid JSON, every target, served in chunks.
        t0 = time.monotonic()
        code, body = http_get(f"http://127.0.0.1:{sport}/api/v1/targets", timeout=60)
        secs = time.monotonic() - t0
        doc = json.loads(body)
        check(doc["status"] == "success", "status is not success")
        active = doc["data"]["activeTargets"]
        check(len(active) == N + 4, f"{len(active)} active targets, want {N + 4}")
        check(doc["data"]["droppedTargets"] == [], "dropped targets listed")
        check(doc["data"]["droppedTargetCounts"] == {"big": 0, "big2": 0, "ticker": 0},
              f"droppedTargetCounts: {doc['data']['droppedTargetCounts']}")
        urls = {(t["scrapePool"], t["scrapeUrl"]) for t in active}
        check(len(urls) == N + 4, "targets listed twice")
        print(f"/api/v1/targets: {len(body)} bytes, {len(active)} targets in {secs:.2f} s")
        code, body = http_get(f"http://127.0.0.1:{sport}/api/v1/targets?job=big2", timeout=60)
        doc = json.loads(body)
        check(len(doc["data"]["activeTargets"]) == N // 2, "?job=big2 did not keep one job")
        check(doc["data"]["droppedTargetCounts"] == {"big2": 0}, "?job= counts")

        # 50 clients ask and read nothing.
        base = peak_rss(p.pid)
        late0, ticks0 = late_ticks(metrics(sport))
        conns = []
        try:
            for _ in range(50):
                conns.append(unread_request(sport, b"GET /api/v1/targets HTTP/1.1\r\nHost: t\r\n\r\n"))
            wait_for("ticks while the answers wait", lambda: late_ticks(metrics(sport))[1] >= ticks0 + 12,
                     timeout=20)
            peak = peak_rss(p.pid)
            late1, _ = late_ticks(metrics(sport))
            # And one more reads it all meanwhile.
            code, body = http_get(f"http://127.0.0.1:{sport}/api/v1/targets", timeout=60)
            check(len(json.loads(body)["data"]["activeTargets"]) == N + 4, "a read during the stall was cut")
        finally:
            for s in conns:
                s.close()
        grown = (peak - base) / 2**20
        print(f"50 unread /api/v1/targets: peak RSS {base / 2**20:.1f} -> {peak / 2**20:.1f} MiB (+{grown:.1f}), "
              f"{late1 - late0:.0f} ticks > 100 ms late")
        check(grown < (24 + 256 if sanitized() else 24), f"peak RSS grew {grown:.1f} MiB with 50 unread /api/v1/targets")
        check(late1 - late0 == 0, "scrape ticks were late while /api/v1/targets was served")

        # A reload that removes the job being streamed, between two parts:
        # the answer goes on with the jobs that are left and stays valid JSON.
        c = http.client.HTTPConnection("127.0.0.1", sport, timeout=30)
        c.request("GET", "/api/v1/targets")
        r = c.getresponse()
        head = r.read(256 * 1024)
        check(b'"scrapePool":"big"' in head, "the first part is not from job big")
        with open(p.config_path, "w") as f:
            f.write(config(sport, dead, os.path.join(tmp, "sink")).replace("job-name: big\n", "job-name: gone\n", 1)
                    .replace("application: big\n", "application: gone\n", 1))
        reloads = metric_value(metrics(sport), "proflet_config_reloads_total", result="success") or 0
        p.send_signal(signal.SIGHUP)
        wait_for("the reload", lambda: metric_value(metrics(sport), "proflet_config_reloads_total",
                                                    result="success") == reloads + 1)
        doc = json.loads(head + r.read())
        c.close()
        pools = {t["scrapePool"] for t in doc["data"]["activeTargets"]}
        check(pools <= {"big", "gone", "big2", "ticker"} and "big2" in pools and "ticker" in pools,
              f"pools after a reload mid-answer: {pools}")
        check(set(doc["data"]["droppedTargetCounts"]) == {"gone", "big2", "ticker"},
              f"counts after the reload: {doc['data']['droppedTargetCounts']}")
        check(stop(p) == 0, "proflet did not exit cleanly")


if __name__ == "__main__":
    run_test(main)
