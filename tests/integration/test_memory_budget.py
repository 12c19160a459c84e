# SPDX-License-Identifier: Apache-2.0
"""The memory budget: a profile whose processing would need more memory
than limits.memory-budget is refused before it is inflated (reason
over_budget, counted), proflet's peak RSS stays far below what inflating it
would take, and a healthy target beside it keeps being scraped. Raised
budget: the same profile is admitted. The profile is honest (its gzip
trailer announces the real 24 MiB); the unit tests of common/workq cover
jobs waiting for room."""
import os
import sys

from lib import *


def run(tmp, procs, bport, dport, budget):
    sport = free_port()
    sink = os.path.join(tmp, f"sink-{budget or 'default'}")
    limits = f"limits: {{memory-budget: {budget}}}\n" if budget else ""
    p = start_proflet(tmp, procs, f"""
{limits}server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: big
    scrape-interval: 1s
    path-prefix: /bigraw
    enabled-profiles: [mem]
    static-configs:
      - application: big
        targets: [127.0.0.1:{bport}]
  - job-name: healthy
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: healthy
        targets: [127.0.0.1:{dport}]
remote-write:
  - url: file://{sink}
""", name=f"proflet-{budget or 'default'}")
    wait_ready(sport)
    text = wait_for("two scrapes of the big profile", lambda: (
        (t := metrics(sport)) and (metric_value(t, "proflet_scrapes_total", job="big") or 0) >= 2 and t),
        timeout=30)
    wait_for("a healthy profile", lambda: any(
        labels_of(m).get("service_name") == "healthy" for _, m in sink_profiles(sink)), timeout=20)
    hwm_kb = int([l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmHWM")][0].split()[1])
    code = stop(p)
    check(code == 0, f"exit status {code}")
    return text, hwm_kb


def main():
    with environment() as (tmp, procs):
        dport = start_demoapp(tmp, procs)
        pf = os.path.join(tmp, "bad.port")
        procs.start([sys.executable, os.path.join(os.path.dirname(__file__), "badtarget.py"), pf])
        bport = int(wait_for("bad target port", lambda: open(pf).read()))

        # Default budget (96 MiB): a delta of 24 MiB needs about 5 x 24 MiB.
        text, hwm_kb = run(tmp, procs, bport, dport, None)
        check(metric_value(text, "proflet_worker_memory_budget_bytes") == 96 << 20,
              "the default budget is 96 MiB")
        held = metric_value(text, "proflet_worker_jobs_backlog_bytes")
        check(held is not None and 0 <= held <= 96 << 20, f"bytes held by waiting jobs: {held}")
        over = metric_value(text, "proflet_scrape_failures_total", job="big", reason="over_budget")
        check(over and over >= 1, f"the big profile was not refused as over_budget: {over}")
        check((metric_value(text, "proflet_worker_jobs_over_budget_total") or 0) >= over,
              "the worker queue counted the refusals")
        print(f"peak RSS with the profile refused: {hwm_kb} kB")
        limit_kb = (256 if sanitized() else 48) * 1024
        check(hwm_kb < limit_kb, f"peak RSS {hwm_kb} kB: the refused profile was inflated?")

        # A budget that fits it: admitted (whatever the delta then says).
        text, _ = run(tmp, procs, bport, dport, "200MiB")
        check(not metric_value(text, "proflet_scrape_failures_total", job="big", reason="over_budget"),
              "a 200 MiB budget still refused the profile")
        check(not metric_value(text, "proflet_worker_jobs_over_budget_total"),
              "a 200 MiB budget counted refusals")


run_test(main)
