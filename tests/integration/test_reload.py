# SPDX-License-Identifier: Apache-2.0
"""Reloads: SIGHUP and POST /-/reload apply a new config; an invalid one is
refused, logged, and the old one keeps running; targets that did not change
keep their timers (no new pair is created for them)."""
import os
import signal

from lib import *

CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: keep
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: keep
        targets: [127.0.0.1:{port}]
  - job-name: change
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: change
        targets: [127.0.0.1:{port}]
        labels:
          env: {env}
remote-write:
  - url: file://{sink}
"""


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, CONFIG.format(sport=sport, port=port, env="a", sink=sink),
                          extra=("--web.enable-lifecycle",))
        wait_ready(sport)
        m = metrics(sport)
        check(metric_value(m, "proflet_scrape_pairs") == 2, "expected 2 pairs")
        check(metric_value(m, "proflet_scrape_pairs_created_total") == 2, "expected 2 pairs created")

        def scrapes(job):
            return metric_value(metrics(sport), "proflet_scrapes_total", job=job) or 0

        wait_for("first scrapes", lambda: scrapes("keep") >= 2, timeout=10)

        # An invalid file is refused, through both triggers; nothing changes.
        with open(p.config_path, "w") as f:
            f.write("scrape-configs:\n  - job-name: [oops\n")
        p.send_signal(signal.SIGHUP)
        wait_for("failed reload counted",
                 lambda: metric_value(metrics(sport), "proflet_config_reloads_total", result="failure") == 1)
        code, _ = http_post(f"http://127.0.0.1:{sport}/-/reload")
        check(code == 500, f"POST /-/reload with a bad file answered {code}")
        m = metrics(sport)
        check(metric_value(m, "proflet_config_last_reload_successful") == 0, "last reload should be marked failed")
        check(metric_value(m, "proflet_scrape_pairs") == 2, "pairs changed after a failed reload")
        n = scrapes("keep")
        wait_for("scraping to go on with the old config", lambda: scrapes("keep") >= n + 2, timeout=10)
        log = open(p.log_path).read()
        check("reload failed" in log, "the failed reload was not logged")

        # A valid change to one job: only its pair is replaced.
        with open(p.config_path, "w") as f:
            f.write(CONFIG.format(sport=sport, port=port, env="b", sink=sink))
        p.send_signal(signal.SIGHUP)
        wait_for("successful reload",
                 lambda: metric_value(metrics(sport), "proflet_config_reloads_total", result="success") == 1)
        m = metrics(sport)
        check(metric_value(m, "proflet_scrape_pairs") == 2, "expected 2 pairs after reload")
        check(metric_value(m, "proflet_scrape_pairs_created_total") == 3,
              f"only the changed target should get a new pair: created={metric_value(m, 'proflet_scrape_pairs_created_total')}")
        check(metric_value(m, "proflet_scrape_pairs_removed_total") == 1, "one pair should be removed")
        wait_for("profiles with the new label",
                 lambda: any(labels_of(x).get("env") == "b" for _, x in sink_profiles(sink)), timeout=10)

        # POST /-/reload with the same (valid) file: nothing restarts.
        code, _ = http_post(f"http://127.0.0.1:{sport}/-/reload")
        check(code == 200, f"POST /-/reload answered {code}")
        m = metrics(sport)
        check(metric_value(m, "proflet_scrape_pairs_created_total") == 3, "an unchanged reload restarted pairs")
        check(stop(p) == 0, "exit status after SIGTERM")


run_test(main)
