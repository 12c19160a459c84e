# SPDX-License-Identifier: Apache-2.0
"""Benchmark: a whole proflet discovering a cluster of N pods (default
10,000; two container ports each, half annotated for scraping) from the fake
API server with the kubernetes-pods job of the Pyroscope seed, every pod IP
on loopback. Reports the first sync (wall and CPU), RSS once synced, the
bytes per discovered target, and the memory a /api/v1/targets answer costs.
With --annotation, every pod also carries an 800-byte
kubectl.kubernetes.io/last-applied-configuration annotation, as pods
applied with `kubectl apply` do.

Not a timed test: it fails only if discovery does not complete.

  python3 tests/bench/discovery/bench_pods.py [N] [--annotation] [--keep-dropped N] [--no-api]
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
from lib import PROFLET, SRC, free_port  # noqa: E402

FAKE = os.path.join(SRC, "tests", "k8s", "fake_apiserver.py")


def pod(i, annotation):
    ann = {"kubectl.kubernetes.io/restartedAt": "2024-01-01"}
    if i % 2 == 0:
        ann["Pyroscope.io/scrape"] = "true"
        ann["Pyroscope.io/application_name"] = "app-%d" % (i % 100)
        ann["Pyroscope.io/port"] = "6060"
    if annotation:
        ann["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-%05d" % i},
             "spec": {"containers": [{"name": "app", "image": "registry/app:1.0"}]},
             "pad": "x" * 620})[:800]
    return {"metadata": {"name": "pod-%05d" % i, "namespace": "ns-%02d" % (i % 50),
                         "uid": "uid-%08d" % i,
                         "labels": {"app": "app-%d" % (i % 100), "pod-template-hash": "abc%d" % (i % 300),
                                    "app.kubernetes.io/name": "svc", "tier": "backend"},
                         "annotations": ann,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "rs-%d" % (i % 300), "uid": "u",
                                              "controller": True}]},
            "spec": {"nodeName": "node-%d" % (i % 20),
                     "containers": [{"name": "app", "image": "registry/app:1.0",
                                     "ports": [{"name": "http", "containerPort": 8080,
                                                "protocol": "TCP"},
                                               {"name": "pprof", "containerPort": 6060,
                                                "protocol": "TCP"}]}]},
            "status": {"phase": "Running",
                       "podIP": "127.%d.%d.%d" % (1 + (i >> 16), (i >> 8) & 255, i & 255),
                       "hostIP": "127.0.0.%d" % (2 + i % 20),
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "app", "containerID": "containerd://a%d" % i}]}}


CONFIG = """
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: kubernetes-pods
    enabled-profiles: [cpu, mem]
    kubernetes-sd-configs:
      - role: pod
        api-server: http://127.0.0.1:{api}
    relabel-configs:
      - source-labels: [__meta_kubernetes_pod_annotation_Pyroscope_io_scrape]
        action: keep
        regex: true
      - source-labels: [__meta_kubernetes_pod_annotation_Pyroscope_io_application_name]
        action: replace
        target-label: __name__
      - source-labels: [__address__, __meta_kubernetes_pod_annotation_Pyroscope_io_port]
        action: replace
        regex: ([^:]+)(?::\\d+)?;(\\d+)
        replacement: $1:$2
        target-label: __address__
      - action: labelmap
        regex: __meta_kubernetes_pod_label_(.+)
      - source-labels: [__meta_kubernetes_namespace]
        target-label: kubernetes_namespace
      - source-labels: [__meta_kubernetes_pod_name]
        target-label: kubernetes_pod_name
      - source-labels: [__meta_kubernetes_pod_phase]
        regex: Pending|Succeeded|Failed|Completed
        action: drop
{keep}
remote-write:
  - url: file://{sink}
"""


def get(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def proc(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def main():
    args = sys.argv[1:]
    n = int(next((a for a in args if a.isdigit()), "10000"))
    annotation = "--annotation" in args
    keep = None
    if "--keep-dropped" in args:
        keep = args[args.index("--keep-dropped") + 1]
    tmp = tempfile.mkdtemp(prefix="proflet-bench-pods-")
    procs = []
    try:
        scenario = os.path.join(tmp, "scenario.json")
        with open(scenario, "w") as f:
            json.dump({"pods": [pod(i, annotation) for i in range(n)],
                       "settings": {"page_size_cap": 500}}, f)
        ports = os.path.join(tmp, "ports")
        procs.append(subprocess.Popen(["/usr/bin/python3", FAKE, "--port-file", ports,
                                       "--scenario", scenario, "--max-seconds", "600"]))
        for _ in range(600):
            if os.path.exists(ports):
                break
            time.sleep(0.1)
        api = int(open(ports).read().split()[0])
        sport = free_port()
        cfg = os.path.join(tmp, "proflet.yaml")
        keep_line = f"    keep-dropped-targets: {keep}" if keep is not None else ""
        with open(cfg, "w") as f:
            f.write(CONFIG.format(sport=sport, api=api, sink=os.path.join(tmp, "sink"), keep=keep_line))
        t0 = time.monotonic()
        p = subprocess.Popen([PROFLET, "--config", cfg, "--log-level", "error"])
        procs.append(p)
        ready = None
        for _ in range(1200):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{sport}/-/ready", timeout=2).status == 200:
                    m = get(f"http://127.0.0.1:{sport}/metrics").decode()
                    if metric(m, "proflet_scrape_pairs") and metric(m, "proflet_discovery_targets"):
                        ready = time.monotonic() - t0
                        break
            except Exception:
                pass
            time.sleep(0.05)
        if ready is None:
            print("FAIL: discovery did not complete", file=sys.stderr)
            sys.exit(1)
        sync_cpu = cpu_s(p.pid)
        time.sleep(3)  # let delivery settle and free what the first sync used
        m = get(f"http://127.0.0.1:{sport}/metrics").decode()
        discovered = metric(m, "proflet_discovery_targets")
        pairs = metric(m, "proflet_scrape_pairs")
        rss = proc(p.pid, "VmRSS")
        hwm0 = proc(p.pid, "VmHWM")
        t = time.monotonic()
        body = b"" if "--no-api" in args else get(f"http://127.0.0.1:{sport}/api/v1/targets")
        api_s = time.monotonic() - t
        hwm1 = proc(p.pid, "VmHWM")
        print(f"pods {n}{' with 800-byte annotation' if annotation else ''}: "
              f"{int(discovered)} discovered targets, {int(pairs)} scrape pairs")
        print(f"first sync: {ready:.2f} s wall, {sync_cpu:.2f} s CPU")
        print(f"RSS once synced: {rss / 1024:.1f} MiB ({rss * 1024 / discovered:.0f} bytes per discovered target; "
              f"anonymous {proc(p.pid, 'RssAnon') / 1024:.1f} MiB, files {proc(p.pid, 'RssFile') / 1024:.1f} MiB)")
        print(f"label strings: {int(metric(m, 'proflet_label_strings'))} distinct, "
              f"{metric(m, 'proflet_label_strings_bytes') / 1e6:.1f} MB")
        print(f"/api/v1/targets: {len(body) / 1e6:.1f} MB in {api_s:.2f} s, peak RSS {hwm0 / 1024:.1f} -> {hwm1 / 1024:.1f} MiB")
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    finally:
        for q in procs:
            if q.poll() is None:
                q.kill()
                q.wait()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
