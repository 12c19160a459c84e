# SPDX-License-Identifier: Apache-2.0
"""A peer is its name, seen once.

  1. A replica watches two namespaces of the fake Kubernetes API server
     (tests/k8s/fake_apiserver.py); a pod of its own name is live in both,
     and one other peer in one: proflet_cluster_peers is 2 (distinct
     names), not 3, and the replica shares the targets with the other.
     One of the same-named pods goes and a third name comes: 3 peers.
  2. Without clustering, the shutdown logs no "cluster view changed" (there
     is no view to change).
"""
import copy
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lib import *  # noqa: E402,F403
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import NS, control, pod  # noqa: E402

OTHER = "other"
N = 20


def config(api_port, sport, sink, base, clustering=True):
    targets = ", ".join(f'"127.0.0.1:{base + i}"' for i in range(N))
    cl = f"""
clustering:
  enabled: true
  kubernetes:
    api-server: http://127.0.0.1:{api_port}
    namespaces:
      names: [{NS}, {OTHER}]
    selectors:
      - role: pod
        label: app.kubernetes.io/name=proflet
""" if clustering else ""
    return f"""
log-level: info
server:
  listen-address: 127.0.0.1:{sport}
{cl}
scrape-configs:
  - job-name: shared
    scrape-interval: 1h
    enabled-profiles: [goroutine]
    static-configs:
      - application: shared
        targets: [{targets}]
remote-write:
  - url: file://{sink}
"""


def pod_in(name, ns):
    p = copy.deepcopy(pod(name, True))
    p["metadata"]["namespace"] = ns
    p["metadata"]["uid"] = f"uid-{ns}-{name}"
    return p


def main():
    with environment() as (tmp, procs):
        pf = os.path.join(tmp, "api.ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "k8s", "fake_apiserver.py"),
                     "--port-file", pf], stderr=subprocess.DEVNULL)
        api_port, cport = map(int, wait_for("fake API server", lambda: open(pf).read().split()))
        base = free_port()  # nothing listens: the targets are only counted

        for ns in (NS, OTHER):
            control(cport, "/apply", {"kind": "pods", "object": pod_in("proflet-0", ns)})
        control(cport, "/apply", {"kind": "pods", "object": pod_in("proflet-1", NS)})
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        cfg = os.path.join(tmp, "c.yaml")
        with open(cfg, "w") as f:
            f.write(config(api_port, sport, sink, base))
        log = os.path.join(tmp, "c.log")
        p = procs.start([PROFLET, "--config", cfg], stderr=open(log, "w"),
                        env=dict(os.environ, POD_NAME="proflet-0"))
        wait_ready(sport, timeout=30)

        def view():
            alive(p)
            m = metrics(sport)
            return (metric_value(m, "proflet_cluster_peers"),
                    metric_value(m, "proflet_cluster_owned_targets"),
                    metric_value(m, "proflet_cluster_membership_changes_total"))

        # Both pods' lists are in before /-/ready: the count is settled.
        peers, owned, _ = wait_for("a view with both namespaces", lambda: (
            lambda v: v[0] is not None and v[1] is not None and v)(view()), timeout=20)
        check(peers == 2, f"proflet_cluster_peers counts distinct names: {peers}")
        check(0 < owned < N, f"two peers share the targets: {owned} of {N} owned")

        # One of the two pods named proflet-0 goes, a third name comes.
        control(cport, "/delete", {"kind": "pods", "namespace": OTHER, "name": "proflet-0"})
        control(cport, "/apply", {"kind": "pods", "object": pod_in("proflet-2", OTHER)})
        wait_for("proflet-2 joins: three distinct peers", lambda: view()[0] == 3, timeout=20)
        check(stop(p) == 0, "the clustered replica exits 0")

        # 2. No clustering: nothing to announce at shutdown.
        sport = free_port()
        cfg2 = os.path.join(tmp, "plain.yaml")
        with open(cfg2, "w") as f:
            f.write(config(api_port, sport, sink, base, clustering=False))
        log2 = os.path.join(tmp, "plain.log")
        p2 = procs.start([PROFLET, "--config", cfg2], stderr=open(log2, "w"))
        wait_ready(sport, timeout=30)
        check(stop(p2) == 0, "the lone replica exits 0")
        with open(log2) as f:
            text = f.read()
        check("proflet stopped" in text, f"the lone replica logged its stop: {tail(log2, 10)}")
        check("cluster view changed" not in text,
              f"no cluster view change logged without clustering: {tail(log2, 10)}")


if __name__ == "__main__":
    run_test(main)
