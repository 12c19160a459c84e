# SPDX-License-Identifier: Apache-2.0
"""Each endpoint's compression setting, against a real Go service: three
directory sinks (balanced first, so deltas are written balanced; none;
smallest). Every heap delta lands in all three with the same profile inside
(the same bytes once gunzipped, and `go tool pprof -raw` reads each file),
plain pprof in the `none` sink and gzip elsewhere, the `smallest` one no
larger than the balanced one; a CPU profile, sent as it came, lands
byte-identical in all three; the two sinks that compressed again count it
in proflet_remote_recompressed_profiles_total and the first does not."""
import gzip
import json
import os
import subprocess

from lib import *

SINKS = ("balanced", "none", "smallest")


def by_id(root, name):
    """{profile id: (path, bytes)} of the sink's profiles of type `name`."""
    out = {}
    for path, meta in sink_profiles(root):
        if labels_of(meta).get("__name__") == name:
            with open(path, "rb") as f:
                out[meta["id"]] = (path, f.read(), meta)
    return out


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        sport = free_port()
        roots = {s: os.path.join(tmp, "sink-" + s) for s in SINKS}
        remotes = "".join(f"""
  - url: file://{roots[s]}
    name: {s}
    compression: {s}""" for s in SINKS)
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: go
    scrape-interval: 2s
    scrape-timeout: 1s
    enabled-profiles: [cpu, mem]
    profiles:
      cpu: {{params: {{seconds: "1"}}}}
    static-configs:
      - application: demo-svc
        targets: [127.0.0.1:{port}]
remote-write:{remotes}
""")
        wait_ready(sport)

        def common(name, want):
            ids = [set(by_id(roots[s], name)) for s in SINKS]
            return len(set.intersection(*ids)) >= want

        wait_for("two heap deltas in every sink", lambda: common("memory", 2), timeout=60)
        wait_for("a CPU profile in every sink", lambda: common("process_cpu", 1), timeout=30)

        mem = {s: by_id(roots[s], "memory") for s in SINKS}
        ids = set.intersection(*(set(m) for m in mem.values()))
        for i in sorted(ids):
            bal, plain, small = (mem[s][i] for s in SINKS)
            check(bal[1][:2] == b"\x1f\x8b", f"{bal[0]}: the balanced sink's delta is not gzip")
            check(small[1][:2] == b"\x1f\x8b", f"{small[0]}: the smallest sink's delta is not gzip")
            check(plain[1][:2] != b"\x1f\x8b", f"{plain[0]}: the none sink's delta is gzip")
            inside = gzip.decompress(bal[1])
            check(gzip.decompress(small[1]) == inside and plain[1] == inside,
                  f"profile {i}: the sinks hold different profiles")
            check(len(small[1]) <= len(bal[1]),
                  f"profile {i}: smallest {len(small[1])} B > balanced {len(bal[1])} B")
            check(plain[2]["bytes"] == len(plain[1]) and small[2]["bytes"] == len(small[1]),
                  f"profile {i}: the sidecar's bytes are not the file's")
            for f in (bal, plain, small):
                check("alloc_space" in pprof_raw(f[0]), f"{f[0]}: not a heap profile")

        cpu = {s: by_id(roots[s], "process_cpu") for s in SINKS}
        for i in set.intersection(*(set(c) for c in cpu.values())):
            check(cpu["balanced"][i][1] == cpu["none"][i][1] == cpu["smallest"][i][1],
                  f"CPU profile {i} was not sent as it came")

        text = metrics(sport)
        for s in SINKS:
            v = metric_value(text, "proflet_remote_recompressed_profiles_total", endpoint=s) or 0
            if s == "balanced":
                check(v == 0, f"the first endpoint compressed {v} profiles again")
            else:
                check(v >= len(ids), f"{s}: {v} profiles compressed again, want >= {len(ids)}")
        check(stop(p) == 0, "proflet did not stop cleanly")


run_test(main)
