#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Oracle test: proflet's delta equals `go tool pprof -base prev cur`.

Builds examples/demoapp (a standard-library Go service with allocation,
mutex and block load) into a temp dir, starts it on 127.0.0.1:0, takes
consecutive scrapes of /debug/pprof/{allocs,mutex,block}, runs pprof-delta
over each series and, for every consecutive pair, checks stack by stack:

  * cumulative columns (alloc_objects, alloc_space; contentions, delay)
    equal max(0, value in `go tool pprof -raw -base prev cur`), exactly;
  * other columns (inuse_*) equal the current profile's values;
  * every stack proflet leaves out is all-zero after clamping;
  * every output parses with `go tool pprof`;
  * read as it is (tests/pprof/unmerged: google/pprof's parser without the
    merge `-raw` applies, which would hide both), no output has an
    all-zero sample or two samples with the same key.

Go scales heap samples per record by a factor that depends only on the
average object size, which the `bytes` label pins per key, so both sides
subtract the same scaled integers and the comparison is exact.

Usage: oracle_test.py --delta PATH/pprof-delta --demo-src examples/demoapp
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pprof_raw import go_raw  # noqa: E402


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib  # noqa: E402  (the shared helpers; unwinds on meson's SIGTERM)

CUMULATIVE = {"alloc_objects/count", "alloc_space/bytes", "contentions/count",
              "delay/nanoseconds"}
SCRAPES = 5
DEADLINE_S = 60


def build_go(src, out, tmp):
    env = dict(os.environ)
    env["GO111MODULE"] = "off"
    env.setdefault("GOCACHE", "/tmp/proflet-go-cache")
    env["GOPATH"] = os.path.join(tmp, "gopath")
    subprocess.run(["go", "build", "-o", out, "."], cwd=src, env=env, check=True, timeout=600)


def build_unmerged(tmp):
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode")
    env.setdefault("GOCACHE", "/tmp/proflet-go-cache")
    out = os.path.join(tmp, "unmerged")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unmerged")
    subprocess.run(["go", "build", "-o", out, "."], cwd=src, env=env, check=True, timeout=600)
    return out


def check_unmerged(tool, paths):
    r = subprocess.run([tool] + paths, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("outputs read without merging:\n" + r.stdout + r.stderr)
    return sum(int(l.rsplit(": ", 1)[1].split()[0]) for l in r.stdout.splitlines())


def start_service(binary, tmp, extra=()):
    port_file = os.path.join(tmp, "port")
    log = open(os.path.join(tmp, "service.log"), "wb")
    proc = subprocess.Popen([binary, "-addr", "127.0.0.1:0", "-port-file", port_file]
                            + list(extra), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("service exited early, see %s" % log.name)
        try:
            with open(port_file) as f:
                return proc, int(f.read().strip())
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("service did not write its port file")


def fetch(port, path, dest):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30) as r:
        data = r.read()
    with open(dest, "wb") as f:
        f.write(data)
    return data


def run_delta(tool, kind, files, outdir):
    out = subprocess.run([tool, "-k", kind, "-o", outdir] + files, capture_output=True,
                         text=True, timeout=120, check=True)
    results = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if parts[0].isdigit():
            results[int(parts[0])] = parts[1:]
    return results


def compare_pair(prev, cur, ours_path, label):
    oracle = go_raw(["-base", prev, cur])
    current = go_raw([cur])
    ours = go_raw([ours_path])
    if ours.columns != oracle.columns:
        raise AssertionError("%s: columns %s vs %s" % (label, ours.columns, oracle.columns))
    cols = ours.columns
    cum = [i for i, c in enumerate(cols) if c in CUMULATIVE]
    other = [i for i, c in enumerate(cols) if c not in CUMULATIVE]
    if not cum:
        raise AssertionError("%s: no cumulative column in %s" % (label, cols))
    checked = nonzero = 0
    keys = set(oracle.samples) | set(ours.samples) | set(current.samples)
    for key in keys:
        want = [0] * len(cols)
        base = oracle.samples.get(key, [0] * len(cols))
        for i in cum:
            want[i] = max(0, base[i])
        cur_vals = current.samples.get(key, [0] * len(cols))
        for i in other:
            want[i] = cur_vals[i]
        got = ours.samples.get(key)
        if got is None:
            if any(want):
                raise AssertionError("%s: stack %s (%s) missing, want %s" % (
                    label, [hex(a) for a in key[0]], key[1], want))
            continue
        if got != want:
            raise AssertionError("%s: stack %s (%s) %s: got %s want %s" % (
                label, [hex(a) for a in key[0]], key[1], ours.functions.get(key, ["?"])[:1], got,
                want))
        checked += 1
        nonzero += any(got[i] for i in cum)
    return checked, nonzero


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--delta", required=True)
    ap.add_argument("--demo-src", required=True)
    args = ap.parse_args()
    if shutil.which("go") is None:
        print("go not found", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="proflet-oracle-")
    proc = None
    try:
        binary = os.path.join(tmp, "demoapp")
        build_go(os.path.abspath(args.demo_src), binary, tmp)
        unmerged = build_unmerged(tmp)
        proc, port = start_service(binary, tmp)
        kinds = {"allocs": "memory", "mutex": "contention", "block": "contention"}
        files = {k: [] for k in kinds}
        for i in range(SCRAPES):
            for k in kinds:
                path = os.path.join(tmp, "%s.%d.pb.gz" % (k, i))
                fetch(port, "/debug/pprof/" + k, path)
                files[k].append(path)
            time.sleep(0.4)  # pacing between scrapes, not synchronisation
        total_checked = 0
        for k, kind in kinds.items():
            outdir = os.path.join(tmp, "out-" + k)
            os.mkdir(outdir)
            res = run_delta(args.delta, kind, files[k], outdir)
            if res.get(0) != ["baseline"]:
                raise AssertionError("%s: first scrape not a baseline: %s" % (k, res.get(0)))
            nonzero_pairs = 0
            for i in range(1, SCRAPES):
                if not res.get(i) or res[i][0] != "emitted":
                    raise AssertionError("%s scrape %d: %s" % (k, i, res.get(i)))
                checked, nonzero = compare_pair(files[k][i - 1], files[k][i], res[i][1],
                                                "%s %d" % (k, i))
                total_checked += checked
                nonzero_pairs += nonzero > 0
                print("%s pair %d: %d stacks equal to go tool pprof -base, %d with a nonzero "
                      "delta" % (k, i, checked, nonzero))
            if nonzero_pairs == 0:
                raise AssertionError("%s: no pair had any nonzero delta; nothing was tested" % k)
            outs = [res[i][1] for i in range(1, SCRAPES)]
            n = check_unmerged(unmerged, outs)
            print("%s: %d samples read unmerged: none all-zero, no key twice" % (k, n))
        print("oracle: %d stacks checked" % total_checked)
        return 0
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
