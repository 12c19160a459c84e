# SPDX-License-Identifier: Apache-2.0
"""Every proflet.yaml that the chart (default values, each mode, options,
secrets) and the plain manifests ship passes `proflet --check-config`,
with the environment the pod gives it (NODE_NAME, SHARD, ...). Mounted
secret files are mapped to temporary files."""
import os
import subprocess
import sys
import tempfile
import shutil

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_validate  # noqa: E402
from dlib import SRC, check, need_file, render, run_tests  # noqa: E402

ENV = {"PATH": "/usr/bin:/bin", "NODE_NAME": "node-a", "POD_NAME": "proflet-0", "POD_NAMESPACE": "profiling",
       "SHARD": "0"}


def configs_of(docs):
    return [d["data"]["proflet.yaml"] for d in docs if d.get("kind") == "ConfigMap" and "proflet.yaml" in (d.get("data") or {})]


def check_config(text, where):
    exe = need_file(os.environ.get("PROFLET"), "the proflet binary (env PROFLET)")
    tmp = tempfile.mkdtemp()
    try:
        secrets = os.path.join(tmp, "secrets")
        for d in ("remote-0-basic-auth", "remote-1-bearer-token"):
            os.makedirs(os.path.join(secrets, d))
            for k in ("password", "token"):
                with open(os.path.join(secrets, d, k), "w") as f:
                    f.write("s3cret")
        text = text.replace("/var/run/secrets/proflet", secrets)
        path = os.path.join(tmp, "proflet.yaml")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([exe, "--check-config", path], capture_output=True, text=True, timeout=30, env=ENV)
        check(p.returncode == 0, f"{where}: --check-config rc={p.returncode}\n{p.stdout}{p.stderr}\n--- config:\n{text}")
    finally:
        shutil.rmtree(tmp)


def test_chart_configs_check():
    cases = {
        "default": [],
        "statefulset": ["--set", "mode=statefulset", "--set", "replicas=3"],
        "deployment": ["--set", "mode=deployment"],
        "attach-metadata": ["--set", "attachMetadata.node=true", "--set", "attachMetadata.namespace=true",
                            "--set", "namespaces={shop,payments}", "--set", "externalLabels.cluster=prod"],
        "no-spool": ["--set", "spool.enabled=false", "--set", "conventions.grafana.enabled=false"],
    }
    for name, args in cases.items():
        for text in configs_of(render(*args)):
            check_config(text, f"chart {name}")


def test_chart_secret_config_checks():
    tmp = tempfile.mkdtemp()
    try:
        vf = os.path.join(tmp, "v.yaml")
        with open(vf, "w") as f:
            yaml.safe_dump({"remoteWrite": [
                {"url": "https://a.example.com", "tenantId": "t",
                 "basicAuth": {"username": "u", "passwordSecret": {"name": "s", "key": "password"}}},
                {"url": "https://b.example.com", "bearerTokenSecret": {"name": "s", "key": "token"}}]}, f)
        for text in configs_of(render("-f", vf)):
            check_config(text, "chart secrets")
    finally:
        shutil.rmtree(tmp)


def test_manifest_configs_check():
    kdir = os.path.join(SRC, "deploy", "kubernetes")
    n = 0
    for name in ("daemonset.yaml", "statefulset.yaml", "deployment.yaml", "sidecar.yaml"):
        with open(os.path.join(kdir, name)) as f:
            for text in configs_of(k8s_validate.load_docs(f.read())):
                check_config(text, name)
                n += 1
    check(n == 4, f"one config per manifest, got {n}")


def test_check_config_rejects_a_broken_chart_config():
    text = configs_of(render())[0].replace("action: keepequal", "action: keep-equal-typo")
    exe = need_file(os.environ.get("PROFLET"), "the proflet binary (env PROFLET)")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(text)
        f.flush()
        p = subprocess.run([exe, "--check-config", f.name], capture_output=True, text=True, timeout=30, env=ENV)
    check(p.returncode == 2, f"an unknown relabel action must be rejected with 2, got {p.returncode}")


def test_check_config_refuses_missing_tls_and_kubeconfig_files():
    """What every request would fail on is refused at its key: a missing
    ca-file, a kubeconfig that is not there, an inline ca that is not PEM.
    A secret file that is not there yet is not (it is re-read at run
    time), nor is in-cluster access without KUBERNETES_SERVICE_HOST."""
    exe = need_file(os.environ.get("PROFLET"), "the proflet binary (env PROFLET)")
    cases = [
        ("scrape-configs:\n  - job-name: a\n    scheme: https\n"
         "    static-configs: [{targets: ['127.0.0.1:6060']}]\n"
         "    tls-config:\n      ca-file: /nonexistent/proflet-ca.pem\n",
         ':6:7: ca-file "/nonexistent/proflet-ca.pem" in tls-config cannot be read: No such file or directory'),
        ("scrape-configs:\n  - job-name: k\n    kubernetes-sd-configs:\n"
         "      - kubeconfig-file: /nonexistent/kubeconfig\n",
         ":4:9: kubeconfig /nonexistent/kubeconfig: No such file or directory"),
        ("remote-write:\n  - url: https://127.0.0.1:4040\n    tls_config: {ca: not-pem}\n",
         ":3:18: ca in tls-config is not PEM"),
    ]
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, "proflet.yaml")
        for text, want in cases:
            with open(path, "w") as f:
                f.write(text)
            p = subprocess.run([exe, "--check-config", path], capture_output=True, text=True, timeout=30, env=ENV)
            out = p.stdout + p.stderr
            check(p.returncode == 2, f"--check-config must refuse with 2, got {p.returncode}: {out}\n--- config:\n{text}")
            check(path + want in out, f"wanted {path + want!r} in: {out}")
        with open(path, "w") as f:
            f.write("scrape-configs:\n  - job-name: pods\n    kubernetes-sd-configs: [{role: pod}]\n"
                    "    basic-auth: {username: u, password-file: /nonexistent/password}\n")
        p = subprocess.run([exe, "--check-config", path], capture_output=True, text=True, timeout=30, env=ENV)
        check(p.returncode == 0, f"secret files and in-cluster access are not required at check time, "
              f"got {p.returncode}: {p.stdout}{p.stderr}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    run_tests([test_chart_configs_check, test_chart_secret_config_checks, test_manifest_configs_check,
               test_check_config_rejects_a_broken_chart_config,
               test_check_config_refuses_missing_tls_and_kubeconfig_files])
