# SPDX-License-Identifier: Apache-2.0
"""The Helm chart (helm/proflet), rendered with tools/helm-render: default
values and every mode validate against the Kubernetes object schemas and
the bundle checks, and the rendered configuration does what the chart says
(node-local discovery, sharding, both annotation conventions, secrets as
files, least-privilege RBAC, rolling on config change)."""
import os
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_validate  # noqa: E402
import relabel_oracle  # noqa: E402
from dlib import check, find, one, render, run_tests  # noqa: E402



def valid(docs, where, **kw):
    probs = k8s_validate.validate(docs, where, **kw)
    check(not probs, f"{where}: " + "\n  ".join(probs))
    return docs


def config_of(docs):
    cm = one(docs, "ConfigMap")
    return yaml.safe_load(cm["data"]["proflet.yaml"])


def container(docs, kind):
    return one(docs, kind)["spec"]["template"]["spec"]["containers"][0]


def k8s_jobs(cfg):
    return [j for j in cfg["scrape-configs"] if "kubernetes-sd-configs" in j]


def values_file(tmp_name, data):
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"proflet-chart-{os.getpid()}-{tmp_name}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(data, f)
    return path


def test_default_is_a_valid_daemonset():
    docs = valid(render(), "default")
    kinds = sorted(d["kind"] for d in docs)
    check(kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Service", "ServiceAccount"],
          f"default kinds: {kinds}")
    ds = one(docs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    check(env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName", "NODE_NAME from the downward API")
    check("SHARD" not in env, "no SHARD in daemonset mode")
    # --config.expand-env: the config takes ${NODE_NAME} from the environment.
    check(c["command"] == ["/usr/bin/proflet"] and
          c["args"] == ["--config", "/etc/proflet/proflet.yaml", "--config.expand-env"],
          f"command/args: {c['command']} {c['args']}")
    check(c["livenessProbe"]["httpGet"]["path"] == "/-/healthy", "liveness on /-/healthy")
    check(c["readinessProbe"]["httpGet"]["path"] == "/-/ready", "readiness on /-/ready")
    check({"operator": "Exists"} in pod["tolerations"], "tolerates every taint")
    check(pod["automountServiceAccountToken"] is True, "the agent pod mounts its token")
    check(one(docs, "ServiceAccount")["automountServiceAccountToken"] is False, "the SA does not auto-mount")
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    check(mounts["/etc/proflet"]["readOnly"] is True, "config mounted read-only")
    spool_vol = [v for v in pod["volumes"] if v["name"] == "spool"][0]
    check("emptyDir" in spool_vol and "/var/lib/proflet/spool" in mounts, "spool on an emptyDir")
    cfg = config_of(docs)
    check(cfg["spool"]["dir"] == "/var/lib/proflet/spool", f"spool dir {cfg['spool']}")
    check(cfg["server"]["listen-address"] == "0.0.0.0:4100", "listens where the kubelet probes")
    for j in k8s_jobs(cfg):
        sd = j["kubernetes-sd-configs"][0]
        check(sd["role"] == "pod", "pod role")
        check(sd["selectors"] == [{"role": "pod", "field": "spec.nodeName=${NODE_NAME}"}],
              f"{j['job-name']}: node-local field selector, got {sd.get('selectors')}")
        names = [r.get("action") for r in j["relabel-configs"]]
        check("hashmod" not in names, "no sharding in daemonset mode")
    rules = one(docs, "ClusterRole")["rules"]
    check(rules == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
          f"RBAC is pods get/list/watch only: {rules}")


def test_each_mode_validates():
    for mode, extra in (("daemonset", []), ("statefulset", ["--set", "replicas=3"]), ("deployment", [])):
        docs = valid(render("--set", f"mode={mode}", *extra), mode)
        check(len(find(docs, {"daemonset": "DaemonSet", "statefulset": "StatefulSet",
                              "deployment": "Deployment"}[mode])) == 1, f"{mode}: one workload")
        check(len([d for d in docs if d["kind"] in k8s_validate.WORKLOADS]) == 1, f"{mode}: only one workload")
        check(bool(find(docs, "PodDisruptionBudget")) == (mode != "daemonset"), f"{mode}: PDB only when not a daemonset")
        notes = render("--set", f"mode={mode}", *extra, notes=True)
        check("proflet" in notes and mode in notes, f"{mode}: NOTES.txt renders: {notes[:200]}")


def test_statefulset_shards_by_pod_index():
    docs = valid(render("--set", "mode=statefulset", "--set", "replicas=3"), "sts")
    sts = one(docs, "StatefulSet")
    check(sts["spec"]["replicas"] == 3, "3 shards")
    svc = one(docs, "Service")
    check(svc["spec"]["clusterIP"] == "None" and sts["spec"]["serviceName"] == svc["metadata"]["name"],
          "headless service for the StatefulSet")
    env = {e["name"]: e for e in container(docs, "StatefulSet")["env"]}
    check(env["SHARD"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']",
          f"SHARD from the pod-index label: {env.get('SHARD')}")
    cfg = config_of(docs)
    jobs = k8s_jobs(cfg)
    check(len(jobs) == 7, f"1 pyroscope.io job + 6 profiles.grafana.com jobs, got {len(jobs)}")
    for j in jobs:
        check("selectors" not in j["kubernetes-sd-configs"][0], "cluster-wide discovery")
        last2 = j["relabel-configs"][-2:]
        check(last2[0]["action"] == "hashmod" and last2[0]["modulus"] == 3 and last2[0]["source-labels"] == ["__address__"],
              f"{j['job-name']}: hashmod of __address__ mod 3 last: {last2}")
        check(last2[1] == {"source-labels": [last2[0]["target-label"]], "action": "keep", "regex": "${SHARD}"},
              f"{j['job-name']}: keep ${{SHARD}}: {last2[1]}")
    # Every target is kept by exactly one shard, whatever the address.
    job = jobs[0]
    targets = [relabel_oracle.pod_targets("ns", f"p{i}", f"10.1.{i // 250}.{i % 250}", [("app", [("pprof", 6060)])],
                                          annotations={"pyroscope.io/scrape": "true"})[0] for i in range(200)]
    by_shard = [relabel_oracle.apply_many(job["relabel-configs"], targets, env={"SHARD": str(s)}) for s in range(3)]
    for i, t in enumerate(targets):
        kept = [s for s in range(3) if by_shard[s][i] is not None]
        check(len(kept) == 1, f"target {t['__address__']} kept by shards {kept}")


def test_deployment_single_replica_and_rejects_more():
    docs = valid(render("--set", "mode=deployment"), "deployment")
    dep = one(docs, "Deployment")
    check(dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate", "1 replica, Recreate")
    for j in k8s_jobs(config_of(docs)):
        check("selectors" not in j["kubernetes-sd-configs"][0], "deployment discovers cluster-wide")
    err = render("--set", "mode=deployment", "--set", "replicas=2", expect_fail=True)
    check("replicas must be 1" in err, f"error names the problem: {err}")
    err = render("--set", "mode=sidecar", expect_fail=True)
    check("mode must be" in err, f"bad mode rejected: {err}")
    err = render("--set", "spool.volume=persistentVolumeClaim", expect_fail=True)
    check("statefulset" in err, f"pvc spool outside statefulset rejected: {err}")


def test_clustering_shares_targets_between_replicas():
    for mode, kind in (("deployment", "Deployment"), ("statefulset", "StatefulSet")):
        docs = valid(render("--set", f"mode={mode}", "--set", "replicas=3", "--set", "clustering.enabled=true"),
                     f"clustered {mode}")
        wl = one(docs, kind)
        check(wl["spec"]["replicas"] == 3, f"{mode}: 3 replicas")
        if mode == "deployment":
            check(wl["spec"]["strategy"]["type"] == "RollingUpdate", "clustered deployment rolls")
        check(one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1, f"{mode}: PDB")
        cfg = config_of(docs)
        cl = cfg["clustering"]
        check(cl["enabled"] is True and "self" not in cl, f"{mode}: clustering on, self from POD_NAME: {cl}")
        k = cl["kubernetes"]
        check(k["namespaces"]["names"] == ["profiling"], f"{mode}: peers in the release namespace: {k}")
        sel = k["selectors"][0]["label"]
        labels = wl["spec"]["template"]["metadata"]["labels"]
        for term in sel.split(","):
            key, _, val = term.partition("=")
            check(labels.get(key) == val, f"{mode}: the selector {sel} selects the release's own pods {labels}")
        for j in k8s_jobs(cfg):
            check(all(r.get("action") != "hashmod" for r in j["relabel-configs"]), f"{mode}: no hashmod shards")
        c = container(docs, kind)
        env = {e["name"]: e for e in c["env"]}
        check(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name", "POD_NAME from the pod")
        check("SHARD" not in env, f"{mode}: no SHARD when clustered")
        check(c["readinessProbe"]["periodSeconds"] == 2 and c["readinessProbe"]["failureThreshold"] == 2 and
              c["readinessProbe"]["timeoutSeconds"] <= 2,
              f"{mode}: a stopping replica turns not ready fast: {c['readinessProbe']}")
        # The pods list/watch discovery already has is all the membership needs.
        rules = one(docs, "ClusterRole")["rules"]
        check(all(set(r["verbs"]) <= {"get", "list", "watch"} for r in rules), f"{mode}: read-only RBAC")
        check(any("pods" in r["resources"] and "watch" in r["verbs"] for r in rules), f"{mode}: pods watch")
        check(not any("leases" in r["resources"] for r in rules), f"{mode}: no lease access")
    err = render("--set", "clustering.enabled=true", expect_fail=True)
    check("clustering.enabled needs mode=deployment" in err, f"clustered daemonset rejected: {err}")
    docs = valid(render("--set", "mode=deployment", "--set", "replicas=1"), "unclustered")
    check("clustering" not in config_of(docs), "no clustering section unless enabled")


def test_pyroscope_io_convention_is_the_seed_job():
    cfg = config_of(render())
    job = [j for j in cfg["scrape-configs"] if j["job-name"] == "kubernetes-pods"][0]
    rules = job["relabel-configs"]
    pods = relabel_oracle.pod_targets("shop", "cart-1", "10.0.0.7", [("cart", [("http", 8080)])],
                                   annotations={"pyroscope.io/scrape": "true", "pyroscope.io/port": "6060",
                                                "pyroscope.io/application-name": "cart",
                                                "pyroscope.io/profile-cpu-enabled": "false"},
                                   labels={"app": "cart"})
    out = relabel_oracle.apply(rules, pods[0])
    check(out is not None, "annotated pod kept")
    check(out["__address__"] == "10.0.0.7:6060", f"address from pyroscope.io/port: {out['__address__']}")
    check(out["__name__"] == "cart" and out["app"] == "cart" and out["kubernetes_namespace"] == "shop",
          f"labels: {out}")
    check(out.get("__profile_cpu_enabled") == "false", "pyroscope.io/profile-* annotations map to __profile_*")
    plain = relabel_oracle.pod_targets("shop", "db-1", "10.0.0.8", [("db", [("sql", 5432)])])
    check(relabel_oracle.apply(rules, plain[0]) is None, "unannotated pod dropped")
    pending = relabel_oracle.pod_targets("shop", "c2", "10.0.0.9", [("c", [("http", 80)])],
                                      annotations={"pyroscope.io/scrape": "true"}, phase="Pending")
    check(relabel_oracle.apply(rules, pending[0]) is None, "pending pod dropped")


def test_profiles_grafana_com_convention():
    cfg = config_of(render())
    jobs = {j["job-name"]: j for j in cfg["scrape-configs"]}
    types = ["memory", "cpu", "goroutine", "block", "mutex", "fgprof"]
    for t in types:
        check(f"profiles-grafana-com-{t}" in jobs, f"job for {t}")
    check(jobs["profiles-grafana-com-cpu"]["enabled-profiles"] == ["process_cpu"], "cpu job enables process_cpu only")
    two_ports = [("app", [("http", 8080), ("http-pprof", 9090)]), ("proxy", [("envoy", 15000)])]

    def kept(job, ann):
        pods = relabel_oracle.pod_targets("ns", "p", "10.0.0.5", two_ports, annotations=ann,
                                       labels={"app.kubernetes.io/name": "p"})
        return [o for o in relabel_oracle.apply_many(jobs[job]["relabel-configs"], pods) if o]

    out = kept("profiles-grafana-com-cpu", {"profiles.grafana.com/cpu.scrape": "true",
                                            "profiles.grafana.com/cpu.port": "9090"})
    check([o["__address__"] for o in out] == ["10.0.0.5:9090"], f"cpu.port picks one container port: {out}")
    check(out[0]["namespace"] == "ns" and out[0]["pod"] == "p" and out[0]["container"] == "app", f"labels {out[0]}")
    check(out[0]["app_kubernetes_io_name"] == "p", "pod labels mapped")
    out = kept("profiles-grafana-com-memory", {"profiles.grafana.com/memory.scrape": "true",
                                               "profiles.grafana.com/memory.port_name": "http-pprof",
                                               "profiles.grafana.com/memory.path": "/custom/heap",
                                               "profiles.grafana.com/memory.scheme": "https",
                                               "profiles.grafana.com/service_name": "checkout"})
    check([o["__address__"] for o in out] == ["10.0.0.5:9090"], f"port_name matches by name: {out}")
    check(out[0]["__scheme__"] == "https" and out[0]["__profile_memory_path"] == "/custom/heap", f"{out[0]}")
    check(out[0]["service_name"] == "checkout", "service_name annotation")
    check(kept("profiles-grafana-com-memory", {"profiles.grafana.com/cpu.scrape": "true",
                                               "profiles.grafana.com/cpu.port": "9090"}) == [],
          "a type not annotated is not scraped")
    check(kept("profiles-grafana-com-cpu", {"profiles.grafana.com/cpu.scrape": "false",
                                            "profiles.grafana.com/cpu.port": "9090"}) == [], "scrape=false")
    check(kept("profiles-grafana-com-cpu", {"profiles.grafana.com/cpu.scrape": "true",
                                            "profiles.grafana.com/cpu.port": "7777"}) == [],
          "a port the pod does not declare matches nothing")
    off = render("--set", "conventions.grafana.enabled=false", "--set", "conventions.pyroscope.enabled=false")
    check(config_of(off)["scrape-configs"] is None or config_of(off)["scrape-configs"] == [],
          "conventions can be turned off")


def test_secrets_are_mounted_files():
    vf = values_file("secrets", {"remoteWrite": [
        {"url": "https://profiles.example.com", "tenantId": "team-a",
         "basicAuth": {"username": "u", "passwordSecret": {"name": "pyro", "key": "password"}}},
        {"url": "https://other.example.com", "bearerTokenSecret": {"name": "tok", "key": "token"},
         "headers": {"X-Extra": "1"}, "extra": {"remote-timeout": "5s"}}]})
    docs = render("-f", vf)
    valid(docs, "secrets", external_secrets=("pyro", "tok"))
    cfg = config_of(docs)
    rw = cfg["remote-write"]
    check(rw[0]["basic-auth"] == {"username": "u", "password-file": "/var/run/secrets/proflet/remote-0-basic-auth/password"},
          f"basic auth from a file: {rw[0]}")
    check(rw[0]["tenant-id"] == "team-a", "tenant id")
    check(rw[1]["bearer-token-file"] == "/var/run/secrets/proflet/remote-1-bearer-token/token", f"{rw[1]}")
    check(rw[1]["headers"] == {"X-Extra": "1"} and rw[1]["remote-timeout"] == "5s", f"{rw[1]}")
    check("password" not in rw[0]["basic-auth"] and "bearer-token" not in rw[1],
          "credentials only as file references in the ConfigMap")
    c = container(docs, "DaemonSet")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    check(mounts["remote-0-basic-auth"]["mountPath"] == "/var/run/secrets/proflet/remote-0-basic-auth", "mount 0")
    check(mounts["remote-1-bearer-token"]["readOnly"] is True, "secret mounts read-only")
    vols = {v["name"]: v for v in one(docs, "DaemonSet")["spec"]["template"]["spec"]["volumes"]}
    check(vols["remote-0-basic-auth"]["secret"]["secretName"] == "pyro", "secret volume")
    check(vols["remote-1-bearer-token"]["secret"]["defaultMode"] == 0o440, "secret files 0440")
    check(not any("valueFrom" in e and "secretKeyRef" in e["valueFrom"] for e in c["env"]), "no secret in env")
    os.unlink(vf)


def test_web_config_is_a_mounted_secret():
    vf = values_file("web", {"webConfig": {"secretName": "proflet-web"}})
    docs = render("-f", vf)
    valid(docs, "web", external_secrets=("proflet-web",))
    c = container(docs, "DaemonSet")
    i = c["args"].index("--web.config.file")
    check(c["args"][i + 1] == "/etc/proflet/web/web.yml", f"args: {c['args']}")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    check(mounts["web-config"]["mountPath"] == "/etc/proflet/web" and mounts["web-config"]["readOnly"] is True,
          "web config mount")
    vols = {v["name"]: v for v in one(docs, "DaemonSet")["spec"]["template"]["spec"]["volumes"]}
    check(vols["web-config"]["secret"]["secretName"] == "proflet-web", "web config secret volume")
    check("--web.config.file" not in container(render(), "DaemonSet")["args"], "off by default")
    check("--web.enable-lifecycle" not in container(render(), "DaemonSet")["args"],
          "the chart does not open the reload endpoint")
    os.unlink(vf)


def test_options_validate():
    vf = values_file("opts", {
        "attachMetadata": {"node": True, "namespace": True},
        "namespaces": ["shop", "payments"],
        "networkPolicy": {"enabled": True, "ingressFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
        "priorityClassName": "system-node-critical",
        "podAnnotations": {"example.com/team": "obs"},
        "externalLabels": {"cluster": "prod-eu"},
        "extraRelabelConfigs": [{"source-labels": ["__meta_kubernetes_namespace"], "regex": "kube-system", "action": "drop"}],
        "extraScrapeConfigs": [{"job-name": "static-extra", "static-configs": [{"targets": ["10.9.9.9:6060"]}]}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
    })
    docs = valid(render("-f", vf, "--api-versions", "monitoring.coreos.com/v1"), "options")
    kinds = {d["kind"] for d in docs}
    check({"NetworkPolicy", "ServiceMonitor"} <= kinds, f"optional objects rendered: {kinds}")
    rules = one(docs, "ClusterRole")["rules"]
    check(sorted(r["resources"][0] for r in rules) == ["namespaces", "nodes", "pods"], f"attachMetadata RBAC {rules}")
    cfg = config_of(docs)
    sd = k8s_jobs(cfg)[0]["kubernetes-sd-configs"][0]
    check(sd["attach-metadata"] == {"node": True, "namespace": True}, f"attach-metadata: {sd}")
    check(sd["namespaces"] == {"names": ["shop", "payments"]}, f"namespaces: {sd}")
    check(cfg["external-labels"] == {"cluster": "prod-eu"}, "external labels")
    for j in k8s_jobs(cfg):
        check({"source-labels": ["__meta_kubernetes_namespace"], "regex": "kube-system", "action": "drop"}
              in j["relabel-configs"], f"{j['job-name']}: extra relabel rule appended")
    check(cfg["scrape-configs"][-1]["job-name"] == "static-extra", "extra scrape config appended")
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    check(pod["priorityClassName"] == "system-node-critical", "priorityClassName")
    check({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in pod["tolerations"], "tolerations")
    np = one(docs, "NetworkPolicy")
    check(np["spec"]["policyTypes"] == ["Ingress"] and np["spec"]["ingress"][0]["ports"][0]["port"] == "http-metrics",
          f"network policy opens only the status port: {np['spec']}")
    os.unlink(vf)
    # Spool variants.
    valid(render("--set", "mode=statefulset", "--set", "replicas=2", "--set", "spool.volume=persistentVolumeClaim"), "pvc")
    sts = one(render("--set", "mode=statefulset", "--set", "replicas=2", "--set", "spool.volume=persistentVolumeClaim"),
              "StatefulSet")
    check(sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "spool", "spool PVC template")
    docs = render("--set", "spool.volume=hostPath")
    valid(docs, "hostPath", allow_host_path=True)
    vols = {v["name"]: v for v in one(docs, "DaemonSet")["spec"]["template"]["spec"]["volumes"]}
    check(vols["spool"]["hostPath"]["path"] == "/var/lib/proflet", "hostPath spool")
    docs = valid(render("--set", "spool.enabled=false"), "nospool")
    check("spool" not in config_of(docs), "spool off")


def test_security_defaults():
    docs = render()
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    psc, sc = pod["securityContext"], pod["containers"][0]["securityContext"]
    check(psc["runAsNonRoot"] is True and psc["runAsUser"] == 65532 and psc["seccompProfile"]["type"] == "RuntimeDefault",
          f"pod security context {psc}")
    check(sc == {"allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
                 "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}, f"container security context {sc}")
    # The validator really enforces it: weakening a default fails validation.
    weak = render("--set", "securityContext.readOnlyRootFilesystem=false", "--set",
                  "securityContext.allowPrivilegeEscalation=true")
    probs = k8s_validate.validate(weak, "weak")
    check(any("readOnlyRootFilesystem" in p for p in probs) and any("allowPrivilegeEscalation" in p for p in probs),
          f"weakened security context is reported: {probs}")


def test_checksum_rolls_on_config_change_only():
    def checksum(*a):
        return one(render(*a), "DaemonSet")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    base = checksum()
    check(len(base) == 64, f"sha256 checksum: {base}")
    check(checksum("--set", "podAnnotations.a=b") == base, "a pod annotation does not change the config checksum")
    check(checksum("--set", "externalLabels.cluster=x") != base, "a config change changes the checksum")
    check(checksum("--set", "scrape.interval=30s") != base, "a config change changes the checksum")


def test_config_override_and_names():
    docs = render("--set-string", "configOverride=log-level: debug\nexternal-labels: {ns: '{{ .Release.Namespace }}'}\n",
                  "--set", "remoteWrite=null")
    check(config_of(docs) == {"log-level": "debug", "external-labels": {"ns": "profiling"}},
          f"override rendered with tpl: {config_of(docs)}")
    docs = valid(render(name="prod"), "release-name")
    check(one(docs, "DaemonSet")["metadata"]["name"] == "prod-proflet", "release-chart name")
    docs = valid(render(name="proflet-eu"), "release-name2")
    check(one(docs, "DaemonSet")["metadata"]["name"] == "proflet-eu", "release name containing the chart name")
    crb = one(docs, "ClusterRoleBinding")
    check(crb["subjects"] == [{"kind": "ServiceAccount", "name": "proflet-eu", "namespace": "profiling"}], f"{crb}")


if __name__ == "__main__":
    run_tests([
        test_default_is_a_valid_daemonset,
        test_each_mode_validates,
        test_statefulset_shards_by_pod_index,
        test_deployment_single_replica_and_rejects_more,
        test_clustering_shares_targets_between_replicas,
        test_pyroscope_io_convention_is_the_seed_job,
        test_profiles_grafana_com_convention,
        test_secrets_are_mounted_files,
        test_options_validate,
        test_security_defaults,
        test_checksum_rolls_on_config_change_only,
        test_config_override_and_names,
    ])
