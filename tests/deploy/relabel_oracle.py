# SPDX-License-Identifier: Apache-2.0
"""The chart's relabel rules, applied by the two implementations that
count: proflet's own (tests/relabel/relabel_cli, the relabel library) and
Prometheus' (`promtool check service-discovery` over file SD). Each call
runs both on the same synthetic pod targets, fails unless they agree, and
returns the agreed result. ${VAR} in the rules is expanded from `env`, as
proflet's --config.expand-env does for the chart's ${SHARD}."""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "relabel"))
import difftest  # noqa: E402  (run_cli, run_promtool, defaults)

RELABEL_CLI = os.environ.get("RELABEL_CLI", "")
PROMTOOL = os.environ.get("PROMTOOL", "promtool")
CASE = "oracle_case"  # a label no chart rule touches, to pair the outputs


class Disagreement(Exception):
    pass


def _snake(rule, env):
    out = {}
    for k, v in rule.items():
        if isinstance(v, str):
            v = re.sub(r"\$\{(\w+)\}", lambda mo: env[mo.group(1)] if mo.group(1) in env else mo.group(0), v)
        out[k.replace("-", "_")] = v
    return out


def apply_many(rules, targets, env=None):
    """The relabelled labels of each target (None: dropped), as both
    implementations agree; raises Disagreement otherwise."""
    if not RELABEL_CLI:
        raise Disagreement("RELABEL_CLI is not set: run through meson (tests/deploy/meson.build)")
    rules = [_snake(r, env or {}) for r in rules]
    with tempfile.TemporaryDirectory(prefix="chart-relabel-") as tmp:
        sd = os.path.join(tmp, "chart.json")
        ins = []
        for i, t in enumerate(targets):
            lab = {k: v for k, v in t.items() if k != "__address__"}
            lab[CASE] = str(i)
            ins.append(difftest.defaults("chart", sd, lab, t["__address__"]))
        ours, err = difftest.run_cli(RELABEL_CLI, rules, ins)
        if err:
            raise Disagreement(f"proflet refused the rules: {err}")
        prom, err = difftest.run_promtool(PROMTOOL, tmp, "chart", rules, ins)
        if err:
            raise Disagreement(f"promtool refused the rules: {err}")
    theirs = {}
    for o in prom:
        if o.get("labels"):
            theirs[o["labels"][CASE]] = o["labels"]
    out = []
    for i, mine in enumerate(ours):
        want = theirs.get(str(i))
        got = mine.get("labels")
        if "error" in mine or got != want:
            raise Disagreement(f"target {targets[i]}: proflet {mine}, promtool {want}")
        if got is not None:
            got = {k: v for k, v in got.items() if k != CASE}
        out.append(got)
    if len(theirs) != sum(1 for o in out if o is not None):
        raise Disagreement(f"promtool kept {len(theirs)} targets, proflet {sum(1 for o in out if o)}")
    return out


def apply(rules, target, env=None):
    """apply_many() for one target."""
    return apply_many(rules, [target], env)[0]


def annotation_label(name):
    """`profiles.grafana.com/cpu.port` -> its __meta_kubernetes_pod_annotation_ label."""
    return "__meta_kubernetes_pod_annotation_" + re.sub(r"[^a-zA-Z0-9_]", "_", name)


def pod_targets(ns, name, ip, containers, annotations=None, labels=None, phase="Running"):
    """Prometheus pod-role targets: one per container port, or one per
    port-less container. containers: [(name, [(port_name, number), ...])]."""
    base = {
        "__meta_kubernetes_namespace": ns,
        "__meta_kubernetes_pod_name": name,
        "__meta_kubernetes_pod_ip": ip,
        "__meta_kubernetes_pod_phase": phase,
    }
    for k, v in (annotations or {}).items():
        base[annotation_label(k)] = v
    for k, v in (labels or {}).items():
        base["__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k)] = v
    out = []
    for cname, ports in containers:
        if not ports:
            out.append(dict(base, __address__=ip, __meta_kubernetes_pod_container_name=cname))
        for pname, num in ports:
            t = dict(base, __address__=f"{ip}:{num}", __meta_kubernetes_pod_container_name=cname,
                     __meta_kubernetes_pod_container_port_number=str(num))
            if pname:
                t["__meta_kubernetes_pod_container_port_name"] = pname
            out.append(t)
    return out
