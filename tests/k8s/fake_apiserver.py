#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A fake Kubernetes API server for proflet's discovery tests (stdlib only).

It serves the parts of the core/v1 API that a pod-discovery client uses:

  GET /api, /apis, /api/v1, /version            discovery documents
  GET /api/v1/{pods,nodes,namespaces}           list or ?watch=true
  GET /api/v1/namespaces/<ns>/pods              namespaced list or watch
  GET /api/v1/namespaces/<ns>/pods/<name>       one pod

with Kubernetes' list semantics (limit + continue tokens, resourceVersion,
label and field selectors, 410 Expired for a compacted continue token or
resourceVersion) and watch semantics (newline-delimited events from a
resourceVersion, BOOKMARK events with allowWatchBookmarks, an ERROR event
with a 410 Status for a compacted resourceVersion, timeoutSeconds, objects
leaving a selector arrive as DELETED, entering it as ADDED).

A second port serves the control interface (JSON over HTTP) so a test can
change the cluster and inject faults:

  POST /apply      {"kind": "pods", "object": {...}}      add or modify
  POST /delete     {"kind": "pods", "namespace": n, "name": x}
  POST /bulk       {"kind": "pods", "objects": [...]}     add many at once
  POST /churn      {"rate": 100, "seconds": 10}            MODIFIED events at a rate
  POST /compact    {"close_watches": true}                 forget history; open
                                                           watches get ERROR 410
  POST /watch_fault {"fault": "error", "code": 500}        to every open watch:
                    "error" (ERROR event, end), "garbage" (a malformed line),
                    "unknown" (an event of unknown type), "midline" (half a
                    line, then the connection is dropped), "close" (clean end),
                    "bookmark" (a BOOKMARK now)
  POST /fail       {"status": 429, "count": 2, "watch": true|false|null,
                    "path": "/api/v1/pods"}                next matching requests fail
  POST /token      {"token": "abc"} | {"token": null}     required bearer token
  POST /restart    {"down_ms": 500}                        drop every connection,
                                                           refuse for a while, come back
  POST /settings   {"page_size_cap": N, "watch_max_seconds": S,
                    "bookmark_every": S, "close_empty_watch": bool}
  GET  /requests                                          log of API requests
  GET  /state                                             rv, counts, open watches,
                                                          requests {"list": N, "watch": N}
                                                          (API requests under /api/v1/)

Scenario files (--scenario FILE) preload objects and settings:
  {"settings": {...}, "namespaces": [...], "nodes": [...], "pods": [...]}

