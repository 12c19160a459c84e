#!/usr/bin/python3
"""pprof delta benchmark: proflet vs the libdeflate floor vs a Go reference.

Pairs of consecutive heap/mutex/block profiles:
  * std-*: checked in (tests/bench/pprof/corpus), from standard-library
    workloads (gen -mode std);
  * heap-16k: ~16,000 stacks, ~1 MB raw (gen -mode big -depth 14 -prefix 4);
  * heap-131k: ~131,000 stacks, ~10 MB raw (gen -mode big -depth 17 -prefix 10),
both generated here into /tmp/proflet-bench-corpus (kept between runs).

For each pair and gzip level: proflet's per-phase CPU time (bench_pprof,
median of N), the floor (libdeflate gunzip + gzip of the same bytes), the
Go reference (google/pprof from Debian: parse, Scale(-1), Merge, write) CPU
time per delta, and both peak RSS figures (one delta per process).

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
        for name, flags in (("heap-16k", ["-depth", "14", "-prefix", "4"]),
                            ("heap-131k", ["-depth", "17", "-prefix", "10"])):
            d = os.path.join(CORPUS_DIR, name)
            if not os.path.exists(os.path.join(d, "heap.2.pb.gz")):
                run([gen, "-mode", "big", "-out", d] + flags)
        corpus = os.path.join(args.src, "corpus")
        pairs = [("std-" + k, os.path.join(corpus, k + ".1.pb.gz"),
                  os.path.join(corpus, k + ".2.pb.gz")) for k in ("heap", "mutex", "block")]
        pairs += [(n, os.path.join(CORPUS_DIR, n, "heap.1.pb.gz"),
                   os.path.join(CORPUS_DIR, n, "heap.2.pb.gz")) for n in ("heap-16k", "heap-131k")]

        print("%-10s %5s %9s %7s | %7s %7s %7s %7s %7s %8s | %7s %6s | %9s %9s %6s | %8s %8s %6s" % (
            "pair", "level", "raw B", "out B", "gunzip", "decode", "delta", "encode", "gzip",
            "total", "floor", "x", "go cpu", "our cpu", "x", "go RSS", "our RSS", "x"))
        for name, prev, cur in pairs:
            g = kv(run([goref, "-n", "3", prev, cur]))
            g1 = kv(run([goref, "-n", "1", prev, cur]))
            for level in (0, 1, 6):
                if level == 0 and not name.startswith("heap-131k"):
                    continue
                b = kv(run([args.bench, "-l", str(level), "-n", str(args.iters), prev, cur]))
                m = kv(run([args.bench, "-m", "-l", str(level), prev, cur]))
                go_cpu = float(g["cpu_ms"])
                our_cpu = float(b["cpu_ms"])
                go_rss = int(g1["peak_rss_kb"]) / 1024
                our_rss = int(m["peak_rss_kb"]) / 1024
                print("%-10s %5d %9s %7s | %7s %7s %7s %7s %7s %8s | %7s %6s | %9.2f %9.2f %6.1f |"
                      " %7.1fM %7.1fM %6.1f" % (
                          name, level, b["raw_bytes"], b["out_bytes"], b["gunzip_ms"],
                          b["decode_ms"], b["delta_ms"], b["encode_ms"], b["gzip_ms"],
                          b["total_ms"], b["floor_ms"], b["ratio"], go_cpu, our_cpu,
                          go_cpu / our_cpu if our_cpu else 0, go_rss, our_rss,
                          go_rss / our_rss if our_rss else 0))
        print("times in ms of CPU (median of %d); floor = libdeflate gunzip + gzip of the same "
              "bytes at the same level (level 0: gunzip only); x = ratio" % args.iters)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
