# SPDX-License-Identifier: Apache-2.0
"""A real Go service (standard library net/http/pprof with CPU, allocation,
mutex and block load): proflet scrapes all five default profile types, the
profiles land in the directory sink with the right labels, every file parses
with `go tool pprof -raw`, /metrics passes `promtool check metrics`, and
SIGTERM ends with exit status 0 (which requires uv_loop_close() == 0)."""
import os
import subprocess

from lib import *

TYPES = ["process_cpu", "memory", "goroutine", "mutex", "block"]
# The sample-types line `go tool pprof -raw` prints for each type (less
# the [dflt] mark on the default one).
SAMPLE_TYPES = {
    "process_cpu": "samples/count cpu/nanoseconds",
    "memory": "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes",
    "goroutine": "goroutine/count",
    "mutex": "contentions/count delay/nanoseconds",
    "block": "contentions/count delay/nanoseconds",
}


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, f"""
log-level: debug
server:
  listen-address: 127.0.0.1:{sport}
external-labels:
  cluster: it
scrape-configs:
  - job-name: go
    scrape-interval: 3s
    scrape-timeout: 2s
    enabled-profiles: [cpu, mem, goroutines, mutex, block]
    static-configs:
      - application: demo-svc
        spy-name: gospy
        targets: [127.0.0.1:{port}]
        labels:
          env: test
remote-write:
  - url: file://{sink}
""")
        wait_ready(sport)

        def all_types():
            got = {labels_of(m).get("__name__") for _, m in sink_profiles(sink)}
            return set(TYPES) <= got

        wait_for("a profile of every default type in the sink", all_types, timeout=40)

        profs = sink_profiles(sink)
        for path, meta in profs:
            l = labels_of(meta)
            name = l.get("__name__")
            check(name in TYPES, f"unexpected __name__ {name!r} in {path}")
            expect = {"service_name": "demo-svc", "job": "go", "instance": f"127.0.0.1:{port}",
                      "env": "test", "cluster": "it", "pyroscope_spy": "gospy"}
            for k, v in expect.items():
                check(l.get(k) == v, f"{path}: label {k}={l.get(k)!r}, want {v!r} (all: {l})")
            if name in ("memory", "mutex", "block"):
                check(l.get("__delta__") == "false", f"{path}: cumulative type without __delta__=false: {l}")
            else:
                check("__delta__" not in l, f"{path}: {name} must not carry __delta__: {l}")
            check(not any(k.startswith("__") and k not in ("__name__", "__delta__") for k in l),
                  f"{path}: internal labels leaked: {l}")
            raw = pprof_raw(path)
            lines = [l.replace("[dflt]", "") for l in raw.splitlines()]
            check(SAMPLE_TYPES[name] in lines,
                  f"{path}: {name} without its sample types {SAMPLE_TYPES[name]!r}")
            if name == "goroutine":  # a live Go process always has goroutines
                first = lines.index(SAMPLE_TYPES[name]) + 1
                check(first < len(lines) and lines[first].strip()[:1].isdigit(), f"{path}: no goroutine samples")

        # The delta'd memory profile keeps all four heap columns.
        mem = [p_ for p_, m in profs if labels_of(m).get("__name__") == "memory"][0]
        raw = pprof_raw(mem)
        for col in ("alloc_objects", "alloc_space", "inuse_objects", "inuse_space"):
            check(col in raw, f"memory profile lacks {col}")

        text = metrics(sport)
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        check(r.returncode == 0, f"promtool check metrics failed:\n{r.stdout}{r.stderr}")
        for t in TYPES:
            v = metric_value(text, "proflet_scrapes_total", job="go", type=t)
            check(v and v >= 1, f"proflet_scrapes_total for {t} = {v}")
        for t in ("memory", "mutex", "block"):
            v = metric_value(text, "proflet_delta_baselines_total", job="go", type=t)
            check(v == 1, f"exactly one baseline for {t}, got {v}")
        # The target's labels are held as shared strings, and counted.
        strings = metric_value(text, "proflet_label_strings") or 0
        strings_bytes = metric_value(text, "proflet_label_strings_bytes") or 0
        check(strings >= 4 and strings_bytes >= strings, f"label strings {strings} / {strings_bytes} B")

        code = stop(p)
        check(code == 0, f"proflet exited with {code} after SIGTERM; log: {open(p.log_path).read()[-2000:]}")


run_test(main)
