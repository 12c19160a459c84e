# SPDX-License-Identifier: Apache-2.0
"""The HTTP client settings on the Kubernetes API connection: a fake API
server (tests/k8s/fake_apiserver.py) that demands one bearer token is
listed and watched by a job that sends it through `authorization` (from a
file) and by one that gets it from an oauth2 token endpoint; both discover
the pod, and every request the API server saw carried the token."""
import json
import os
import subprocess
import sys
import urllib.request

from lib import *
from http_peers import TokenEndpoint

TOKEN = "kube-5ecr3t-token"


def control(cport, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{cport}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.read()


def main():
    with environment() as (tmp, procs):
        pf = os.path.join(tmp, "api.ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "k8s", "fake_apiserver.py"), "--port-file", pf,
                     "--token", TOKEN], stderr=subprocess.DEVNULL)
        api_port, cport = map(int, wait_for("fake API server", lambda: open(pf).read().split()))
        control(cport, "/apply", {"kind": "pods", "object": {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "app", "namespace": "shop", "uid": "uid-app", "labels": {"app": "app"}},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "ports": [{"containerPort": 6060}]}]},
            "status": {"phase": "Running", "podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}}})
        ep = TokenEndpoint({"kube": "oauth-5ecr3t"}, expires_in=3600, fixed=TOKEN)
        cred = os.path.join(tmp, "cred")
        with open(cred, "w") as f:
            f.write(TOKEN + "\n")
        sport = free_port()
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
discovery: {{coalesce-delay: 200ms}}
scrape-configs:
  - job-name: authz
    enabled-profiles: [goroutine]
    kubernetes-sd-configs:
      - api-server: http://127.0.0.1:{api_port}
        authorization: {{credentials_file: {cred}}}
        http_headers: {{X-Audit: {{values: [proflet]}}}}
  - job-name: oauth
    enabled-profiles: [goroutine]
    kubernetes-sd-configs:
      - api-server: http://127.0.0.1:{api_port}
        oauth2:
          client_id: kube
          client_secret: oauth-5ecr3t
          token_url: {ep.url}
remote-write:
  - url: file://{tmp}/sink
""")
        wait_ready(sport, timeout=40)

        def pools():
            body = json.loads(http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1])
            got = {t["scrapePool"] for t in body["data"]["activeTargets"]}
            return got if got == {"authz", "oauth"} else None

        wait_for("the pod as a target of both jobs", pools, timeout=20)
        reqs = json.loads(http_get(f"http://127.0.0.1:{cport}/requests")[1])
        reqs = reqs if isinstance(reqs, list) else reqs.get("requests", [])
        auths = {r.get("auth") for r in reqs}
        check(reqs and auths == {f"Bearer {TOKEN}"}, f"API requests without the token: {auths}")
        check(ep.count()[0]["kube"] >= 1, "the oauth2 job never asked the token endpoint")
        code = stop(p)
        check(code == 0, f"exit status {code}")
        log = open(p.log_path).read()
        check(TOKEN not in log and "oauth-5ecr3t" not in log, "a secret shows in the log")
        ep.close()


run_test(main)
