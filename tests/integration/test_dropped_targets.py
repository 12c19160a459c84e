# SPDX-License-Identifier: Apache-2.0
"""Dropped targets: /api/v1/targets lists at most keep-dropped-targets of a
job's dropped targets and counts all of them (droppedTargetCounts, and the
proflet_scrape_dropped_targets metric); the kept targets show the same
discovered and final labels in /api/v1/targets as `proflet targets` prints,
although the scrape manager no longer stores its own copies of them."""
import html
import json
import os
import re
import signal
import subprocess

from lib import *

CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: files
    scrape-interval: 1h
    enabled-profiles: [goroutine]
    keep-dropped-targets: {keep}
    file-sd-configs: [{{files: ["{sd}"]}}]
    relabel-configs:
      - source-labels: [n]
        regex: "[0-3]."
        action: drop
      - source-labels: [n]
        target-label: number
remote-write:
  - url: file://{sink}
"""


def main():
    with environment() as (tmp, procs):
        sd = os.path.join(tmp, "sd.json")
        with open(sd, "w") as f:
            json.dump([{"targets": [f"127.0.0.{2 + i}:9"],
                        "labels": {"n": f"{i:02d}", "team": "t" if i % 2 else "u"}}
                       for i in range(50)], f)
        sport = free_port()
        text = CONFIG.format(sport=sport, sd=sd, sink=os.path.join(tmp, "sink"), keep=5)
        p = start_proflet(tmp, procs, text)
        wait_ready(sport)

        def api():
            return json.loads(http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1])["data"]

        data = wait_for("all 50 targets", lambda: (lambda d: d if len(d["activeTargets"]) == 10 else None)(api()))
        check(len(data["droppedTargets"]) == 5, f"{len(data['droppedTargets'])} dropped listed, want 5")
        check(data["droppedTargetCounts"] == {"files": 40}, f"droppedTargetCounts {data['droppedTargetCounts']}")
        check(metric_value(metrics(sport), "proflet_scrape_dropped_targets", job="files") == 40,
              "proflet_scrape_dropped_targets is not 40")
        for t in data["droppedTargets"]:
            check(int(t["discoveredLabels"]["n"]) < 40 and t["discoveredLabels"]["job"] == "files",
                  f"a listed dropped target is not one the rules drop: {t}")

        # The kept ones: the same labels proflet targets prints.
        r = subprocess.run([PROFLET, "targets", "--config", p.config_path], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0, f"proflet targets: {r.stderr}")
        printed = {t["discoveredLabels"]["__address__"]: t for t in json.loads(r.stdout)}
        check(len(printed) == 10, f"proflet targets printed {len(printed)} targets")
        for t in data["activeTargets"]:
            want = printed[t["discoveredLabels"]["__address__"]]
            check(t["discoveredLabels"] == want["discoveredLabels"],
                  f"discoveredLabels differ:\n api {t['discoveredLabels']}\n cli {want['discoveredLabels']}")
            public = {k: v for k, v in want["labels"].items() if not k.startswith("__")}
            got = {k: v for k, v in t["labels"].items() if k in public}
            check(got == public, f"labels differ:\n api {t['labels']}\n cli {want['labels']}")
            check(t["labels"]["number"] == t["discoveredLabels"]["n"], f"rule result missing: {t}")

        # The service discovery page shows the same labels: every kept
        # target's discovered set, and its public labels.
        page = http_get(f"http://127.0.0.1:{sport}/service-discovery")[1].decode()
        rows = re.findall(r'<tr class="t" data-health="kept"><td>(.*?)</td><td>(.*?)</td></tr>', page)

        def spans(cell):
            return dict(html.unescape(m).split("=", 1) for m in re.findall(r'<span class="l">(.*?)</span>', cell))

        shown = {spans(d)["__address__"]: (spans(d), spans(l)) for d, l in rows}
        check(len(shown) == 10, f"the service discovery page lists {len(shown)} kept targets, want 10")
        for t in data["activeTargets"]:
            disc, final = shown[t["discoveredLabels"]["__address__"]]
            check(disc == t["discoveredLabels"], f"page and API differ:\n page {disc}\n api {t['discoveredLabels']}")
            public = {k: v for k, v in t["labels"].items() if not k.startswith("__")}
            check(final == public, f"page and API final labels differ:\n page {final}\n api {public}")

        # keep-dropped-targets: 0 lists every dropped target, as Prometheus'.
        with open(p.config_path, "w") as f:
            f.write(CONFIG.format(sport=sport, sd=sd, sink=os.path.join(tmp, "sink"), keep=0))
        p.send_signal(signal.SIGHUP)
        wait_for("the reload", lambda: metric_value(metrics(sport), "proflet_config_reloads_total",
                                                    result="success") == 1)
        data = api()
        check(len(data["droppedTargets"]) == 40 and len(data["activeTargets"]) == 10,
              f"after reload: {len(data['droppedTargets'])} dropped, {len(data['activeTargets'])} active")
        check(stop(p) == 0, "proflet did not exit 0")


run_test(main)
