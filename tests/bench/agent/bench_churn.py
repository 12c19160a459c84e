# SPDX-License-Identifier: Apache-2.0
"""Benchmark: proflet's resident memory under pod churn, over a long run.

A fake Kubernetes API server holds up to 100 pod names; every 0.05 s one of
them is ADDED (if absent) or DELETED (if present), so about half are live
at a time and every pod lives a few seconds. Each pod is a scrape target
(memory and goroutines, every second) on a fixture on 127.0.0.1 that
serves two real heap profiles in turn and a small goroutine profile. Every
new pod takes the next of 1,000 fixture ports, so it is a new host:port as
a new pod's IP is, and carries a new uid and pod-template-hash, as a
rolled-out pod does. proflet is reloaded (SIGHUP) every 30 s. The
profiles go to a receiver that only counts.

BENCH_CHURN_PORTS=100 gives each pod name its own port instead (a pod that
comes back is the same host:port); BENCH_CHURN_PORTS=0 puts every pod on
one port of an HTTP/1.0 server that closes each connection.

Prints RSS (and anonymous RSS, live scrape pairs, open fds) every
BENCH_CHURN_STEP seconds, then the slope of RSS in MiB per minute fitted
by least squares over the second half of the run, where warm-up is over:
the goal is a slope of about zero.

  BENCH_CHURN_SECONDS=1800 (default) BENCH_CHURN_STEP=60 python3 bench_churn.py

Not a timed test: it fails only if proflet dies or stops scraping.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
from lib import *  # noqa: E402,F403

PODS = 100
CHURN_EVERY = float(os.environ.get("BENCH_CHURN_EVERY", "0.05"))
RELOAD_EVERY = float(os.environ.get("BENCH_CHURN_RELOAD_EVERY", "30"))


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def pod(i, gen, port):
    return {"metadata": {"name": "pod-%03d" % i, "namespace": "churn",
                         "uid": "uid-%d-%d" % (i, gen),
                         "labels": {"app": "app-%d" % (i % 10), "pod-template-hash": "h%d" % gen}},
            "spec": {"containers": [{"name": "app", "ports": [{"name": "pprof", "containerPort": port,
                                                               "protocol": "TCP"}]}]},
            "status": {"phase": "Running", "podIP": "127.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()
    except urllib.error.HTTPError as e:
        e.read()


def churner(ctl, base, ports, stop_ev, counts):
    live = set()
    gen = 0
    rng = random.Random(1)
    nxt = time.monotonic()
    while not stop_ev.is_set():
        i = rng.randrange(PODS)
        if i in live:
            post(f"http://127.0.0.1:{ctl}/delete", {"kind": "pods", "namespace": "churn", "name": "pod-%03d" % i})
            live.discard(i)
        else:
            gen += 1
            post(f"http://127.0.0.1:{ctl}/apply", {"kind": "pods", "object": pod(i, gen, base + (0 if not ports else i if ports == PODS else gen % ports))})
            live.add(i)
        counts["events"] += 1
        nxt += CHURN_EVERY
        stop_ev.wait(max(0.0, nxt - time.monotonic()))


def one_port_fixture(bodies):
    """BENCH_CHURN_PORTS=0: every pod on one 127.0.0.1 port of an HTTP/1.0
    server that closes each connection after its answer."""
    import http.server
    import socketserver
    allocs = [open(os.path.join(bodies, f"allocs.{k}"), "rb").read() for k in (1, 2)]
    sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
    from badtarget import PPROF
    turn = [0]

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            if "allocs" in self.path:
                turn[0] += 1
                body = allocs[turn[0] % 2]
            else:
                body = PPROF
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        request_queue_size = 256

        def handle_error(self, request, client_address):
            pass  # a scrape cancelled with its pod: a broken pipe here is expected

    srv = S(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


def slope(points):
    """Least-squares slope of (t seconds, MiB) in MiB per minute."""
    n = len(points)
    if n < 2:
        return float("nan")
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 60 * sum((t - mt) * (r - mr) for t, r in points) / var if var else float("nan")


def main():
    seconds = float(os.environ.get("BENCH_CHURN_SECONDS", "1800"))
    step = float(os.environ.get("BENCH_CHURN_STEP", "60" if seconds >= 600 else "15"))
    ports = int(os.environ.get("BENCH_CHURN_PORTS", "1000"))
    with environment() as (tmp, procs):
        # Memory: two real heap profiles of a Go service served in turn (a
        # real delta, then a reset); goroutines: a small valid profile.
        bodies = os.path.join(tmp, "bodies")
        os.makedirs(bodies)
        corpus = os.path.join(SRC, "tests", "bench", "pprof", "corpus")
        for k in (1, 2):
            shutil.copy(os.path.join(corpus, f"heap.{k}.pb.gz"), os.path.join(bodies, f"allocs.{k}"))
        if ports:
            out = os.path.join(tmp, "ports")
            procs.start([sys.executable, os.path.join(SRC, "tests", "integration", "manyports.py"), str(ports),
                         out, bodies])
            base, _ = map(int, wait_for("fixture", lambda: open(out).read().split(), timeout=60))
        else:
            base = one_port_fixture(bodies)
        pf = os.path.join(tmp, "api-ports")
        procs.start([sys.executable, os.path.join(SRC, "tests", "k8s", "fake_apiserver.py"), "--port-file", pf,
                     "--max-seconds", str(seconds + 600)])
        api, ctl = map(int, wait_for("fake API server", lambda: open(pf).read().split(), timeout=60))
        rx = procs.start([sys.executable, os.path.join(SRC, "tests", "receiver", "receiver.py"), "--fast"],
                         stdout=subprocess.PIPE, text=True)
        rport = json.loads(rx.stdout.readline())["port"]
        sport = free_port()
        p = start_proflet(tmp, procs, f"""
