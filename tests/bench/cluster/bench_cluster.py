# SPDX-License-Identifier: Apache-2.0
"""Benchmark: clustered replicas sharing N loopback targets (default 1,000)
through the fake Kubernetes API server, 3 -> 4 -> 3 replicas.

Reports, for a replica joining (its pod turning ready) and one dying
(SIGKILL, its pod turning not ready): the time until every target has
exactly one owner again in the replicas' /api/v1/targets, the time until
every target that moved has been scraped by its new owner (the fixture's
request log), and the fraction of targets that moved. Then the CPU a
replica spends on its membership watch alone, quiet and while the API
server sends MODIFIED events of the proflet pods (status churn that changes
no view) at 50/s.

Not a timed test: it fails only if the replicas never settle.

  python3 tests/bench/cluster/bench_cluster.py [N] [--interval SECONDS]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
from lib import (PROFLET, SRC, check, environment, free_port, http_get, metric_value, metrics,  # noqa: E402
                 run_test, stop, wait_for, wait_ready)
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
from peers import NS, control, ownership, pod  # noqa: E402



def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Replica:
    def __init__(self, tmp, procs, name, api_port, targets, interval):
        self.name = name
        self.sport = free_port()
        cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write(f"""
log-level: warn
server: {{listen-address: 127.0.0.1:{self.sport}}}
clustering:
  enabled: true
  kubernetes:
    api-server: http://127.0.0.1:{api_port}
    namespaces: {{names: [{NS}]}}
    selectors: [{{role: pod, label: app.kubernetes.io/name=proflet}}]
scrape-configs:
  - job-name: shared
    scrape-interval: {interval}s
    scrape-timeout: 5s
    enabled-profiles: [goroutine]
    keep-dropped-targets: 1
    static-configs:
      - targets: [{targets}]
remote-write:
  - url: file://{os.path.join(tmp, 'sink-' + name)}
""")
        self.p = procs.start([PROFLET, "--config", cfg], stderr=subprocess.DEVNULL,
                             env=dict(os.environ, POD_NAME=name))

    def active(self):
        d = json.loads(http_get(f"http://127.0.0.1:{self.sport}/api/v1/targets", timeout=30)[1])["data"]
        return {t["labels"]["instance"] for t in d["activeTargets"]}


def settled(reps, instances):
    own = ownership(reps)
    return set(own) == instances and all(len(v) == 1 for v in own.values())


def scraped_since(fport, instances, t0):
    h = json.loads(http_get(f"http://127.0.0.1:{fport}/stats", timeout=60)[1])
    return all(any(t > t0 for t in h.get(i.rsplit(":", 1)[1], [])) for i in instances)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=1000)
    ap.add_argument("--interval", type=int, default=10)
    a = ap.parse_args()
    n, interval = a.n, a.interval
    with environment() as (tmp, procs):
        pf = os.path.join(tmp, "api.ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "k8s", "fake_apiserver.py"), "--port-file", pf],
                    stderr=subprocess.DEVNULL)
        api_port, cport = map(int, wait_for("fake API server", lambda: open(pf).read().split()))
        out = os.path.join(tmp, "ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "integration", "manyports.py"), str(n), out])
        base, fport = map(int, wait_for("fixture", lambda: open(out).read().split(), timeout=60))
        instances = {f"127.0.0.1:{base + i}" for i in range(n)}
        targets = ", ".join(f'"{i}"' for i in sorted(instances))
        reps = []
        for i in range(3):
            control(cport, "/apply", {"kind": "pods", "object": pod(f"proflet-{i}", True)})
            reps.append(Replica(tmp, procs, f"proflet-{i}", api_port, targets, interval))
        for r in reps:
            wait_ready(r.sport, timeout=60)
        wait_for("3 replicas settled", lambda: settled(reps, instances), timeout=60, interval=0.2)
        print(f"{n} targets, scrape interval {interval}s")

        def step(what, before_reps, after_reps, change):
            before = {i: o[0] for i, o in ownership(before_reps).items()}
            t0 = change()
            wait_for(f"{what} settled", lambda: settled(after_reps, instances), timeout=60, interval=0.1)
            t_settle = time.time() - t0
            after = {i: o[0] for i, o in ownership(after_reps).items()}
            moved = {i for i in instances if before.get(i) != after[i]}
            wait_for(f"{what}: moved targets scraped", lambda: scraped_since(fport, moved, t0),
                     timeout=3 * interval + 30, interval=0.2)
            t_scraped = time.time() - t0
            print(f"{what}: settled in {t_settle:.2f}s, moved targets all scraped by their new owner in "
                  f"{t_scraped:.2f}s; {len(moved)} of {n} moved ({100.0 * len(moved) / n:.1f}%)")

        # 3 -> 4: the new replica starts with its pod not ready, as a pod does
        # until its readiness probe passes; the clock starts when it turns ready.
        control(cport, "/apply", {"kind": "pods", "object": pod("proflet-3", False)})
        new = Replica(tmp, procs, "proflet-3", api_port, targets, interval)
        wait_ready(new.sport, timeout=60)

        def join():
            control(cport, "/apply", {"kind": "pods", "object": pod("proflet-3", True)})
            return time.time()
        step("3 -> 4 (join)", reps, reps + [new], join)
        reps.append(new)

        victim = reps[1]

        def kill():
            victim.p.send_signal(signal.SIGKILL)
            control(cport, "/apply", {"kind": "pods", "object": pod(victim.name, False)})
            return time.time()
        alive = [r for r in reps if r is not victim]
        step("4 -> 3 (SIGKILL)", reps, alive, kill)

        # CPU of the membership watch: a replica whose pod is not in the API
        # is no peer, owns nothing and scrapes nothing, but watches the peers
        # as every replica does. Pod status churn (MODIFIED events of the
        # proflet pods that change no view) at 50/s against a quiet period.
        obs = Replica(tmp, procs, "observer", api_port, targets, interval)
        wait_ready(obs.sport, timeout=60)
        check(not obs.active(), "the observer scrapes nothing")
        c0, t0 = cpu_seconds(obs.p.pid), time.time()
        wait_for("a quiet period", lambda: time.time() - t0 >= 15, timeout=30)
        idle = (cpu_seconds(obs.p.pid) - c0) / (time.time() - t0)
        changes0 = metric_value(metrics(obs.sport), "proflet_cluster_membership_changes_total")
        control(cport, "/churn", {"rate": 50, "seconds": 15})
        c0, t0 = cpu_seconds(obs.p.pid), time.time()
        wait_for("the churn period", lambda: time.time() - t0 >= 15, timeout=30)
        churn = (cpu_seconds(obs.p.pid) - c0) / (time.time() - t0)
        changes = metric_value(metrics(obs.sport), "proflet_cluster_membership_changes_total") - changes0
        print(f"membership watch CPU: {100 * idle:.2f}% of a core quiet, {100 * churn:.2f}% with 50 "
              f"pod MODIFIED events/s ({changes:.0f} view changes)")
        alive.append(obs)
        for r in alive:
            check(stop(r.p, timeout=60) == 0, f"{r.name} exit status")


run_test(main)
