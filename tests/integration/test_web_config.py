# SPDX-License-Identifier: Apache-2.0
"""--web.config.file (Prometheus' exporter-toolkit format): the status server
speaks TLS (through OpenSSL memory BIOs on the libuv stream) and requires
basic auth against bcrypt hashes; client certificates when asked; a bad
file is refused at start-up with its position.

Basic auth under attack: a flood of wrong passwords from several addresses
does not starve a first-time login from another; an unknown user's wrong
password takes as long as a known one's; hash costs outside 4..12 are
refused at load; SIGTERM does not wait for the checks running. The TLS
keys cipher_suites, curve_preferences, prefer_server_cipher_suites and
max_version are taken and enforced.

Clients: curl and Python's ssl + http.client, from 127.0.0.x source
addresses. Hashes from python3-bcrypt ($2b$), and the same hash spelled $2y$
(htpasswd -B writes that)."""
import base64
import signal
import json
import http.client
import os
import ssl
import statistics
import subprocess
import threading
import time

import bcrypt

from lib import *

CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: a
    scrape-interval: 1h
    enabled-profiles: [goroutine]
    static-configs:
      - application: a
        targets: [127.0.0.1:{dead}]
remote-write:
  - url: file://{sink}
"""


def client_cert(tmp):
    key, csr, crt = (os.path.join(tmp, n) for n in ("cli.key", "cli.csr", "cli.crt"))
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=client")
    run("openssl", "x509", "-req", "-in", csr, "-CA", os.path.join(tmp, "ca.crt"), "-CAkey",
        os.path.join(tmp, "ca.key"), "-CAcreateserial", "-out", crt, "-days", "2")
    return crt, key


def curl(url, *args):
    """The HTTP status curl saw (0 when the connection or TLS failed)."""
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", *args, url],
                       capture_output=True, text=True)
    return int(r.stdout or 0)


def py_get(port, ca, path, user=None, password=None, cert=None, source=None):
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(*cert)
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10,
                                    source_address=(source, 0) if source else None)
    headers = {}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    try:
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        return r.status, r.read(), r.getheader("WWW-Authenticate")
    finally:
        c.close()


def main():
    with environment() as (tmp, procs):
        ca, crt, key = make_ca(tmp)
        ccrt, ckey = client_cert(tmp)
        dead = free_port()
        sink = os.path.join(tmp, "sink")
        h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=10)).decode()
        check(h.startswith("$2b$"), f"python3-bcrypt wrote {h[:4]}")
        h2y = "$2y$" + h[4:]
        web = os.path.join(tmp, "web.yml")
        with open(web, "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n"
                    f"basic_auth_users:\n  alice: '{h}'\n  bob: '{h2y}'\n")
        sport = free_port()
        p = start_proflet(tmp, procs, CONFIG.format(sport=sport, dead=dead, sink=sink),
                          extra=("--web.config.file", web))
        url = f"https://127.0.0.1:{sport}"
        wait_for("TLS status server", lambda: curl(url + "/-/healthy", "--cacert", ca) == 401, timeout=20)

        check(curl(url + "/metrics", "--cacert", ca, "-u", "alice:s3cret") == 200, "curl with alice's password")
        check(curl(url + "/metrics", "--cacert", ca, "-u", "bob:s3cret") == 200, "curl with a $2y$ hash")
        check(curl(url + "/metrics", "--cacert", ca, "-u", "alice:wrong") == 401, "a wrong password was accepted")
        check(curl(url + "/metrics", "--cacert", ca, "-u", "mallory:s3cret") == 401, "an unknown user was accepted")
        check(curl(url + "/metrics", "--cacert", ca) == 401, "no credentials were accepted")
        check(curl(f"http://127.0.0.1:{sport}/metrics", "-u", "alice:s3cret") in (0, 400),
              "plain HTTP was served on a TLS port")
        check(curl(url + "/metrics", "--cacert", ca, "-u", "alice:s3cret", "--tls-max", "1.1") == 0,
              "TLS 1.1 was accepted (min_version defaults to TLS12)")

        code, body, _ = py_get(sport, ca, "/metrics", "alice", "s3cret")
        check(code == 200 and b"proflet_build_info" in body, f"python client: {code}")
        code, _, challenge = py_get(sport, ca, "/metrics", "alice", "nope")
        check(code == 401 and challenge and challenge.startswith("Basic"), f"python wrong password: {code} {challenge}")
        # Bcrypt runs off the loop: while 30 wrong passwords from one address
        # are checked (or refused with 429 past the few that may wait), a
        # remembered good one is answered at once.
        results = []
        sent = []
        def wrong():
            c = http.client.HTTPSConnection("127.0.0.1", sport, context=ssl.create_default_context(cafile=ca),
                                            timeout=30)
            try:
                c.request("GET", "/metrics", headers={"Authorization": basic("alice", "wrong")})
                sent.append(1)
                r = c.getresponse()
                r.read()
                results.append(r.status)
            finally:
                c.close()
        threads = [threading.Thread(target=wrong) for _ in range(30)]
        # The good request goes once the thirty are sent, on a connection
        # whose handshake is done: what is timed is the request, not
        # handshakes queued behind thirty others.
        gc = http.client.HTTPSConnection("127.0.0.1", sport, context=ssl.create_default_context(cafile=ca),
                                         timeout=10)
        gc.connect()
        t0 = time.monotonic()
        for t in threads:
            t.start()
        wait_for("30 wrong passwords sent", lambda: len(sent) == 30, timeout=30)
        t1 = time.monotonic()
        gc.request("GET", "/metrics", headers={"Authorization": basic("alice", "s3cret")})
        r = gc.getresponse()
        r.read()
        code = r.status
        good = time.monotonic() - t1
        gc.close()
        pending = 30 - len(results)
        for t in threads:
            t.join(30)
        wrong_s = time.monotonic() - t0
        print(f"30 wrong passwords took {wrong_s:.2f} s; a good one meanwhile {good * 1000:.0f} ms")
        check(code == 200 and len(results) == 30 and set(results) <= {401, 429} and 401 in results,
              f"auth under load: {code} {results}")
        check(pending > 0 and good < wrong_s / 3,
              f"a remembered password waited {good:.2f} s behind the bcrypt checks ({pending} still pending)")
        # A streamed answer over TLS, with keep-alive: many requests on one connection.
        ctx = ssl.create_default_context(cafile=ca)
        c = http.client.HTTPSConnection("127.0.0.1", sport, context=ctx, timeout=10)
        auth = {"Authorization": "Basic " + base64.b64encode(b"alice:s3cret").decode()}
        for _ in range(20):
            c.request("GET", "/api/v1/targets", headers=auth)
            r = c.getresponse()
            doc = json.loads(r.read())
            check(r.status == 200 and len(doc["data"]["activeTargets"]) == 1, "targets over TLS")
        c.close()
        check(stop(p) == 0, "proflet did not exit cleanly")

        # Client certificates required (and TLS 1.3 only).
        with open(web, "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n  client_ca_file: {ca}\n"
                    f"  client_auth_type: RequireAndVerifyClientCert\n  min_version: TLS13\n")
        sport = free_port()
        p = start_proflet(tmp, procs, CONFIG.format(sport=sport, dead=dead, sink=sink), name="mtls",
                          extra=("--web.config.file", web))
        url = f"https://127.0.0.1:{sport}"
        wait_for("mTLS status server",
                 lambda: curl(url + "/-/healthy", "--cacert", ca, "--cert", ccrt, "--key", ckey) == 200, timeout=20)
        check(curl(url + "/-/healthy", "--cacert", ca) == 0, "no client certificate was accepted")
        check(curl(url + "/-/healthy", "--cacert", ca, "--cert", ccrt, "--key", ckey, "--tls-max", "1.2") == 0,
              "TLS 1.2 was accepted with min_version TLS13")
        code, _, _ = py_get(sport, ca, "/-/ready", cert=(ccrt, ckey))
        check(code == 200, f"python client with a certificate: {code}")
        check(stop(p) == 0, "proflet did not exit cleanly")

        # A plain-text password is refused at start-up, with its position.
        with open(web, "w") as f:
            f.write("basic_auth_users:\n  alice: s3cret\n")
        r = subprocess.run([PROFLET, "--config", p.config_path, "--web.config.file", web],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2, f"a bad web config exited {r.returncode}")
        check(f"{web}:2:" in r.stderr and "bcrypt" in r.stderr, f"message: {r.stderr.strip()}")

        costs(tmp, crt, key, p.config_path)
        tls_keys(tmp, procs, ca, crt, key, dead, sink, p.config_path)
        unknown_user_timing(tmp, procs, ca, crt, key, dead, sink)
        flood_vs_login(tmp, procs, ca, crt, key, dead, sink)
        sigterm_during_checks(tmp, procs, ca, crt, key, dead, sink)


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def curl_time(url, ca, source, *args):
    """(status, seconds) of one curl request from `source` (connect, TLS and answer)."""
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "--max-time", "30",
                        "--cacert", ca, "--interface", source, *args, url], capture_output=True, text=True)
    code, t = (r.stdout or "0 0").split()
    return int(code), float(t)


class Flood:
    """`n` connections with a wrong password, spread over `sources`, each
    sending again on an answer (on a new connection once one is closed)
    until stopped, for at most two minutes."""

    def __init__(self, port, ca, sources, n, user="alice"):
        self.port, self.ca, self.user = port, ca, user
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.codes = {}
        self.sent = 0
        self.threads = [threading.Thread(target=self.one, args=(sources[i % len(sources)],), daemon=True)
                        for i in range(n)]
        for t in self.threads:
            t.start()

    def one(self, source):
        ctx = ssl.create_default_context(cafile=self.ca)
        headers = {"Authorization": basic(self.user, "wrong")}
        deadline = time.monotonic() + 120
        c = None
        while not self.stopping.is_set() and time.monotonic() < deadline:
            try:
                if c is None:
                    c = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=30,
                                                    source_address=(source, 0))
                c.request("GET", "/metrics", headers=headers)
                with self.lock:
                    self.sent += 1
                r = c.getresponse()
                r.read()
                code = r.status
                if r.will_close:
                    c.close()
                    c = None
            except (OSError, http.client.HTTPException):
                code = 0
                if c is not None:
                    c.close()
                c = None
            with self.lock:
                self.codes[code] = self.codes.get(code, 0) + 1
        if c is not None:
            c.close()

    def answered(self):
        with self.lock:
            return sum(self.codes.values())

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(40)


def web_file(tmp, crt, key, users, tls_extra=""):
    path = os.path.join(tmp, "web-auth.yml")
    with open(path, "w") as f:
        f.write(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n{tls_extra}basic_auth_users:\n")
        for u, h in users.items():
            f.write(f"  {u}: '{h}'\n")
    return path


def start_auth(tmp, procs, name, web, ca, dead, sink):
    """A proflet serving TLS and basic auth; its status port."""
    sport = free_port()
    p = start_proflet(tmp, procs, CONFIG.format(sport=sport, dead=dead, sink=sink), name=name,
                      extra=("--web.config.file", web))
    wait_for(f"{name}: TLS status server",
             lambda: alive(p) and curl(f"https://127.0.0.1:{sport}/-/healthy", "--cacert", ca) == 401, timeout=20)
    return p, sport


def flood_vs_login(tmp, procs, ca, crt, key, dead, sink):
    """200 connections with wrong passwords from four addresses; a first-time
    login from a fifth is answered within a bound: it waits for at most the
    check already running, not for the flood's queue. The bound is in
    checks at cost 10 timed here during the flood (the machine is shared),
    and at least 1 s."""
    h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=10)).decode()
    p, sport = start_auth(tmp, procs, "flood", web_file(tmp, crt, key, {"alice": h, "bob": h}), ca, dead, sink)
    url = f"https://127.0.0.1:{sport}/metrics"
    flood = Flood(sport, ca, [f"127.0.0.{i}" for i in range(2, 6)], 200)
    try:
        # The flood is on: every connection has sent, and answers come back.
        wait_for("the flood", lambda: flood.sent >= 200 and flood.answered() >= 20, timeout=60)
        t0 = time.monotonic()
        bcrypt.checkpw(b"wrong", h.encode())
        one_check = time.monotonic() - t0
        code, login = curl_time(url, ca, "127.0.0.9", "-u", "alice:s3cret")
        code2, login2 = curl_time(url, ca, "127.0.0.10", "-u", "bob:s3cret")
        with flood.lock:
            codes = dict(flood.codes)
    finally:
        flood.stop()
    bound = max(1.0, 5 * one_check)
    print(f"flood of 200 wrong passwords (cost 10, one check {one_check * 1000:.0f} ms here): first-time "
          f"logins answered in {login:.2f} s and {login2:.2f} s (bound {bound:.2f} s); flood answers {codes}")
    check(code == 200 and code2 == 200, f"logins during the flood: {code} {code2}")
    check(login < bound and login2 < bound,
          f"a first-time login waited {max(login, login2):.2f} s behind the flood (bound {bound:.2f} s)")
    check(codes.get(401, 0) > 0, f"the flood's wrong passwords were not refused: {codes}")
    check(stop(p) == 0, "proflet did not exit cleanly after the flood")


def unknown_user_timing(tmp, procs, ca, crt, key, dead, sink):
    """A wrong password takes as long for a user that does not exist as for
    one that does (the median of 15 each, interleaved)."""
    h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=10)).decode()
    p, sport = start_auth(tmp, procs, "timing", web_file(tmp, crt, key, {"alice": h}), ca, dead, sink)
    ctx = ssl.create_default_context(cafile=ca)
    times = {"alice": [], "mallory": []}
    for _ in range(15):
        for user in times:
            c = http.client.HTTPSConnection("127.0.0.1", sport, context=ctx, timeout=10)
            c.connect()  # the handshake is not timed
            t0 = time.monotonic()
            c.request("GET", "/metrics", headers={"Authorization": basic(user, "wrong")})
            r = c.getresponse()
            r.read()
            times[user].append(time.monotonic() - t0)
            c.close()
            check(r.status == 401, f"{user}: {r.status}")
    known, unknown = statistics.median(times["alice"]), statistics.median(times["mallory"])
    print(f"wrong password, median of 15: known user {known * 1000:.1f} ms, unknown user {unknown * 1000:.1f} ms")
    check(abs(known - unknown) < 0.35 * known,
          f"an unknown user is told apart: {unknown * 1000:.1f} ms against {known * 1000:.1f} ms for a known one")
    check(stop(p) == 0, "proflet did not exit cleanly")


def costs(tmp, crt, key, cfg_path):
    """Hash costs outside 4..12 are refused at load (exit 2, the position,
    the range). The hashes are a real one with its cost digits changed:
    loading checks the form, not the password. (4 and 12 are taken: the
    other parts run with them.)"""
    h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    for cost in (31, 18, 13, 3):
        web = web_file(tmp, crt, key, {"alice": f"{h[:4]}{cost:02d}{h[6:]}"})
        try:
            r = subprocess.run([PROFLET, "--config", cfg_path, "--web.config.file", web],
                               capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            raise TestFailure(f"a cost-{cost} hash was taken: proflet started")
        check(r.returncode == 2, f"a cost-{cost} hash exited {r.returncode}: {r.stderr.strip()}")
        check(f"{web}:" in r.stderr and f"cost of alice is {cost}" in r.stderr and "4 to 12" in r.stderr,
              f"cost {cost}: {r.stderr.strip()}")


def log_time(path, msg):
    """The time (s since the epoch) of the first log line with msg="<msg>", or None."""
    import datetime
    with open(path, errors="replace") as f:
        for line in f:
            if f'msg="{msg}"' in line and line.startswith("ts="):
                ts = line.split()[0][3:].rstrip("Z")
                return datetime.datetime.fromisoformat(ts).replace(tzinfo=datetime.timezone.utc).timestamp()
    return None


def sigterm_during_checks(tmp, procs, ca, crt, key, dead, sink):
    """SIGTERM while cost-12 checks run (the costliest taken) and more wait:
    proflet exits 0 within 10 s, and its shutdown (from the signal to the
    last log line, so not the process's own teardown, slow under ASan)
    takes less than half a check: it does not wait for the one running."""
    h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=12)).decode()
    t0 = time.monotonic()
    bcrypt.checkpw(b"wrong", h.encode())
    one_check = time.monotonic() - t0
    p, sport = start_auth(tmp, procs, "sigterm", web_file(tmp, crt, key, {"alice": h}), ca, dead, sink)
    flood = Flood(sport, ca, [f"127.0.0.{i}" for i in range(2, 6)], 20)
    try:
        wait_for("the checks", lambda: flood.sent >= 20, timeout=30)
        sent = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise TestFailure("proflet outlived SIGTERM by 20 s while checks ran")
        took = time.monotonic() - sent
    finally:
        flood.stop()
    begin, end = log_time(p.log_path, "shutting down"), log_time(p.log_path, "proflet stopped")
    check(begin is not None and end is not None, f"no shutdown in the log: {tail(p.log_path)}")
    inner = end - begin
    print(f"SIGTERM with cost-12 checks running (one takes {one_check:.2f} s here): exited {rc} "
          f"in {took:.2f} s, shutdown {inner:.3f} s")
    check(rc == 0, f"proflet exited {rc}: {tail(p.log_path)}")
    check(took < 10, f"exit took {took:.2f} s")
    check(inner < one_check / 2, f"shutdown took {inner:.3f} s: it waited for a check ({one_check:.2f} s)")


def tls_keys(tmp, procs, ca, crt, key, dead, sink, cfg_path):
    """exporter-toolkit's cipher_suites, curve_preferences,
    prefer_server_cipher_suites and max_version: taken and in effect."""
    h = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    web = web_file(tmp, crt, key, {"alice": h},
                   "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n"
                   "  prefer_server_cipher_suites: false\n"
                   "  curve_preferences: [CurveP384]\n"
                   "  max_version: TLS12\n")
    p, sport = start_auth(tmp, procs, "ciphers", web, ca, dead, sink)
    url = f"https://127.0.0.1:{sport}/metrics"
    ok = ("--cacert", ca, "-u", "alice:s3cret")
    check(curl(url, *ok) == 200, "the default client")
    check(curl(url, *ok, "--ciphers", "ECDHE-RSA-AES128-GCM-SHA256") == 200, "a listed suite was refused")
    check(curl(url, *ok, "--ciphers", "ECDHE-RSA-AES256-GCM-SHA384") == 0, "a suite not listed was accepted")
    check(curl(url, *ok, "--ciphers", "ECDHE-RSA-CHACHA20-POLY1305") == 0, "a suite not listed was accepted")
    check(curl(url, *ok, "--curves", "X25519") == 0, "a curve not listed was accepted")
    check(curl(url, *ok, "--curves", "P-384") == 200, "the listed curve was refused")
    check(curl(url, *ok, "--tlsv1.3") == 0, "TLS 1.3 was accepted with max_version TLS12")
    check(stop(p) == 0, "proflet did not exit cleanly")
    for extra, want in (("  cipher_suites: [TLS_FOO]\n", "TLS_FOO"),
                        ("  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", "RC4"),
                        ("  curve_preferences: [P256]\n", "P256"),
                        ("  min_version: TLS13\n  max_version: TLS12\n", "max_version")):
        web = web_file(tmp, crt, key, {"alice": h}, extra)
        r = subprocess.run([PROFLET, "--config", cfg_path, "--web.config.file", web],
                           capture_output=True, text=True, timeout=10)
        check(r.returncode == 2 and f"{web}:" in r.stderr and want in r.stderr,
              f"{extra.strip()}: exit {r.returncode}: {r.stderr.strip()}")


if __name__ == "__main__":
    run_test(main)
