# SPDX-License-Identifier: Apache-2.0
"""Clustering end to end: real proflet replicas whose membership is the
ready proflet pods of the fake Kubernetes API server (tests/k8s/
fake_apiserver.py), sharing 60 loopback targets (one manyports fixture).

  1. 3 replicas: every target is owned and scraped by exactly one replica
     (the API's active targets, and each replica's directory sink), and
     `proflet targets` names the same owners.
  2. Scale 3 -> 4: at most about a quarter of the targets change owner, all
     to the new replica, and the old replicas start no new pair (kept
     targets keep their timers and delta state).
  3. An API server outage: no target dropped or doubled meanwhile.
  4. SIGKILL one replica and mark its pod not ready, as the kubelet would:
     its targets are scraped by the others within the bound of
     docs/clustering.md (one scrape interval plus a second after the pod
     turns not ready; asserted with a whole interval of slack), and once
     the view settles no target is scraped twice.
  5. Delete a replica's pod as Kubernetes does: the API server marks it
     (deletionTimestamp) while it is still Ready, then the replica gets
     SIGTERM: the others take its targets within the same bound, without
     waiting for the pod to turn not ready, and it exits 0.
"""
import collections
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lib import *  # noqa: E402,F403
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import NS, control, ownership, pod  # noqa: E402

N = 60
INTERVAL = 2.0


def config(api_port, sport, sink, base):
    targets = ", ".join(f'"127.0.0.1:{base + i}"' for i in range(N))
    return f"""
log-level: info
server:
  listen-address: 127.0.0.1:{sport}
clustering:
  enabled: true
  kubernetes:
    api-server: http://127.0.0.1:{api_port}
    namespaces:
      names: [{NS}]
    selectors:
      - role: pod
        label: app.kubernetes.io/name=proflet
scrape-configs:
  - job-name: shared
    scrape-interval: {int(INTERVAL)}s
    scrape-timeout: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: shared
        targets: [{targets}]
remote-write:
  - url: file://{sink}
"""


class Replica:
    def __init__(self, tmp, procs, name, api_port, base):
        self.name = name
        self.sport = free_port()
        self.sink = os.path.join(tmp, "sink-" + name)
        self.cfg = cfg = os.path.join(tmp, name + ".yaml")
        with open(cfg, "w") as f:
            f.write(config(api_port, self.sport, self.sink, base))
        self.log = open(os.path.join(tmp, name + ".log"), "w")
        self.p = procs.start([PROFLET, "--config", cfg], stderr=self.log,
                             env=dict(os.environ, POD_NAME=name))

    def targets(self):
        return json.loads(http_get(f"http://127.0.0.1:{self.sport}/api/v1/targets")[1])["data"]

    def active(self):
        """{instance: owner shown} of the targets this replica scrapes."""
        return {t["labels"]["instance"]: t.get("owner") for t in self.targets()["activeTargets"]}

    def metric(self, name, **labels):
        return metric_value(metrics(self.sport), name, **labels)

    def sink_instances(self):
        return {labels_of(meta).get("instance") for _, meta in sink_profiles(self.sink)}


def hits(cport):
    return json.loads(http_get(f"http://127.0.0.1:{cport}/stats", timeout=30)[1])


def scrape_times(h, instance):
    """The times the fake target recorded for `instance` (host:port, keyed by port)."""
    return h.get(str(int(instance.rsplit(":", 1)[1])), [])


def scraped_since(fport, instances, since):
    """Whether every one of `instances` was scraped after `since`."""
    h = hits(fport)
    return all(any(t > since for t in scrape_times(h, i)) for i in instances)


def settled(replicas, peers, instances):
    """Every replica sees `peers` live peers and each target has exactly one owner."""
    for r in replicas:
        if r.metric("proflet_cluster_peers") != peers:
            return False
    own = ownership(replicas)
    return set(own) == instances and all(len(v) == 1 for v in own.values())


