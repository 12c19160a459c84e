# SPDX-License-Identifier: Apache-2.0
"""Reloads of a configuration of 10,000 jobs (one static target, two
profile types each: 20,000 pairs) keep the event loop running: the file
is loaded off the loop, a job whose settings did not change keeps what was
built for it (nothing is relabeled again), and the first discovery sync of
every job is built a slice per loop turn, so neither start-up, nor an
unchanged SIGHUP, nor a burst of them, nor one that changes a job stalls
the loop past the watchdog's limit (lib.LOOP_LAG_MAX), and the new
configuration is in force after it. A burst of SIGHUPs sent while a load
runs is coalesced into one more load. POST /-/reload is loaded off the
loop the same way and answered once its load is applied: two at once
both say 200, and the change they asked for is in force when they do.

The figures, before and after the apply kept unchanged jobs, are in
docs/benchmarks.md "Reloads". Under ASan the load alone takes
several seconds a reload, so the test runs 2,000 jobs there.
PROFLET_RELOAD_JOBS sets the number of jobs; the figures are printed."""
import os
import re
import signal
import threading

import lib
from lib import *

N = int(os.environ.get("PROFLET_RELOAD_JOBS") or (2000 if lib._sanitized_build() else 10000))


def config(sport, dead, sink, env):
    """`env` is the label of job0's target; every other job's is "a"."""
    out = [f"""server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
"""]
    # A long interval: the scrapes (refused at once) are not under test.
    for i in range(N):
        out.append(f"""  - job-name: job{i}
    scrape-interval: 5m
    enabled-profiles: [goroutine, memory]
    static-configs:
      - targets: [127.0.0.1:{dead}]
        labels:
          env: {env if i == 0 else "a"}
""")
    out.append(f"remote-write:\n  - url: file://{sink}\n")
    return "".join(out)


def reloads(p):
    with open(p.log_path, errors="replace") as f:
        return len(re.findall(r'msg="configuration reloaded" trigger=SIGHUP', f.read()))


def env_of(sport, job):
    body = json.loads(http_get(f"http://127.0.0.1:{sport}/api/v1/targets?job={job}", timeout=30)[1])
    active = body["data"]["activeTargets"]
    return active[0]["labels"].get("env") if active else None


def main():
    with environment() as (tmp, procs):
        sport, dead = free_port(), free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, config(sport, dead, sink, "a"), extra=("--web.enable-lifecycle",))
        wait_for("proflet ready", lambda: alive(p) and http_get(f"http://127.0.0.1:{sport}/-/ready")[0] == 200,
                 timeout=300)
        wait_for("every job's targets", lambda: env_of(sport, f"job{N - 1}") == "a", timeout=300)

        # Unchanged reloads, one at a time.
        for i in range(2):
            n = reloads(p)
            p.send_signal(signal.SIGHUP)
            wait_for(f"unchanged reload {i + 1}", lambda: alive(p) and reloads(p) > n, timeout=300)

        # A burst while a load runs: the load, then one more for the rest.
        n = reloads(p)
        for _ in range(5):
            p.send_signal(signal.SIGHUP)
        wait_for("the burst's reloads", lambda: alive(p) and reloads(p) > n, timeout=300)
        # A change now is loaded after whatever the burst still runs.
        # Whole or not at all, for a load that may be reading it.
        with open(p.config_path + ".new", "w") as f:
            f.write(config(sport, dead, sink, "b"))
        os.replace(p.config_path + ".new", p.config_path)
        p.send_signal(signal.SIGHUP)
        wait_for("the new label on the first job", lambda: alive(p) and env_of(sport, "job0") == "b",
                 timeout=300)
        check(env_of(sport, f"job{N - 1}") == "a", "the last job's label changed")
        burst = reloads(p) - n
        check(2 <= burst <= 3, f"5 SIGHUPs and 1 more made {burst} reloads: not coalesced")

        # Two POSTs at once, after a change: each is answered once a load
        # that read the change is applied, not before and not on the loop.
        with open(p.config_path + ".new", "w") as f:
            f.write(config(sport, dead, sink, "c"))
        os.replace(p.config_path + ".new", p.config_path)
        codes = []
        posts = [threading.Thread(target=lambda: codes.append(
            http_post(f"http://127.0.0.1:{sport}/-/reload", timeout=300)[0])) for _ in range(2)]
        for t in posts:
            t.start()
        for t in posts:
            t.join(timeout=310)
        check(codes == [200, 200], f"two POST /-/reload answered {codes}")
        check(env_of(sport, "job0") == "c", "POST /-/reload answered before its change was applied")

        check(stop(p, timeout=60) == 0, "exit status after SIGTERM")
        busy, wall = getattr(p, "lag_seen", None), getattr(p, "lag_wall", None)
        check(busy is not None, "no loop-lag figure in the log")
        print(f"{N} jobs, {reloads(p)} reloads: longest loop stall {busy * 1000:.0f} ms on the CPU, "
              f"{wall * 1000:.0f} ms wall clock")
        check(busy <= LOOP_LAG_MAX, f"the loop stalled {busy * 1000:.0f} ms during reloads "
                                    f"(limit {LOOP_LAG_MAX * 1000:.0f} ms)")


run_test(main)
