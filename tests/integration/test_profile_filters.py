# SPDX-License-Identifier: Apache-2.0
"""Sample-type and sample-label filters against the real Go demo service,
checked with `go tool pprof` on what reaches the sink.

- live job: memory without alloc_* (two in-use columns, sent from the first
  scrape: nothing left to difference), mutex keeping only delay, CPU
  keeping only the `handler` label, goroutine dropping `span_id`; block
  unfiltered, as the control.
- file job: a CPU profile the demo service wrote, served unchanged, sent
  with span_id dropped: per stack and remaining labels, the output's
  values equal the input's summed the same way (exact totals, samples
  merged)."""
import os
import sys
import urllib.request

from lib import *
from http_peers import serve_bytes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pprof"))
import pprof_raw  # noqa: E402  (the -raw reader the pprof oracles use)


def columns(path):
    return pprof_raw.go_raw([path]).columns


def label_lines(path):
    return {lab for key in pprof_raw.go_raw([path]).samples for lab in key[1].split()}


def without_span(labels):
    return " ".join(l for l in labels.split() if not l.startswith("span_id:"))


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        # A CPU profile of the demo for the file job. It must hold two
        # samples that differ only in span_id, or merging is not tested; on
        # a loaded machine a 2 s profile may have too few samples, so take
        # longer ones, a bounded number of times.
        cpu_in_path = os.path.join(tmp, "cpu-in.pb.gz")
        for seconds in (2, 4, 8):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/pprof/profile?seconds={seconds}",
                                        timeout=seconds + 20) as r:
                cpu_in = r.read()
            open(cpu_in_path, "wb").write(cpu_in)
            src = pprof_raw.go_raw([cpu_in_path])
            expect = {}
            for (stack, labels), vals in src.samples.items():
                key = (stack, without_span(labels))
                expect[key] = [a + b for a, b in zip(expect.get(key, [0] * len(vals)), vals)]
            if len(expect) < len(src.samples):
                break
        check(len(expect) < len(src.samples),
              f"the demo's CPU profiles ({len(src.samples)} samples) never held two that differ only in span_id")
        srv = serve_bytes({"/cpu.pb.gz": cpu_in})
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: live
    scrape-interval: 2s
    scrape-timeout: 1500ms
    enabled-profiles: [cpu, goroutine, mem, mutex, block]
    static-configs:
      - application: demo
        targets: [127.0.0.1:{port}]
    profiles:
      process_cpu:
        params: {{seconds: ["1"]}}
        sample-labels: {{keep: handler}}
      goroutine:
        sample-labels: {{drop: span_id}}
      memory:
        sample-types: {{drop: [alloc_objects, alloc_space]}}
      mutex:
        sample-types: {{keep: [delay]}}
  - job-name: file
    scrape-interval: 2s
    enabled-profiles: [cpufile]
    static-configs:
      - application: file
        targets: [127.0.0.1:{srv.server_address[1]}]
    profiles:
      cpufile:
        path: /cpu.pb.gz
        sample-labels: {{drop: 'span_.*'}}
remote-write:
  - url: file://{sink}
""")
        wait_ready(sport)

        def by_type():
            got = {}
            for path, meta in sink_profiles(sink):
                got.setdefault((labels_of(meta)["job"], labels_of(meta)["__name__"]), []).append(path)
            return got

        want = {("live", t) for t in ("process_cpu", "goroutine", "memory", "mutex", "block")}
        want.add(("file", "cpufile"))
        got = wait_for("a profile of every filtered type", lambda: want <= set(by_type()) and by_type(),
                       timeout=60)
        text = metrics(sport)
        code = stop(p)
        srv.shutdown()
        check(code == 0, f"exit status {code}")

        live = {t: got[("live", t)] for _, t in want if ("live", t) in got}
        for path in live["memory"]:
            check(columns(path) == ["inuse_objects/count", "inuse_space/bytes"],
                  f"{path}: memory columns {columns(path)}")
        for path in live["mutex"]:
            check(columns(path) == ["delay/nanoseconds"], f"{path}: mutex columns {columns(path)}")
        for path in live["block"]:
            check(columns(path) == ["contentions/count", "delay/nanoseconds"],
                  f"{path}: the unfiltered control lost a column: {columns(path)}")
        # Sent from the first scrape: no baseline for memory (nothing left to
        # difference), one for mutex and block.
        check(not metric_value(text, "proflet_delta_baselines_total", job="live", type="memory"),
              "memory without alloc_* still waited for a baseline")
        check(metric_value(text, "proflet_delta_baselines_total", job="live", type="mutex") == 1,
              "mutex (a kept cumulative column) had no baseline")

        cpu_labels = set().union(*(label_lines(path) for path in live["process_cpu"]))
        check(any(l.startswith("handler:") for l in cpu_labels), f"CPU lost its kept label: {cpu_labels}")
        check(not any(l.startswith("span_id:") for l in cpu_labels), f"CPU kept span_id: {cpu_labels}")
        gor_labels = set().union(*(label_lines(path) for path in live["goroutine"]))
        check(any(l.startswith("handler:") for l in gor_labels), f"goroutine lost handler: {gor_labels}")
        check(not any(l.startswith("span_id:") for l in gor_labels), f"goroutine kept span_id: {gor_labels}")

        # Exact totals: the input summed per stack and remaining labels.
        check(any("span_id:" in k[1] for k in src.samples), "the demo's CPU profile has no span_id labels")
        for path in got[("file", "cpufile")]:
            out = pprof_raw.go_raw([path])
            check(out.columns == src.columns, f"{path}: columns {out.columns} != {src.columns}")
            check(out.samples == expect, f"{path}: {len(out.samples)} samples, want {len(expect)} "
                  "(values per stack and labels differ from the input summed without span_id)")
            check(len(out.samples) < len(src.samples), "no samples were merged")


run_test(main)
