# SPDX-License-Identifier: Apache-2.0
"""The seed's kubernetes-pods job end to end: proflet lists and watches a
fake Kubernetes API server (tests/k8s/fake_apiserver.py), applies the seed's
relabel rules unchanged (tests/agent/seeds/001_kubernetes_wrapped.yaml),
scrapes the real Go service behind an annotated pod, and forgets the pod
when it is deleted. Also: /-/ready stays false until discovery has synced,
and `proflet targets` lists the same Kubernetes targets and exits."""
import json
import os
import subprocess
import sys
import urllib.request

import yaml

from lib import *

SEED = os.path.join(SRC, "tests", "agent", "seeds", "001_kubernetes_wrapped.yaml")


def control(cport, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{cport}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.read()


def pod(name, port, annotations, phase="Running"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}",
                         "labels": {"app": name, "app.kubernetes.io/part-of": "shop"},
                         "annotations": annotations},
            "spec": {"nodeName": "node-a", "containers": [
                {"name": "app", "image": "demoapp:1",
                 "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]},
            "status": {"phase": phase, "podIP": "127.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def config(api_port, sport, sink):
    doc = yaml.safe_load(open(SEED))
    top = doc["pyroscopeConfigs"]
    job = top["scrape-configs"][0]
    job["kubernetes-sd-configs"][0]["api-server"] = f"http://127.0.0.1:{api_port}"
    job["scrape-interval"] = "2s"
    job["scrape-timeout"] = "1s"
    top["log-level"] = "info"
    top["server"] = {"listen-address": f"127.0.0.1:{sport}"}
    top["remote-write"] = [{"url": f"file://{sink}"}]
    top["discovery"] = {"coalesce-delay": "500ms"}
    return yaml.safe_dump(doc)


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        pf = os.path.join(tmp, "api.ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "k8s", "fake_apiserver.py"), "--port-file", pf],
                    stderr=subprocess.DEVNULL)
        api_port, cport = map(int, wait_for("fake API server", lambda: open(pf).read().split()))
        # Until the token is lifted every request gets 401: discovery cannot sync.
        control(cport, "/token", {"token": "not-proflets"})
        control(cport, "/apply", {"kind": "pods", "object": pod("checkout", port, {
            "pyroscope.io/scrape": "true", "pyroscope.io/application-name": "checkout",
            "pyroscope.io/port": str(port), "pyroscope.io/profile-cpu-enabled": "false"})})
        control(cport, "/apply", {"kind": "pods", "object": pod("quiet", port, {})})
        control(cport, "/apply", {"kind": "pods", "object": pod("starting", port, {
            "pyroscope.io/scrape": "true", "pyroscope.io/port": str(port)}, phase="Pending")})

        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, config(api_port, sport, sink))
        wait_for("status server", lambda: http_get(f"http://127.0.0.1:{sport}/-/healthy")[0] == 200)
        code = None
        try:
            code = http_get(f"http://127.0.0.1:{sport}/-/ready")[0]
        except urllib.error.HTTPError as e:
            code = e.code
        check(code == 503, f"/-/ready answered {code} before discovery could sync")
        control(cport, "/token", {"token": None})
        wait_ready(sport, timeout=40)

        # Only the annotated, running pod is a target, and only for memory:
        # its annotation switched cpu off through the seed's labelmap rule.
        def active():
            body = http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1]
            return json.loads(body)["data"]["activeTargets"]

        ts = wait_for("the annotated pod's target", active, timeout=10)
        check(len(ts) == 1, f"expected exactly one active target, got {[t['labels'] for t in ts]}")
        t = ts[0]
        check(t["scrapeUrl"] == f"http://127.0.0.1:{port}/debug/pprof/allocs", t["scrapeUrl"])
        want = {"service_name": "checkout", "kubernetes_namespace": "shop", "kubernetes_pod_name": "checkout",
                "app": "checkout", "app_kubernetes_io_part_of": "shop", "instance": f"127.0.0.1:{port}",
                "job": "kubernetes-pods", "__name__": "memory"}
        for k, v in want.items():
            check(t["labels"].get(k) == v, f"label {k}={t['labels'].get(k)!r}, want {v!r}: {t['labels']}")
        check(not any(k.startswith("__meta") for k in t["labels"]), t["labels"])

        def memory_profiles():
            return [m for _, m in sink_profiles(sink) if labels_of(m).get("__name__") == "memory"]

        profs = wait_for("a memory profile from the pod", memory_profiles, timeout=15)
        l = labels_of(profs[0])
        check(l.get("service_name") == "checkout" and l.get("kubernetes_pod_name") == "checkout", l)
        check(not [m for _, m in sink_profiles(sink) if labels_of(m).get("__name__") == "process_cpu"],
              "cpu was scraped although the pod's annotation disabled it")

        # proflet targets lists the same, once, and exits.
        cfgfile = p.config_path
        r = subprocess.run([PROFLET, "targets", "--config", cfgfile], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"proflet targets failed: {r.stderr}")
        out = json.loads(r.stdout)
        check(len(out) == 1 and out[0]["labels"].get("__name__") == "checkout", f"targets printed {out}")
        check(out[0]["discoveredLabels"].get("__meta_kubernetes_pod_annotation_pyroscope_io_scrape") == "true", out[0])
        r = subprocess.run([PROFLET, "targets", "--config", cfgfile, "--show-dropped"], capture_output=True,
                           text=True, timeout=60)
        check(len(json.loads(r.stdout)) == 3, f"--show-dropped: {r.stdout}")

        # Deleting the pod stops its scrapes within the coalescing delay.
        control(cport, "/delete", {"kind": "pods", "namespace": "shop", "name": "checkout"})
        wait_for("the target to go", lambda: not active(), timeout=5)
        m = metrics(sport)
        check(metric_value(m, "proflet_scrape_pairs") == 0, "pairs left after the pod was deleted")
        check(stop(p) == 0, "exit status after SIGTERM")


run_test(main)
