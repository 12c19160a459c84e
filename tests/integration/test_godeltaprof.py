# SPDX-License-Identifier: Apache-2.0
"""godeltaprof pass-through: with `use-delta-profiles: true`, memory, mutex
and block come from /debug/pprof/delta_heap|delta_mutex|delta_block of a
fixture that serves godeltaprof-style deltas (tests/pprof/deltaprof); proflet
does no delta of its own (no baseline is dropped), sends them as
memory/mutex/block with __delta__="false", and the bytes reach the sink
untouched: a recording proxy between fixture and proflet hashes every body
it served and every stored profile must be one of them."""
import collections
import hashlib
import os

from lib import *

def main():
    with environment() as (tmp, procs):
        fx = go_build(os.path.join(SRC, "tests", "pprof", "deltaprof"), os.path.join(tmp, "deltaprof"))
        pf = os.path.join(tmp, "fx.port")
        procs.start([fx, "-addr", "127.0.0.1:0", "-port-file", pf], stderr=subprocess.DEVNULL)
        fport = int(wait_for("fixture port", lambda: open(pf).read().strip()))
        proxy = RecordingProxy(upstream=fport)
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: delta
    scrape-interval: 1s
    enabled-profiles: [mem, mutex, block]
    use-delta-profiles: true
    static-configs:
      - application: deltaprof
        targets: [127.0.0.1:{proxy.port}]
remote-write:
  - url: file://{sink}
""")
        wait_ready(sport)

        def three_each():
            names = [labels_of(m).get("__name__") for _, m in sink_profiles(sink)]
            return all(names.count(n) >= 3 for n in ("memory", "mutex", "block"))

        wait_for("three profiles of each type", three_each, timeout=30)
        code = stop(p)
        check(code == 0, f"exit status {code}")
        proxy.close()
        served = {digest: path for path, digest in proxy.records()}
        profs = sink_profiles(sink)
        paths = set()
        for path, meta in profs:
            l = labels_of(meta)
            check(l.get("__name__") in ("memory", "mutex", "block"), f"unexpected type {l}")
            check(l.get("__delta__") == "false", f"{path}: missing __delta__=false: {l}")
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            src = served.get(digest)
            check(src is not None, f"{path} is not byte-identical to anything the fixture served")
            paths.add(src.split("?")[0])
            pprof_raw(path)
        check(paths == {"/debug/pprof/delta_heap", "/debug/pprof/delta_mutex", "/debug/pprof/delta_block"},
              f"profiles came from {paths}")
        # Nothing was swallowed as a baseline: every body served became a
        # profile, in particular the first of each path. Only the last
        # request of a path may be missing (in flight when SIGTERM came).
        stored = collections.Counter(hashlib.sha256(open(p_, "rb").read()).hexdigest() for p_, _ in profs)
        by_path = collections.defaultdict(list)
        for path, digest in proxy.records():
            by_path[path.split("?")[0]].append(digest)
        for path, digests in by_path.items():
            check(stored[digests[0]] >= 1, f"{path}: the first body served is missing (swallowed as a baseline?)")
            missing = collections.Counter(digests) - stored
            check(sum(missing.values()) <= 1 and (not missing or digests[-1] in missing),
                  f"{path}: {sum(missing.values())} of {len(digests)} served bodies never stored")


run_test(main)
