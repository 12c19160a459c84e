# SPDX-License-Identifier: Apache-2.0
"""oauth2 client credentials against a local token endpoint that mints
6-second tokens: every scrape reaches the target with a token the endpoint
minted and that has not expired (the target refuses any other), the first
scrapes wait for the first (slow) token instead of going out without one,
tokens are refreshed (several fetches, far fewer than requests), remote-write
uses its own oauth2 client, and a wrong client secret fails the job with
the endpoint's status while neither secret shows in /api/v1/targets or the
log."""
import json
import os
import subprocess
import sys
import time

from lib import *
from http_peers import Target, TokenEndpoint

GOOD, BAD = "client-5ecr3t-good", "client-5ecr3t-wrong"


def main():
    with environment() as (tmp, procs):
        ep = TokenEndpoint({"proflet a": GOOD, "proflet b": GOOD, "proflet rw": GOOD}, expires_in=6,
                           scope="profiles read", params={"audience": "pyroscope"})
        ep.first_delay = 1.0  # the first scrapes must wait for it
        refused = []

        def auth(headers):
            a = headers.get("Authorization") or ""
            if not a.startswith("Bearer ") or not ep.valid(a[7:]):
                refused.append(a)
                return 401
            return None

        target = Target(auth=auth)
        secret = os.path.join(tmp, "secret")
        with open(secret, "w") as f:
            f.write(GOOD + "\n")
        rx = procs.start([sys.executable, os.path.join(SRC, "tests", "receiver", "receiver.py")],
                         stdout=subprocess.PIPE, text=True)
        info = json.loads(rx.stdout.readline())
        sport = free_port()

        def job(name, oauth):
            return f"""
  - job-name: {name}
    scrape-interval: 1s
    scrape-timeout: 5s
    path-prefix: /{name}
    enabled-profiles: [goroutine]
    static-configs:
      - targets: [127.0.0.1:{target.port}]
    oauth2:
{oauth}"""

        good = lambda who: f"""      client_id: proflet {who}
      client_secret_file: {secret}
      token_url: {ep.url}
      scopes: [profiles, read]
      endpoint_params: {{audience: pyroscope}}"""
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
{job("a", good("a"))}
{job("b", good("b"))}
{job("wrong", f'''      client-id: proflet a
      client-secret: {BAD}
      token-url: {ep.url}''')}
remote-write:
  - url: http://127.0.0.1:{info['port']}
    batch: {{max-wait: 100ms}}
    oauth2:
{good("rw")}
""")
        wait_ready(sport)
        start = time.monotonic()

        def scrapes(name):
            return [h for path, h in target.requests() if path.startswith(f"/{name}/")]

        wait_for("13 s of scrapes", lambda: time.monotonic() - start > 13 and len(scrapes("a")) >= 8, timeout=40)
        fetched, n_refused = ep.count()
        check(not refused, f"{len(refused)} scrapes without a valid token, e.g. {refused[:3]}")
        for who in ("a", "b"):
            n = len(scrapes(who))
            print(f"job {who}: {n} scrapes, {fetched[f'proflet {who}']} tokens", file=sys.stderr)
            check(fetched[f"proflet {who}"] >= 3, f"job {who}: {fetched} tokens in 13 s of 6 s tokens: no refresh")
            check(fetched[f"proflet {who}"] <= n // 2, f"job {who}: {fetched} token fetches for {n} scrapes: "
                  "the token is not cached")
        check(n_refused > 0, "the wrong client secret was never sent (or accepted)")
        check(scrapes("wrong") == [], "the job with the wrong secret reached the target")

        def remote_tokens():
            r = json.loads(http_get(f"http://127.0.0.1:{info['control']}/requests")[1])
            r = r if isinstance(r, list) else r.get("requests", [])
            return [x.get("headers", {}).get("Authorization") for x in r if x.get("headers")]

        toks = wait_for("pushes at the receiver", remote_tokens, timeout=20)
        check(all(t and t.startswith("Bearer ") and t[7:] in ep.minted for t in toks),
              f"remote-write sent tokens the endpoint never minted: {toks[:3]}")

        def wrong_error():
            body = json.loads(http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1])
            for t in body["data"]["activeTargets"]:
                if t["scrapePool"] == "wrong" and t.get("lastError"):
                    return t["lastError"], body
            return None

        err, body = wait_for("the wrong-secret job's error", wrong_error, timeout=20)
        check("oauth2" in err and "401" in err, f"wrong-secret error does not say what failed: {err}")
        text = json.dumps(body) + metrics(sport)
        code = stop(p)
        check(code == 0, f"exit status {code}")
        text += open(p.log_path).read()
        for s in (GOOD, BAD):
            check(s not in text, f"client secret {s} shows in the targets page, metrics or log")
        target.close()
        ep.close()


run_test(main)
