# SPDX-License-Identifier: Apache-2.0
"""The memory bound: whatever valid profile a target sends, proflet's peak
RSS (VmHWM of the real process) stays under the bound docs/limits.md
states,

  rest of the process (24 MiB for a few targets) + delta states
  + 2 x limits.memory-budget (work in flight, bodies waiting for it)
  + 48 MiB (buffers the pool threads keep between jobs)
  + pool threads x 1.1 MiB (the gzip encoders each uses)
  + server.recent-profiles-bytes + queue.max-bytes + bodies being received,

and each profile gets its outcome: a delta emitted and correct, or refused
as over_budget. The profiles are hostile but inside the default caps, built
by pprof-hostile-gen and served by hostile_target.py on 127.0.0.1: a
million samples over 1,000 locations (block and heap), a million
locations, nearly the cap of strings, 100 KiB function names, stacks at
the depth cap, 64 labels per sample, and many targets at once with a
small backlog. Under AddressSanitizer the RSS comparison is skipped
(its shadow memory and quarantine are not proflet's); outcomes are still
checked."""
import os
import subprocess
import sys

from lib import *

MIB = 1 << 20
GEN = os.path.join(BUILD, "tests", "pprof", "pprof-hostile-gen")
WORKERS = 2
POOL_THREADS = WORKERS + 3  # agent/main.c sizes libuv's pool so
RECENT = 8 * MIB
QUEUE = 16 * MIB
REST = 24 * MIB
KEPT = 48 * MIB

# name: (samples, locations, depth, columns, functions, labels, name_len, extra_strings)
PROFILES = {
    "block1m": (1000000, 1000, 2, 2, 1000, 0, 0, 0),
    "heap1m": (1000000, 1000, 2, 4, 1000, 0, 0, 0),
    "locs1m": (100000, 1000000, 10, 2, 1000, 0, 0, 0),
    "strings": (1000, 100, 2, 2, 100, 0, 0, 1900000),
    "names": (1000, 100, 2, 2, 100, 0, 100 * 1024, 0),
    "deep": (2000, 4099, 4096, 2, 1000, 0, 0, 0),
    "labels": (20000, 1000, 2, 2, 1000, 64, 0, 0),
    "mid": (100000, 1000, 2, 2, 1000, 0, 0, 0),
}

# (case, profile, profile type, memory budget, targets, backlog, outcome)
CASES = [
    ("block-1m", "block1m", "block", "96MiB", 1, 1024, "over_budget"),
    ("block-1m-raised", "block1m", "block", "256MiB", 1, 1024, "emitted"),
    ("heap-1m", "heap1m", "mem", "96MiB", 1, 1024, "over_budget"),
    ("locations-1m", "locs1m", "block", "96MiB", 1, 1024, "over_budget"),
    ("strings", "strings", "block", "96MiB", 1, 1024, "over_budget"),
    ("long-names", "names", "block", "96MiB", 1, 1024, "emitted"),
    ("deep-stacks", "deep", "block", "96MiB", 1, 1024, "emitted"),
    ("labels", "labels", "block", "96MiB", 1, 1024, "emitted"),
    ("backlog", "mid", "block", "96MiB", 24, 4, "emitted"),
]


def size(s):
    return int(s[:-3]) * MIB


