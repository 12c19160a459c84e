# SPDX-License-Identifier: Apache-2.0
"""Proxy settings against Debian's tinyproxy (demanding Proxy-Authorization):
`proxy-url` with `proxy-connect-header` goes through it; without the header
the proxy refuses (407) and the target never sees the job; `no-proxy` (a
CIDR) bypasses it; `proxy-from-environment` takes http_proxy from the
environment, and a job with neither ignores that environment, as
Prometheus does."""
import base64
import json
import os

from lib import *
from http_peers import Target, tinyproxy


def main():
    with environment() as (tmp, procs):
        tp = tinyproxy(tmp, procs, basic_auth=("proxyuser", "proxypass"))
        target = Target()
        cred = base64.b64encode(b"proxyuser:proxypass").decode()
        sport = free_port()

        def job(name, extra):
            return f"""
  - job-name: {name}
    scrape-interval: 1s
    path-prefix: /{name}
    enabled-profiles: [goroutine]
    static-configs:
      - targets: [127.0.0.1:{target.port}]
{extra}"""

        env = dict(os.environ, http_proxy=f"http://proxyuser:proxypass@127.0.0.1:{tp}")
        env.pop("no_proxy", None)
        env.pop("NO_PROXY", None)
        cfg = f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
{job("proxied", f'''    proxy-url: http://127.0.0.1:{tp}
    proxy-connect-header:
      Proxy-Authorization: [Basic {cred}]''')}
{job("noauth", f'''    proxy_url: http://127.0.0.1:{tp}''')}
{job("bypass", f'''    proxy-url: http://127.0.0.1:{tp}
    no-proxy: 127.0.0.0/8''')}
{job("fromenv", '''    proxy_from_environment: true''')}
{job("direct", "")}
remote-write:
  - url: file://{tmp}/sink
"""
        path = os.path.join(tmp, "p.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        log = open(os.path.join(tmp, "p.log"), "w")
        p = procs.start([PROFLET, "--config", path], stderr=log, env=env)
        wait_ready(sport)

        def via(prefix):
            """Via headers of the requests of one job (None: no Via)."""
            out = []
            for path_, hdrs in target.requests():
                if path_.startswith(f"/{prefix}/"):
                    v = [b for a, b in hdrs if a.lower() == "via"]
                    out.append(v[0] if v else None)
            return out

        def seen_all():
            return all(len(via(j)) >= 2 for j in ("proxied", "bypass", "fromenv", "direct"))

        wait_for("two scrapes of every reachable job", seen_all, timeout=30)
        check(all(v and "tinyproxy" in v for v in via("proxied")),
              f"proxied job bypassed the proxy: {via('proxied')}")
        check(all(v and "tinyproxy" in v for v in via("fromenv")),
              f"proxy-from-environment did not use http_proxy: {via('fromenv')}")
        check(all(v is None for v in via("bypass")), f"no-proxy went through the proxy: {via('bypass')}")
        check(all(v is None for v in via("direct")),
              f"a job without proxy settings used the environment's proxy: {via('direct')}")

        def noauth_error():
            body = json.loads(http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1])
            for t in body["data"]["activeTargets"]:
                if t["scrapePool"] == "noauth" and t.get("lastError"):
                    return t["lastError"]
            return None

        err = wait_for("the job without proxy credentials to fail", noauth_error, timeout=20)
        check("407" in err, f"noauth error does not show the proxy's 407: {err}")
        check(via("noauth") == [], "the target saw a request the proxy should have refused")
        code = stop(p)
        check(code == 0, f"exit status {code}")
        target.close()


run_test(main)
