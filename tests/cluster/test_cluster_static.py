# SPDX-License-Identifier: Apache-2.0
"""Static membership with real processes, and reloads: two replicas with
`peers: [a, b]` split 20 loopback targets (each scraped by exactly one);
reloading a's configuration to `peers: [a]` makes a own everything while
the targets it had keep their pairs; a configuration whose `self` is not a
peer is refused and the running one kept."""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lib import *  # noqa: E402,F403

N = 20


def config(sport, base, self_name, peers, sink):
    targets = ", ".join(f'"127.0.0.1:{base + i}"' for i in range(N))
    return f"""
server:
  listen-address: 127.0.0.1:{sport}
clustering:
  enabled: true
  self: {self_name}
  peers: [{", ".join(peers)}]
scrape-configs:
  - job-name: shared
    scrape-interval: 1s
    scrape-timeout: 500ms
    enabled-profiles: [goroutine]
    static-configs:
      - targets: [{targets}]
remote-write:
  - url: file://{sink}
"""


def active(sport):
    d = json.loads(http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1])["data"]
    return {t["labels"]["instance"] for t in d["activeTargets"]}


def main():
    with environment() as (tmp, procs):
        out = os.path.join(tmp, "ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "integration", "manyports.py"), str(N), out])
        base, _ = map(int, wait_for("fixture", lambda: open(out).read().split(), timeout=30))
        instances = {f"127.0.0.1:{base + i}" for i in range(N)}
        sa, sb = free_port(), free_port()
        sink_a = os.path.join(tmp, "sink-a")
        a = start_proflet(tmp, procs, config(sa, base, "a", ["a", "b"], sink_a), name="a", extra=("--web.enable-lifecycle",))
        b = start_proflet(tmp, procs, config(sb, base, "b", ["a", "b"], os.path.join(tmp, "sink-b")), name="b")
        wait_ready(sa)
        wait_ready(sb)
        wait_for("a and b to split the targets", lambda: active(sa) | active(sb) == instances)
        ta, tb = active(sa), active(sb)
        check(not (ta & tb), f"scraped by both: {ta & tb}")
        check(ta and tb, f"one replica owns nothing: a {len(ta)}, b {len(tb)}")
        check(metric_value(metrics(sa), "proflet_cluster_peers") == 2, "a sees 2 peers")

        # a alone: it takes b's targets and keeps its own pairs.
        created = metric_value(metrics(sa), "proflet_scrape_pairs_created_total")
        with open(a.config_path, "w") as f:
            f.write(config(sa, base, "a", ["a"], sink_a))
        a.send_signal(signal.SIGHUP)
        wait_for("a to own everything", lambda: active(sa) == instances)
        m = metrics(sa)
        check(metric_value(m, "proflet_scrape_pairs_created_total") - created == len(tb),
              "a started pairs only for the targets it gained")
        check(metric_value(m, "proflet_cluster_peers") == 1, "a sees 1 peer")

        # A name that is not a peer is refused at load; the running view stays.
        reloads = metric_value(m, "proflet_config_reloads_total", result="failure")
        with open(a.config_path, "w") as f:
            f.write(config(sa, base, "c", ["a", "b"], sink_a))
        code, _ = http_post(f"http://127.0.0.1:{sa}/-/reload")
        check(code == 500, f"reload with self outside peers answered {code}")
        m = metrics(sa)
        check(metric_value(m, "proflet_config_reloads_total", result="failure") == reloads + 1, "counted")
        check(active(sa) == instances, "the running configuration stays in force")
        check(stop(a) == 0 and stop(b) == 0, "exit status after SIGTERM")


run_test(main)