log-level: error
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: churn
    scrape-interval: 1s
    enabled-profiles: [mem, goroutines]
    kubernetes-sd-configs:
      - role: pod
        api-server: http://127.0.0.1:{api}
    relabel-configs:
      - source-labels: [__meta_kubernetes_pod_name]
        target-label: pod
      - source-labels: [__meta_kubernetes_namespace]
        target-label: namespace
remote-write:
  - url: http://127.0.0.1:{rport}
""", name="proflet-churn")
        wait_for("proflet ready", lambda: alive(p) and http_get(f"http://127.0.0.1:{sport}/-/ready")[0] == 200,
                 timeout=60)
        stop_ev = threading.Event()
        counts = {"events": 0}
        th = threading.Thread(target=churner, args=(ctl, base, ports, stop_ev, counts), daemon=True)
        th.start()
        t0 = time.monotonic()
        next_reload = t0 + RELOAD_EVERY
        next_sample = t0 + step
        series = []
        print(f"churn soak: {PODS} pod names, one ADDED or DELETED every {CHURN_EVERY} s, "
              f"scrape every 1 s (mem, goroutines), SIGHUP every {RELOAD_EVERY} s, {seconds:.0f} s", flush=True)
        print(f"{'t (s)':>7} {'RSS MiB':>8} {'anon MiB':>9} {'pairs':>6} {'created':>8} {'fds':>5} "
              f"{'scrapes':>8} {'failures':>8}", flush=True)
        try:
            while True:
                now = time.monotonic()
                if now - t0 >= seconds:
                    break
                alive(p)
                if now >= next_reload:
                    p.send_signal(signal.SIGHUP)
                    next_reload += RELOAD_EVERY
                if now >= next_sample:
                    m = metrics(sport)
                    rss = status_kb(p.pid, "VmRSS") / 1024
                    anon = status_kb(p.pid, "RssAnon") / 1024
                    fds = len(os.listdir(f"/proc/{p.pid}/fd"))
                    pairs = metric_value(m, "proflet_scrape_pairs") or 0
                    created = metric_value(m, "proflet_scrape_pairs_created_total") or 0
                    scrapes = metric_value(m, "proflet_scrapes_total") or 0
                    fails = metric_value(m, "proflet_scrape_failures_total") or 0
                    series.append((now - t0, rss))
                    print(f"{now - t0:7.0f} {rss:8.1f} {anon:9.1f} {pairs:6.0f} {created:8.0f} {fds:5d} "
                          f"{scrapes:8.0f} {fails:8.0f}", flush=True)
                    next_sample += step
                # Pacing of the benchmark's own schedule (the next reload or
                # sample), not a wait for proflet.
                time.sleep(min(0.5, max(0.0, min(next_reload, next_sample) - time.monotonic())))
        finally:
            stop_ev.set()
            th.join(timeout=15)
        if not series or (metric_value(metrics(sport), "proflet_scrapes_total") or 0) == 0:
            print("FAIL: proflet did not scrape", file=sys.stderr)
            sys.exit(1)
        half = [pt for pt in series if pt[0] >= seconds / 2]
        first = series[0][1]
        print(f"churn events: {counts['events']}; RSS {first:.1f} -> {series[-1][1]:.1f} MiB; "
              f"slope over the second half: {slope(half):+.3f} MiB/min", flush=True)
        stop(p, timeout=60)


main()
