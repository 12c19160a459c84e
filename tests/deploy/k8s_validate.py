# SPDX-License-Identifier: Apache-2.0
"""Offline validation of Kubernetes manifests, without a cluster.

kubectl cannot validate offline (`kubectl create --dry-run=client` and
`kubectl apply --validate=strict --dry-run=client` both need a server: the
first for the REST mapping, the second for the OpenAPI document), so this
module validates against the object schemas of the official Python client
(python3-kubernetes, Debian): every document is checked field by field
against its model class (`openapi_types` / `attribute_map`, recursively):
unknown fields, wrong types and nulls are errors; then it is deserialized
into the model with `ApiClient`, which enforces required fields.

On top of the schema, `check_bundle` checks what makes a set of manifests
deployable and safe: references (volumes, ports, ConfigMaps, Secrets,
ServiceAccounts, ClusterRoles, Services), selectors matching pod labels, the
"restricted" Pod Security Standard, resources, and least-privilege RBAC.

    /usr/bin/python3 k8s_validate.py FILE...    # exit 1 and a list of errors
"""
import re
import sys

import kubernetes.client.models as models
import yaml
from kubernetes.client import ApiClient

WORKLOADS = ("DaemonSet", "StatefulSet", "Deployment")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
IANA_SVC_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$")

# ServiceMonitor is a CRD (monitoring.coreos.com/v1), not in the client's
# models: the fields proflet's chart uses, and their types.
SERVICE_MONITOR = {
    "apiVersion": str, "kind": str, "metadata": "ObjectMeta",
    "spec": {
        "selector": "LabelSelector", "jobLabel": str,
        "namespaceSelector": {"any": bool, "matchNames": [str]},
        "endpoints": [{"port": str, "path": str, "interval": str, "scrapeTimeout": str,
                       "scheme": str, "honorLabels": bool}],
    },
}


class Problems(list):
    def add(self, where, msg):
        self.append(f"{where}: {msg}")


def model_for(api_version, kind):
    version = (api_version or "").split("/")[-1]
    if not version or not kind:
        return None
    return getattr(models, version[0].upper() + version[1:] + kind, None)


def _check_type(value, typ, path, probs):
    if value is None:
        probs.add(path, "null value (a template rendered nothing?)")
        return
    if typ.startswith("list["):
        if not isinstance(value, list):
            probs.add(path, f"expected a list, got {type(value).__name__}")
            return
        for i, v in enumerate(value):
            _check_type(v, typ[5:-1], f"{path}[{i}]", probs)
    elif typ.startswith("dict("):
        inner = typ[5:-1].split(", ", 1)[1]
        if not isinstance(value, dict):
            probs.add(path, f"expected a map, got {type(value).__name__}")
            return
        for k, v in value.items():
            if not isinstance(k, str):
                probs.add(path, f"map key {k!r} is not a string")
            # Quantities (resources, storage) may be YAML numbers.
            if inner == "str" and isinstance(v, (int, float)) and not isinstance(v, bool) and (
                    ".resources." in path + "." or ".limits" in path or ".requests" in path or path.endswith("capacity")):
                continue
            _check_type(v, inner, f"{path}.{k}", probs)
    elif typ == "str":
        if not isinstance(value, str):
            probs.add(path, f"expected a string, got {type(value).__name__} {value!r}")
    elif typ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            probs.add(path, f"expected an integer, got {type(value).__name__} {value!r}")
    elif typ == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            probs.add(path, f"expected a number, got {type(value).__name__}")
    elif typ == "bool":
        if not isinstance(value, bool):
            probs.add(path, f"expected true/false, got {type(value).__name__} {value!r}")
    elif typ == "datetime":
        if not isinstance(value, str):
            probs.add(path, "expected a timestamp string")
    elif typ == "object":
        # IntOrString, Quantity, RawExtension: scalars or maps; not lists of junk.
        if isinstance(value, list):
            probs.add(path, "expected a scalar or a map, got a list")
    else:
        cls = getattr(models, typ, None)
        if cls is None:
            probs.add(path, f"no model class {typ}")
            return
        _check_model(value, cls, path, probs)


