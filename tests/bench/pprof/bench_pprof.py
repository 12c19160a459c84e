#!/usr/bin/python3
"""pprof delta benchmark: proflet vs the libdeflate floor vs a Go reference.

Pairs of consecutive heap/mutex/block profiles:
  * std-*: checked in (tests/bench/pprof/corpus), from standard-library
    workloads (gen -mode std);
  * heap-16k: ~16,000 stacks, ~1 MB raw (gen -mode big -depth 14 -prefix 4);
  * heap-131k: ~131,000 stacks, ~10 MB raw (gen -mode big -depth 17 -prefix 10),
    every stack allocating again between the snapshots: the worst case,
    nothing dropped;
  * heap-131k-10pct: the same stacks, one in ten allocating again, as
    between two scrapes of a large service;
all generated here into /tmp/proflet-bench-corpus (kept between runs).

For each pair and gzip level: proflet's per-phase CPU time (bench_pprof,
median of N), the floor (libdeflate gunzip + gzip of the same bytes), the
Go reference (google/pprof from Debian: parse, Scale(-1), Merge, write) CPU
time per delta (mean over enough deltas to fill about a second), both
output sizes, and memory, one delta per process: the peak RSS, and what
the delta adds to the process's RSS with both inputs read (a Go process
starts at about 2.5 MB, a C one at about 1.5 MB).

Usage: bench_pprof.py --bench PATH/bench_pprof --src tests/bench/pprof
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

CORPUS_DIR = "/tmp/proflet-bench-corpus"


def go_build(src, out, gopath=None):
    env = dict(os.environ)
    env["GO111MODULE"] = "off"
    env.setdefault("GOCACHE", "/tmp/proflet-go-cache")
    if gopath:
        env["GOPATH"] = gopath
    subprocess.run(["go", "build", "-o", out, "."], cwd=src, env=env, check=True, timeout=900)


def kv(line):
    return {k: v for k, v in (w.split("=", 1) for w in line.split() if "=" in w)}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1200).stdout


def median_run(cmd, key, times):
    """The run, of `times`, whose `key` is the median: one run of the Go
    reference moves by half its CPU time with its collector's pacing, and a
    peak RSS by a few pages with the address-space layout."""
    runs = sorted((kv(run(cmd)) for _ in range(times)), key=lambda r: float(r[key]))
    return runs[len(runs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--iters", type=int, default=15)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="proflet-bench-")
    try:
        gen = os.path.join(tmp, "gen")
        goref = os.path.join(tmp, "goref")
        go_build(os.path.join(args.src, "gen"), gen)
        go_build(os.path.join(args.src, "goref"), goref, gopath="/usr/share/gocode")
        big = (("heap-16k", ["-depth", "14", "-prefix", "4"]),
               ("heap-131k", ["-depth", "17", "-prefix", "10"]),
               ("heap-131k-10pct", ["-depth", "17", "-prefix", "10", "-active", "10"]))
        for name, flags in big:
            d = os.path.join(CORPUS_DIR, name)
            if not os.path.exists(os.path.join(d, "heap.2.pb.gz")):
                run([gen, "-mode", "big", "-out", d] + flags)
        corpus = os.path.join(args.src, "corpus")
        pairs = [("std-" + k, os.path.join(corpus, k + ".1.pb.gz"),
                  os.path.join(corpus, k + ".2.pb.gz")) for k in ("heap", "mutex", "block")]
        pairs += [(n, os.path.join(CORPUS_DIR, n, "heap.1.pb.gz"),
                   os.path.join(CORPUS_DIR, n, "heap.2.pb.gz")) for n, _ in big]

        print("%-15s %5s %9s %7s %7s | %7s %7s %7s %7s %7s %8s | %7s %5s | %8s %7s %6s |"
              " %7s %7s %5s | %7s %7s %5s" % (
                  "pair", "level", "raw B", "out B", "go out", "gunzip", "decode", "delta",
                  "encode", "gzip", "total", "floor", "x", "go cpu", "our cpu", "x", "go RSS",
                  "our RSS", "x", "go +RSS", "our +", "x"))
        for name, prev, cur in pairs:
            g = kv(run([goref, "-n", "1", prev, cur]))
            n = max(3, min(200, int(1000 / max(float(g["cpu_ms"]), 0.1))))
            g = median_run([goref, "-n", str(n), prev, cur], "cpu_ms", 3)
            g1 = median_run([goref, "-n", "1", prev, cur], "peak_rss_kb", 3)
            for level in (0, 1, 6):
                if level == 0 and not name.startswith("heap-131k"):
                    continue
                b = kv(run([args.bench, "-l", str(level), "-n", str(args.iters), prev, cur]))
                m = median_run([args.bench, "-m", "-l", str(level), prev, cur], "peak_rss_kb", 3)
                go_cpu = float(g["cpu_ms"])
                our_cpu = float(b["cpu_ms"])
                go_rss = int(g1["peak_rss_kb"]) / 1024
                our_rss = int(m["peak_rss_kb"]) / 1024
                go_add = (int(g1["peak_rss_kb"]) - int(g1["base_rss_kb"])) / 1024
                our_add = (int(m["peak_rss_kb"]) - int(m["base_rss_kb"])) / 1024
                print("%-15s %5d %9s %7s %7s | %7s %7s %7s %7s %7s %8s | %7s %5.2f | %8.2f %7.2f"
                      " %6.1f | %6.1fM %6.1fM %5.1f | %6.2fM %6.2fM %5.1f" % (
                          name, level, b["raw_bytes"], b["out_bytes"], g["out_bytes"],
                          b["gunzip_ms"], b["decode_ms"], b["delta_ms"], b["encode_ms"],
                          b["gzip_ms"], b["total_ms"], b["floor_ms"], float(b["ratio"]), go_cpu,
                          our_cpu, go_cpu / our_cpu if our_cpu else 0, go_rss, our_rss,
                          go_rss / our_rss if our_rss else 0, go_add, our_add,
                          go_add / our_add if our_add > 0 else 0))
        print("times in ms of CPU (ours: median of %d); total = the call timed as a whole "
              "(each phase timed apart adds a clock read); floor = libdeflate gunzip + gzip of "
              "the same bytes at the same level, warm buffers (level 0: gunzip only); "
              "go out = the Go "
              "reference's output (gzip default level); go cpu: median of 3 runs of about a "
              "second; RSS: median of 3 processes; +RSS = peak RSS less the RSS with both "
              "inputs read; x = ratio" % args.iters)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
