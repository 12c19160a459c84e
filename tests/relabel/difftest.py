#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Differential test: our relabeling against Prometheus itself.

Generates random label sets and rule lists (fixed seed) covering every
action, separators, `$` templates, anchoring, alternation, character
classes and named groups; writes them as a Prometheus config with
file_sd_configs; runs `promtool check service-discovery` (Debian's
Prometheus 2.42) and compares its final labels, drops and errors with
tests/relabel/relabel_cli (our library, plus 2.42's post-relabel target
checks). Also runs the kubernetes-pods relabel rules of seed 001 on
synthetic pods' meta labels.

Usage: difftest.py RELABEL_CLI [PROMTOOL]
Environment: RELABEL_DIFF_SEED (default fixed), RELABEL_DIFF_LONG=N runs N
times as many jobs (long mode).

Case classes excluded because Prometheus 2.42 differs from Prometheus 3 (the
semantics we implement), not because we differ from Prometheus:
  * values or names containing "\\n": 2.42 anchors with ^(?:...)$ (no `s`
    flag), so `.` does not match a newline there; 3.x uses ^(?s:...)$.
  * `(?<name>...)` groups: Go 1.19 (2.42's compiler) only knows (?P<name>).
  * UTF-8 label names: 2.42 only has legacy names; everything runs with the
    legacy scheme on both sides.
  * labelmap rules whose mapping is not injective, except as the first rule:
    2.42 walks the sorted label set, 3.x walks base labels then the labels
    earlier rules set, so collisions resolve differently.
  * replace with `$` in target_label and a replacement that can expand to
    "": 2.42 deletes the unexpanded target_label, 3.x the expanded one.
  * default ports: run with --enable-feature=no-default-scrape-port (3.x
    adds none; 2.42 then strips :80/:443, which relabel_cli emulates);
    __scrape_*__/__metrics_path__ defaults are emulated.
  * 2.42's printed discoveredLabels are modified in place by some rules (a
    2.42 bug), so they are not compared; kept targets are paired by a case
    id label no rule removes, dropped and failed ones are compared by count.
