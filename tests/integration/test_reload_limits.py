# SPDX-License-Identifier: Apache-2.0
"""Reloading `limits`: the new limits apply to the next scrapes, without a
restart. A heap target whose profile (750 samples) is over max-samples
fails every scrape as too large; a reload that raises max-samples and
changes memory-budget makes its scrapes succeed and shows the new budget,
while a changed `workers` is kept for the next start and said so in the
log."""
import os
import signal

from lib import *
from http_peers import serve_bytes

HEAP = os.path.join(SRC, "tests", "bench", "pprof", "corpus")


def serve_heaps():
    """A loopback target answering /debug/pprof/allocs with the two heap
    profiles of the corpus in turn, then the second (cumulative: it grew)."""
    bodies = [open(os.path.join(HEAP, f"heap.{i}.pb.gz"), "rb").read() for i in (1, 2)]
    served = []

    def next_heap():
        served.append(1)
        return bodies[min(len(served), 2) - 1]

    return serve_bytes({"/debug/pprof/allocs": next_heap})


CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
limits:
  max-samples: {samples}
  memory-budget: {budget}
  workers: {workers}
scrape-configs:
  - job-name: heap
    scrape-interval: 1s
    enabled-profiles: [mem]
    static-configs:
      - application: heap
        targets: [127.0.0.1:{port}]
remote-write:
  - url: file://{sink}
"""


def main():
    with environment() as (tmp, procs):
        srv = serve_heaps()
        sport = free_port()
        cfg = dict(sport=sport, port=srv.server_address[1], sink=os.path.join(tmp, "sink"))
        p = start_proflet(tmp, procs, CONFIG.format(samples=100, budget="8MiB", workers=2, **cfg))
        wait_ready(sport)

        def failures():
            return metric_value(metrics(sport), "proflet_scrape_failures_total", job="heap", type="memory",
                                reason="too_large") or 0

        wait_for("scrapes refused by max-samples 100", lambda: failures() >= 2, timeout=20)
        text = metrics(sport)
        check(metric_value(text, "proflet_worker_memory_budget_bytes") == 8 << 20, "budget is not 8 MiB")
        for name in ("proflet_delta_baselines_total", "proflet_profiles_produced_total"):
            check(not metric_value(text, name, job="heap", type="memory"),
                  f"a profile over max-samples was used ({name})")

        with open(p.config_path, "w") as f:
            f.write(CONFIG.format(samples=1000000, budget="64MiB", workers=3, **cfg))
        p.send_signal(signal.SIGHUP)
        wait_for("the reload", lambda: metric_value(metrics(sport), "proflet_config_reloads_total",
                                                     result="success") == 1, timeout=20)
        before = failures()
        wait_for("a baseline and a delta under the raised max-samples",
                 lambda: (metric_value(metrics(sport), "proflet_profiles_produced_total", job="heap",
                                       type="memory") or 0) >= 1, timeout=20)
        text = metrics(sport)
        check(metric_value(text, "proflet_delta_baselines_total", job="heap", type="memory") == 1,
              "the first profile after the reload was not the baseline")
        check(failures() <= before + 1, "scrapes still fail as too large after the reload")
        check(metric_value(text, "proflet_worker_memory_budget_bytes") == 64 << 20,
              "the reloaded memory-budget is not in effect")
        code = stop(p)
        check(code == 0, f"exit status {code}")
        log = open(p.log_path).read()
        check("limits.workers changes only at restart" in log, "the kept worker count is not said")
        srv.shutdown()


run_test(main)
