# SPDX-License-Identifier: Apache-2.0
"""oauth2's own transport settings, with real peers: the token request
goes over TLS to an https token endpoint trusted through oauth2's own
`tls-config` (and fails, saying so, without it), and through Debian's
tinyproxy when oauth2 has its own `proxy-url`, while the job's scrapes
keep their own settings (direct, no proxy)."""
import json

from lib import *
from http_peers import Target, TokenEndpoint, tinyproxy, tls_context

SECRET = "client-5ecr3t-transport"


def main():
    with environment() as (tmp, procs):
        ca, crt, key = make_ca(tmp)
        ep_tls = TokenEndpoint({"tls": SECRET, "noca": SECRET}, expires_in=60, tls=tls_context(crt, key))
        ep_plain = TokenEndpoint({"proxied": SECRET}, expires_in=60)
        tp = tinyproxy(tmp, procs)
        refused = []

        def auth(headers):
            a = headers.get("Authorization") or ""
            if a.startswith("Bearer ") and (ep_tls.valid(a[7:]) or ep_plain.valid(a[7:])):
                return None
            refused.append(a)
            return 401

        target = Target(auth=auth)
        sport = free_port()

        def job(name, url, extra=""):
            return f"""
  - job-name: {name}
    scrape-interval: 1s
    scrape-timeout: 5s
    path-prefix: /{name}
    enabled-profiles: [goroutine]
    static-configs:
      - targets: [127.0.0.1:{target.port}]
    oauth2:
      client-id: {name}
      client-secret: {SECRET}
      token-url: {url}
{extra}"""

        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
{job("tls", ep_tls.url, f"      tls-config: {{ca-file: {ca}}}")}
{job("noca", ep_tls.url)}
{job("proxied", ep_plain.url, f"      proxy-url: http://127.0.0.1:{tp}")}
remote-write:
  - url: file://{tmp}/sink
""")
        wait_ready(sport)

        def scrapes(name):
            return [h for path, h in target.requests() if path.startswith(f"/{name}/")]

        wait_for("scrapes of the tls and proxied jobs",
                 lambda: len(scrapes("tls")) >= 2 and len(scrapes("proxied")) >= 2, timeout=30)
        fetched, _ = ep_tls.count()
        check(fetched["tls"] >= 1, "no token was fetched over TLS")
        check(fetched["noca"] == 0, "a token request went out without the CA that oauth2's tls-config names")
        check(scrapes("noca") == [], "the job whose token request cannot verify the endpoint reached the target")
        check(not refused, f"scrapes without a minted token: {refused[:3]}")
        check(ep_plain.count()[0]["proxied"] >= 1, "the proxied job fetched no token")
        check(ep_plain.vias and all(v and "tinyproxy" in v for v in ep_plain.vias),
              f"token requests bypassed oauth2's proxy-url: {ep_plain.vias}")
        check(all(not any(k.lower() == "via" for k, _ in h) for h in scrapes("proxied")),
              "the job's scrapes went through the proxy meant for its token requests")

        def noca_error():
            body = json.loads(http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1])
            for t in body["data"]["activeTargets"]:
                if t["scrapePool"] == "noca" and t.get("lastError"):
                    return t["lastError"]
            return None

        err = wait_for("the untrusting job's error", noca_error, timeout=20)
        check("oauth2" in err and ("certificate" in err.lower() or "ssl" in err.lower()),
              f"the TLS failure of the token request is not said: {err}")
        code = stop(p)
        check(code == 0, f"exit status {code}")
        log = open(p.log_path).read()
        check(SECRET not in log, "the client secret shows in the log")
        target.close()
        ep_tls.close()
        ep_plain.close()


run_test(main)
