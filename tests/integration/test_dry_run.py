# SPDX-License-Identifier: Apache-2.0
"""A dry run touches nothing: `proflet targets` (with and without
--show-dropped) runs discovery and relabeling only, and `--check-config`
opens no connection at all.

300 static targets and a file-SD target point at one loopback listener that
counts every accepted connection, with every profile type enabled and a 1 s
interval (so a pair's first scrape would fall inside the dry run's window);
remote-write points at a second counting listener and at a directory. Both
counts must stay 0, and the directory must not be created."""
import json
import os
import socket
import subprocess
import threading

from lib import *


class CountingListener:
    """Accepts on 127.0.0.1 and counts connections; answers nothing."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)
        self.sock.close()


def config(tmp, target_port, remote_port):
    sd = os.path.join(tmp, "sd.json")
    with open(sd, "w") as f:
        json.dump([{"targets": [f"127.0.0.1:{target_port}"], "labels": {"from": "file"}}], f)
    statics = "\n".join(
        f"""      - targets: ["127.0.0.1:{target_port}"]
        labels: {{n: "{i}"}}""" for i in range(300))
    return f"""
scrape-configs:
  - job-name: fast
    scrape-interval: 1s
    enabled-profiles: [mem, goroutines, mutex, block, godeltaprof_memory, godeltaprof_mutex, godeltaprof_block]
    static-configs:
{statics}
    file-sd-configs: [{{files: ["{sd}"]}}]
    relabel-configs:
      - source-labels: [n]
        regex: "1.*"
        action: drop
  - job-name: durations
    scrape-interval: 2s
    enabled-profiles: [cpu, fgprof, mem, goroutines, mutex, block]
    static-configs:
{statics}
remote-write:
  - url: http://127.0.0.1:{remote_port}
  - url: file://{tmp}/sink
spool: {{dir: {tmp}/spool}}
"""


def main():
    targets, remote = CountingListener(), CountingListener()
    try:
        with environment() as (tmp, procs):
            cfg = os.path.join(tmp, "proflet.yaml")
            with open(cfg, "w") as f:
                f.write(config(tmp, targets.port, remote.port))

            r = subprocess.run([PROFLET, "--check-config", cfg], capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"--check-config rejected the config: {r.stderr}")

            for extra in ([], ["--show-dropped"]):
                r = subprocess.run([PROFLET, "targets", "--config", cfg, *extra],
                                   capture_output=True, text=True, timeout=60)
                check(r.returncode == 0, f"proflet targets {extra} failed: {r.stderr}")
                out = json.loads(r.stdout)
                kept = [t for t in out if not t.get("dropped")]
                # fast: 300 static minus the 111 whose n starts with 1, plus
                # the file target; durations: all 300.
                check(len(kept) == 189 + 1 + 300, f"{extra}: {len(kept)} kept targets")
                if extra:
                    check(len(out) - len(kept) == 111, f"--show-dropped lists {len(out) - len(kept)} dropped")
                check("scrape failed" not in r.stderr, f"a dry run scraped: {r.stderr[:500]}")

            check(targets.accepted == 0, f"the dry run connected to targets {targets.accepted} times")
            check(remote.accepted == 0, f"the dry run connected to remote-write {remote.accepted} times")
            check(not os.path.exists(os.path.join(tmp, "sink")), "the dry run created the directory sink")
            check(not os.path.exists(os.path.join(tmp, "spool")), "the dry run created the spool")
    finally:
        targets.close()
        remote.close()


run_test(main)