def _check_model(value, cls, path, probs):
    if not isinstance(value, dict):
        probs.add(path, f"expected a {cls.__name__} map, got {type(value).__name__}")
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for k, v in value.items():
        attr = by_json.get(k)
        if attr is None:
            probs.add(path, f"unknown field {k!r} for {cls.__name__}")
            continue
        _check_type(v, cls.openapi_types[attr], f"{path}.{k}", probs)


def _check_shape(value, shape, path, probs):
    if isinstance(shape, str):
        _check_model(value, getattr(models, "V1" + shape), path, probs)
    elif isinstance(shape, dict):
        if not isinstance(value, dict):
            probs.add(path, "expected a map")
            return
        for k, v in value.items():
            if k not in shape:
                probs.add(path, f"unknown field {k!r}")
            else:
                _check_shape(v, shape[k], f"{path}.{k}", probs)
    elif isinstance(shape, list):
        if not isinstance(value, list):
            probs.add(path, "expected a list")
            return
        for i, v in enumerate(value):
            _check_shape(v, shape[0], f"{path}[{i}]", probs)
    elif shape is bool:
        if not isinstance(value, bool):
            probs.add(path, "expected true/false")
    elif not isinstance(value, shape):
        probs.add(path, f"expected {shape.__name__}")


def check_schema(doc, where, probs):
    """Schema check of one document; returns the model instance or None."""
    if not isinstance(doc, dict):
        probs.add(where, "document is not a map")
        return None
    kind, api = doc.get("kind"), doc.get("apiVersion")
    where = f"{where} {kind}/{(doc.get('metadata') or {}).get('name')}"
    if kind == "ServiceMonitor" and api == "monitoring.coreos.com/v1":
        _check_shape(doc, SERVICE_MONITOR, where, probs)
        return doc
    cls = model_for(api, kind)
    if cls is None:
        probs.add(where, f"no Kubernetes model for apiVersion={api!r} kind={kind!r}")
        return None
    n = len(probs)
    _check_model(doc, cls, where, probs)
    if len(probs) != n:
        return None
    try:
        # Deserializing runs the models' own validation (required fields).
        return ApiClient()._ApiClient__deserialize(doc, cls.__name__)
    except (ValueError, TypeError) as e:
        probs.add(where, f"does not deserialize into {cls.__name__}: {e}")
        return None


def load_docs(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]


def _name(doc):
    return (doc.get("metadata") or {}).get("name")


def _ns(doc):
    return (doc.get("metadata") or {}).get("namespace")


def pod_specs(doc):
    """(where, pod template metadata, pod spec) of a workload."""
    kind = doc.get("kind")
    if kind in WORKLOADS:
        t = doc["spec"]["template"]
        return t.get("metadata") or {}, t["spec"]
    if kind == "Pod":
        return doc.get("metadata") or {}, doc["spec"]
    return None, None