Ports go to --port-file as "API_PORT CONTROL_PORT\n" once both listen, and
the same line to stdout (C tests read it there: tests/harness/test_peer.h).
Optional TLS for the API port with --tls-cert/--tls-key.
"""
import argparse
import base64
import copy
import json
import os
import re
import select
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib  # noqa: E402

KINDS = {"pods": "Pod", "nodes": "Node", "namespaces": "Namespace"}


class Cluster:
    def __init__(self):
        self.lock = threading.Condition()
        self.rv = 100
        self.compacted = 0           # watches/continues from rv < this get 410
        self.objects = {k: {} for k in KINDS}   # kind -> key -> obj
        self.events = []             # (rv, kind, type, old, new)
        self.watches = set()
        self.fails = []
        self.token = None
        self.requests = []
        self.request_counts = {"list": 0, "watch": 0}   # never trimmed, unlike requests
        self.settings = {"page_size_cap": 0, "watch_max_seconds": 0,
                         "bookmark_every": 0, "close_empty_watch": False}
        self.generation = 0          # bumps on restart: watches end

    @staticmethod
    def key(kind, obj):
        md = obj.get("metadata", {})
        if kind == "pods":
            return "%s/%s" % (md.get("namespace", "default"), md.get("name", ""))
        return md.get("name", "")

    def _next_rv(self):
        self.rv += 1
        return str(self.rv)

    def apply(self, kind, obj, notify=True):
        obj = copy.deepcopy(obj)
        md = obj.setdefault("metadata", {})
        if kind == "pods":
            md.setdefault("namespace", "default")
        md.setdefault("uid", "uid-" + md.get("name", ""))
        obj.setdefault("kind", KINDS[kind])
        obj.setdefault("apiVersion", "v1")
        k = self.key(kind, obj)
        old = self.objects[kind].get(k)
        md["resourceVersion"] = self._next_rv()
        self.objects[kind][k] = obj
        self.events.append((self.rv, kind, "MODIFIED" if old else "ADDED", old, obj))
        if notify:
            self.lock.notify_all()

    def delete(self, kind, k):
        old = self.objects[kind].pop(k, None)
        if old is None:
            return False
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = self._next_rv()
        self.events.append((self.rv, kind, "DELETED", old, gone))
        self.lock.notify_all()
        return True


C = Cluster()


# ---------------------------------------------------------------- selectors

def parse_label_selector(s):
    reqs = []
    if not s:
        return reqs
    for part in re.split(r",(?![^()]*\))", s):
        part = part.strip()
        m = re.match(r"^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$", part)
        if m:
            vals = {v.strip() for v in m.group(3).split(",")}
            reqs.append((m.group(1), m.group(2), vals))
            continue
        m = re.match(r"^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$", part)
        if m:
            reqs.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
            continue
        m = re.match(r"^(!?)([\w./-]+)$", part)
        if m:
            reqs.append((m.group(2), "!exists" if m.group(1) else "exists", None))
            continue
        raise ValueError("unable to parse requirement: " + part)
    return reqs


def label_match(reqs, obj):
    labels = obj.get("metadata", {}).get("labels") or {}
    for k, op, v in reqs:
        if op == "=" and labels.get(k) != v:
            return False
        if op == "!=" and labels.get(k) == v:
            return False
        if op == "in" and labels.get(k) not in v:
            return False
        if op == "notin" and labels.get(k) in v:
            return False
        if op == "exists" and k not in labels:
            return False
        if op == "!exists" and k in labels:
            return False
    return True


FIELDS = {
    "metadata.name": lambda o: o.get("metadata", {}).get("name", ""),
    "metadata.namespace": lambda o: o.get("metadata", {}).get("namespace", ""),
    "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName", ""),
    "status.phase": lambda o: (o.get("status") or {}).get("phase", ""),
}


def parse_field_selector(s):
    reqs = []
    if not s:
        return reqs
    for part in s.split(","):
        m = re.match(r"^([\w.]+)\s*(==|=|!=)\s*(.*)$", part.strip())
        if not m or m.group(1) not in FIELDS:
            raise ValueError('field label not supported: "%s"' % part)
        reqs.append((m.group(1), m.group(2) == "!=", m.group(3)))
    return reqs


def field_match(reqs, obj):
    for f, neg, v in reqs:
        if (FIELDS[f](obj) == v) == neg:
            return False
    return True


# ---------------------------------------------------------------- helpers

def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def encode_continue(rv, start):
    raw = json.dumps({"rv": rv, "start": start}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_continue(tok):
    try:
        d = json.loads(base64.urlsafe_b64decode(tok.encode()))
        return int(d["rv"]), d["start"]
    except Exception:
        return None, None


class Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, code, obj, extra=None):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        path = u.path
        watch = q.get("watch", "").lower() in ("true", "1")
        with C.lock:
            C.requests.append({"path": path, "query": q, "watch": watch,
                               "auth": self.headers.get("Authorization", ""),
                               "time": time.time()})
            del C.requests[:-5000]
            if path.startswith("/api/v1/"):
                C.request_counts["watch" if watch else "list"] += 1
            if C.token is not None and self.headers.get("Authorization") != "Bearer " + C.token:
                return self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
            for f in list(C.fails):
                if f.get("path") and not path.startswith(f["path"]):
                    continue
                if f.get("watch") is not None and bool(f["watch"]) != watch:
                    continue
                f["count"] -= 1
                if f["count"] <= 0:
                    C.fails.remove(f)
                code = int(f.get("status", 500))
                return self.send_json(code, status(code, f.get("reason", "Fault"), "injected"),
                                      {"Retry-After": "1"} if code == 429 else None)
        if path == "/api":
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                        "serverAddressByClientCIDRs": [
                                            {"clientCIDR": "0.0.0.0/0",
                                             "serverAddress": "127.0.0.1"}]})
        if path == "/apis":
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": []})
        if path == "/version":
            return self.send_json(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0",
                                        "platform": "linux/amd64"})
        if path == "/api/v1":
            res = []
            for name, kind in KINDS.items():
                res.append({"name": name, "singularName": kind.lower(), "kind": kind,
                            "namespaced": name == "pods",
                            "verbs": ["get", "list", "watch"]})
            return self.send_json(200, {"kind": "APIResourceList", "groupVersion": "v1",
                                        "resources": res})
        m = re.match(r"^/api/v1/(?:namespaces/([^/]+)/)?(pods|nodes|namespaces)(?:/([^/]+))?$",
                     path)
        if not m:
            return self.send_json(404, status(404, "NotFound", "the server could not find "
                                                               "the requested resource"))
        ns, kind, name = m.group(1), m.group(2), m.group(3)
        try:
            lsel = parse_label_selector(q.get("labelSelector", ""))
            fsel = parse_field_selector(q.get("fieldSelector", ""))
        except ValueError as e:
            return self.send_json(400, status(400, "BadRequest", str(e)))

        def match(o):
            if ns and o.get("metadata", {}).get("namespace") != ns:
                return False
            return label_match(lsel, o) and field_match(fsel, o)

        if name:
            with C.lock:
                o = C.objects[kind].get("%s/%s" % (ns, name) if kind == "pods" else name)
            if not o:
                return self.send_json(404, status(404, "NotFound", "not found"))
            return self.send_json(200, o)
        if watch:
            return self.watch(kind, match, q)
        return self.list(kind, match, q)

    def list(self, kind, match, q):
        limit = int(q.get("limit") or 0)
        cap = C.settings.get("page_size_cap") or 0
        if cap and (not limit or limit > cap):
            limit = cap
        with C.lock:
            start = ""
            if q.get("continue"):
                rv, start = decode_continue(q["continue"])
                if rv is None:
                    return self.send_json(400, status(400, "BadRequest", "invalid continue"))
                if rv < C.compacted:
                    return self.send_json(410, status(
                        410, "Expired", "The provided continue parameter is too old to "
                        "display a consistent list result."))
            rvq = q.get("resourceVersion", "")
            if rvq not in ("", "0") and rvq.isdigit() and int(rvq) < C.compacted \
                    and q.get("resourceVersionMatch") == "Exact":
                return self.send_json(410, status(410, "Expired", "too old resource version"))
            if rvq.isdigit() and int(rvq) > C.rv:
                return self.send_json(504, status(504, "Timeout",
                                                  "Too large resource version"))
            keys = sorted(k for k, o in C.objects[kind].items() if match(o))
            keys = [k for k in keys if k > start]
            items = [copy.deepcopy(C.objects[kind][k]) for k in (keys[:limit] if limit else keys)]
            md = {"resourceVersion": str(C.rv)}
            if limit and len(keys) > limit:
                md["continue"] = encode_continue(C.rv, keys[limit - 1])
                md["remainingItemCount"] = len(keys) - limit
        self.send_json(200, {"kind": KINDS[kind] + "List", "apiVersion": "v1",
                             "metadata": md, "items": items})

    def write_chunk(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, kind, match, q):
        rvq = q.get("resourceVersion", "")
        timeout = int(q.get("timeoutSeconds") or 1800)
        maxs = C.settings.get("watch_max_seconds") or 0
        if maxs:
            timeout = min(timeout, maxs)
        bookmarks = q.get("allowWatchBookmarks", "").lower() == "true"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        box = {"faults": [], "sock": self.connection}
        deadline = time.time() + timeout
        sent = 0
        try:
            with C.lock:
                gen = C.generation
                C.watches.add(id(box))
                WATCHERS[id(box)] = box
                if rvq in ("", "0"):
                    # Synthetic ADDED events for the current state, as Kubernetes does.
                    pos_rv = C.rv
                    initial = [copy.deepcopy(o) for k, o in sorted(C.objects[kind].items())
                               if match(o)]
                else:
                    try:
                        pos_rv = int(rvq)
                    except ValueError:
                        pos_rv = -1
                    initial = []
                    if pos_rv < C.compacted:
                        ev = {"type": "ERROR", "object": status(
                            410, "Expired", "too old resource version: %s (%d)"
                            % (rvq, C.compacted))}
                        initial = None
            if initial is None:
                self.write_chunk(json.dumps(ev) + "\n")
                self.write_chunk(b"")
                return
            for o in initial:
                self.write_chunk(json.dumps({"type": "ADDED", "object": o}) + "\n")
                sent += 1
            if C.settings.get("close_empty_watch") and sent == 0:
                self.write_chunk(b"")  # ends at once without an event
                return
            last_bm = time.time()
            while True:
                out = []
                with C.lock:
                    while True:
                        if C.generation != gen or peer_closed(box["sock"]):
                            raise ConnectionAbortedError()
                        if box["faults"]:
                            break
                        if any(e[0] > pos_rv and e[1] == kind for e in C.events[-2000:]):
                            break
                        now = time.time()
                        if now >= deadline:
                            break
                        be = C.settings.get("bookmark_every") or 0
                        if bookmarks and be and now - last_bm >= be:
                            break
                        wait = deadline - now
                        if bookmarks and be:
                            wait = min(wait, be - (now - last_bm))
                        C.lock.wait(max(0.01, min(wait, 0.5)))
                    faults, box["faults"] = box["faults"], []
                    for rv, k, typ, old, new in C.events:
                        if rv <= pos_rv or k != kind:
                            continue
                        was, now_m = old is not None and match(old), match(new)
                        if typ == "DELETED":
                            if was:
                                out.append({"type": "DELETED", "object": new})
                        elif now_m and not was:
                            out.append({"type": "ADDED", "object": new})
                        elif now_m and was:
                            out.append({"type": "MODIFIED", "object": new})
                        elif was and not now_m:
                            out.append({"type": "DELETED", "object": new})
                        pos_rv = rv
                    cur_rv = C.rv
                for e in out:
                    self.write_chunk(json.dumps(e) + "\n")
                    sent += 1
                for f in faults:
                    t = f.get("fault")
                    if t == "error":
                        code = int(f.get("code", 500))
                        reason = "Expired" if code == 410 else f.get("reason", "InternalError")
                        self.write_chunk(json.dumps({"type": "ERROR", "object": status(
                            code, reason, "too old resource version" if code == 410
                            else "injected")}) + "\n")
                        self.write_chunk(b"")
                        return
                    if t == "garbage":
                        self.write_chunk('{"type": "ADDED", "object": {"metadata": ]]]\n')
                    if t == "unknown":
                        self.write_chunk(json.dumps({"type": "WEIRD", "object": {
                            "metadata": {"resourceVersion": str(cur_rv)}}}) + "\n")
                    if t == "midline":
                        self.write_chunk('{"type": "MODIFIED", "object": {"metadata": {"na')
                        raise ConnectionAbortedError()
                    if t == "close":
                        self.write_chunk(b"")
                        return
                    if t == "bookmark":
                        self.write_chunk(json.dumps({"type": "BOOKMARK", "object": {
                            "kind": KINDS[kind], "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(cur_rv)}}}) + "\n")
                        last_bm = time.time()
                be = C.settings.get("bookmark_every") or 0
                if bookmarks and be and time.time() - last_bm >= be:
                    self.write_chunk(json.dumps({"type": "BOOKMARK", "object": {
                        "kind": KINDS[kind], "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(cur_rv)}}}) + "\n")
                    pos_rv = max(pos_rv, cur_rv)
                    last_bm = time.time()
                if time.time() >= deadline:
                    self.write_chunk(b"")
                    return
        except (ConnectionAbortedError, BrokenPipeError, ConnectionResetError, OSError):
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.close_connection = True
        finally:
            with C.lock:
                C.watches.discard(id(box))
                WATCHERS.pop(id(box), None)


WATCHERS = {}


def peer_closed(sock):
    """True once the client has closed a watch connection (it sends nothing
    after its request, so a readable socket with no data means EOF). Lets
    /state count open watches without waiting for the next write to fail."""
    if isinstance(sock, ssl.SSLSocket):
        return False  # no MSG_PEEK on TLS sockets; found on the next write
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, tls):
        super().__init__(addr, handler)
        self.conns = set()
        self.tls = tls

    def get_request(self):
        s, a = super().get_request()
        if self.tls:
            s = self.tls.wrap_socket(s, server_side=True)
        self.conns.add(s)
        return s, a

    def shutdown_request(self, request):
        self.conns.discard(request)
        super().shutdown_request(request)

    def drop_all(self):
        for s in list(self.conns):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Control(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, obj, code=200):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with C.lock:
            if self.path.startswith("/requests"):
                return self.reply(C.requests)
            if self.path.startswith("/state"):
                return self.reply({"rv": C.rv, "compacted": C.compacted,
                                   "watches": len(C.watches),
                                   "requests": dict(C.request_counts),
                                   "counts": {k: len(v) for k, v in C.objects.items()}})
        self.reply({"error": "not found"}, 404)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            d = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return self.reply({"error": "bad json"}, 400)
        p = self.path
        with C.lock:
            if p == "/apply":
                C.apply(d["kind"], d["object"])
            elif p == "/bulk":
                for o in d["objects"]:
                    C.apply(d["kind"], o, notify=False)
                C.lock.notify_all()
            elif p == "/generate":
                for i in range(int(d.get("pods", 0))):
                    C.apply("pods", synthetic_pod(i), notify=False)
                C.lock.notify_all()
            elif p == "/delete":
                k = d["name"] if d["kind"] != "pods" else "%s/%s" % (
                    d.get("namespace", "default"), d["name"])
                if not C.delete(d["kind"], k):
                    return self.reply({"error": "not found"}, 404)
            elif p == "/compact":
                C.compacted = C.rv + 1
                C.events = []
                if d.get("close_watches"):
                    for b in WATCHERS.values():
                        b["faults"].append({"fault": "error", "code": 410})
                C.lock.notify_all()
            elif p == "/watch_fault":
                for b in WATCHERS.values():
                    b["faults"].append(d)
                n_w = len(WATCHERS)
                C.lock.notify_all()
                return self.reply({"ok": True, "watches": n_w})
            elif p == "/fail":
                C.fails.append(dict(d, count=int(d.get("count", 1))))
            elif p == "/token":
                C.token = d.get("token")
            elif p == "/settings":
                C.settings.update(d)
                C.lock.notify_all()
            elif p == "/churn":
                threading.Thread(target=churn, args=(float(d.get("rate", 100)),
                                                     float(d.get("seconds", 10))),
                                 daemon=True).start()
            elif p == "/restart":
                threading.Thread(target=restart, args=(int(d.get("down_ms", 500)),),
                                 daemon=True).start()
            else:
                return self.reply({"error": "unknown control " + p}, 404)
            rv = C.rv
        self.reply({"ok": True, "rv": rv})


def synthetic_pod(i):
    """A realistic-size pod (two containers, labels, annotations, owner)."""
    return {"metadata": {"name": "pod-%05d" % i, "namespace": "ns-%02d" % (i % 50),
                         "labels": {"app": "app-%d" % (i % 100), "pod-template-hash": "abc%d" % i,
                                    "app.kubernetes.io/name": "svc", "tier": "backend"},
                         "annotations": {"prometheus.io/scrape": "true",
                                         "kubectl.kubernetes.io/restartedAt": "2024-01-01"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "rs-%d" % (i % 100), "uid": "u",
                                              "controller": True}]},
            "spec": {"nodeName": "node-%d" % (i % 20),
                     "containers": [{"name": "app", "image": "registry/app:1.0",
                                     "ports": [{"name": "http", "containerPort": 8080,
                                                "protocol": "TCP"},
                                               {"name": "pprof", "containerPort": 6060,
                                                "protocol": "TCP"}]},
                                    {"name": "sidecar", "image": "envoy:1.30"}]},
            "status": {"phase": "Running", "podIP": "10.%d.%d.%d" % (i >> 16, (i >> 8) & 255,
                                                                      i & 255),
                       "hostIP": "192.168.0.%d" % (i % 20),
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "app", "containerID": "containerd://a%d" % i},
                                             {"name": "sidecar",
                                              "containerID": "containerd://s%d" % i}]}}


def churn(rate, seconds):
    """MODIFIED events on existing pods at `rate` per second (an annotation changes)."""
    end = time.time() + seconds
    i = 0
    step = 1.0 / rate
    nxt = time.time()
    while time.time() < end:
        with C.lock:
            keys = sorted(C.objects["pods"])
            if not keys:
                return
            k = keys[i % len(keys)]
            o = copy.deepcopy(C.objects["pods"][k])
            o["metadata"].setdefault("annotations", {})["churn"] = str(i)
            C.apply("pods", o)
        i += 1
        nxt += step
        time.sleep(max(0, nxt - time.time()))


SERVER = {}


def restart(down_ms):
    srv = SERVER["api"]
    with C.lock:
        C.generation += 1
        C.lock.notify_all()
    srv.shutdown()
    srv.server_close()
    port = srv.server_address[1]
    # Held while down: refused, and given to no other test's server.
    held = lib.hold_port(port)
    srv.drop_all()
    time.sleep(down_ms / 1000.0)
    for _ in range(200):
        try:
            new = ApiServer(("127.0.0.1", port), Api, srv.tls)
            break
        except OSError:
            time.sleep(0.05)
    held.close()  # listening again
    SERVER["api"] = new
    threading.Thread(target=new.serve_forever, daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--scenario")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--token")
    ap.add_argument("--max-seconds", type=float, default=900)
    a = ap.parse_args()
    if a.scenario:
        with open(a.scenario) as f:
            sc = json.load(f)
        C.settings.update(sc.get("settings", {}))
        for kind in KINDS:
            for o in sc.get(kind, []):
                C.apply(kind, o, notify=False)
    C.token = a.token
    tls = None
    if a.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(a.tls_cert, a.tls_key)
    api = ApiServer(("127.0.0.1", 0), Api, tls)
    ctl = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    ctl.daemon_threads = True
    SERVER["api"] = api
    threading.Thread(target=api.serve_forever, daemon=True).start()
    threading.Thread(target=ctl.serve_forever, daemon=True).start()
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d %d\n" % (api.server_address[1], ctl.server_address[1]))
    os.rename(tmp, a.port_file)
    print("%d %d" % (api.server_address[1], ctl.server_address[1]), flush=True)
    # Runs until SIGTERM, or until --max-seconds pass (a leaked server dies).
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    time.sleep(a.max_seconds)
    os._exit(0)

if __name__ == "__main__":
    main()
