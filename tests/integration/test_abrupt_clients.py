# SPDX-License-Identifier: Apache-2.0
"""Clients that go away abruptly, on every route of the status server.

For each route (the web UI's pages, the text and JSON views, /metrics, the
health and readiness probes, a real scraped profile's page and download,
/-/reload refused, an unknown path), a burst of clients that:

  - send a request and close at once (20 in parallel);
  - send, then half-close (shutdown(SHUT_WR)) and read a little;
  - send, then reset (SO_LINGER 0, close: an RST);
  - pipeline 50 requests and close without reading;
  - read the answer one byte at a time, a bounded number, then close;
  - give up after 50 ms, as `curl -m 0.05` does;

plain, then again with --web.config.file (TLS and basic auth) with no
credentials, wrong ones and right ones (and connections cut in the
middle of the TLS handshake, or sending no TLS at all). After each burst proflet's process is alive,
/-/healthy answers, and every connection was closed and counted: the open
connections return to the probe's own one, and the accepted connections
equal the closed ones plus the open ones
(proflet_http_server_connections_*).

A write to a socket its client has closed raises SIGPIPE unless it is
ignored; this test kills a proflet that does not ignore it.
"""
import base64
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time

import bcrypt

from lib import *

CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: ok
    scrape-interval: 1s
    scrape-timeout: 1s
    enabled-profiles: [goroutine]
    path-prefix: /ok
    static-configs:
      - application: ok
        targets: [127.0.0.1:{tport}]
remote-write:
  - url: file://{sink}
"""

PARALLEL = 20
PIPELINE = 50
SLOW_BYTES = 64
DEADLINE = 20.0  # seconds for the connections of a burst to be closed

USER, PASSWORD = "alice", "s3cret"
SETTLE = []  # seconds each burst took to be closed and counted, for the report


class Server:
    """How to reach the status server: plain, or TLS with basic auth."""

    def __init__(self, port, ca=None):
        self.port = port
        self.ctx = None
        if ca:
            self.ctx = ssl.create_default_context(cafile=ca)
            self.ctx.check_hostname = False

    def connect(self, timeout=5.0, handshake=True):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if self.ctx and handshake:
            s = self.ctx.wrap_socket(s, server_hostname="127.0.0.1")
        return s

    def request(self, method, path, creds, close=False):
        h = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if creds is not None:
            h += "Authorization: Basic " + base64.b64encode(creds.encode()).decode() + "\r\n"
        if method == "POST":
            h += "Content-Length: 0\r\n"
        if close:
            h += "Connection: close\r\n"
        return (h + "\r\n").encode()

    def get(self, path, timeout=10.0):
        """(status, body) of one request on a fresh connection."""
        creds = f"{USER}:{PASSWORD}" if self.ctx else None
        s = self.connect(timeout)
        try:
            s.sendall(self.request("GET", path, creds, close=True))
            data = b""
            end = time.monotonic() + timeout
            while time.monotonic() < end and len(data) < (64 << 20):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
        if b"transfer-encoding: chunked" in head.lower():
            body = dechunk(body)
        return status, body


def dechunk(b):
    out = b""
    while b:
        size, _, rest = b.partition(b"\r\n")
        n = int(size.split(b";")[0] or b"0", 16)
        if n == 0:
            break
        out += rest[:n]
        b = rest[n + 2:]
    return out


# ----------------------------------------------------------- the clients

def quietly(fn):
    """A client's errors (resets, timeouts) are the point, not failures."""
    def run(*a):
        try:
            fn(*a)
        except (OSError, ssl.SSLError, ValueError):
            pass
    return run


@quietly
def send_close(srv, req):
    s = srv.connect()
    s.sendall(req)
    s.close()


@quietly
def half_close(srv, req):
    s = srv.connect()
    s.sendall(req)
    if isinstance(s, ssl.SSLSocket):
        s = s.unwrap()  # close_notify: TLS's half-close, then TCP's
    s.shutdown(socket.SHUT_WR)
    s.settimeout(0.2)
    s.recv(1024)
    s.close()


@quietly
def reset(srv, req):
    s = srv.connect()
    s.sendall(req)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