def _selected(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def check_pod_security(where, spec, probs, allow_host_path=False):
    """The "restricted" Pod Security Standard, plus read-only root filesystems,
    resources and probes for every container."""
    psc = spec.get("securityContext") or {}
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(f):
            probs.add(where, f"{f} is set")
    for v in spec.get("volumes") or []:
        if "hostPath" in v and not allow_host_path:
            probs.add(where, f"volume {v['name']} is a hostPath (not allowed by the restricted standard)")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        cw = f"{where} container {c['name']}"
        sc = c.get("securityContext") or {}
        if not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
            probs.add(cw, "runAsNonRoot is not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            probs.add(cw, "runs as uid 0")
        if sc.get("allowPrivilegeEscalation") is not False:
            probs.add(cw, "allowPrivilegeEscalation is not false")
        if sc.get("privileged"):
            probs.add(cw, "privileged")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            probs.add(cw, "capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            probs.add(cw, f"adds capabilities {caps.get('add')}")
        if (sc.get("seccompProfile") or {}).get("type", pod_seccomp) not in ("RuntimeDefault", "Localhost"):
            probs.add(cw, "seccompProfile is not RuntimeDefault")
        if sc.get("readOnlyRootFilesystem") is not True:
            probs.add(cw, "readOnlyRootFilesystem is not true")
        res = c.get("resources") or {}
        if not (res.get("requests") or {}).get("memory") or not (res.get("requests") or {}).get("cpu"):
            probs.add(cw, "no cpu and memory requests")
        if not (res.get("limits") or {}).get("memory"):
            probs.add(cw, "no memory limit")


def check_pod_refs(where, meta, spec, bundle, probs, external_secrets=()):
    vols = {}
    for v in spec.get("volumes") or []:
        if v["name"] in vols:
            probs.add(where, f"duplicate volume {v['name']}")
        vols[v["name"]] = v
        if "configMap" in v and not any(d.get("kind") == "ConfigMap" and _name(d) == v["configMap"]["name"]
                                        for d in bundle):
            probs.add(where, f"volume {v['name']}: ConfigMap {v['configMap']['name']} is not in the bundle")
        if "secret" in v:
            sn = v["secret"]["secretName"]
            if sn not in external_secrets and not any(d.get("kind") == "Secret" and _name(d) == sn for d in bundle):
                probs.add(where, f"volume {v['name']}: Secret {sn} is neither in the bundle nor expected")
    claim_names = set()
    if "_claims" in spec:
        claim_names = set(spec["_claims"])
    containers = (spec.get("initContainers") or []) + spec["containers"]
    names = [c["name"] for c in containers]
    if len(set(names)) != len(names):
        probs.add(where, f"duplicate container names {names}")
    for c in containers:
        cw = f"{where} container {c['name']}"
        ports = {}
        for p in c.get("ports") or []:
            if "name" in p:
                if len(p["name"]) > 15 or not IANA_SVC_NAME.match(p["name"]):
                    probs.add(cw, f"port name {p['name']!r} is not a valid IANA service name")
                ports[p["name"]] = p["containerPort"]
        envs = [e["name"] for e in c.get("env") or []]
        if len(set(envs)) != len(envs):
            probs.add(cw, f"duplicate env names {envs}")
        mounts = set()
        for m in c.get("volumeMounts") or []:
            if m["name"] not in vols and m["name"] not in claim_names:
                probs.add(cw, f"volumeMount {m['name']} has no volume")
            if m["mountPath"] in mounts:
                probs.add(cw, f"two mounts at {m['mountPath']}")
            mounts.add(m["mountPath"])
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            hg = (c.get(probe) or {}).get("httpGet")
            if hg and isinstance(hg.get("port"), str) and hg["port"] not in ports:
                probs.add(cw, f"{probe} uses port {hg['port']!r}, which the container does not declare")
    sa = spec.get("serviceAccountName")
    if sa and sa != "default" and not any(d.get("kind") == "ServiceAccount" and _name(d) == sa for d in bundle):
        probs.add(where, f"ServiceAccount {sa} is not in the bundle")


def check_bundle(docs, where, probs, allow_host_path=False, external_secrets=()):
    """Cross-document checks of one set of manifests (one file or one render)."""
    seen = set()
    for d in docs:
        key = (d.get("kind"), _ns(d), _name(d))
        if key in seen:
            probs.add(where, f"duplicate object {key}")
        seen.add(key)
        meta = d.get("metadata") or {}
        name = meta.get("name") or ""
        if not DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
            probs.add(where, f"{d.get('kind')} name {name!r} is not a DNS-1123 name")
        if d.get("kind") in ("Service",) and not DNS1123_LABEL.match(name):
            probs.add(where, f"Service name {name!r} is not a DNS-1123 label")
        for k, v in (meta.get("labels") or {}).items():
            if not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v):
                probs.add(where, f"{d.get('kind')}/{name}: label {k}={v!r} is not a valid label value")

    pods = []
    for d in docs:
        meta, spec = pod_specs(d)
        if spec is None:
            continue
        w = f"{where} {d['kind']}/{_name(d)}"
        labels = meta.get("labels") or {}
        if d["kind"] in WORKLOADS:
            sel = d["spec"]["selector"].get("matchLabels") or {}
            if not sel or not _selected(sel, labels):
                probs.add(w, f"selector {sel} does not match the pod template's labels {labels}")
        if d["kind"] == "StatefulSet":
            claims = [c["metadata"]["name"] for c in d["spec"].get("volumeClaimTemplates") or []]
            spec = dict(spec, _claims=claims)
            svc = d["spec"].get("serviceName")
            if not any(x.get("kind") == "Service" and _name(x) == svc and
                       (x["spec"].get("clusterIP") == "None") for x in docs):
                probs.add(w, f"serviceName {svc} is not a headless Service in the bundle")
        check_pod_security(w, spec, probs, allow_host_path=allow_host_path)
        check_pod_refs(w, meta, spec, docs, probs, external_secrets=external_secrets)
        pods.append((d, labels, spec))

    for d in docs:
        k, w = d.get("kind"), f"{where} {d.get('kind')}/{_name(d)}"
        if k == "Service":
            sel = d["spec"].get("selector") or {}
            match = [p for p in pods if _selected(sel, p[1])]
            if not sel or not match:
                probs.add(w, f"selector {sel} selects no pod of the bundle")
            for port in d["spec"].get("ports") or []:
                tp = port.get("targetPort")
                if isinstance(tp, str):
                    for p in match:
                        if not any(cp.get("name") == tp for c in p[2]["containers"] for cp in c.get("ports") or []):
                            probs.add(w, f"targetPort {tp} is not a port of {p[0]['kind']}/{_name(p[0])}")
        elif k == "PodDisruptionBudget":
            sel = d["spec"]["selector"].get("matchLabels") or {}
            if not any(_selected(sel, p[1]) for p in pods):
                probs.add(w, "selects no pod of the bundle")
        elif k == "NetworkPolicy":
            sel = d["spec"]["podSelector"].get("matchLabels") or {}
            if not any(_selected(sel, p[1]) for p in pods):
                probs.add(w, "podSelector selects no pod of the bundle")
        elif k == "ServiceMonitor":
            sel = d["spec"]["selector"].get("matchLabels") or {}
            svcs = [s for s in docs if s.get("kind") == "Service" and _selected(sel, (s["metadata"].get("labels") or {}))]
            if not svcs:
                probs.add(w, "selects no Service of the bundle")
            for ep in d["spec"]["endpoints"]:
                if not any(p.get("name") == ep.get("port") for s in svcs for p in s["spec"]["ports"]):
                    probs.add(w, f"endpoint port {ep.get('port')} is not a port of the selected Services")
        elif k in ("ClusterRole", "Role"):
            for r in d.get("rules") or []:
                if set(r.get("verbs") or []) - {"get", "list", "watch"}:
                    probs.add(w, f"rule grants {r.get('verbs')}: only get/list/watch are needed")
                if r.get("apiGroups") != [""] or set(r.get("resources") or []) - {"pods", "nodes", "namespaces"}:
                    probs.add(w, f"rule on {r.get('apiGroups')}/{r.get('resources')}: only core pods/nodes/namespaces")
                if "*" in (r.get("resources") or []) + (r.get("verbs") or []):
                    probs.add(w, "wildcard in a rule")
        elif k in ("ClusterRoleBinding", "RoleBinding"):
            ref = d["roleRef"]
            if not any(x.get("kind") == ref["kind"] and _name(x) == ref["name"] for x in docs):
                probs.add(w, f"roleRef {ref['kind']}/{ref['name']} is not in the bundle")
            for s in d.get("subjects") or []:
                if s["kind"] == "ServiceAccount" and not any(
                        x.get("kind") == "ServiceAccount" and _name(x) == s["name"] and _ns(x) == s.get("namespace")
                        for x in docs):
                    probs.add(w, f"subject ServiceAccount {s.get('namespace')}/{s['name']} is not in the bundle")


def proflet_config(docs, pod_doc):
    """The proflet.yaml (parsed) that a workload's proflet container reads."""
    _, spec = pod_specs(pod_doc)
    for v in spec.get("volumes") or []:
        if "configMap" in v:
            for d in docs:
                if d.get("kind") == "ConfigMap" and _name(d) == v["configMap"]["name"] and "proflet.yaml" in (d.get("data") or {}):
                    return d["data"]["proflet.yaml"]
    return None


def validate(docs, where, allow_host_path=False, external_secrets=()):
    probs = Problems()
    for i, d in enumerate(docs):
        check_schema(d, f"{where}[{i}]", probs)
    if not probs:
        check_bundle(docs, where, probs, allow_host_path=allow_host_path, external_secrets=external_secrets)
    return probs


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    failed = 0
    for path in argv[1:]:
        with open(path) as f:
            probs = validate(load_docs(f.read()), path)
        for p in probs:
            print(p)
        failed += bool(probs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
