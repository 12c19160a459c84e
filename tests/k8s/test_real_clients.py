#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Proves the fake API server behaves like Kubernetes for real clients:
kubectl (list + watch with --output-watch-events) and the official Python
client (watch.Watch().stream over list_namespaced_pod) must see the pods a
test adds and deletes through the control interface. Bounded: every wait
has a deadline; the server and kubectl are killed at the end."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib  # noqa: E402  (the shared helpers; unwinds on meson's SIGTERM)

HERE = os.path.dirname(os.path.abspath(__file__))


def start_server(tmp):
    pf = os.path.join(tmp, "ports")
    p = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "fake_apiserver.py"),
                          "--port-file", pf, "--max-seconds", "120",
                          "--scenario", os.path.join(HERE, "scenarios", "basic.json")])
    deadline = time.time() + 10
    while not os.path.exists(pf):
        if time.time() > deadline:
            p.kill()
            raise SystemExit("fake server did not start")
        time.sleep(0.02)
    api, ctl = open(pf).read().split()
    return p, int(api), int(ctl)


def control(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.load(r)


def pod(name, ns, ip):
    return {"metadata": {"name": name, "namespace": ns, "labels": {"app": "t"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": ip}}




def test_kubectl(api, ctl):
    out = []
    p = subprocess.Popen(["/usr/bin/kubectl", "--server=http://127.0.0.1:%d" % api,
                          "get", "pods", "-A", "--watch", "--output-watch-events",
                          "--request-timeout=0"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, KUBECONFIG="/dev/null", HOME=tempfile.gettempdir()))
    t = threading.Thread(target=lambda: [out.append(l) for l in p.stdout], daemon=True)
    t.start()
    try:
        lib.wait_for("kubectl initial list", lambda: any("web-1" in l for l in out), timeout=20)
        # The initial list must be complete before the watch starts.
        lib.wait_for("kubectl watch", lambda: any(r["watch"] for r in requests(ctl)), timeout=20)
        control(ctl, "/apply", {"kind": "pods", "object": pod("kc-new", "shop", "10.9.0.1")})
        lib.wait_for("kubectl ADDED", lambda: any("ADDED" in l and "kc-new" in l for l in out), timeout=20)
        control(ctl, "/delete", {"kind": "pods", "namespace": "shop", "name": "kc-new"})
        lib.wait_for("kubectl DELETED", lambda: any("DELETED" in l and "kc-new" in l for l in out),
                     timeout=20)
    finally:
        p.kill()
        p.wait()
    print("kubectl saw:", "".join(out))


def requests(ctl):
    with urllib.request.urlopen("http://127.0.0.1:%d/requests" % ctl, timeout=5) as r:
        return json.load(r)


def test_python_client(api, ctl):
    from kubernetes import client, watch
    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:%d" % api
    v1 = client.CoreV1Api(client.ApiClient(cfg))
    names = sorted(p.metadata.name for p in v1.list_namespaced_pod("shop").items)
    assert "web-1" in names and "web-2" in names, names
    seen = []
    w = watch.Watch()

    def run():
        for ev in w.stream(v1.list_namespaced_pod, namespace="shop", timeout_seconds=30):
            seen.append((ev["type"], ev["object"].metadata.name))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    # The stream starts with synthetic ADDED events for existing pods.
    lib.wait_for("python initial ADDED", lambda: ("ADDED", "web-2") in seen, timeout=20)
    control(ctl, "/apply", {"kind": "pods", "object": pod("py-new", "shop", "10.9.0.2")})
    control(ctl, "/apply", {"kind": "pods", "object": pod("other-ns", "default", "10.9.0.3")})
    lib.wait_for("python ADDED", lambda: ("ADDED", "py-new") in seen, timeout=20)
    control(ctl, "/delete", {"kind": "pods", "namespace": "shop", "name": "py-new"})
    lib.wait_for("python DELETED", lambda: ("DELETED", "py-new") in seen, timeout=20)
    w.stop()
    assert ("ADDED", "other-ns") not in seen, seen  # namespaced watch only
    print("python client saw:", seen)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        p, api, ctl = start_server(tmp)
        try:
            test_python_client(api, ctl)
            test_kubectl(api, ctl)
        finally:
            p.terminate()
            p.wait(timeout=10)
    print("ok")


if __name__ == "__main__":
    main()
