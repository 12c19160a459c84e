#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Replays a fuzz target's corpus under libFuzzer (-runs=0) and fails when
the coverage it reports is below the floor: the check that a target is
still guided by the code it fuzzes. Usage: fuzz_cov.py EXE CORPUS FLOOR"""
import re
import subprocess
import sys

exe, corpus, floor = sys.argv[1], sys.argv[2], int(sys.argv[3])
run = subprocess.run([exe, "-runs=0", "-rss_limit_mb=2048", corpus],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                     text=True, timeout=280)
out = run.stdout
sys.stdout.write(out[-4000:])
if run.returncode != 0:
    sys.exit(f"{exe}: exit {run.returncode}")
m = re.search(r"INITED (?:cov: (\d+) ft: (\d+) corp: (\d+))?", out)
if not m:
    sys.exit(f"{exe}: libFuzzer printed no INITED line")
# Without instrumentation libFuzzer prints no coverage at all: zero.
cov, ft, corp = (int(g or 0) for g in m.groups())
print(f"coverage {cov} (floor {floor}), features {ft}, corpus {corp}")
if cov < floor:
    sys.exit(f"{exe}: coverage {cov} below its floor {floor}")
