# SPDX-License-Identifier: Apache-2.0
"""write-relabel-configs per remote-write endpoint, against the real Go demo
service and two push receivers (tests/receiver/receiver.py decodes every
PushRequest): one endpoint keeps only memory and mutex, the other drops
memory and rewrites a label, the external labels included, as Prometheus'
write_relabel_configs do. Each receives its own set; what a rule drops is
counted per endpoint, and the directory sink without rules gets everything."""
import json
import os
import subprocess
import sys

from lib import *


def receiver(procs):
    rx = procs.start([sys.executable, os.path.join(SRC, "tests", "receiver", "receiver.py")],
                     stdout=subprocess.PIPE, text=True)
    return json.loads(rx.stdout.readline())


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        a, b = receiver(procs), receiver(procs)
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
external-labels:
  cluster: prod-eu
scrape-configs:
  - job-name: go
    scrape-interval: 1s
    enabled-profiles: [goroutine, mem, mutex]
    static-configs:
      - application: demo
        targets: [127.0.0.1:{port}]
remote-write:
  - url: http://127.0.0.1:{a['port']}
    name: a
    batch: {{max-wait: 100ms}}
    write-relabel-configs:
      - source-labels: [__name__]
        regex: memory|mutex
        action: keep
  - url: http://127.0.0.1:{b['port']}
    name: b
    batch: {{max-wait: 100ms}}
    write-relabel-configs:
      - source-labels: [__name__]
        regex: memory
        action: drop
      - source-labels: [cluster]
        regex: prod-(.*)
        target-label: region
      - action: labeldrop
        regex: cluster
  - url: file://{sink}
""")
        wait_ready(sport)

        def accepted(rx):
            return json.loads(http_get(f"http://127.0.0.1:{rx['control']}/accepted")[1])["profiles"]

        def names(rx):
            return {x["labels"].get("__name__") for x in accepted(rx)}

        wait_for("memory and mutex at a, goroutine and mutex at b",
                 lambda: names(a) >= {"memory", "mutex"} and names(b) >= {"goroutine", "mutex"},
                 timeout=40)
        text = metrics(sport)
        code = stop(p)
        check(code == 0, f"exit status {code}")

        check(names(a) == {"memory", "mutex"}, f"endpoint a got {names(a)}")
        check(names(b) == {"goroutine", "mutex"}, f"endpoint b got {names(b)}")
        for x in accepted(a):
            check(x["labels"].get("cluster") == "prod-eu", f"a: external label lost: {x['labels']}")
        for x in accepted(b):
            check("cluster" not in x["labels"], f"b: cluster not dropped: {x['labels']}")
            check(x["labels"].get("region") == "eu", f"b: region not set from the external label: {x['labels']}")
        sunk = {labels_of(m).get("__name__") for _, m in sink_profiles(sink)}
        check(sunk >= {"goroutine", "memory", "mutex"}, f"the sink without rules got {sunk}")
        dropped_a = metric_value(text, "proflet_remote_dropped_profiles_total", endpoint="a",
                                 reason="write_relabel")
        dropped_b = metric_value(text, "proflet_remote_dropped_profiles_total", endpoint="b",
                                 reason="write_relabel")
        check(dropped_a and dropped_a >= 1, f"a's drops not counted: {dropped_a}")
        check(dropped_b and dropped_b >= 1, f"b's drops not counted: {dropped_b}")


run_test(main)