"""
import concurrent.futures
import json
import os
import random
import re
import subprocess
import sys
import tempfile

import yaml


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib  # noqa: E402  (the shared helpers; unwinds on meson's SIGTERM)

SEED = int(os.environ.get("RELABEL_DIFF_SEED", "424242"))
LONG = int(os.environ.get("RELABEL_DIFF_LONG", "1") or "1")
JOBS = 56 * LONG
TARGETS_PER_JOB = 90
PROMTOOL_TIMEOUTS = ["400ms", "2s", "8s"]  # retried only if file SD was late

NAMES = ["a", "b", "c", "foo", "bar", "env", "region", "zone", "app", "team", "x1",
         "instance", "job", "__tmp_x", "__tmp_port", "__meta_x_y", "__meta_sd_tags",
         "__meta_kubernetes_pod_label_app", "__meta_kubernetes_pod_label_tier",
         "__meta_kubernetes_namespace", "__param_seconds", "__scheme__"]
CHARS = "abcxyzABCZ0123456789:.-_/ ,;=ÄéßǅΩ中"
ACTIONS = (["replace"] * 8 + ["keep", "drop", "keepequal", "dropequal", "hashmod",
           "labelmap", "labelmap", "labeldrop", "labelkeep", "lowercase", "uppercase"])
ATOMS = [r".*", r".+", r"(.*)", r"(.+)", r"\d+", r"(\d+)", r"\w+", r"(\w*)", r"[a-z]+",
         r"([a-z0-9]+)", r"[^:]+", r"([^:]*)", r"[[:alpha:]]+", r"[[:digit:]]*", r"\pL+",
         r"\PL", r"[\d.]+", r"\S+", r"\s*", r"\W", r".", r".?", r".*?", r"(.*?)",
         r"(?:a|b)", r"(a|aa)", r"(a*)", r"x{1,3}", r"[0-9]{2}", r"(?i)foo",
         r"(?P<grp>[a-z]+)", r"(?P<n1>.*)", r"\.", r"-", r":", r"[;,]", r"(?:.+,|^)",
         r"$", r"^", r"\b", r"[^\W\d]+", r"\x41", r"\Qa.b\E", r"(?s:.)", r"(?U)a+",
         r"[[:^alpha:]]", r"\p{Greek}", r"[\p{Lu}]", r"(?i)[ä-ö]+", r"[^a-c]*",
         r"(\w+)?", r"(?:(\d)|([a-z]))+", r"\A", r"\z", r"[[:upper:][:digit:]]+",
         r"\x{4e2d}", r"(?i:ÄÉ)", r"[\-:.]", r"(.)(.)", r"()"]
META = set("\\.+*?()|[]{}^$")
TEMPLATES = [None, "$1", "${1}", "${1}-${2}", "$2$1", "x", "$$", "${grp}", "$grp",
             "$1_x", "$10", "$0", "${0}", "$", "a$", "$-", "${", "${}", "pre_${1}_post",
             "$n1", "${n1}x", "é$1", "$ {1}", "${1x}", "$01"]


def esc(s):
    return "".join("\\" + ch if ch in META else ch for ch in s)


def rand_value(rng):
    n = rng.randint(1, 12)
    return "".join(rng.choice(CHARS) for _ in range(n))


def rand_address(rng):
    k = rng.random()
    if k < 0.55:
        return "10.%d.%d.%d:%d" % (rng.randint(0, 3), rng.randint(0, 255), rng.randint(0, 255),
                                   rng.choice([80, 443, 6060, 8080, 9090]))
    if k < 0.7:
        return "host-%d.example" % rng.randint(0, 99)
    if k < 0.85:
        return "[fd00::%x]:%d" % (rng.randint(1, 999), rng.choice([80, 6060]))
    if k < 0.97:
        return "10.0.0.%d" % rng.randint(1, 254)
    return "a/b:1"


def gen_regex(rng, samples):
    """A regex that often matches one of the sample strings."""
    def one():
        s = rng.choice(samples) if samples and rng.random() < 0.8 else rand_value(rng)
        out, i = [], 0
        while i < len(s):
            j = i + rng.randint(1, 4)
            chunk = s[i:j]
            k = rng.random()
            if k < 0.45:
                out.append(esc(chunk))
            elif k < 0.9:
                out.append(rng.choice(ATOMS))
            else:
                out.append("(" + esc(chunk) + ")")
            i = j
        return "".join(out)
    k = rng.random()
    if k < 0.12:
        return rng.choice(ATOMS)
    if k < 0.25:
        return one() + "|" + one()
    return one()


def keeps_cid(rng, names):
    """A labeldrop regex that does not match the case id label "cid" (judged
    with Python's re on the subset of syntax both read the same way)."""
    for _ in range(50):
        rx = gen_regex(rng, names)
        if any(s in rx for s in ("[[:", "\\p", "\\P", "\\z", "\\Q", "(?U)", "\\x{")):
            continue
        try:
            if re.fullmatch(rx, "cid", re.S):
                continue
        except re.error:
            continue
        return rx
    return "__meta_(.*)"


def gen_rule(rng, labels, first):
    act = rng.choice(ACTIONS)
    names = sorted(labels)
    r = {"action": act}
    srcs = [rng.choice(names + NAMES) for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3]))]
    sep = rng.choice([None, None, ";", "", ",", "-", "::"])
    joined = (sep if sep is not None else ";").join(labels.get(s, "") for s in srcs)
    if act in ("labelmap", "labeldrop", "labelkeep"):
        if act == "labelmap" and not first:
            # injective: a fixed prefix plus the whole rest of the name
            pre = rng.choice(["__meta_kubernetes_pod_label_", "__meta_", "__tmp_", "a", ""])
            r["regex"] = esc(pre) + "(.*)"
            r["replacement"] = rng.choice(["m_${1}", "${1}_m", "__tmp_m_$1", "z${1}"])
        elif act == "labelkeep":
            r["regex"] = gen_regex(rng, names) + "|cid"  # the case id must survive
        elif act == "labeldrop":
            r["regex"] = keeps_cid(rng, names)
        else:
            r["regex"] = gen_regex(rng, names)
            if act == "labelmap":
                r["replacement"] = rng.choice(["$1", "${1}", "m_${1}", "${grp}x", "k_$n1", "x"])
        return r
    if srcs or rng.random() < 0.3:
        r["source_labels"] = srcs
    if sep is not None and act not in ("keepequal", "dropequal"):
        r["separator"] = sep
    if act in ("keepequal", "dropequal"):
        r["target_label"] = rng.choice(names + NAMES)
        return r
    if act in ("lowercase", "uppercase"):
        r["target_label"] = rng.choice(names + NAMES + ["lc", "uc"])
        return r
    if act == "hashmod":
        r["target_label"] = rng.choice(["__tmp_hash", "shard", "a"])
        r["modulus"] = rng.choice([1, 2, 3, 10, 1000, 2**40 + 7])
        return r
    if rng.random() < 0.85:
        r["regex"] = gen_regex(rng, [joined] if joined else [])
    if act in ("keep", "drop"):
        return r
    # replace
    t = rng.choice(names + NAMES + ["new", "__tmp_t", "${1}", "t_$1", "${grp}_t", "$1$2"])
    r["target_label"] = t
    repl = rng.choice(TEMPLATES)
    if "$" in t and (repl is None or not any(ch.isalpha() for ch in repl.replace("$", ""))):
        repl = "v" + (repl or "$1")
    if repl is not None:
        r["replacement"] = repl
    return r


