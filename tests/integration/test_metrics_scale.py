# SPDX-License-Identifier: Apache-2.0
"""/metrics with 4,000 jobs (two profile types each; about 6 KB of series a
job, 25 MB in all) is streamed part by part: a full read passes `promtool
check metrics` and holds every job's series once, 20 clients that ask for
it and read nothing raise the peak RSS by a bounded amount, and neither
the reads nor the unread answers stall the event loop past the watchdog's
limit (lib.LOOP_LAG_MAX). Built whole on the loop, one answer took
0.3-0.9 s of the loop's CPU and 25 MB per client."""
import os
import re
import subprocess

from lib import *

# Under ASan starting 4,000 jobs takes minutes; 2,000 show the same.
N = int(os.environ.get("PROFLET_METRICS_JOBS") or (2000 if sanitized() else 4000))


def config(sport, dead, sink):
    out = [f"server:\n  listen-address: 127.0.0.1:{sport}\nscrape-configs:\n"]
    for i in range(N):
        out.append(f"""  - job-name: job{i}
    scrape-interval: 5m
    enabled-profiles: [goroutine, memory]
    static-configs:
      - targets: [127.0.0.1:{dead}]
""")
    out.append(f"remote-write:\n  - url: file://{sink}\n")
    return "".join(out)


def main():
    with environment() as (tmp, procs):
        sport, dead = free_port(), free_port()
        p = start_proflet(tmp, procs, config(sport, dead, os.path.join(tmp, "sink")))
        wait_for("proflet ready", lambda: alive(p) and http_get(f"http://127.0.0.1:{sport}/-/ready")[0] == 200,
                 timeout=300)
        wait_for("every pair", lambda: metric_value(metrics(sport), "proflet_scrape_pairs") == 2 * N, timeout=300)

        code, body = http_get(f"http://127.0.0.1:{sport}/metrics", timeout=120)
        text = body.decode() if isinstance(body, bytes) else body
        check(code == 200, f"/metrics answered {code}")
        print(f"/metrics: {len(text)} bytes for {N} jobs")
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        check(r.returncode == 0, f"promtool check metrics failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        for name in ("proflet_scrapes_total", "proflet_scrape_dropped_targets", "proflet_discovery_targets"):
            jobs = re.findall(r'^' + name + r'\{job="(job\d+)"', text, re.M)
            check(len(set(jobs)) == N, f"{name}: {len(set(jobs))} jobs, want {N}")
        check(metric_value(text, "proflet_discovery_targets", job=f"job{N - 1}", provider="static") == 1,
              "the last job's discovered targets")

        base = peak_rss(p.pid)
        conns = []
        try:
            for _ in range(20):
                conns.append(unread_request(sport, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"))
            # The server serves them in turns while this read goes through.
            code, body = http_get(f"http://127.0.0.1:{sport}/metrics", timeout=120)
            check(code == 200 and len(body) > len(text) // 2, "a read while others wait was cut")
            peak = peak_rss(p.pid)
        finally:
            for s in conns:
                s.close()
        grown = (peak - base) / 2**20
        print(f"20 unread /metrics: peak RSS {base / 2**20:.1f} -> {peak / 2**20:.1f} MiB (+{grown:.1f})")
        check(grown < (48 + 256 if sanitized() else 48), f"peak RSS grew {grown:.1f} MiB with 20 unread /metrics")

        check(stop(p, timeout=60) == 0, "exit status after SIGTERM")
        busy = getattr(p, "lag_seen", None)
        check(busy is not None, "no loop-lag figure in the log")
        print(f"longest loop stall {busy * 1000:.0f} ms on the CPU")


run_test(main)
