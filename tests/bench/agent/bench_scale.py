# SPDX-License-Identifier: Apache-2.0
"""Benchmark: CPU and RSS of proflet scraping N targets x 5 profile types
(cpu, memory, goroutine, mutex, block) every 15 s from a local fixture,
pushing to a local receiver that only counts, plus the p50 and p99 scrape
start lateness. The fixture and the receiver are Python and share the
machine's two cores with proflet.

The fixture serves the CPU and goroutine profiles of the demo Go service
as captured once, and for memory, mutex and block a series of cumulative
snapshots of one process (series/main.go: a heap of about 17,000 stacks,
0.8-1.3 MB raw, 95-170 KB gzip, where a fifth of the stacks allocate again
between snapshots), served in turn: every scrape after the first brings a
real delta. The figure is CPU and RSS per 100 delivered profiles/s of this
mix.

With --real-heaps, the memory snapshots are instead a real program's heap
(tests/bench/pprof/gen -mode typecheck: go/types checking the standard
library, one pass per snapshot, sampled every KiB: 430-600 KB gzip, about
1.8 MB raw, every stack allocating again between snapshots), as the
largest heaps of a fleet are.

Usage: bench_scale.py [--real-heaps] [N ...]   (default: 1000 5000)
With BENCH_PERF=FILE, `perf record -g` samples proflet during the window.
Prints one line per N. Not a test: it asserts nothing about speed.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "integration"))
from lib import *  # noqa: E402

INTERVAL = 15
WARMUP = 2 * INTERVAL
WINDOW = 3 * INTERVAL


SNAPSHOTS = 8  # more than the scrapes of one pair in the warm-up and window


def capture_bodies(tmp, procs):
    port = start_demoapp(tmp, procs)
    d = os.path.join(tmp, "bodies")
    os.makedirs(d)
    for name, q in (("profile", "?seconds=2"), ("goroutine", "")):
        _, body = http_get(f"http://127.0.0.1:{port}/debug/pprof/{name}{q}", timeout=30)
        open(os.path.join(d, name), "wb").write(body)
    series = go_build(os.path.join(os.path.dirname(os.path.abspath(__file__)), "series"),
                      os.path.join(tmp, "series"))
    subprocess.run([series, "-out", d, "-n", str(SNAPSHOTS)], check=True, timeout=300)
    return d


def real_heaps(tmp, bodies):
    """Replaces the memory snapshots with a real program's heaps."""
    gen_src = os.path.join(SRC, "tests", "bench", "pprof", "gen")
    gen = go_build(gen_src, os.path.join(tmp, "gen"))
    d = os.path.join(tmp, "typecheck")
    subprocess.run([gen, "-mode", "typecheck", "-rate", "1024", "-rounds", str(SNAPSHOTS),
                    "-out", d], check=True, timeout=900, capture_output=True)
    for i in range(1, SNAPSHOTS + 1):
        os.replace(os.path.join(d, f"heap.{i}.pb.gz"), os.path.join(bodies, f"allocs.{i}"))


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid, field="VmRSS"):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith(field):
            return int(l.split()[1])


def quantile(text, q):
    buckets = []
    for line in text.splitlines():
        if line.startswith("proflet_scrape_start_lateness_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    total = buckets[-1][1]
    target = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= target:
            if le == float("inf"):
                return prev_le
            frac = (target - prev_c) / (c - prev_c) if c > prev_c else 0
            return prev_le + frac * (le - prev_le)
        prev_le, prev_c = le, c
    return prev_le


def run(n, bodies, tmp, procs):
    out = os.path.join(tmp, f"ports-{n}")
    fx = procs.start([sys.executable, os.path.join(SRC, "tests", "integration", "manyports.py"), str(n), out, bodies])
    base, cport = map(int, wait_for("fixture", lambda: open(out).read().split(), timeout=60))
    sport = free_port()
    # Profiles go to a push receiver that only counts (tests/receiver --fast).
    rx = procs.start([sys.executable, os.path.join(SRC, "tests", "receiver", "receiver.py"), "--fast"],
                     stdout=subprocess.PIPE, text=True)
    rport = json.loads(rx.stdout.readline())["port"]
    targets = ",".join(f'"127.0.0.1:{base + i}"' for i in range(n))
    p = start_proflet(tmp, procs, f"""
log-level: warn
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: bench
    scrape-interval: {INTERVAL}s
    enabled-profiles: [cpu, mem, goroutines, mutex, block]
    static-configs:
      - application: bench
        targets: [{targets}]
remote-write:
  - url: http://127.0.0.1:{rport}
""", name=f"proflet-{n}")
    wait_ready(sport, timeout=60)
    time.sleep(WARMUP)  # a benchmark's measurement window, not a wait for a condition
    c0, t0 = cpu_seconds(p.pid), time.monotonic()
    m0 = metrics(sport)
    if os.environ.get("BENCH_PERF"):
        subprocess.run(["perf", "record", "-g", "-o", os.environ["BENCH_PERF"], "-p", str(p.pid),
                        "--", "sleep", str(WINDOW)], capture_output=True)
    else:
        time.sleep(WINDOW)
    c1, t1 = cpu_seconds(p.pid), time.monotonic()
    m1 = metrics(sport)
    def delta(name, **kw):
        return (metric_value(m1, name, **kw) or 0) - (metric_value(m0, name, **kw) or 0)

    secs = t1 - t0
    scrapes = delta("proflet_scrapes_total")
    produced = delta("proflet_profiles_produced_total")
    deltas = sum(delta("proflet_profiles_produced_total", type=t) for t in ("memory", "mutex", "block"))
    fails = metric_value(m1, "proflet_scrape_failures_total") or 0
    cpu = 100 * (c1 - c0) / secs
    per100 = cpu / (produced / secs / 100) if produced else float("nan")
    line = (f"targets={n} types=5 interval={INTERVAL}s: cpu={cpu:.1f}% of a core, "
            f"rss={rss_kb(p.pid) / 1024:.1f} MiB (peak {rss_kb(p.pid, 'VmHWM') / 1024:.1f} MiB), "
            f"scrapes/s={scrapes / secs:.0f}, profiles/s={produced / secs:.0f} "
            f"({deltas / secs:.0f}/s computed deltas), {per100:.1f}% of a core per 100 profiles/s, "
            f"failures={fails:.0f}, "
            f"lateness p50={1000 * quantile(m1, 0.5):.2f} ms p99={1000 * quantile(m1, 0.99):.2f} ms")
    print(line, flush=True)
    for l in m1.splitlines():
        if l.startswith("proflet_scrape_failures_total") and not l.endswith(" 0"):
            print("   ", l, flush=True)
    stop(p, timeout=60)
    fx.kill()
    rx.kill()


def main():
    args = sys.argv[1:]
    real = "--real-heaps" in args
    ns = [int(x) for x in args if x != "--real-heaps"] or [1000, 5000]
    with environment() as (tmp, procs):
        bodies = capture_bodies(tmp, procs)
        if real:
            real_heaps(tmp, bodies)
        for n in ns:
            run(n, bodies, tmp, procs)


main()