def gen_labels(rng):
    ls = {}
    for _ in range(rng.randint(1, 7)):
        name = rng.choice(NAMES)
        if name in ("instance",) and rng.random() < 0.7:
            continue
        ls[name] = rand_value(rng) if rng.random() < 0.8 else rng.choice(["a", "aa", "foo", "true"])
    return ls


K8S_RULES = yaml.safe_load("""
- source_labels: [__meta_kubernetes_pod_annotation_pyroscope_io_scrape]
  action: keep
  regex: true
- source_labels: [__meta_kubernetes_pod_annotation_pyroscope_io_application_name]
  action: replace
  target_label: __name__
- source_labels: [__meta_kubernetes_pod_annotation_pyroscope_io_scheme]
  action: replace
  regex: (https?)
  target_label: __scheme__
- source_labels: [__address__, __meta_kubernetes_pod_annotation_pyroscope_io_port]
  action: replace
  regex: ([^:]+)(?::\\d+)?;(\\d+)
  replacement: $1:$2
  target_label: __address__
- action: labelmap
  regex: __meta_kubernetes_pod_label_(.+)
- source_labels: [__meta_kubernetes_namespace]
  action: replace
  target_label: kubernetes_namespace
- source_labels: [__meta_kubernetes_pod_name]
  action: replace
  target_label: kubernetes_pod_name
- source_labels: [__meta_kubernetes_pod_phase]
  regex: Pending|Succeeded|Failed|Completed
  action: drop
- action: labelmap
  regex: __meta_kubernetes_pod_annotation_pyroscope_io_profile_(.+)
  replacement: __profile_$1
""")


