# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the clustering test and benchmark: the fake Kubernetes
API server's control interface, and a proflet replica's pod as the kubelet
would report it (ready or not)."""
import collections
import json
import urllib.request

NS = "monitoring"


def control(cport, path, body):
    """POSTs `body` to the fake API server's control port."""
    req = urllib.request.Request(f"http://127.0.0.1:{cport}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


def pod(name, ready, deleting=False):
    """A Running proflet pod on 127.0.0.1 whose Ready condition is `ready`;
    `deleting`: the API server has marked it for deletion (its containers
    get SIGTERM next, and stay Ready until a probe fails)."""
    md = {"name": name, "namespace": NS, "uid": f"uid-{name}",
          "labels": {"app.kubernetes.io/name": "proflet"}}
    if deleting:
        md["deletionTimestamp"] = "2026-11-27T03:00:00Z"
        md["deletionGracePeriodSeconds"] = 30
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": md,
            "spec": {"nodeName": "node-a", "containers": [
                {"name": "proflet", "image": "proflet:1",
                 "ports": [{"name": "http", "containerPort": 4100, "protocol": "TCP"}]}]},
            "status": {"phase": "Running", "podIP": "127.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def ownership(replicas):
    """{instance: [names of the replicas that scrape it]}, from each
    replica's active targets (`r.active()` iterates instances, `r.name`)."""
    own = collections.defaultdict(list)
    for r in replicas:
        for inst in r.active():
            own[inst].append(r.name)
    return own