def expected(profile):
    """samples=N totals=... of a delta of two consecutive versions."""
    n, cols = PROFILES[profile][0], PROFILES[profile][3]
    per = [n // 7 + (1 if r < n % 7 else 0) for r in range(7)]
    totals = [sum((r + 1) * (c + 1) * per[r] for r in range(7)) for c in range(cols)]
    return f"samples={n} totals=" + ",".join(str(t) for t in totals)


def summary(path):
    r = subprocess.run([GEN, "sum", path], capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else f"unreadable: {r.stderr.strip()}"


def run_case(tmp, procs, port, bodies, case):
    name, profile, ptype, budget, ntargets, backlog, outcome = case
    sport = free_port()
    sink = os.path.join(tmp, "sink-" + name)
    jobs = "".join(f"""
  - job-name: {name}-{k}
    scrape-interval: 1s
    path-prefix: /{profile}-{name}-{k}
    enabled-profiles: [{ptype}]
    static-configs:
      - application: {name}-{k}
        targets: [127.0.0.1:{port}]""" for k in range(ntargets))
    p = start_proflet(tmp, procs, f"""
limits: {{memory-budget: {budget}, workers: {WORKERS}, max-jobs-backlog: {backlog}}}
server:
  listen-address: 127.0.0.1:{sport}
  recent-profiles-bytes: {RECENT}
scrape-configs:{jobs}
remote-write:
  - url: file://{sink}
    queue: {{max-bytes: {QUEUE}}}
""", name="proflet-" + name)
    wait_ready(sport)
    want = expected(profile)
    seen = {}

    def emitted():
        alive(p)
        for path, meta in sink_profiles(sink):
            if path not in seen:
                seen[path] = summary(path)
        return sum(1 for s in seen.values() if s == want)

    def refused():
        alive(p)
        t = metrics(sport)
        return (metric_value(t, "proflet_scrape_failures_total", reason="over_budget") or 0) >= 2 and t

    if outcome == "emitted":
        # Every target in time, or at least one when the backlog is meant
        # to overflow (the others skipped and counted).
        need = 1 if backlog < ntargets else ntargets
        try:
            wait_for(f"{name}: {need} correct deltas ({want})", lambda: emitted() >= need,
                     timeout=60)
        except TestFailure:
            print(f"{name}: profiles seen: {list(seen.values())[:5]}; peak RSS "
                  f"{peak_rss(p.pid) / MIB:.1f} MiB\n{tail(p.log_path, 10)}", file=sys.stderr)
            raise
        text = metrics(sport)
        over = metric_value(text, "proflet_scrape_failures_total", reason="over_budget") or 0
        if backlog < ntargets:
            skipped = metric_value(text, "proflet_scrape_failures_total", reason="backlog") or 0
            print(f"{name}: {emitted()} correct deltas, {skipped:.0f} scrapes skipped (backlog)")
        wrong = [s for s in seen.values() if s != want and not s.startswith("samples=0 ")]
        check(not wrong or backlog < ntargets, f"{name}: deltas with wrong contents: {wrong[:3]}")
    else:
        try:
            text = wait_for(f"{name}: refused as over_budget", refused, timeout=60)
        except TestFailure:
            print(f"{name}: not refused; peak RSS {peak_rss(p.pid) / MIB:.1f} MiB",
                  file=sys.stderr)
            raise
        decode = metric_value(text, "proflet_scrape_failures_total", reason="decode") or 0
        check(decode == 0, f"{name}: decode failures beside over_budget")
        check(not any(s == want for s in (summary(x) for x, _ in sink_profiles(sink))),
              f"{name}: a delta was emitted though it was refused")
    targets = http_get(f"http://127.0.0.1:{sport}/api/v1/targets")[1].decode()
    if outcome == "over_budget":
        check("over the memory budget" in targets or "over its grant" in targets,
              f"{name}: /api/v1/targets does not show the refusal: {targets[:300]}")
    hwm = peak_rss(p.pid)
    state = metric_value(text, "proflet_delta_state_bytes") or 0
    code = stop(p)
    check(code == 0, f"{name}: exit status {code}")
    b = size(budget)
    bound = (REST + state + 2 * b + KEPT + POOL_THREADS * 11 * MIB // 10 + RECENT + QUEUE +
             bodies[profile] * ntargets)
    print(f"{name}: peak RSS {hwm / MIB:.1f} MiB, bound {bound / MIB:.1f} MiB "
          f"(budget {budget}, delta state {state / MIB:.1f} MiB), outcome {outcome}")
    if sanitized():
        print(f"{name}: AddressSanitizer build: RSS not compared (shadow memory)")
    else:
        check(hwm <= bound, f"{name}: peak RSS {hwm / MIB:.1f} MiB over the bound "
                            f"{bound / MIB:.1f} MiB")


def main():
    check(os.path.exists(GEN), f"{GEN} not built")
    only = sys.argv[1:]
    with environment() as (tmp, procs):
        pdir = os.path.join(tmp, "profiles")
        os.mkdir(pdir)
        bodies = {}
        for prof in {c[1] for c in CASES if not only or c[0] in only}:
            subprocess.run([GEN, "gen", os.path.join(pdir, prof), "3"] +
                           [str(x) for x in PROFILES[prof]], check=True, timeout=120,
                           stdout=subprocess.DEVNULL)
            bodies[prof] = max(os.path.getsize(os.path.join(pdir, f"{prof}.{v}.pb.gz"))
                               for v in (1, 2, 3))
        pf = os.path.join(tmp, "target.port")
        procs.start([sys.executable, os.path.join(os.path.dirname(__file__), "hostile_target.py"),
                     pdir, pf])
        port = int(wait_for("hostile target port", lambda: open(pf).read()))
        for case in CASES:
            if not only or case[0] in only:
                run_case(tmp, procs, port, bodies, case)


run_test(main)
