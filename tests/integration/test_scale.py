# SPDX-License-Identifier: Apache-2.0
"""1000 static targets on a local fixture: each is scraped once per interval
and the scrape start times are spread across the interval (the largest
burst per 100 ms is reported and bounded)."""
import collections
import json
import os
import sys

from lib import *

N = 1000
INTERVAL = 10


def main():
    with environment() as (tmp, procs):
        out = os.path.join(tmp, "ports")
        procs.start([sys.executable, os.path.join(os.path.dirname(__file__), "manyports.py"), str(N), out])
        base, cport = map(int, wait_for("fixture", lambda: open(out).read().split(), timeout=30))
        sport = free_port()
        targets = ",".join(f'"127.0.0.1:{base + i}"' for i in range(N))
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: scale
    scrape-interval: {INTERVAL}s
    scrape-timeout: 5s
    enabled-profiles: [goroutine]
    static-configs:
      - application: scale
        targets: [{targets}]
remote-write:
  - url: file://{sink}
    max-dir-bytes: 64MiB
""")
        wait_ready(sport)
        t_ready = time.time()
        # Observe two whole intervals after the first one.
        wait_for("three intervals", lambda: time.time() - t_ready >= 3 * INTERVAL + 1, timeout=3 * INTERVAL + 10)
        hits = json.loads(http_get(f"http://127.0.0.1:{cport}/stats", timeout=30)[1])
        w0, w1 = t_ready + INTERVAL, t_ready + 3 * INTERVAL
        per_port = collections.Counter()
        buckets = collections.Counter()
        for port, times in hits.items():
            for t in times:
                if w0 <= t < w1:
                    per_port[port] += 1
                    buckets[int(t * 10)] += 1
        check(len(hits) == N, f"only {len(hits)} of {N} targets were scraped")
        bad = {p_: c for p_, c in per_port.items() if c != 2}
        missing = N - len(per_port)
        # A scrape right at the window's edge may fall on either side: allow 1 +/- 1 at the edges,
        # but nearly every target must show exactly one scrape per interval.
        check(missing == 0, f"{missing} targets not scraped in a 2-interval window")
        check(len(bad) <= N // 100, f"{len(bad)} targets not scraped exactly twice in two intervals: {list(bad.items())[:5]}")
        burst = max(buckets.values())
        mean = sum(buckets.values()) / (2 * INTERVAL * 10)
        print(f"largest burst per 100 ms: {burst} scrapes (mean {mean:.1f})")
        check(burst <= 5 * mean, f"scrapes bunch up: {burst} in one 100 ms bucket (mean {mean:.1f})")
        m = metrics(sport)
        check(metric_value(m, "proflet_scrape_pairs") == N, "pair count")
        check((metric_value(m, "proflet_scrape_skipped_ticks_total", job="scale") or 0) == 0, "skipped ticks")
        check(stop(p) == 0, "exit status after SIGTERM")


run_test(main)