@quietly
def pipeline(srv, req):
    s = srv.connect()
    s.sendall(req * PIPELINE)
    s.close()


@quietly
def slow_read(srv, req):
    s = srv.connect()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(req)
    s.settimeout(0.5)
    end = time.monotonic() + 0.5
    for _ in range(SLOW_BYTES):
        if time.monotonic() > end or not s.recv(1):
            break
        # The pace is the behaviour under test (a reader slower than the
        # server writes), not a wait for anything.
        time.sleep(0.005)
    s.close()


@quietly
def give_up(srv, req):
    s = srv.connect()
    s.sendall(req)
    s.settimeout(0.05)
    try:
        while s.recv(65536):
            pass
    finally:
        s.close()


@quietly
def half_handshake(srv, req):
    """TLS only: a ClientHello cut short, then an RST."""
    s = srv.connect(handshake=False)
    s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(16))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


@quietly
def bad_record(srv, req):
    """TLS only: a record that is no TLS at all; the server's alert is read
    (bounded), then the connection closed."""
    s = srv.connect(handshake=False)
    s.sendall(b"\x16\x03\x01\x00\x05hello")
    s.settimeout(1.0)
    s.recv(1024)
    s.close()


def burst(srv, method, path, creds_list):
    """Every kind of abrupt client on one route, all at once; returns how
    many connections it opened."""
    jobs = []
    for i in range(PARALLEL):
        jobs.append((send_close, creds_list[i % len(creds_list)]))
    for creds in creds_list:
        jobs += [(half_close, creds), (reset, creds), (pipeline, creds), (slow_read, creds),
                 (give_up, creds), (give_up, creds)]
        if srv.ctx:
            jobs += [(half_handshake, creds), (bad_record, creds)]
    threads = [threading.Thread(target=fn, args=(srv, srv.request(method, path, creds)))
               for fn, creds in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    check(not any(t.is_alive() for t in threads), f"a client of {path} did not finish")
    return len(jobs)


# ------------------------------------------------------------ the checks

def conn_stats(srv):
    status, body = srv.get("/metrics")
    check(status == 200, f"/metrics answered {status}")
    text = body.decode()
    closed = {}
    for line in text.splitlines():
        if line.startswith("proflet_http_server_connections_closed_total{"):
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            closed[reason] = float(line.rsplit(" ", 1)[1])
    opened = metric_value(text, "proflet_http_server_connections")
    accepted = metric_value(text, "proflet_http_server_connections_accepted_total")
    check(opened is not None and accepted is not None and closed,
          "proflet_http_server_connections_* are exported")
    return opened, accepted, closed


def settled(p, srv, what, before, at_least):
    """After a burst: the process lives, /-/healthy answers, and every
    connection of the burst was closed and counted."""
    check(alive(p), f"proflet alive after {what}")
    status, body = srv.get("/-/healthy")
    check(status == 200 and b"healthy" in body, f"/-/healthy after {what}: {status}")
    last = {}

    def closed_and_counted():
        alive(p)
        opened, accepted, closed = conn_stats(srv)
        last.update(opened=opened, accepted=accepted, closed=closed)
        # The probe's own connection is the only one open; every other
        # accepted connection is counted as closed.
        return opened == 1 and accepted == sum(closed.values()) + 1

    t0 = time.monotonic()
    wait_for(f"the connections of {what} closed and counted", closed_and_counted,
             timeout=DEADLINE, interval=0.1)
    SETTLE.append(time.monotonic() - t0)
    gained = last["accepted"] - before
    check(gained >= at_least, f"{what}: {gained} connections accepted, the burst opened "
                              f"{at_least}")
    return last["accepted"], last["closed"]


def routes(key):
    return [
        ("GET", "/"),
        ("GET", "/targets"),
        ("GET", "/targets?format=text"),
        ("GET", "/service-discovery"),
        ("GET", "/forwarding"),
        ("GET", "/config"),
        ("GET", "/api/v1/targets"),
        ("GET", "/api/v1/targets?job=ok"),
        ("GET", "/metrics"),
        ("GET", "/-/healthy"),
        ("GET", "/-/ready"),
        ("GET", f"/profile?key={key}"),
        ("GET", f"/profile?key={key}&type=goroutine"),
        ("GET", f"/profile.pb.gz?key={key}"),
        ("HEAD", "/metrics"),
        ("POST", "/-/reload"),
        ("GET", "/no/such/page"),
    ]


def abuse(p, srv, key, creds_lists, label):
    accepted, closed = settled(p, srv, f"{label}: start", 0, 0)
    for method, path in routes(key):
        for creds_list in creds_lists:
            n = burst(srv, method, path, creds_list)
            accepted, closed = settled(p, srv, f"{label} {method} {path} {creds_list}",
                                       accepted, n)
    return closed


def main():
    with environment() as (tmp, procs):
        pf = os.path.join(tmp, "bad.port")
        procs.start([sys.executable, os.path.join(os.path.dirname(__file__), "badtarget.py"), pf],
                    stderr=subprocess.DEVNULL)
        tport = int(wait_for("target port", lambda: open(pf).read().strip()))
        sink = os.path.join(tmp, "sink")

        # Plain HTTP.
        sport = free_port()
        p = start_proflet(tmp, procs, CONFIG.format(sport=sport, tport=tport, sink=sink))
        srv = Server(sport)
        wait_ready(sport)
        key = profile_key(p, srv)
        t0 = time.monotonic()
        closed = abuse(p, srv, key, [[None]], "plain")
        print(f"plain: {time.monotonic() - t0:.1f} s; slowest burst closed in "
              f"{max(SETTLE):.2f} s; closed by reason {closed}")
        # Resets and vanished clients are seen as such, not only as "done".
        check(closed.get("reset", 0) > 0, f"resets counted: {closed}")
        check(closed.get("client_closed", 0) > 0, f"client closes counted: {closed}")
        check(stop(p) == 0, "proflet exits 0 after the plain bursts")

        # TLS and basic auth: no credentials, wrong ones, right ones.
        ca, crt, tkey = ec_cert(tmp)
        h = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        web = os.path.join(tmp, "web.yml")
        with open(web, "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {tkey}\n"
                    f"basic_auth_users:\n  {USER}: '{h}'\n")
        sport = free_port()
        p = start_proflet(tmp, procs, CONFIG.format(sport=sport, tport=tport, sink=sink),
                          name="proflet-tls", extra=("--web.config.file", web))
        srv = Server(sport, ca)
        wait_for("TLS status server ready", lambda: alive(p) and srv_ready(srv), timeout=20)
        key = profile_key(p, srv)
        t0 = time.monotonic()
        SETTLE.clear()
        closed = abuse(p, srv, key, [[None, f"{USER}:wrong", f"{USER}:{PASSWORD}"]], "tls")
        print(f"tls: {time.monotonic() - t0:.1f} s; slowest burst closed in "
              f"{max(SETTLE):.2f} s; closed by reason {closed}")
        check(closed.get("error", 0) > 0, f"failed handshakes counted as errors: {closed}")
        check(stop(p) == 0, "proflet exits 0 after the TLS bursts")


def ec_cert(tmp):
    """A self-signed P-256 certificate for 127.0.0.1: hundreds of TLS
    handshakes cost a fraction of what RSA ones do (under ASan too)."""
    key, crt = os.path.join(tmp, "ec.key"), os.path.join(tmp, "ec.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return crt, crt, key


def srv_ready(srv):
    try:
        return srv.get("/-/ready")[0] == 200
    except OSError:
        return False


def profile_key(p, srv):
    """The key of a profile scraped and kept for the UI."""
    import re

    def found():
        alive(p)
        page = srv.get("/targets")[1].decode()
        m = re.search(r'href="/profile\?key=([0-9a-f]+)"', page)
        return m and m.group(1)

    key = wait_for("a scraped profile in the UI", found, timeout=30)
    status, body = srv.get(f"/profile?key={key}")
    check(status == 200 and b"Flame graph" in body, f"the profile page draws it: {status}")
    return key


if __name__ == "__main__":
    run_test(main)
