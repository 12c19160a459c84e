"""--web.config.file (Prometheus' exporter-toolkit format): the status server
speaks TLS (through OpenSSL memory BIOs on the libuv stream) and requires
basic auth against bcrypt hashes; client certificates when asked; a bad
file is refused at start-up with its position.

Clients: curl and Python's ssl + http.client. Hashes from python3-bcrypt
($2b$), and the same hash spelled $2y$ (htpasswd -B writes that)."""
import base64
import json
import http.client
import os
import ssl
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


def py_get(port, ca, path, user=None, password=None, cert=None):
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(*cert)
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
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
        # Bcrypt runs off the loop: while 30 wrong passwords are checked one
        # by one, a remembered good one is answered at once.
        def jobs_done():
            _, body, _ = py_get(sport, ca, "/metrics", "alice", "s3cret")
            return metric_value(body.decode(), "proflet_worker_jobs_completed_total") or 0
        jobs0 = jobs_done()
        results = []
        def wrong():
            results.append(py_get(sport, ca, "/metrics", "alice", "wrong")[0])
        threads = [threading.Thread(target=wrong) for _ in range(30)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        t1 = time.monotonic()
        code, _, _ = py_get(sport, ca, "/metrics", "alice", "s3cret")
        good = time.monotonic() - t1
        pending = 30 - len(results)
        for t in threads:
            t.join(30)
        wrong_s = time.monotonic() - t0
        print(f"30 wrong passwords took {wrong_s:.2f} s; a good one meanwhile {good * 1000:.0f} ms")
        check(code == 200 and results == [401] * 30, f"auth under load: {code} {results}")
        check(pending > 0 and good < wrong_s / 3,
              f"a remembered password waited {good:.2f} s behind the bcrypt checks ({pending} still pending)")
        # Each check was a job of the one CPU work queue.
        check(jobs_done() - jobs0 >= 30, f"{jobs_done() - jobs0} work-queue jobs for 30 bcrypt checks")
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


if __name__ == "__main__":
    run_test(main)
