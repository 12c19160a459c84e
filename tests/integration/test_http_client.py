# SPDX-License-Identifier: Apache-2.0
"""The HTTP client settings against real peers on 127.0.0.1:

- `authorization` (inline and from a file) and `http-headers` (values,
  secrets, files) arrive at a scrape target and at a remote-write receiver;
- TLS `min-version`/`max-version` against Python servers that speak only
  TLS 1.2 or only TLS 1.3, with the CA given inline (`ca`) or as a file, and
  a client certificate given inline (`cert`, `key`) to a server that
  demands one;
- no secret (credentials, header secrets and files, the client key) shows
  in the log, /api/v1/targets, /metrics, `proflet targets`, or the error
  of a refused configuration."""
import json
import os
import ssl
import subprocess
import sys

from lib import *
from http_peers import Target, tls_context

SECRETS = {
    "inline": "inline-cred-5ecr3t-a1",
    "file": "file-cred-5ecr3t-b2",
    "hsecret": "header-5ecr3t-c3",
    "hfile": "headerfile-5ecr3t-d4",
    "rw": "remote-cred-5ecr3t-e5",
    "rwh": "remote-header-5ecr3t-f6",
}


def client_cert(tmp):
    """A client certificate signed by make_ca's CA."""
    key, csr, crt = (os.path.join(tmp, n) for n in ("cli.key", "cli.csr", "cli.crt"))
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=proflet client")
    run("openssl", "x509", "-req", "-in", csr, "-CA", os.path.join(tmp, "ca.crt"), "-CAkey",
        os.path.join(tmp, "ca.key"), "-CAcreateserial", "-out", crt, "-days", "2")
    return open(crt).read(), open(key).read()


def indent(pem, n):
    return "\n".join(" " * n + l for l in pem.strip().splitlines())


def main():
    with environment() as (tmp, procs):
        ca, crt, key = make_ca(tmp)
        cli_crt, cli_key = client_cert(tmp)
        ca_pem = open(ca).read()
        credf, hfile = os.path.join(tmp, "cred"), os.path.join(tmp, "hfile")
        with open(credf, "w") as f:
            f.write(SECRETS["file"] + "\n")
        with open(hfile, "w") as f:
            f.write(SECRETS["hfile"] + "\n")

        plain = Target()
        t12 = Target(tls=tls_context(crt, key, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2))
        t13 = Target(tls=tls_context(crt, key, ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3))
        mtls = Target(tls=tls_context(crt, key, ssl.TLSVersion.TLSv1_2, client_ca=ca))
        rx = procs.start([sys.executable, os.path.join(SRC, "tests", "receiver", "receiver.py")],
                         stdout=subprocess.PIPE, text=True)
        info = json.loads(rx.stdout.readline())
        sport = free_port()

        def job(name, port, extra, scheme="http"):
            return f"""
  - job-name: {name}
    scrape-interval: 1s
    scheme: {scheme}
    path-prefix: /{name}
    enabled-profiles: [goroutine]
    static-configs:
      - targets: [127.0.0.1:{port}]
{extra}"""

        cfg = f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
{job("authz", plain.port, f'''    authorization: {{type: Token, credentials: {SECRETS["inline"]}}}
    http-headers:
      X-Values: {{values: [v1, v2]}}
      X-Secret: {{secrets: [{SECRETS["hsecret"]}]}}
      X-File: {{files: [{hfile}]}}''')}
{job("authzfile", plain.port, f'''    authorization:
      credentials_file: {credf}''')}
{job("min13-vs-12", t12.port, f'''    tls-config: {{ca-file: {ca}, min-version: TLS13}}''', "https")}
{job("min13-vs-13", t13.port, f'''    tls-config:
      min-version: TLS13
      ca: |
{indent(ca_pem, 8)}''', "https")}
{job("max12-vs-13", t13.port, f'''    tls-config: {{ca-file: {ca}, max_version: TLS12}}''', "https")}
{job("max12-vs-12", t12.port, f'''    tls-config: {{ca-file: {ca}, max-version: TLS12}}''', "https")}
{job("mtls", mtls.port, f'''    tls-config:
      ca-file: {ca}
      cert: |
{indent(cli_crt, 8)}
      key: |
{indent(cli_key, 8)}''', "https")}
{job("mtls-nocert", mtls.port, f'''    tls-config: {{ca-file: {ca}}}''', "https")}
remote-write:
  - url: http://127.0.0.1:{info['port']}
    authorization: {{type: Bearer, credentials: {SECRETS["rw"]}}}
    http_headers:
      X-Tenant-Secret: {{secrets: [{SECRETS["rwh"]}]}}
    batch: {{max-wait: 100ms}}
