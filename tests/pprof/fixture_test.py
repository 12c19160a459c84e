#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the godeltaprof-style fixture (tests/pprof/deltaprof) really serves
deltas, so the agent's pass-through tests rest on a sound fixture.

With every allocation sampled (-mem-rate=1), every blocking event recorded
(-block-rate=1) and no background load, known work is requested and the next
delta must hold exactly that work under the function that did it, and the
delta after that must hold none of it:

  * /alloc?n=1000&size=4096 -> delta_heap has alloc_objects 1000 and
    alloc_space 4096000 at main.fixtureAlloc (bytes label 4096), then 0;
  * /block?n=25 -> delta_block has 25 contentions at main.fixtureBlock, then 0;
  * /contend?n=50 -> delta_mutex has some contention at main.fixtureContend
    (scheduling decides how much), then 0.

Every profile must parse with `go tool pprof` and be gzip (as godeltaprof).

Usage: fixture_test.py --src tests/pprof/deltaprof
"""

import argparse
import os
import shutil
import signal
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle_test import build_go, start_service  # noqa: E402
from pprof_raw import go_raw  # noqa: E402


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib  # noqa: E402  (the shared helpers; unwinds on meson's SIGTERM)


def get(port, path, dest=None):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=60) as r:
        data = r.read()
    if dest:
        if data[:2] != b"\x1f\x8b":
            raise AssertionError("%s is not gzip" % path)
        with open(dest, "wb") as f:
            f.write(data)
    return data


def total_at(prof, func, column, label=None):
    col = prof.columns.index(column)
    total = 0
    for key, values in prof.samples.items():
        if func in prof.functions.get(key, []) and (label is None or label in key[1]):
            total += values[col]
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="proflet-deltaprof-")
    proc = None
    try:
        binary = os.path.join(tmp, "deltaprof")
        build_go(os.path.abspath(args.src), binary, tmp)
        proc, port = start_service(binary, tmp, ["-load=false", "-mem-rate=1", "-block-rate=1",
                                                 "-mutex-fraction=1"])
        n = [0]

        def delta(kind):
            n[0] += 1
            path = os.path.join(tmp, "%s.%d.pb.gz" % (kind, n[0]))
            get(port, "/debug/pprof/delta_%s%s" % (kind, "?gc=1" if kind == "heap" else ""),
                path)
            return go_raw([path])

        # Heap: the first call drains everything since start.
        delta("heap")
        get(port, "/alloc?n=1000&size=4096")
        p = delta("heap")
        got = (total_at(p, "main.fixtureAlloc", "alloc_objects/count", "bytes:[4096]"),
               total_at(p, "main.fixtureAlloc", "alloc_space/bytes", "bytes:[4096]"))
        if got != (1000, 4096000):
            raise AssertionError("delta_heap after /alloc: %s, want (1000, 4096000)" % (got,))
        p = delta("heap")
        if total_at(p, "main.fixtureAlloc", "alloc_objects/count") != 0:
            raise AssertionError("delta_heap repeated the allocations of the previous delta")
        print("delta_heap: 1000 objects / 4096000 bytes, then 0")

        delta("block")
        get(port, "/block?n=25")
        p = delta("block")
        c = total_at(p, "main.fixtureBlock", "contentions/count")
        if c != 25:
            raise AssertionError("delta_block after /block?n=25: %d contentions" % c)
        if total_at(p, "main.fixtureBlock", "delay/nanoseconds") < 25 * 500000:
            raise AssertionError("delta_block delay below 25 x 0.5 ms")
        p = delta("block")
        if total_at(p, "main.fixtureBlock", "contentions/count") != 0:
            raise AssertionError("delta_block repeated the previous delta")
        print("delta_block: 25 contentions, then 0")

        delta("mutex")
        get(port, "/contend?n=50")
        p = delta("mutex")
        # The mutex profile records the unlocker's stack, in the closure.
        func = "main.fixtureContend.func1"
        c = total_at(p, func, "contentions/count")
        if c <= 0:
            raise AssertionError("delta_mutex after /contend: no contention at %s" % func)
        p = delta("mutex")
        if total_at(p, func, "contentions/count") != 0:
            raise AssertionError("delta_mutex repeated the previous delta")
        print("delta_mutex: %d contentions, then 0" % c)
        return 0
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
