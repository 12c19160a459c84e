# SPDX-License-Identifier: Apache-2.0
"""The plain manifests in deploy/kubernetes: every file validates against the
Kubernetes object schemas and the bundle checks, the generated ones match
the chart, the sidecar needs no API access, and the validator itself catches
the mistakes it claims to (so a green run means something)."""
import copy
import glob
import os
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_validate  # noqa: E402
from dlib import SRC, check, find, helm_render, one, run_tests  # noqa: E402

KDIR = os.path.join(SRC, "deploy", "kubernetes")


def load(name):
    with open(os.path.join(KDIR, name)) as f:
        return k8s_validate.load_docs(f.read())


def test_every_manifest_validates():
    files = sorted(glob.glob(os.path.join(KDIR, "*.yaml")))
    names = [os.path.basename(f) for f in files]
    for want in ("namespace.yaml", "remote-credentials.yaml", "daemonset.yaml", "statefulset.yaml",
                 "deployment.yaml", "sidecar.yaml"):
        check(want in names, f"{want} exists")
    secrets = [k8s_validate._name(d) for d in load("remote-credentials.yaml") if d["kind"] == "Secret"]
    expanding = set()
    for f in files:
        docs = load(os.path.basename(f))
        check(docs, f"{f} has documents")
        probs = k8s_validate.validate(docs, os.path.basename(f), external_secrets=secrets)
        check(not probs, "\n  ".join(probs))
        # Environment expansion is opt-in: every proflet container opts in.
        for d in docs:
            spec = d.get("spec", {}).get("template", {}).get("spec", {}) if d.get("kind") in (
                "DaemonSet", "Deployment", "StatefulSet") else {}
            for c in spec.get("containers", []):
                if c.get("name") == "proflet":
                    check("--config.expand-env" in c.get("args", []),
                          f"{os.path.basename(f)}: the proflet container passes --config.expand-env")
                    expanding.add(os.path.basename(f))
    check(expanding >= {"daemonset.yaml", "statefulset.yaml", "deployment.yaml",
                        "deployment-clustered.yaml", "sidecar.yaml"}, f"proflet containers seen in {expanding}")


def test_generated_manifests_match_the_chart():
    p = subprocess.run([os.path.join(KDIR, "generate.sh"), "--check", helm_render()],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"plain manifests differ from the chart:\n{p.stdout[-3000:]}{p.stderr[-2000:]}")


