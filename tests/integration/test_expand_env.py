# SPDX-License-Identifier: Apache-2.0
"""Environment expansion is opt-in: without --config.expand-env the file is
read literally, so relabel templates ($$1, ${1}, ${name}, $name) mean what
they mean in Prometheus; the same file through `promtool check
service-discovery` and `proflet targets` gives the same labels. With the
flag (either spelling) ${VAR} expands, and --check-config notes a `${` it
did not expand."""
import json
import os
import shutil
import subprocess

from lib import *

RULES = {
    "t1": "$$1",
    "t2": "${1}",
    "t3": "${name}",
    "t4": "$name",
    "t5": "${2}x$$$2",
    "t6": "$1_$2",
    "t7": "${1}_${2}",
}


def config(sd):
    rules = "\n".join(
        f"      - {{source_labels: [app], regex: '(?P<name>[a-z]+)-(\\d+)', "
        f"target_label: {t}, replacement: '{r}'}}" for t, r in RULES.items())
    return f"""scrape_configs:
  - job_name: e
    file_sd_configs: [{{files: [{sd}]}}]
    relabel_configs:
{rules}
"""


def rule_labels(targets):
    return [{k: v for k, v in t["labels"].items() if k in RULES} for t in targets]


def main():
    promtool = shutil.which("promtool")
    check(promtool is not None, "promtool is missing (scripts/install-deps.sh installs prometheus)")
    with environment() as (tmp, procs):
        sd = os.path.join(tmp, "sd.json")
        with open(sd, "w") as f:
            json.dump([{"targets": ["127.0.0.1:9"], "labels": {"app": "cart-7"}},
                       {"targets": ["127.0.0.2:9"], "labels": {"app": "db-12"}}], f)
        cfg = os.path.join(tmp, "p.yml")
        with open(cfg, "w") as f:
            f.write(config(sd))

        want = subprocess.run([promtool, "check", "service-discovery", "--timeout=2s", cfg, "e"],
                              capture_output=True, text=True, timeout=60)
        check(want.returncode == 0, f"promtool failed: {want.stderr}")
        want = rule_labels(json.loads(want.stdout))
        got = subprocess.run([PROFLET, "targets", "--config", cfg], capture_output=True, text=True,
                             timeout=60)
        check(got.returncode == 0, f"proflet targets failed: {got.stderr}")
        got = rule_labels(json.loads(got.stdout))
        key = lambda d: json.dumps(d, sort_keys=True)
        check(sorted(map(key, got)) == sorted(map(key, want)),
              f"differences from promtool without the flag:\n proflet {got}\n promtool {want}")
        check(len(want) == 2 and want[0].get("t1") == "$1", f"unexpected oracle output {want}")

        r = subprocess.run([PROFLET, "--check-config", cfg], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0, f"--check-config: {r.stderr}")
        check("expand-env" in r.stderr and "${" in r.stderr,
              f"--check-config does not note the unexpanded ${{: {r.stderr!r}")

        # With the flag, ${VAR} expands: the same rules now differ from
        # Prometheus where they look like variables ($$1 -> $1 -> "cart").
        env = dict(os.environ, PROFLET_T_JOB="expanded")
        expanding = os.path.join(tmp, "x.yml")
        with open(expanding, "w") as f:
            f.write(config(sd).replace("job_name: e", "job_name: ${PROFLET_T_JOB}"))
        for flag in ("--config.expand-env", "-config.expand-env=true"):
            r = subprocess.run([PROFLET, "targets", "--config", expanding, flag], env=env,
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"targets {flag}: {r.stderr}")
            out = json.loads(r.stdout)
            check(all(t["labels"]["job"] == "expanded" for t in out), f"{flag}: job not expanded: {out}")
            labels = rule_labels(out)
            check(labels[0]["t1"] in ("cart", "db") and "t3" not in labels[0],
                  f"{flag}: $$1 and ${{name}} were not expanded as documented: {labels}")
        r = subprocess.run([PROFLET, "--check-config", expanding, "--config.expand-env=false"],
                           env=env, capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "${" in r.stderr, f"=false does not turn expansion off: {r}")


run_test(main)
