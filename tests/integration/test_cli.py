# SPDX-License-Identifier: Apache-2.0
"""The command line: --version, --help, --check-config on valid and invalid
files (exit 2 and a message naming file, line and column), a bad config at
start-up (exit 2), and `proflet targets` printing promtool-shaped JSON."""
import glob
import json
import os
import subprocess

from lib import *


def run(*args, **kw):
    return subprocess.run([PROFLET, *args], capture_output=True, text=True, timeout=30, **kw)


def main():
    r = run("--version")
    check(r.returncode == 0 and r.stdout.startswith("proflet "), f"--version: {r}")
    r = run("--help")
    for word in ("--config", "--check-config", "targets", "SIGHUP", "/metrics", "--show-dropped"):
        check(word in r.stdout, f"--help does not document {word}")
    r = run("--no-such-flag")
    check(r.returncode == 2, f"unknown flag exit {r.returncode}")
    r = run("--print-default-config")
    check(r.returncode == 0 and "127.0.0.1:6060" in r.stdout, "default config does not scrape 127.0.0.1:6060")

    with environment() as (tmp, procs):
        default = os.path.join(tmp, "default.yaml")
        with open(default, "w") as f:
            f.write(run("--print-default-config").stdout)
        r = run("--check-config", default)
        check(r.returncode == 0, f"embedded default does not validate: {r.stderr}")

        seeds = sorted(glob.glob(os.path.join(SRC, "tests", "agent", "seeds", "*.yaml")))
        check(len(seeds) >= 4, f"seed fixtures missing: {seeds}")
        for s in seeds:
            r = run("--check-config", s)
            check(r.returncode == 0, f"seed {s} rejected: {r.stderr}")

        bad = os.path.join(tmp, "bad.yaml")
        cases = [
            ("scrape-configs:\n  - job-name: a\n    scrape-intervall: 15s\n", "3:5"),
            ("scrape-configs:\n  - job-name: a\n    scrape-interval: soon\n", "3:"),
            ("log-level: info\nscrape-configs: [\n", ":"),
        ]
        for text, where in cases:
            with open(bad, "w") as f:
                f.write(text)
            r = run("--check-config", bad)
            check(r.returncode == 2, f"bad config accepted: {text!r}")
            check(f"{bad}:" in r.stderr and where in r.stderr, f"message lacks file:line:col: {r.stderr!r}")
            r = run("--config", bad)
            check(r.returncode == 2, f"proflet started with a bad config (exit {r.returncode})")

        cfg = os.path.join(tmp, "targets.yaml")
        with open(cfg, "w") as f:
            f.write("""
scrape-configs:
  - job-name: t
    enabled-profiles: [cpu]
    static-configs:
      - application: app
        targets: ["127.0.0.1:6060", "127.0.0.2"]
        labels: {team: a}
    relabel-configs:
      - source-labels: [__address__]
        regex: "127.0.0.2.*"
        action: drop
remote-write:
  - url: file:///nonexistent-not-written
""")
        r = run("targets", "--config", cfg)
        check(r.returncode == 0, f"targets failed: {r.stderr}")
        out = json.loads(r.stdout)
        check(len(out) == 1, f"expected 1 surviving target, got {out}")
        t = out[0]
        check(t["discoveredLabels"]["__address__"] == "127.0.0.1:6060", t)
        check(t["labels"]["instance"] == "127.0.0.1:6060" and t["labels"]["job"] == "t", t)
        check(t["labels"].get("team") == "a", t)
        r = run("targets", "--config", cfg, "--show-dropped")
        out = json.loads(r.stdout)
        check(len(out) == 2, f"--show-dropped should list 2 targets: {out}")


run_test(main)
