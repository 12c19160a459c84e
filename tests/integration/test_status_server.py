# SPDX-License-Identifier: Apache-2.0
"""The status server under attack and its access rules:

- 250 connections pipelining 200 GET /metrics each and never reading: the
  peak RSS grows by a bounded amount and scrape ticks keep their timing
  (proflet_scrape_start_lateness_seconds gains no tick later than 100 ms);
- 300 slow-loris connections (heads that never end): /-/healthy still
  answers within 1 s, and a slow head is closed at the header timeout;
- POST/PUT /-/reload is 403 without --web.enable-lifecycle (SIGHUP still
  reloads) and works with it; cross-origin browser POSTs are 403.
"""
import os
import signal
import socket
import time

from lib import *

JOBS = 20
TYPES = "[memory, goroutine, mutex, block]"


def config(sport, dead, sink, header_timeout="10s"):
    jobs = "".join(f"""
  - job-name: job{i:02d}
    scrape-interval: 1s
    enabled-profiles: {TYPES}
    static-configs:
      - application: app{i:02d}
        targets: [127.0.0.1:{dead}]
""" for i in range(JOBS))
    return f"""
server:
  listen-address: 127.0.0.1:{sport}
  header-timeout: {header_timeout}
scrape-configs:{jobs}
remote-write:
  - url: file://{sink}
"""



def raw(port, data, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    return s


def request(port, head, timeout=5.0):
    """Sends a request, returns (status, seconds) of its answer."""
    t0 = time.monotonic()
    s = raw(port, head.encode(), timeout)
    try:
        line = s.makefile("rb").readline()
    finally:
        s.close()
    if not line:
        raise TestFailure(f"no answer to {head.splitlines()[0]!r}")
    return int(line.split()[1]), time.monotonic() - t0


def pipelining(sport, pid):
    """250 connections x 200 pipelined GET /metrics, never read."""
    size = len(metrics(sport).encode())
    base_hwm = peak_rss(pid)
    late0, ticks0 = late_ticks(metrics(sport))
    req = b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n" * 200
    conns = []
    try:
        for _ in range(250):
            conns.append(unread_request(sport, req))
        t0 = time.monotonic()
        # Let it serve what it will while nobody reads; ticks come every
        # 1 s for each of the 80 pairs.
        wait_for("ticks during the attack",
                 lambda: late_ticks(metrics(sport))[1] >= ticks0 + 400, timeout=30)
        attack_s = time.monotonic() - t0
        hwm = peak_rss(pid)
        late1, ticks1 = late_ticks(metrics(sport))
    finally:
        for s in conns:
            s.close()
    grown = (hwm - base_hwm) / 2**20
    print(f"pipelining: /metrics {size} B; peak RSS {base_hwm / 2**20:.1f} -> {hwm / 2**20:.1f} MiB "
          f"(+{grown:.1f}); {ticks1 - ticks0:.0f} ticks in {attack_s:.1f} s, {late1 - late0:.0f} late > 100 ms")
    # Per connection at most 64 KiB unsent + one /metrics + one 16 KiB read.
    bound = 250 * (64 * 1024 + size + 16 * 1024) / 2**20 + 16
    if sanitized():
        bound += 256  # ASan keeps freed memory in a 256 MiB quarantine
    check(grown < bound, f"peak RSS grew {grown:.1f} MiB under the pipelining attack (bound {bound:.0f})")
    check(late1 - late0 <= 2, f"{late1 - late0:.0f} scrape ticks started > 100 ms late under the attack")


def slowloris(sport):
    conns = []
    try:
        for _ in range(300):
            conns.append(raw(sport, b"GET /metrics HTTP/1.1\r\nHost: t\r\nX-a: "))
        worst = 0.0
        for _ in range(10):
            code, secs = request(sport, "GET /-/healthy HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            check(code == 200, f"/-/healthy answered {code} under slow-loris")
            worst = max(worst, secs)
        code, secs = request(sport, "GET /-/ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        check(code == 200, f"/-/ready answered {code} under slow-loris")
        worst = max(worst, secs)
        print(f"slow-loris: 300 half-open heads; /-/healthy and /-/ready answered in at most {worst * 1000:.0f} ms")
        check(worst < 1.0, f"a probe took {worst:.2f} s under slow-loris")
        # The newest slow head is closed at the header timeout (2 s here).
        last = conns[-1]
        last.settimeout(8)
        t0 = time.monotonic()
        try:
            got = last.recv(1)
        except ConnectionResetError:
            got = b""
        secs = time.monotonic() - t0
        check(got == b"", f"a slow head got {got!r} instead of a close")
        check(secs < 4.0, f"a slow head was closed after {secs:.1f} s (header timeout 2 s)")
    finally:
        for s in conns:
            s.close()


def post(sport, method="POST", headers=""):
    code, _ = request(sport, f"{method} /-/reload HTTP/1.1\r\nHost: 127.0.0.1:{sport}\r\n"
                             f"Content-Length: 0\r\n{headers}Connection: close\r\n\r\n", timeout=10)
    return code


def main():
    with environment() as (tmp, procs):
        dead = free_port()
        sport = free_port()
        p = start_proflet(tmp, procs, config(sport, dead, os.path.join(tmp, "sink"), "2s"))
        wait_ready(sport)

        # Lifecycle off: reload over HTTP refused, SIGHUP still reloads.
        check(post(sport) == 403, "POST /-/reload without --web.enable-lifecycle was not refused")
        check(post(sport, "PUT") == 403, "PUT /-/reload without --web.enable-lifecycle was not refused")
        check(metric_value(metrics(sport), "proflet_config_reloads_total", result="success") == 0,
              "a refused reload was applied")
        p.send_signal(signal.SIGHUP)
        wait_for("SIGHUP reload", lambda: metric_value(metrics(sport), "proflet_config_reloads_total",
                                                       result="success") == 1)

        slowloris(sport)
        pipelining(sport, p.pid)
        check(stop(p) == 0, "proflet did not exit cleanly")

        # Lifecycle on: reload works, but not from another origin.
        sport = free_port()
        p = start_proflet(tmp, procs, config(sport, dead, os.path.join(tmp, "sink")), name="lifecycle", extra=("--web.enable-lifecycle",))
        wait_ready(sport)
        check(post(sport) == 200, "POST /-/reload with --web.enable-lifecycle failed")
        check(post(sport, headers=f"Origin: http://127.0.0.1:{sport}\r\nSec-Fetch-Site: same-origin\r\n") == 200,
              "a same-origin POST /-/reload was refused")
        check(post(sport, headers="Origin: http://evil.example\r\n") == 403, "a cross-origin POST was accepted")
        check(post(sport, "PUT", headers="Origin: null\r\n") == 403, "an Origin: null PUT was accepted")
        check(post(sport, headers="Sec-Fetch-Site: cross-site\r\n") == 403,
              "a Sec-Fetch-Site: cross-site POST was accepted")
        check(post(sport, headers=f"Origin: http://127.0.0.1:{sport}\r\nSec-Fetch-Site: same-site\r\n") == 403,
              "a Sec-Fetch-Site: same-site POST was accepted")
        ok = metric_value(metrics(sport), "proflet_config_reloads_total", result="success")
        check(ok == 2, f"expected 2 reloads over HTTP, metrics say {ok}")
        check(stop(p) == 0, "proflet did not exit cleanly")


if __name__ == "__main__":
    run_test(main)
