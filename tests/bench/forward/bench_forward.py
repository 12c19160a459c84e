#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Forwarding benchmark: push throughput of 100 KB profiles to a local
receiver (receiver.py --fast: counts bytes, no decoding; single Python
process, so it may be the bottleneck), the driver's CPU per profile, and
spool write / replay throughput.

    bench_forward.py DRIVER RECEIVER PROTO_DIR
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
import lib  # noqa: E402

DRIVER, RECEIVER, PROTO = sys.argv[1:4]
N, SIZE = 2000, 100 * 1024
TMP = tempfile.mkdtemp(prefix="fwd-bench-")


def receiver():
    p = subprocess.Popen(["/usr/bin/python3", RECEIVER, "--fast", "--proto-dir", PROTO],
                         stdout=subprocess.PIPE)
    return p, json.loads(p.stdout.readline())


def run(args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    rc = subprocess.run([DRIVER] + args, timeout=600).returncode
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, wall, cpu


def metric(path, name):
    for line in open(path):
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0


try:
    rp, info = receiver()
    url = "http://127.0.0.1:%d" % info["port"]
    rc, wall, cpu = run(["--ep", "name=a,url=" + url, "--count", str(N), "--rate", "100000",
                         "--size", str(SIZE), "--series", "64", "--batch", "32",
                         "--queue", "100000", "--metrics", os.path.join(TMP, "m")])
    mb = N * SIZE / 1e6
    print("push: %d x %d KB in %.2fs = %.0f profiles/s, %.0f MB/s; driver CPU %.2fs "
          "(%.0f us/profile) rc=%d" % (N, SIZE // 1024, wall, N / wall, mb / wall, cpu,
                                        cpu / N * 1e6, rc))
    # spool write: nothing listens
    dead = lib.free_port()
    spool = os.path.join(TMP, "spool")
    m = os.path.join(TMP, "m2")
    p = subprocess.Popen([DRIVER, "--ep", "name=a,url=http://127.0.0.1:%d" % dead,
                          "--count", str(N), "--rate", "100000", "--size", str(SIZE),
                          "--spool", spool, "--metrics", m, "--linger-s", "600",
                          "--min-backoff-ms", "60000", "--max-backoff-ms", "60000"])
    t0 = time.time()
    while time.time() - t0 < 300:
        time.sleep(0.05)
        if os.path.exists(m) and metric(m, "proflet_remote_spool_written_profiles_total") >= N:
            break
    wall = time.time() - t0
    p.kill()
    p.wait()
    print("spool write: %.0f MB in %.2fs = %.0f MB/s (zstd level 1, fsync batch)"
          % (mb, wall, mb / wall))
    rc, wall, cpu = run(["--ep", "name=a,url=" + url, "--count", "0", "--spool", spool,
                         "--linger-s", "600", "--metrics", os.path.join(TMP, "m3"),
                         "--batch", "32"])
    print("spool replay + push: %.0f MB in %.2fs = %.0f MB/s; CPU %.2fs rc=%d"
          % (mb, wall, mb / wall, cpu, rc))
    rp.kill()
finally:
    shutil.rmtree(TMP, ignore_errors=True)