def k8s_pod_labels(rng, i):
    ip = "10.%d.%d.%d" % (rng.randint(0, 3), rng.randint(0, 255), rng.randint(1, 254))
    port = ":%d" % rng.choice([6060, 8080, 4040]) if rng.random() < 0.7 else ""
    ls = {"__address__": ip + port,
          "__meta_kubernetes_namespace": rng.choice(["default", "prod", "kube-system"]),
          "__meta_kubernetes_pod_name": "pod-%d" % i,
          "__meta_kubernetes_pod_phase": rng.choice(["Running"] * 4 + ["Pending", "Succeeded",
                                                                     "Failed", "Unknown"]),
          "__meta_kubernetes_pod_ip": ip,
          "__meta_kubernetes_pod_container_name": rng.choice(["app", "sidecar"])}
    if rng.random() < 0.85:
        ls["__meta_kubernetes_pod_annotation_pyroscope_io_scrape"] = rng.choice(
            ["true"] * 5 + ["false", "True"])
    if rng.random() < 0.7:
        ls["__meta_kubernetes_pod_annotation_pyroscope_io_application_name"] = \
            rng.choice(["ride-sharing", "api", "db-proxy"])
    if rng.random() < 0.5:
        ls["__meta_kubernetes_pod_annotation_pyroscope_io_scheme"] = rng.choice(
            ["http", "https", "grpc", "HTTPS"])
    if rng.random() < 0.6:
        ls["__meta_kubernetes_pod_annotation_pyroscope_io_port"] = rng.choice(
            ["6060", "8080", "x1", ""]) or "4040"
    for k in rng.sample(["app", "tier", "version", "pod_template_hash"], rng.randint(0, 3)):
        ls["__meta_kubernetes_pod_label_" + k] = rng.choice(["web", "v1", "backend", "abc123"])
    for k in rng.sample(["cpu_enabled", "mem_enabled", "cpu_path", "mem_param_gc"],
                        rng.randint(0, 2)):
        ls["__meta_kubernetes_pod_annotation_pyroscope_io_profile_" + k] = rng.choice(
            ["true", "false", "/debug/x", "1"])
    return ls


def run_cli(cli, rules, targets):
    doc = {"scheme": "legacy", "mode": "prom242", "rules": rules, "targets": targets}
    p = subprocess.run([cli], input=json.dumps(doc).encode(), capture_output=True, timeout=60)
    lines = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
    if p.returncode == 2:
        return None, lines[0]["config_error"]
    if p.returncode != 0:
        raise RuntimeError("relabel_cli failed: %s" % p.stderr.decode())
    return lines, None