"""
        p = start_proflet(tmp, procs, cfg)
        wait_ready(sport)

        def by_job(target, name):
            return [h for path, h in target.requests() if path.startswith(f"/{name}/")]

        def values(hdrs, name):
            return [v for k, v in hdrs if k.lower() == name.lower()]

        # authorization and http-headers at the scrape target.
        reqs = wait_for("scrapes of the authz jobs", lambda: len(by_job(plain, "authz")) >= 2
                        and len(by_job(plain, "authzfile")) >= 2 and by_job(plain, "authz"), timeout=30)
        for h in reqs:
            check(values(h, "Authorization") == [f"Token {SECRETS['inline']}"], f"authorization: {values(h, 'Authorization')}")
            check(values(h, "X-Values") == ["v1", "v2"], f"X-Values: {values(h, 'X-Values')}")
            check(values(h, "X-Secret") == [SECRETS["hsecret"]], f"X-Secret: {values(h, 'X-Secret')}")
            check(values(h, "X-File") == [SECRETS["hfile"]], f"X-File: {values(h, 'X-File')}")
        for h in by_job(plain, "authzfile"):
            check(values(h, "Authorization") == [f"Bearer {SECRETS['file']}"],
                  f"credentials-file: {values(h, 'Authorization')}")

        # ... and at the remote-write receiver.
        def rw_headers():
            r = json.loads(http_get(f"http://127.0.0.1:{info['control']}/requests")[1])
            r = r if isinstance(r, list) else r.get("requests", [])
            return [x.get("headers", {}) for x in r if x.get("headers")]

        hs = wait_for("pushes at the receiver", rw_headers, timeout=30)
        for h in hs:
            check(h.get("Authorization") == f"Bearer {SECRETS['rw']}", f"remote authorization: {h.get('Authorization')}")
            check(h.get("X-Tenant-Secret") == SECRETS["rwh"], f"remote header: {h.get('X-Tenant-Secret')}")

        # TLS versions, inline CA, inline client certificate.
        def targets():
            body = json.loads(http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1])
            return {t["scrapePool"]: t for t in body["data"]["activeTargets"]}

        want = {"min13-vs-12": False, "min13-vs-13": True, "max12-vs-13": False, "max12-vs-12": True,
                "mtls": True, "mtls-nocert": False}

        def settled():
            t = targets()
            ok = all(t.get(j, {}).get("health") == ("up" if good else "down") for j, good in want.items())
            return t if ok else None

        t = wait_for("every TLS job up or down as its versions allow", settled, timeout=30)
        check(len(by_job(t12, "min13-vs-12")) == 0, "a TLS 1.2-only server answered a min-version TLS13 client")
        check(len(by_job(t13, "max12-vs-13")) == 0, "a TLS 1.3-only server answered a max-version TLS12 client")
        check(len(by_job(t13, "min13-vs-13")) > 0 and len(by_job(t12, "max12-vs-12")) > 0, "TLS jobs never scraped")
        check(len(by_job(mtls, "mtls-nocert")) == 0, "the client-certificate server answered a client without one")

        # No secret anywhere proflet reports.
        seen = {"targets": http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1].decode(),
                "metrics": metrics(sport)}
        r = subprocess.run([PROFLET, "targets", "--config", p.config_path], capture_output=True, text=True, timeout=60)
        seen["proflet targets"] = r.stdout + r.stderr
        r = subprocess.run([PROFLET, "--check-config", p.config_path], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"--check-config refused the test config: {r.stderr}")
        seen["check-config"] = r.stdout + r.stderr
        bad = os.path.join(tmp, "bad.yaml")
        with open(bad, "w") as f:
            f.write(cfg.replace(f"credentials: {SECRETS['inline']}", f"credentials: \"{SECRETS['inline']}\\r\\nX: y\""))
        r = subprocess.run([PROFLET, "--check-config", bad], capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "CR or LF" in r.stderr, f"credentials with CR LF accepted: {r.stderr}")
        seen["refused config"] = r.stdout + r.stderr
        code = stop(p)
        check(code == 0, f"exit status {code}")
        seen["log"] = open(p.log_path).read()
        key_line = cli_key.strip().splitlines()[1]
        for where, text in seen.items():
            for name, s in list(SECRETS.items()) + [("client key", key_line)]:
                check(s not in text, f"secret {name} appears in {where}")
        check("min13-vs-12" in seen["targets"], "the targets page lists no job: the secret check saw nothing")
        for t_ in (plain, t12, t13, mtls):
            t_.close()


run_test(main)