def test_manifests_install_into_the_restricted_namespace():
    ns = one(load("namespace.yaml"), "Namespace")
    check(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted", "restricted PSS enforced")
    for f in ("daemonset.yaml", "statefulset.yaml", "deployment.yaml", "remote-credentials.yaml"):
        for d in load(f):
            if d["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
                check(d["metadata"].get("namespace") == "proflet", f"{f}: {d['kind']} in namespace proflet")
    names = set()
    for f in ("daemonset.yaml", "statefulset.yaml", "deployment.yaml"):
        for d in load(f):
            key = (d["kind"], d["metadata"]["name"])
            check(key not in names, f"{f}: {key} clashes with another mode's manifest")
            names.add(key)


def test_daemonset_manifest_is_node_local_with_credentials_from_a_secret():
    docs = load("daemonset.yaml")
    cfg = yaml.safe_load(one(docs, "ConfigMap")["data"]["proflet.yaml"])
    for j in cfg["scrape-configs"]:
        check(j["kubernetes-sd-configs"][0]["selectors"][0]["field"] == "spec.nodeName=${NODE_NAME}", j["job-name"])
    rw = cfg["remote-write"][0]
    check(rw["basic-auth"]["password-file"].startswith("/var/run/secrets/proflet/"), f"password from a file: {rw}")
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    vols = [v for v in pod["volumes"] if "secret" in v]
    check(vols and vols[0]["secret"]["secretName"] == "proflet-remote-credentials", "secret volume")


def test_clustered_deployment_manifest():
    docs = load("deployment-clustered.yaml")
    dep = one(docs, "Deployment")
    check(dep["spec"]["replicas"] == 3, "three replicas")
    cfg = yaml.safe_load(one(docs, "ConfigMap")["data"]["proflet.yaml"])
    k = cfg["clustering"]["kubernetes"]
    check(cfg["clustering"]["enabled"] is True and k["namespaces"]["names"] == ["proflet"], f"clustering: {k}")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    for term in k["selectors"][0]["label"].split(","):
        key, _, val = term.partition("=")
        check(labels.get(key) == val, f"the peer selector selects the replicas: {term} vs {labels}")
    others = {(d["kind"], d["metadata"]["name"]) for f in ("daemonset.yaml", "statefulset.yaml", "deployment.yaml")
              for d in load(f)}
    for d in docs:
        check((d["kind"], d["metadata"]["name"]) not in others, f"{d['kind']} {d['metadata']['name']} clashes")
        if d["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            check(d["metadata"].get("namespace") == "proflet", f"{d['kind']} in namespace proflet")


def test_sidecar_needs_no_api_access():
    docs = load("sidecar.yaml")
    check(not find(docs, "ClusterRole") and not find(docs, "ServiceAccount"), "no RBAC objects")
    dep = one(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    check(pod["automountServiceAccountToken"] is False, "no service-account token mounted")
    names = [c["name"] for c in pod["containers"]]
    check(names == ["app", "proflet"], f"app + proflet containers: {names}")
    cfg = yaml.safe_load(one(docs, "ConfigMap")["data"]["proflet.yaml"])
    targets = [t for j in cfg["scrape-configs"] for s in j.get("static-configs", []) for t in s["targets"]]
    check(targets == ["localhost:6060"], f"scrapes localhost:6060: {targets}")
    check(all("kubernetes-sd-configs" not in j for j in cfg["scrape-configs"]), "no kubernetes discovery")


def _mutations():
    ds = one(load("daemonset.yaml"), "DaemonSet")
    pod = lambda d: d["spec"]["template"]["spec"]  # noqa: E731
    c0 = lambda d: pod(d)["containers"][0]  # noqa: E731

    def m(desc, fn, want):
        d = copy.deepcopy(ds)
        fn(d)
        return desc, d, want

    return [
        m("unknown field", lambda d: c0(d).__setitem__("imagePullPolcy", "Always"), "unknown field 'imagePullPolcy'"),
        m("wrong type", lambda d: c0(d)["ports"][0].__setitem__("containerPort", "4100"), "expected an integer"),
        m("null from an empty template", lambda d: pod(d).__setitem__("nodeSelector", None), "null value"),
        m("missing required field", lambda d: c0(d).pop("name"), "name"),
        m("label value type", lambda d: d["metadata"]["labels"].__setitem__("x", 1), "expected a string"),
        m("selector mismatch", lambda d: d["spec"]["selector"]["matchLabels"].__setitem__("x", "y"), "does not match"),
        m("dangling mount", lambda d: c0(d)["volumeMounts"].append({"name": "nope", "mountPath": "/x"}), "has no volume"),
        m("probe on an undeclared port", lambda d: c0(d)["readinessProbe"]["httpGet"].__setitem__("port", "metrics"),
          "does not declare"),
        m("root", lambda d: c0(d)["securityContext"].__setitem__("runAsNonRoot", False), "runAsNonRoot"),
        m("capabilities", lambda d: c0(d)["securityContext"]["capabilities"].__setitem__("add", ["SYS_ADMIN"]),
          "adds capabilities"),
        m("hostNetwork", lambda d: pod(d).__setitem__("hostNetwork", True), "hostNetwork"),
        m("no memory limit", lambda d: c0(d)["resources"].pop("limits"), "no memory limit"),
    ]


def test_validator_catches_mistakes():
    base = load("daemonset.yaml")
    idx = [i for i, d in enumerate(base) if d["kind"] == "DaemonSet"][0]
    secrets = ("proflet-remote-credentials",)
    check(not k8s_validate.validate(base, "base", external_secrets=secrets), "the unmutated bundle is valid")
    for desc, mutated, want in _mutations():
        docs = list(base)
        docs[idx] = mutated
        probs = k8s_validate.validate(docs, desc, external_secrets=secrets)
        check(any(want in p for p in probs), f"{desc}: want a problem mentioning {want!r}, got {probs}")
    # RBAC beyond get/list/watch, and a binding to a missing role.
    cr = copy.deepcopy(one(base, "ClusterRole"))
    cr["rules"][0]["verbs"].append("delete")
    docs = [d for d in base if d["kind"] != "ClusterRole"] + [cr]
    check(any("only get/list/watch" in p for p in k8s_validate.validate(docs, "rbac", external_secrets=secrets)),
          "excess verbs reported")
    docs = [d for d in base if d["kind"] != "ClusterRole"]
    check(any("roleRef" in p for p in k8s_validate.validate(docs, "rbac2", external_secrets=secrets)),
          "binding to a missing ClusterRole reported")
    check(any("Secret" in p for p in k8s_validate.validate(base, "secret")), "a Secret nobody provides is reported")


if __name__ == "__main__":
    run_tests([
        test_every_manifest_validates,
        test_generated_manifests_match_the_chart,
        test_manifests_install_into_the_restricted_namespace,
        test_clustered_deployment_manifest,
        test_daemonset_manifest_is_node_local_with_credentials_from_a_secret,
        test_sidecar_needs_no_api_access,
        test_validator_catches_mistakes,
    ])
