# SPDX-License-Identifier: Apache-2.0
"""Remote-write over TLS with a rotating bearer token, through proflet: the
receiver serves HTTPS with a certificate from a CA made at test time;
proflet verifies it with `tls-config.ca-file` and `server-name`, sends the
token from `bearer-token-file`, picks up a new token after the file
changes, and keeps the token it has while the file reads empty. A second endpoint with no CA must fail verification (counted),
never receive anything, and never block the first."""
import json
import os
import subprocess
import sys

from lib import *


def main():
    with environment() as (tmp, procs):
        ca, crt, key = make_ca(tmp)
        port = start_demoapp(tmp, procs)
        rx = procs.start([sys.executable, os.path.join(SRC, "tests", "receiver", "receiver.py"),
                          "--tls-cert", crt, "--tls-key", key], stdout=subprocess.PIPE, text=True)
        info = json.loads(rx.stdout.readline())
        token = os.path.join(tmp, "token")
        with open(token, "w") as f:
            f.write("first-token\n")
        sport = free_port()
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: tls
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: tls-app
        targets: [127.0.0.1:{port}]
remote-write:
  - url: https://127.0.0.1:{info['port']}
    name: verified
    bearer-token-file: {token}
    tls-config:
      ca-file: {ca}
      server-name: pyroscope.test
    batch:
      max-wait: 100ms
  - url: https://127.0.0.1:{info['port']}
    name: unverified
    min-backoff: 100ms
    max-backoff: 500ms
""")
        wait_ready(sport)

        def requests():
            r = json.loads(http_get(f"http://127.0.0.1:{info['control']}/requests")[1])
            return r if isinstance(r, list) else r.get("requests", [])

        def auths():
            return [x.get("headers", {}).get("Authorization") for x in requests()]

        wait_for("pushes with the first token", lambda: "Bearer first-token" in auths(), timeout=20)
        with open(token + ".new", "w") as f:
            f.write("second-token\n")
        os.rename(token + ".new", token)
        wait_for("pushes with the rotated token", lambda: "Bearer second-token" in auths(), timeout=30)
        # A file rewritten in place reads empty for a moment: the token it
        # had stays in use (every push keeps a token) until the new one lands.
        open(token, "w").close()
        seen = len(auths())
        wait_for("pushes while the token file is empty", lambda: len(auths()) >= seen + 3, timeout=30)
        with open(token, "w") as f:
            f.write("third-token\n")
        wait_for("pushes with the token written in place", lambda: "Bearer third-token" in auths(), timeout=30)
        check(all(a in ("Bearer first-token", "Bearer second-token", "Bearer third-token") for a in auths()),
              f"a push without the token reached the receiver: {set(auths())}")
        m = metrics(sport)
        code = stop(p)
        check(code == 0, f"exit status {code}")
        # The unverified endpoint never got through (every request it made failed TLS).
        text = "\n".join(l for l in m.splitlines() if 'endpoint="unverified"' in l)
        check(text, "no metrics for the unverified endpoint")
        sent = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                   if l.startswith("proflet_remote_sent_profiles_total"))
        check(sent == 0, f"the unverified endpoint reports {sent} profiles sent")
        ok_sent = metric_value(m, "proflet_remote_sent_profiles_total", endpoint="verified")
        check(ok_sent and ok_sent > 0, f"the verified endpoint reports {ok_sent} profiles sent")
        failed = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                     if l.startswith("proflet_remote_") and ("failed" in l or "retr" in l or "error" in l))
        check(failed > 0, f"the unverified endpoint counted no failure:\n{text}")
        got = json.loads(http_get(f"http://127.0.0.1:{info['control']}/accepted")[1])["profiles"]
        ids = [x["id"] for x in got]
        check(len(ids) == len(set(ids)), "duplicates at the receiver")


run_test(main)