def main():
    with environment() as (tmp, procs):
        pf = os.path.join(tmp, "api.ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "k8s", "fake_apiserver.py"),
                     "--port-file", pf], stderr=subprocess.DEVNULL)
        api_port, cport = map(int, wait_for("fake API server", lambda: open(pf).read().split()))
        out = os.path.join(tmp, "ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "integration", "manyports.py"),
                     str(N), out])
        base, fport = map(int, wait_for("fixture", lambda: open(out).read().split(), timeout=30))
        instances = {f"127.0.0.1:{base + i}" for i in range(N)}

        names = [f"proflet-{i}" for i in range(3)]
        for n in names:
            control(cport, "/apply", {"kind": "pods", "object": pod(n, True)})
        reps = [Replica(tmp, procs, n, api_port, base) for n in names]
        for r in reps:
            wait_ready(r.sport, timeout=30)

        # 1. Three replicas: each target has exactly one owner, who names itself.
        wait_for("3 replicas to share the targets", lambda: settled(reps, 3, instances), timeout=20)
        for r in reps:
            act = r.active()
            check(all(o == r.name for o in act.values()), f"{r.name} shows owners {set(act.values())}")
            dropped = r.targets()["droppedTargets"]
            check(len(act) + len(dropped) == N, f"{r.name}: {len(act)} active + {len(dropped)} dropped")
            check(all(d["dropReason"].startswith("owned by proflet-") and d["owner"] != r.name
                      for d in dropped), f"{r.name}: dropped targets lack their owner: {dropped[:1]}")
            check(r.metric("proflet_cluster_owned_targets") == len(act), "owned-targets metric")
        wait_for("every target in some sink",
                 lambda: set().union(*(r.sink_instances() for r in reps)) >= instances, timeout=20)
        seen = collections.Counter(i for r in reps for i in r.sink_instances())
        doubled = [i for i, c in seen.items() if c > 1]
        check(not doubled, f"targets scraped by two replicas: {doubled[:5]}")
        # `proflet targets` (a dry run as proflet-0) waits for the peers and
        # names the same owners the running replicas agree on. Its first lists
        # of the peers fail, so it must wait for them (static targets are
        # known at once).
        control(cport, "/fail", {"status": 500, "count": 2, "watch": False,
                                 "path": f"/api/v1/namespaces/{NS}/pods"})
        p = subprocess.run([PROFLET, "targets", "--config", reps[0].cfg], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, POD_NAME="proflet-0"))
        check(p.returncode == 0, f"proflet targets failed: {p.stderr[-500:]}")
        listed = json.loads(p.stdout)
        owners = {i: o[0] for i, o in ownership(reps).items()}
        check(len(listed) == N, f"proflet targets listed {len(listed)} targets")
        for t in listed:
            inst = t["labels"]["instance"]
            check(t.get("owner") == owners[inst], f"proflet targets says {inst} is {t.get('owner')}'s, "
                  f"the replicas say {owners[inst]}'s")
            check(bool(t.get("ownedElsewhere")) == (owners[inst] != "proflet-0"), f"ownedElsewhere of {inst}")
        print("3 replicas: " + ", ".join(f"{r.name} owns {len(r.active())}" for r in reps))

        # 2. Scale 3 -> 4: about a quarter moves, all of it to the new replica.
        before = {i: o[0] for i, o in ownership(reps).items()}
        created = {r.name: r.metric("proflet_scrape_pairs_created_total") for r in reps}
        changes = {(r.name, d): r.metric("proflet_scrape_ownership_changes_total", direction=d)
                   for r in reps for d in ("gained", "lost")}
        control(cport, "/apply", {"kind": "pods", "object": pod("proflet-3", True)})
        reps.append(Replica(tmp, procs, "proflet-3", api_port, base))
        wait_ready(reps[3].sport, timeout=30)
        wait_for("4 replicas to share the targets", lambda: settled(reps, 4, instances), timeout=20)
        after = {i: o[0] for i, o in ownership(reps).items()}
        moved = [i for i in instances if before[i] != after[i]]
        check(all(after[i] == "proflet-3" for i in moved),
              f"targets moved between old replicas: {[(i, before[i], after[i]) for i in moved if after[i] != 'proflet-3'][:5]}")
        check(0 < len(moved) <= N // 4 + 11, f"{len(moved)} of {N} targets moved on 3 -> 4")
        lost = 0
        for r in reps[:3]:
            check(r.metric("proflet_scrape_pairs_created_total") == created[r.name],
                  f"{r.name} started new pairs when a peer joined (kept targets must keep theirs)")
            check(r.metric("proflet_scrape_ownership_changes_total", direction="gained") ==
                  changes[(r.name, "gained")], f"{r.name} gained targets when a peer joined")
            lost += r.metric("proflet_scrape_ownership_changes_total", direction="lost") - changes[(r.name, "lost")]
        check(lost == len(moved), f"the old replicas count {lost} targets lost, {len(moved)} moved")
        print(f"scale 3 -> 4: {len(moved)} of {N} targets moved (expected about {N // 4})")

        # 3. API server outage: the replicas keep their view; nothing dropped or doubled.
        errors0 = sum(r.metric("proflet_cluster_membership_errors_total") for r in reps)
        control(cport, "/restart", {"down_ms": 3000})
        t_end = time.monotonic() + 3.5
        samples = 0
        while time.monotonic() < t_end:
            now = {i: o[0] for i, o in ownership(reps).items() if len(o) == 1}
            check(now == after, "ownership changed while the API server was down")
            samples += 1
            time.sleep(0.25)
        check(samples >= 5, f"only {samples} samples during the outage")
        wait_for("a membership error counted",
                 lambda: sum(r.metric("proflet_cluster_membership_errors_total") for r in reps) > errors0,
                 timeout=10)

        # 4. SIGKILL one replica; its pod turns not ready as the kubelet would mark it.
        victim = reps[1]
        lost = {i for i, o in after.items() if o == victim.name}
        victim.p.send_signal(signal.SIGKILL)
        victim.p.wait(timeout=10)
        control(cport, "/apply", {"kind": "pods", "object": pod(victim.name, False)})
        t_kill = time.time()
        alive = [r for r in reps if r is not victim]
        bound = 2 * INTERVAL + 1.0

        wait_for("the killed replica's targets scraped again", lambda: scraped_since(fport, lost, t_kill),
                 timeout=bound + 5)
        took = time.time() - t_kill
        check(took <= bound, f"took {took:.1f}s to scrape the killed replica's targets again (bound {bound}s)")
        wait_for("3 survivors to share the targets", lambda: settled(alive, 3, instances), timeout=10)
        print(f"SIGKILL: {len(lost)} targets taken over in {took:.1f}s")

        # No target scraped twice once the view settles: two intervals of
        # scrapes, each target's scrapes at least a quarter interval apart
        # (two replicas on one host share the offset seed, so a doubled
        # target is scraped twice within milliseconds; a late tick on a
        # loaded machine is not a double).
        t0 = time.time()
        wait_for("two intervals", lambda: time.time() - t0 >= 2 * INTERVAL + 0.5, timeout=3 * INTERVAL + 5)
        h = hits(fport)
        for i in instances:
            ts = sorted(t for t in scrape_times(h, i) if t >= t0)
            check(len(ts) >= 2, f"{i} scraped {len(ts)} times in two intervals")
            gaps = [b - a for a, b in zip(ts, ts[1:])]
            check(min(gaps) >= INTERVAL / 4, f"{i} scraped twice in one interval: gaps {gaps}")

        # 5. A pod being deleted: marked while still Ready, then SIGTERM.
        owners = {i: o[0] for i, o in ownership(alive).items()}
        leaving = alive[0]
        lost = {i for i, o in owners.items() if o == leaving.name}
        check(lost, f"{leaving.name} owns no target to hand over")
        control(cport, "/apply", {"kind": "pods", "object": pod(leaving.name, True, deleting=True)})
        leaving.p.send_signal(signal.SIGTERM)
        t_del = time.time()
        rest = [r for r in alive if r is not leaving]

        wait_for("the deleted replica's targets scraped by the others",
                 lambda: scraped_since(fport, lost, t_del), timeout=bound + 5)
        took = time.time() - t_del
        check(took <= bound, f"took {took:.1f}s to take over a deleted replica's targets (bound {bound}s)")
        check(leaving.p.wait(timeout=15) == 0, f"{leaving.name} exit status after SIGTERM")
        wait_for("2 survivors to share the targets", lambda: settled(rest, 2, instances), timeout=10)
        print(f"deletion: {len(lost)} targets handed over in {took:.1f}s")

        for r in rest:
            check(stop(r.p) == 0, f"{r.name} exit status after SIGTERM")


run_test(main)
