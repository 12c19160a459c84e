# SPDX-License-Identifier: Apache-2.0
"""Targets that leave take what proflet kept for them: under churn, where
every new target is a new host:port (as a new pod's IP is), proflet holds
about one kept-alive connection per live target, not one per target it
ever scraped, and the web UI keeps the recent profiles of live targets
only, not of every target it ever scraped (up to its 32 MiB cap).

A file SD file names 10 targets at a time out of 200 ports of a fixture
that keeps connections alive; the file moves on to the next 10 ports
every round, once each of the current ones has been scraped. After 20
rounds (200 distinct host:ports), the sockets proflet still holds to the
fixture are counted from /proc: about 10 live ones plus a few spare per
scrape client (8 of them), where a cache floor of 64 per client kept
nearly all 200; and proflet_ui_recent_series (the targets with profiles
kept) must be at most the 10 live ones, where it was one per target ever
scraped.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from lib import *  # noqa: E402,F403

PORTS = 200
LIVE = 10
ROUNDS = PORTS // LIVE
# 10 live connections, 4 spare for each of the 8 scrape clients, and the
# last round's departed targets on clients that have not completed a
# transfer since (at most 10).
BOUND = LIVE + 8 * 4 + LIVE


def hits(cport):
    return json.loads(http_get(f"http://127.0.0.1:{cport}/stats")[1])


def sockets_to(pid, lo, hi):
    """proflet's established TCP sockets whose remote port is in [lo, hi)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    with open(f"/proc/{pid}/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            rport = int(parts[2].split(":")[1], 16)
            if parts[3] == "01" and parts[9] in inodes and lo <= rport < hi:
                n += 1
    return n


def write_targets(path, ports):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump([{"targets": [f"127.0.0.1:{p}" for p in ports], "labels": {"round": str(ports[0])}}], f)
    os.rename(tmp, path)


def test():
    with environment() as (tmp, procs):
        out = os.path.join(tmp, "ports")
        fx = procs.start([sys.executable, os.path.join(SRC, "tests", "integration", "manyports.py"),
                          str(PORTS), out])
        base, cport = map(int, wait_for("fixture", lambda: open(out).read().split(), timeout=60))
        sd = os.path.join(tmp, "targets.json")
        write_targets(sd, [base + i for i in range(LIVE)])
        sport = free_port()
        p = start_proflet(tmp, procs, f"""
log-level: warn
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: churn
    scrape-interval: 1s
    enabled-profiles: [goroutines]
    file-sd-configs:
      - files: [{sd}]
remote-write:
  - url: file://{os.path.join(tmp, "sink")}
""")
        wait_for("proflet ready", lambda: alive(p) and http_get(f"http://127.0.0.1:{sport}/-/ready")[0] == 200,
                 timeout=30)
        peak = 0
        for r in range(ROUNDS):
            ports = [base + r * LIVE + i for i in range(LIVE)]
            if r:
                write_targets(sd, ports)
            wait_for(f"round {r}: every target scraped",
                     lambda: alive(p) and alive(fx) and all(str(q) in hits(cport) for q in ports), timeout=30)
            peak = max(peak, sockets_to(p.pid, base, base + PORTS))
        # A few more scrapes of the last round's targets, so every client
        # with a live target completes transfers after the last change.
        last = {q: len(hits(cport).get(str(q), [])) for q in ports}
        wait_for("two more scrapes of the last targets",
                 lambda: alive(p) and all(len(hits(cport).get(str(q), [])) >= last[q] + 2 for q in ports),
                 timeout=30)
        held = sockets_to(p.pid, base, base + PORTS)
        print(f"connections held to the fixture after {PORTS} targets, {LIVE} live: {held} "
              f"(peak {peak}, bound {BOUND})")
        check(held >= 1, "no connection to the live targets: the count is not measuring anything")
        check(held <= BOUND, f"{held} connections kept to the fixture for {LIVE} live targets "
                             f"(bound {BOUND}): departed targets keep theirs")
        kept = metric_value(metrics(sport), "proflet_ui_recent_series")
        print(f"targets with profiles kept for the web UI: {kept:.0f}")
        check(kept is not None and 1 <= kept <= LIVE,
              f"{kept} targets' profiles kept for the web UI with {LIVE} live targets: departed targets keep theirs")
        check(stop(p) == 0, "proflet did not exit cleanly")


run_test(test)
