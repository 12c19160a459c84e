# SPDX-License-Identifier: Apache-2.0
"""profile-relabel-configs against the real Go demo service: a rule on
__name__ drops block, another empties goroutine's __name__ (neither pair is
scraped; both are counted, each under its reason), a rule sets
a label from __name__ and __delta__ on the delta'd types only, and what
reaches the sink carries exactly that."""
import os

from lib import *


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: go
    scrape-interval: 1s
    enabled-profiles: [goroutine, mem, mutex, block]
    static-configs:
      - application: demo
        targets: [127.0.0.1:{port}]
    profile-relabel-configs:
      - source-labels: [__name__]
        regex: block
        action: drop
      - source-labels: [__name__]
        regex: goroutine
        target-label: __name__
        replacement: ""
      - source-labels: [__name__, __delta__]
        regex: (.+);false
        target-label: delta_of
        replacement: $1
remote-write:
  - url: file://{sink}
""")
        wait_ready(sport)

        def types():
            return {labels_of(m).get("__name__") for _, m in sink_profiles(sink)}

        wait_for("memory and mutex profiles", lambda: {"memory", "mutex"} <= types(), timeout=30)
        text = metrics(sport)
        code = stop(p)
        check(code == 0, f"exit status {code}")
        check(types() == {"memory", "mutex"}, f"only memory and mutex were sent: {types()}")
        check(metric_value(text, "proflet_scrape_dropped_pairs", job="go", reason="drop") == 1,
              "the dropped pair is counted under drop")
        check(metric_value(text, "proflet_scrape_dropped_pairs", job="go", reason="no_name") == 1,
              "the nameless pair is counted under no_name")
        for t in ("block", "goroutine"):
            check(not metric_value(text, "proflet_scrapes_total", job="go", type=t),
                  f"the dropped {t} pair was scraped")
        for path, meta in sink_profiles(sink):
            l = labels_of(meta)
            want = l["__name__"] if l["__name__"] in ("memory", "mutex") else None
            check(l.get("delta_of") == want, f"{path}: delta_of={l.get('delta_of')!r}, want {want!r} ({l})")


run_test(main)
