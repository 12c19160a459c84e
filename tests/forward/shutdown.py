#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""SIGTERM during an outage: the real proflet binary, a remote-write
endpoint that is down (connections refused, or a receiver answering 503),
the spool on, max-backoff 5m. Whatever the retry timers say when the signal
comes, proflet exits 0 within the documented deadline (README: up to 10 s),
and every profile it accepted is in the spool: replayed afterwards to a live
receiver by fwd_driver, each arrives exactly once.

    shutdown.py PROFLET DRIVER RECEIVER PROTO_DIR

Runs six times, alternating the two kinds of outage and signalling after a
different number of failed pushes each time (so at a different point of
the backoff), then once more with a scrape in flight that never gets an
answer (a target that accepts and stays silent, its timeout longer than the
deadline): the deadline covers waiting for it and the flush together.
Every process is bounded and cleaned up.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

PROFLET, DRIVER, RECEIVER, PROTO = sys.argv[1:5]
os.environ["PROFLET"] = PROFLET
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lib import *  # noqa: E402,F403

DEADLINE_S = 10.0  # README: "up to 10 s"
RUNS = 6

HUNG_JOB = """
  - job-name: hung
    scrape-interval: 14s
    scrape-timeout: 14s
    enabled-profiles: [goroutine]
    static-configs:
      - application: hung
        targets: [127.0.0.1:{hung}]
"""

CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: shut
    scrape-interval: 1s
    enabled-profiles: [goroutine, mem]
    static-configs:
      - application: shut
        targets: [127.0.0.1:{port}]
remote-write:
  - url: {url}
    name: ep
    min-backoff: 200ms
    max-backoff: 5m
    remote-timeout: 3s
spool:
  dir: {spool}
"""


class SilentTarget:
    """Accepts connections and never answers: a scrape of it stays in
    flight until its timeout. Counts the connections it accepted."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append((time.monotonic(), c))  # kept open, never read


def start_receiver(procs):
    rx = procs.start(["/usr/bin/python3", RECEIVER, "--proto-dir", PROTO], stdout=subprocess.PIPE,
                     text=True)
    info = json.loads(rx.stdout.readline())
    return info


def ctl(info, path, obj=None):
    data = None if obj is None else json.dumps(obj).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{info['control']}{path}", data=data,
                                 method="POST" if data is not None else "GET")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def one_run(tmp, procs, run, hung=None):
    kind = "refused" if run % 2 == 0 else "503"
    failures = 2 + run % 5  # signal at a different point of the backoff each run
    spool = os.path.join(tmp, f"spool{run}")
    if kind == "refused":
        url = f"http://127.0.0.1:{free_port()}"
    else:
        rx = start_receiver(procs)
        ctl(rx, "/faults", {"fail_next": {"count": 1 << 30, "status": 503}})
        url = f"http://127.0.0.1:{rx['port']}"
    app = start_demoapp(tmp, procs, name=f"demoapp{run}")
    app_proc = procs.procs[-1]
    sport = free_port()
    config = CONFIG.format(sport=sport, port=app, url=url, spool=spool)
    if hung:
        config = config.replace("remote-write:", HUNG_JOB.format(hung=hung.port).lstrip("\n") +
                                "remote-write:")
    p = start_proflet(tmp, procs, config, name=f"proflet{run}")
    wait_ready(sport)
    wait_for(f"{failures} failed pushes",
             lambda: (metric_value(metrics(sport), "proflet_remote_failed_requests_total") or 0)
             >= failures, timeout=60)
    # Stop production so that the count of accepted profiles is final.
    app_proc.kill()
    app_proc.wait(timeout=10)
    last = [None, 0]

    def produced_settled():
        n = metric_value(metrics(sport), "proflet_profiles_produced_total")
        now = time.monotonic()
        if n != last[0]:
            last[0], last[1] = n, now
            return False
        return now - last[1] >= 2.5  # unchanged across two scrape intervals
    wait_for("production to stop", produced_settled, timeout=30, interval=0.2)
    produced = int(last[0])
    check(produced > 0, "nothing was produced")
    if hung:
        # Signal right after a scrape of the silent target began: it stays
        # in flight for its 14 s timeout unless shutdown gives up on it.
        seen = len(hung.accepted)
        wait_for("a scrape of the silent target", lambda: len(hung.accepted) > seen, timeout=30,
                 interval=0.02)
        kind += ", a scrape in flight"
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        code = p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise TestFailure(f"run {run} ({kind}): no exit 60 s after SIGTERM")
    took = time.monotonic() - t0
    print(f"run {run} ({kind}, after {failures} failures): exit {code} in {took:.2f} s, "
          f"{produced} profiles", flush=True)
    check(code == 0, f"run {run}: exit status {code}")
    check(took <= DEADLINE_S, f"run {run} ({kind}): exit took {took:.1f} s > {DEADLINE_S} s")
    # Everything accepted is in the spool: replay it to a live receiver.
    live = start_receiver(procs)
    replay = subprocess.run([DRIVER, "--ep", f"name=ep,url=http://127.0.0.1:{live['port']}",
                             "--count", "0", "--spool", spool, "--linger-s", "30"],
                            timeout=90, capture_output=True, text=True)
    check(replay.returncode == 0, f"run {run}: replay exit {replay.returncode}: {replay.stderr}")
    got = ctl(live, "/accepted")["profiles"]
    ids = [x["id"] for x in got]
    check(len(ids) == len(set(ids)), f"run {run}: a profile was spooled twice")
    check(len(ids) == produced, f"run {run}: {len(ids)} of {produced} accepted profiles in the spool")
    for x in got:
        check(x["labels"].get("service_name") == "shut", x["labels"])
    return took


def main():
    with environment() as (tmp, procs):
        times = [one_run(tmp, procs, run) for run in range(RUNS)]
        times.append(one_run(tmp, procs, RUNS + 1, hung=SilentTarget()))  # 503: flushing waits
        print("exit times:", " ".join(f"{t:.2f}" for t in times))


run_test(main)
