# SPDX-License-Identifier: Apache-2.0
"""proflet end to end with the Pyroscope push protocol: a real Go service
scraped every second, two remote-write endpoints of which one is dead. The
live receiver (tests/receiver/receiver.py, which decodes every PushRequest
with protoc-generated modules) gets every profile, each ID once, with the
right labels and the tenant header; the dead endpoint delays neither the
live one nor any scrape (no skipped tick, low start lateness)."""
import json
import os
import subprocess
import sys

from lib import *


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        rx = procs.start([sys.executable, os.path.join(SRC, "tests", "receiver", "receiver.py")],
                         stdout=subprocess.PIPE, text=True)
        info = json.loads(rx.stdout.readline())
        dead = free_port()  # nothing listens there: connections are refused
        sport = free_port()
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
external-labels:
  cluster: e2e
scrape-configs:
  - job-name: push
    scrape-interval: 1s
    enabled-profiles: [goroutine, mem]
    static-configs:
      - application: pushed
        targets: [127.0.0.1:{port}]
remote-write:
  - url: http://127.0.0.1:{info['port']}
    name: live
    tenant-id: team-a
    batch:
      max-wait: 200ms
  - url: http://127.0.0.1:{dead}
    name: dead
    min-backoff: 100ms
    max-backoff: 1s
""")
        wait_ready(sport)

        def accepted():
            return json.loads(http_get(f"http://127.0.0.1:{info['control']}/accepted")[1])

        wait_for("10 goroutine profiles at the live receiver",
                 lambda: sum(1 for x in accepted()["profiles"] if x["labels"].get("__name__") == "goroutine") >= 10,
                 timeout=30)
        m = metrics(sport)
        produced = metric_value(m, "proflet_profiles_produced_total")
        code = stop(p)
        check(code == 0, f"exit status {code}")
        got = accepted()
        ids = [x["id"] for x in got["profiles"]]
        check(len(ids) == len(set(ids)), "a profile was delivered twice")
        check(len(ids) >= produced, f"live endpoint got {len(ids)} of {produced} produced profiles")
        for x in got["profiles"]:
            l = x["labels"]
            check(l.get("service_name") == "pushed" and l.get("cluster") == "e2e" and l.get("job") == "push", l)
            check(l.get("__name__") in ("goroutine", "memory"), l)
        reqs = json.loads(http_get(f"http://127.0.0.1:{info['control']}/requests")[1])
        seen = reqs if isinstance(reqs, list) else reqs.get("requests", [])
        check(seen, "no request log at the receiver")
        hdrs = json.dumps(seen[0]).lower()
        check("x-scope-orgid" in hdrs and "team-a" in hdrs, f"tenant header missing: {seen[0]}")
        check("/push.v1.pusherservice/push" in hdrs, f"push path: {seen[0]}")
        check((metric_value(m, "proflet_scrape_skipped_ticks_total") or 0) == 0, "scrapes were skipped")
        le = [l for l in m.splitlines() if l.startswith('proflet_scrape_start_lateness_seconds_bucket{le="0.025"}')]
        total = metric_value(m, "proflet_scrape_start_lateness_seconds_count")
        late_ok = float(le[0].rsplit(" ", 1)[1]) if le else 0
        check(total and late_ok / total >= 0.95, f"only {late_ok}/{total} ticks started within 25 ms")


run_test(main)
