# SPDX-License-Identifier: Apache-2.0
"""Misbehaving targets (slow, 404, 500, HTML, JSON, truncated gzip, an
endless body, an oversized body, an empty body) each become that target's
error — in /api/v1/targets and in proflet_scrape_failures_total — while a
healthy Go target beside them keeps its schedule."""
import json
import os
import subprocess
import sys

from lib import *

BAD = {  # mode -> failure reason label
    "slow": "timeout",
    "404": "http_status",
    "500": "http_status",
    "html": "not_pprof",
    "json": "not_pprof",
    "truncated": "decode",
    "endless": "too_large",
    "oversized": "too_large",
    "empty": "empty",
}


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        pf = os.path.join(tmp, "bad.port")
        procs.start([sys.executable, os.path.join(os.path.dirname(__file__), "badtarget.py"), pf])
        bport = int(wait_for("bad target port", lambda: open(pf).read()))
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        jobs = "".join(f"""
  - job-name: bad-{m}
    scrape-interval: 2s
    scrape-timeout: 1s
    body-size-limit: 1MiB
    path-prefix: /{m}
    enabled-profiles: [goroutine]
    static-configs:
      - application: bad-{m}
        targets: [127.0.0.1:{bport}]
""" for m in BAD)
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: healthy
    scrape-interval: 1s
    scrape-timeout: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: healthy
        targets: [127.0.0.1:{port}]
  - job-name: ok-fixture
    scrape-interval: 2s
    path-prefix: /ok
    enabled-profiles: [goroutine]
    static-configs:
      - application: ok-fixture
        targets: [127.0.0.1:{bport}]
{jobs}
  - job-name: overlap
    scrape-interval: 1s
    scrape-timeout: 3s
    path-prefix: /slow
    enabled-profiles: [goroutine]
    static-configs:
      - application: overlap
        targets: [127.0.0.1:{bport}]
remote-write:
  - url: file://{sink}
""")
        wait_ready(sport)

        def all_failed():
            text = metrics(sport)
            for m, reason in BAD.items():
                v = metric_value(text, "proflet_scrape_failures_total", job=f"bad-{m}", reason=reason)
                if not v:
                    return False
            return text

        text = wait_for("every bad target to fail with its reason", all_failed, timeout=30)

        def targets_by_job():
            _, body = http_get(f"http://127.0.0.1:{sport}/api/v1/targets")
            return {t["scrapePool"]: t for t in json.loads(body)["data"]["activeTargets"]}

        # Each error is attached to its own target, with a message; the good
        # targets (whose first tick may come later in their interval) are up.
        by_job = wait_for("the good targets' first scrapes",
                          lambda: (lambda b: b if all(b[j]["health"] != "unknown" for j in ("healthy", "ok-fixture"))
                                   else None)(targets_by_job()), timeout=10)
        for m in BAD:
            t = by_job.get(f"bad-{m}")
            check(t is not None, f"bad-{m} missing from /api/v1/targets")
            check(t["health"] == "down" and t["lastError"], f"bad-{m}: {t}")
        for j in ("healthy", "ok-fixture"):
            check(by_job[j]["health"] == "up" and not by_job[j]["lastError"], f"{j}: {by_job[j]}")
        check("HTTP status 404" in by_job["bad-404"]["lastError"], by_job["bad-404"]["lastError"])

        # The healthy target kept its 1 s schedule while the others failed:
        # count its profiles over a 6 s window.
        def healthy_count():
            return sum(1 for _, m in sink_profiles(sink) if labels_of(m).get("service_name") == "healthy")

        before = healthy_count()
        t0 = time.monotonic()
        wait_for("6 s to pass", lambda: time.monotonic() - t0 >= 6, timeout=10)
        after = healthy_count()
        check(5 <= after - before <= 7, f"healthy target produced {after - before} profiles in 6 s")
        text = metrics(sport)
        skipped = metric_value(text, "proflet_scrape_skipped_ticks_total", job="healthy")
        check(skipped == 0, f"healthy target skipped {skipped} ticks")
        # A request that outlives its interval (timeout 3 s, interval 1 s)
        # makes the ticks that fall inside it skipped and counted, never
        # stacked: about two per 3 s request.
        overlap_skipped = metric_value(text, "proflet_scrape_skipped_ticks_total", job="overlap") or 0
        overlap_timeouts = metric_value(text, "proflet_scrape_failures_total", job="overlap", reason="timeout") or 0
        check(overlap_timeouts >= 1 and overlap_skipped >= overlap_timeouts,
              f"overlap: {overlap_skipped} skipped ticks for {overlap_timeouts} timed-out requests")
        # Nothing of the bad targets reached the sink.
        bad_profiles = [m for _, m in sink_profiles(sink) if labels_of(m).get("service_name", "").startswith("bad-")]
        check(not bad_profiles, f"bad targets produced profiles: {bad_profiles[:2]}")
        # proflet stayed small despite the 8 MiB bodies and the endless stream.
        rss_kb = int([l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmHWM")][0].split()[1])
        limit = 512 * 1024 if sanitized() else 64 * 1024
        check(rss_kb < limit, f"peak RSS {rss_kb} kB > {limit} kB")
        code = stop(p)
        check(code == 0, f"exit status {code}")


run_test(main)
