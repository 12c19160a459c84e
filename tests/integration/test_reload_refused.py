# SPDX-License-Identifier: Apache-2.0
"""A configuration that loads but cannot be applied (here a job whose
in-cluster Kubernetes discovery has no KUBERNETES_SERVICE_HOST) fails the
reload as an invalid file does: counted, logged, and the running
configuration goes on with its targets. At start-up it fails start-up, so
--check-config, start-up and reload agree on what runs."""
import os
import signal
import subprocess

from lib import *

CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: keep
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - targets: [127.0.0.1:{port}]
{more}
remote-write:
  - url: file://{sink}
"""

CLUSTER = """
  - job-name: cluster
    kubernetes-sd-configs:
      - role: pod
"""


def main():
    for k in [k for k in os.environ if k.startswith("KUBERNETES_")]:
        del os.environ[k]  # proflet and its children run outside a cluster
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        bad = os.path.join(tmp, "bad.yaml")
        with open(bad, "w") as f:
            f.write(CONFIG.format(sport=sport, port=port, sink=sink, more=CLUSTER))

        # Start-up with it fails, naming the job.
        r = subprocess.run([PROFLET, "--config", bad], capture_output=True, text=True, timeout=30)
        check(r.returncode == 2, f"start-up with an unappliable config exited {r.returncode}")
        check("cluster" in r.stderr and "KUBERNETES_SERVICE_HOST" in r.stderr,
              f"start-up does not say why: {r.stderr[-500:]}")

        p = start_proflet(tmp, procs, CONFIG.format(sport=sport, port=port, sink=sink, more=""))
        wait_ready(sport)

        def scrapes():
            return metric_value(metrics(sport), "proflet_scrapes_total", job="keep") or 0

        wait_for("first scrapes", lambda: scrapes() >= 2, timeout=10)
        with open(bad) as src, open(p.config_path, "w") as dst:
            dst.write(src.read())
        p.send_signal(signal.SIGHUP)
        wait_for("failed reload counted",
                 lambda: metric_value(metrics(sport), "proflet_config_reloads_total", result="failure") == 1)
        m = metrics(sport)
        check(metric_value(m, "proflet_config_last_reload_successful") == 0, "reload not marked failed")
        check(metric_value(m, "proflet_scrape_pairs") == 1, "pairs changed after a refused reload")
        check(metric_value(m, "proflet_discovery_providers") == 1, "providers changed after a refused reload")
        n = scrapes()
        wait_for("scraping to go on", lambda: scrapes() >= n + 2, timeout=10)
        with open(p.log_path) as f:
            log = f.read()
        check("configuration reload failed" in log and "KUBERNETES_SERVICE_HOST" in log,
              f"the refused reload is not logged with its reason: {log[-800:]}")
        check(stop(p) == 0, "proflet did not exit 0")


run_test(main)