def run_promtool(promtool, tmp, name, rules, targets):
    sd = os.path.join(tmp, name + ".json")
    groups = []
    for t in targets:
        lab = {k: v for k, v in t.items() if k != "__address__"}
        groups.append({"targets": [t["__address__"]], "labels": lab})
    with open(sd, "w", encoding="utf-8") as f:
        json.dump(groups, f, ensure_ascii=False)
    cfg = {"scrape_configs": [{"job_name": name, "file_sd_configs": [{"files": [sd]}],
                               "relabel_configs": rules}]}
    path = os.path.join(tmp, name + ".yml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(cfg, f, allow_unicode=True, default_style='"', width=1 << 20)
    for tmo in PROMTOOL_TIMEOUTS:
        p = subprocess.run([promtool, "check", "service-discovery", "--timeout=" + tmo,
                            "--enable-feature=no-default-scrape-port", path, name],
                           capture_output=True, timeout=60)
        if p.returncode != 0:
            return None, p.stderr.decode()[-500:]
        out = json.loads(p.stdout.decode() or "[]")
        if len(out) == len(targets):
            return out, None
    raise RuntimeError("promtool returned %d of %d targets" % (len(out), len(targets)))


def defaults(job, sd_path, labels, addr):
    d = dict(labels)
    d["__address__"] = addr
    d.setdefault("job", job)
    d.setdefault("__metrics_path__", "/metrics")
    d.setdefault("__scheme__", "http")
    d.setdefault("__scrape_interval__", "1m")
    d.setdefault("__scrape_timeout__", "10s")
    d["__meta_filepath"] = sd_path
    return d


def compare(job, targets_in, ours, prom, failures):
    """Kept targets are paired by their case id, which no rule removes;
    dropped and failed ones are compared by count (they carry no labels)."""
    theirs_kept, theirs_dropped, theirs_errors = {}, 0, 0
    for o in prom:
        if "error" in o:
            theirs_errors += 1
        elif not o["labels"]:
            theirs_dropped += 1
        else:
            theirs_kept[o["labels"].get("cid")] = o["labels"]
    our_kept, our_dropped, our_errors = {}, 0, 0
    for t, mine in zip(targets_in, ours):
        if "error" in mine:
            our_errors += 1
        elif mine.get("dropped"):
            our_dropped += 1
        else:
            our_kept[t["cid"]] = (t, mine["labels"])
    for cid, (t, got) in our_kept.items():
        want = theirs_kept.get(cid)
        if got != want:
            failures.append((job, cid, t, got, want if want is not None else "not kept"))
    for cid in theirs_kept:
        if cid not in our_kept:
            t = next((x for x in targets_in if x["cid"] == cid), {})
            failures.append((job, cid, t, "not kept", theirs_kept[cid]))
    if (our_dropped, our_errors) != (theirs_dropped, theirs_errors):
        failures.append((job, "-", {}, "dropped %d errors %d" % (our_dropped, our_errors),
                         "dropped %d errors %d" % (theirs_dropped, theirs_errors)))
    return len(targets_in)


def run_job(args):
    cli, promtool, tmp, job, rules, raw_targets = args
    sd_path = os.path.join(tmp, job + ".json")
    targets = [defaults(job, sd_path, lab, addr) for lab, addr in raw_targets]
    ours, our_err = run_cli(cli, rules, targets)
    prom, prom_err = run_promtool(promtool, tmp, job, rules, targets)
    return job, rules, targets, ours, our_err, prom, prom_err


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    cli = sys.argv[1]
    promtool = sys.argv[2] if len(sys.argv) > 2 else "promtool"
    rng = random.Random(SEED)
    work = []
    with tempfile.TemporaryDirectory(prefix="relabel-diff-") as tmp:
        for j in range(JOBS):
            raw = []
            for i in range(TARGETS_PER_JOB):
                lab = gen_labels(rng)
                lab.pop("__address__", None)
                lab["cid"] = "%d-%d" % (j, i)
                raw.append((lab, rand_address(rng)))
            pool = {}
            for lab, _ in raw[:10]:
                pool.update(lab)
            del pool["cid"]  # rules never touch the case id
            rules = [gen_rule(rng, pool, k == 0) for k in range(rng.randint(1, 6))]
            work.append((cli, promtool, tmp, "j%d" % j, rules, raw))
        raw = []
        for i in range(TARGETS_PER_JOB * 4):
            lab = k8s_pod_labels(rng, i)
            addr = lab.pop("__address__")
            lab["cid"] = "k8s-%d" % i
            raw.append((lab, addr))
        work.append((cli, promtool, tmp, "kubernetes_pods", K8S_RULES, raw))

        failures, cases, rejected_both, kept, dropped = [], 0, 0, 0, 0
        actions = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
            for job, rules, targets, ours, our_err, prom, prom_err in ex.map(run_job, work):
                if our_err or prom_err:
                    if our_err and prom_err:
                        rejected_both += 1
                        continue
                    failures.append((job, "-", rules, "ours: %s" % our_err,
                                     "promtool: %s" % prom_err))
                    continue
                for r in rules:
                    a = r.get("action", "replace")
                    actions[a] = actions.get(a, 0) + 1
                cases += compare(job, targets, ours, prom, failures)
                kept += sum(1 for o in ours if "labels" in o)
                dropped += sum(1 for o in ours if o.get("dropped"))
    print("relabel differential: %d cases in %d jobs (%d kept, %d dropped, rest errors); "
          "%d rule lists rejected by both; rules per action: %s" %
          (cases, len(work), kept, dropped, rejected_both, json.dumps(actions, sort_keys=True)))
    for f in failures[:20]:
        print("MISMATCH job=%s case=%s\n  input: %s\n  ours:  %s\n  prom:  %s" %
              (f[0], f[1], json.dumps(f[2], ensure_ascii=False), f[3], f[4]))
    if failures:
        print("%d mismatches" % len(failures))
        return 1
    if cases < 1000 * LONG:
        print("too few cases compared")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
