# SPDX-License-Identifier: Apache-2.0
"""Cluster in a box: the chart's rendered DaemonSet runs for real.

The DaemonSet's command, arguments and environment (downward-API values
filled in as the kubelet would) and its ConfigMap run proflet against the
project's fake Kubernetes API server (tests/k8s/fake_apiserver.py, over TLS
with a bearer token, found through KUBERNETES_SERVICE_HOST/PORT like in a
pod) and the project's Pyroscope push receiver (tests/receiver/receiver.py)
on 127.0.0.1. Pods are added through the
fake server's control interface and point at a real Go service
(examples/demoapp). Annotated pods on this node end up as profiles at the
receiver, with either annotation convention; pods on another node or
without annotations do not.

What differs from a real pod, and why: volume mount paths are mapped to
temporary directories (the ConfigMap's /etc/proflet, the spool emptyDir);
the status server listens on 127.0.0.1:<free port> instead of 0.0.0.0:4100;
each kubernetes-sd-config gets `service-account-dir` pointing at a
temporary token/ca.crt/namespace instead of
/var/run/secrets/kubernetes.io/serviceaccount; the remote-write URL and the
scrape interval are chart values set for the test.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import (SRC, Procs, alive, check, free_port, http_get, need_file, one, render, run_tests,  # noqa: E402
                  tail, wait_for)

FAKE = os.path.join(SRC, "tests", "k8s", "fake_apiserver.py")
RECEIVER = os.path.join(SRC, "tests", "receiver", "receiver.py")
NODE = "node-a"
TOKEN = "proflet-test-token-1"


def control(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read() or b"{}")


def pod(name, node, ip, port, annotations, labels=None):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}", "labels": labels or {"app": name},
                     "annotations": annotations},
        "spec": {"nodeName": node, "containers": [
            {"name": "app", "image": "demoapp", "ports": [{"name": "pprof", "containerPort": port, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def kubelet_env(container, api_port):
    """The container's environment as the kubelet would set it."""
    field = {"spec.nodeName": NODE, "metadata.name": "proflet-x7k2p", "metadata.namespace": "profiling"}
    env = {"PATH": "/usr/bin:/bin", "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(api_port), "HOME": "/nonexistent"}
    for e in container.get("env") or []:
        if "value" in e:
            env[e["name"]] = e["value"]
        else:
            fp = e["valueFrom"]["fieldRef"]["fieldPath"]
            check(fp in field, f"env {e['name']} from unsupported field {fp}")
            env[e["name"]] = field[fp]
    return env


def make_tls(tmp):
    key, cert = os.path.join(tmp, "tls.key"), os.path.join(tmp, "tls.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return key, cert


def test_daemonset_scrapes_annotated_pods_on_its_node():
    proflet = need_file(os.environ.get("PROFLET"), "the proflet binary (env PROFLET)")
    need_file(FAKE, "the fake API server tests/k8s/fake_apiserver.py")
    need_file(RECEIVER, "the push receiver tests/receiver/receiver.py")
    tmp = tempfile.mkdtemp(prefix="proflet-cluster-")
    try:
        with Procs() as procs:
            rlog = os.path.join(tmp, "receiver.log")
            procs.start(["/usr/bin/python3", RECEIVER, "--port", "0"], rlog)
            rports = wait_for("receiver ports", lambda: json.loads(open(rlog).readline()), 60)
            recv_port, recv_ctl = rports["port"], rports["control"]

            def accepted():
                with urllib.request.urlopen(f"http://127.0.0.1:{recv_ctl}/accepted", timeout=5) as r:
                    return json.loads(r.read())["profiles"]

            # The Go service the pods "run".
            demo = os.path.join(tmp, "demoapp")
            subprocess.run(["go", "build", "-o", demo, "."], cwd=os.path.join(SRC, "examples", "demoapp"),
                           env=dict(os.environ, GO111MODULE="off", GOCACHE=os.environ.get("GOCACHE", os.path.join(tmp, "gocache"))),
                           check=True, timeout=300)
            portf = os.path.join(tmp, "demo.port")
            procs.start([demo, "-addr", "127.0.0.1:0", "-port-file", portf], os.path.join(tmp, "demo.log"))
            demo_port = int(wait_for("demoapp port", lambda: open(portf).read().strip(), 30))
            # A second process for the second annotated pod: Go allows one CPU
            # profile at a time per process, as two real pods would not share.
            portf2 = os.path.join(tmp, "demo2.port")
            procs.start([demo, "-addr", "127.0.0.1:0", "-port-file", portf2], os.path.join(tmp, "demo2.log"))
            demo2_port = int(wait_for("second demoapp port", lambda: open(portf2).read().strip(), 30))

            # The API server, in-cluster style: TLS + bearer token.
            key, cert = make_tls(tmp)
            apif = os.path.join(tmp, "api.ports")
            procs.start(["/usr/bin/python3", FAKE, "--port-file", apif, "--tls-cert", cert, "--tls-key", key,
                         "--token", TOKEN, "--max-seconds", "300"], os.path.join(tmp, "api.log"))
            api_port, ctl_port = map(int, wait_for("fake API ports", lambda: open(apif).read().split(), 30))
            sa = os.path.join(tmp, "serviceaccount")
            os.makedirs(sa)
            shutil.copy(cert, os.path.join(sa, "ca.crt"))
            with open(os.path.join(sa, "token"), "w") as f:
                f.write(TOKEN)
            with open(os.path.join(sa, "namespace"), "w") as f:
                f.write("profiling")

            # Pods: two annotated on this node (one per convention), one
            # annotated on another node, one unannotated on this node.
            control(ctl_port, "/apply", {"kind": "pods", "object": pod("cart", NODE, "127.0.0.1", demo_port, {
                "pyroscope.io/scrape": "true", "pyroscope.io/port": str(demo_port),
                "pyroscope.io/application-name": "cart"})})
            control(ctl_port, "/apply", {"kind": "pods", "object": pod("checkout", NODE, "127.0.0.1", demo2_port, {
                "profiles.grafana.com/cpu.scrape": "true", "profiles.grafana.com/cpu.port": str(demo2_port),
                "profiles.grafana.com/service_name": "checkout"})})
            control(ctl_port, "/apply", {"kind": "pods", "object": pod("elsewhere", "node-b", "127.0.0.1", demo_port, {
                "pyroscope.io/scrape": "true", "pyroscope.io/port": str(demo_port),
                "pyroscope.io/application-name": "elsewhere"})})
            control(ctl_port, "/apply", {"kind": "pods", "object": pod("quiet", NODE, "127.0.0.1", demo_port, {})})

            # The chart, rendered for this "cluster".
            docs = render("--set", "scrape.interval=4s", "--set", "scrape.timeout=3s",
                          "-f", _values(tmp, recv_port))
            ds = one(docs, "DaemonSet")
            c = ds["spec"]["template"]["spec"]["containers"][0]
            mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
            cfg = yaml.safe_load(one(docs, "ConfigMap")["data"]["proflet.yaml"])
            status_port = free_port()
            cfg["server"]["listen-address"] = f"127.0.0.1:{status_port}"
            spool = os.path.join(tmp, "spool")
            os.makedirs(spool)
            check(cfg["spool"]["dir"] == mounts["spool"], "the config's spool is the spool volume")
            cfg["spool"]["dir"] = spool
            for j in cfg["scrape-configs"]:
                for sd in j.get("kubernetes-sd-configs", []):
                    sd["service-account-dir"] = sa
            etc = os.path.join(tmp, "etc-proflet")
            os.makedirs(etc)
            with open(os.path.join(etc, "proflet.yaml"), "w") as f:
                yaml.safe_dump(cfg, f, sort_keys=False)
            check(c["command"] == ["/usr/bin/proflet"], f"command {c['command']}")
            args = [a.replace(mounts["config"], etc) for a in c["args"]]
            env = kubelet_env(c, api_port)

            log = os.path.join(tmp, "proflet.log")
            p = procs.start([proflet] + args, log, env=env)
            try:
                wait_for("/-/healthy", lambda: alive(p) and http_get(f"http://127.0.0.1:{status_port}/-/healthy")[0] == 200, 30)
                wait_for("/-/ready", lambda: http_get(f"http://127.0.0.1:{status_port}/-/ready")[0] == 200, 60)

                def services():
                    return {s["labels"].get("service_name") for s in accepted()}

                wait_for("profiles of cart and checkout at the receiver",
                         lambda: alive(p) and {"cart", "checkout"} <= services(), 90)
            except Exception:
                raise AssertionError(f"proflet log:\n{tail(log)}\nAPI log:\n{tail(os.path.join(tmp, 'api.log'), 20)}")
            series = [(s["labels"], s) for s in accepted()]
            names = services()
            check("elsewhere" not in names, f"a pod on another node was scraped: {names}")
            check("quiet" not in names and "shop/app" not in names, f"an unannotated pod was scraped: {names}")
            cart = [s for s in series if s[0].get("service_name") == "cart"]
            check(cart[0][0].get("kubernetes_namespace") == "shop" and cart[0][0].get("kubernetes_pod_name") == "cart",
                  f"seed labels on cart profiles: {cart[0][0]}")
            check(cart[0][1]["len"] > 0 and cart[0][1]["head"][:2] == "\x1f\x8b", "raw_profile is gzip pprof")
            checkout = [s for s in series if s[0].get("service_name") == "checkout"]
            check({s[0].get("__name__") for s in checkout} == {"process_cpu"},
                  f"the cpu-only annotation gives only process_cpu: {[s[0] for s in checkout]}")
            check(checkout[0][0].get("namespace") == "shop" and checkout[0][0].get("pod") == "checkout",
                  f"grafana labels: {checkout[0][0]}")
            # Discovery really was node-local and authenticated.
            with urllib.request.urlopen(f"http://127.0.0.1:{ctl_port}/requests", timeout=5) as r:
                reqs = json.loads(r.read())
            text = json.dumps(reqs)
            check("spec.nodeName" in text and NODE in text, f"pods requested with the node field selector: {text[:800]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _values(tmp, recv_port):
    path = os.path.join(tmp, "values.yaml")
    with open(path, "w") as f:
        yaml.safe_dump({"remoteWrite": [{"url": f"http://127.0.0.1:{recv_port}"}]}, f)
    return path


if __name__ == "__main__":
    run_tests([test_daemonset_scrapes_annotated_pods_on_its_node])
