# SPDX-License-Identifier: Apache-2.0
"""target-sampling and target-limit on a real proflet with file SD: 40
targets in 4 groups at max-per-group 3 give 12 scraped targets; removing a
chosen one brings exactly one replacement and leaves the other 11; adding
40 more keeps the chosen 12; a job over its target-limit scrapes nothing
and says why. The targets are loopback addresses nothing listens on: only
the choice is under test."""
import json
import os

from lib import *


def write_sd(path, targets):
    groups = {}
    for port, grp in targets:
        groups.setdefault(grp, []).append(f"127.0.0.1:{port}")
    doc = [{"targets": t, "labels": {"grp": g}} for g, t in sorted(groups.items())]
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f)
    os.rename(path + ".tmp", path)


def active(sport, job):
    _, body = http_get(f"http://127.0.0.1:{sport}/api/v1/targets?job={job}")
    data = json.loads(body)["data"]
    return ({t["labels"]["instance"]: t["labels"]["grp"] for t in data["activeTargets"]},
            data["droppedTargets"])


def main():
    with environment() as (tmp, procs):
        sport = free_port()
        sd, lim = os.path.join(tmp, "sd.json"), os.path.join(tmp, "lim.json")
        targets = [(20000 + i, f"g{i % 4}") for i in range(40)]
        write_sd(sd, targets)
        write_sd(lim, [(21000 + i, "x") for i in range(10)])
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: sampled
    scrape-interval: 60s
    enabled-profiles: [goroutine]
    file-sd-configs: [{{files: [{sd}], refresh-interval: 1s}}]
    target-sampling: {{group-by: [grp], max-per-group: 3}}
  - job-name: limited
    scrape-interval: 60s
    enabled-profiles: [goroutine]
    target-limit: 5
    file-sd-configs: [{{files: [{lim}], refresh-interval: 1s}}]
remote-write:
  - url: file://{tmp}/sink
""")
        wait_ready(sport)
        first = wait_for("12 sampled targets", lambda: (a := active(sport, "sampled")[0]) and len(a) == 12 and a)
        for g in range(4):
            check(sum(1 for v in first.values() if v == f"g{g}") == 3, f"3 of group g{g}: {first}")
        text = metrics(sport)
        check(metric_value(text, "proflet_scrape_sampled_out_targets", job="sampled") == 28,
              "28 targets left out")
        _, dropped = active(sport, "sampled")
        check(any("not sampled" in d.get("dropReason", "") for d in dropped), "left out targets say why")

        # Remove one chosen target: exactly one replacement, in its group.
        gone = sorted(first)[0]
        write_sd(sd, [t for t in targets if f"127.0.0.1:{t[0]}" != gone])
        second = wait_for("a replacement", lambda: (a := active(sport, "sampled")[0]) and gone not in a
                          and len(a) == 12 and a, timeout=20)
        new = set(second) - set(first)
        check(len(new) == 1 and second[new.pop()] == first[gone], f"one replacement in {first[gone]}")
        check(set(first) - {gone} <= set(second), "the other chosen targets stay")

        # Add 40 more targets in the same groups: the chosen stay.
        more = targets + [(20100 + i, f"g{i % 4}") for i in range(40)]
        write_sd(sd, [t for t in more if f"127.0.0.1:{t[0]}" != gone])
        wait_for("80 targets known", lambda: metric_value(metrics(sport), "proflet_scrape_sampled_out_targets",
                                                          job="sampled") == 67, timeout=20)
        check(active(sport, "sampled")[0] == second, "adding targets changed the choice")

        # Over its limit: nothing scraped, visible.
        text = metrics(sport)
        check(metric_value(text, "proflet_scrape_target_limit_exceeded", job="limited") == 1, "limit flagged")
        act, dropped = active(sport, "limited")
        check(not act, f"an over-limit job scrapes nothing: {act}")
        check(any("target-limit exceeded: 10 targets, limit 5" in d.get("dropReason", "") for d in dropped),
              f"the reason is shown: {dropped[:1]}")
        write_sd(lim, [(21000 + i, "x") for i in range(5)])
        wait_for("the job under its limit again", lambda: len(active(sport, "limited")[0]) == 5, timeout=20)
        check(metric_value(metrics(sport), "proflet_scrape_target_limit_exceeded_total", job="limited") == 1,
              "one excess counted")
        code = stop(p)
        check(code == 0, f"exit status {code}")


run_test(main)
