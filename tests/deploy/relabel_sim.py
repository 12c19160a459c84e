"""A small Prometheus relabel evaluator (the actions the chart's rules use),
so the chart tests can check what its generated rules keep and drop for
synthetic pods without a cluster. Semantics follow Prometheus'
model/relabel: fully anchored regexes, `;` separator, `$1` replacement,
empty result deletes the target label, hashmod = md5 of the joined source
labels, last 8 bytes big-endian, modulo."""
import hashlib
import re
import struct


def _get(rule, key, default=None):
    for k in (key, key.replace("-", "_")):
        if k in rule:
            return rule[k]
    return default


def _expand(template, m):
    def sub(mo):
        g = mo.group(1) or mo.group(2)
        try:
            return m.group(int(g)) if g.isdigit() else m.group(g) or ""
        except (IndexError, re.error):
            return ""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, template)


def apply(rules, labels, env=None):
    """Returns the relabelled labels, or None if a rule dropped the target."""
    lb = dict(labels)
    env = env or {}
    for r in rules:
        action = _get(r, "action", "replace")
        src = _get(r, "source-labels", []) or []
        sep = _get(r, "separator", ";")
        raw = str(_get(r, "regex", "(.*)"))
        raw = re.sub(r"\$\{(\w+)\}", lambda mo: env.get(mo.group(1), ""), raw)
        rx = re.compile(r"^(?:" + raw + r")$")
        target = _get(r, "target-label")
        repl = str(_get(r, "replacement", "$1"))
        val = sep.join(lb.get(s, "") for s in src)
        if action == "replace":
            m = rx.match(val)
            if not m:
                continue
            res = _expand(repl, m)
            t = _expand(target, m)
            if res == "":
                lb.pop(t, None)
            else:
                lb[t] = res
        elif action == "keep":
            if not rx.match(val):
                return None
        elif action == "drop":
            if rx.match(val):
                return None
        elif action == "keepequal":
            if val != lb.get(target, ""):
                return None
        elif action == "dropequal":
            if val == lb.get(target, ""):
                return None
        elif action == "hashmod":
            h = hashlib.md5(val.encode()).digest()
            lb[target] = str(struct.unpack(">Q", h[8:])[0] % int(_get(r, "modulus")))
        elif action == "labelmap":
            for k in list(lb):
                m = rx.match(k)
                if m:
                    lb[_expand(repl, m)] = lb[k]
        elif action == "labeldrop":
            lb = {k: v for k, v in lb.items() if not rx.match(k)}
        elif action == "labelkeep":
            lb = {k: v for k, v in lb.items() if rx.match(k)}
        elif action == "lowercase":
            lb[target] = val.lower()
        elif action == "uppercase":
            lb[target] = val.upper()
        else:
            raise ValueError(f"unknown action {action}")
    return lb


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
