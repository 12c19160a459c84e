#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A Pyroscope test receiver: push (Connect unary, binary protobuf) and the
legacy /ingest API, with fault injection and a control API for tests.

Every push body is decoded with python3-protobuf modules generated at start
by `protoc --python_out` from proflet's own .proto files (into a temp dir).
Accepted profiles are recorded with their ID, labels and the first bytes of
the profile; tests read them from the control port.

    receiver.py [--proto-dir DIR] [--port N] [--fast] [--tls-cert PEM --tls-key PEM]

Prints one JSON line {"port": P, "control": C} on stdout when ready.

Control API (JSON over HTTP on the control port):
    GET  /accepted            -> {"profiles": [{id, labels, head, t}], "requests": n}
    GET  /requests            -> every request seen, in arrival order: {method, path,
                                 query, headers, len, sha256 (of the body), status
                                 (answered; absent if none), ids (push: the sample
                                 ids, in request order), t}
    POST /faults  {...}       -> merges fault settings:
        down_for: seconds     stop listening (connections refused), then come back
        fail_next: {count, status, code, message, retry_after}   whole-request
                   failures, nothing stored (retry_after: a Retry-After header, seconds)
        fail_ids: {id: status}                       refuse these ids (attributed), store others
        fail_ids_times: n                           how many times each fail_ids id is refused
        partial_every: k      in each request, refuse every k-th series with 503 (attributed), once per id
        reset_next: n         next n requests: read the body, close without answering, store nothing
        slow_ms: ms           answer every request after ms (after storing)
        max_body: bytes       bodies over this get 429 "message size N is larger than configured max"
    POST /reset               -> forget accepted profiles and faults

`--fast` skips decoding (benchmarks): it counts requests and bytes only.
"""
import argparse
import gzip
import hashlib
import json
import os
import socket
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib  # noqa: E402

LOCK = threading.Lock()
STATE = {"profiles": [], "requests": 0, "seen": [], "bytes": 0}
FAULTS = {}
FAILED_ONCE = {}
push_pb2 = None


def load_protos(proto_dir):
    global push_pb2
    out = tempfile.mkdtemp(prefix="recv-pb2-")
    subprocess.run(["protoc", "--proto_path=" + os.path.join(proto_dir, "types", "v1"),
                    "--proto_path=" + os.path.join(proto_dir, "push", "v1"),
                    "--python_out=" + out, "types.proto", "push.proto"], check=True)
    sys.path.insert(0, out)
    try:
        import push_pb2 as m  # noqa: E402
    finally:
        sys.path.remove(out)
        shutil.rmtree(out, ignore_errors=True)  # loaded: the generated files are no longer needed
    push_pb2 = m


class Push(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fast = False
    down = False

    def log_message(self, *a):
        pass

    def reply(self, status, obj=None, ctype="application/json", retry_after=None):
        body = b"" if obj is None else json.dumps(obj).encode()
        if self.rec is not None:
            with LOCK:
                self.rec["status"] = status
        self.send_response(status)
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.send_header("Content-Type", ctype if obj is not None else "application/proto")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > 300 * 1024 * 1024:
            raise ValueError("too big")
        return self.rfile.read(n)

    def do_POST(self):
        self.rec = None
        body = self.read_body()
        if Push.down:
            # Down: a kept-alive connection is cut without an answer.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        url = urllib.parse.urlparse(self.path)
        with LOCK:
            STATE["requests"] += 1
            STATE["bytes"] += len(body)
            if not self.fast:
                self.rec = {"method": self.command, "path": url.path, "query": url.query,
                            "headers": {k: v for k, v in self.headers.items()},
                            "len": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                            "t": time.time()}
                STATE["seen"].append(self.rec)
            reset = FAULTS.get("reset_next", 0)
            if reset:
                FAULTS["reset_next"] = reset - 1
            fail = FAULTS.get("fail_next")
            if not reset and fail and fail.get("count", 0) > 0:
                fail["count"] -= 1
            else:
                fail = None
            slow = FAULTS.get("slow_ms", 0)
            max_body = FAULTS.get("max_body", 0)
        if reset:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fail:
            if slow:
                time.sleep(slow / 1000)
            return self.reply(fail.get("status", 503), {"code": fail.get("code", "unavailable"),
                                                        "message": fail.get("message", "injected")},
                              retry_after=fail.get("retry_after"))
        if max_body and len(body) > max_body:
            return self.reply(429, {"code": "resource_exhausted",
                                    "message": "message size %d is larger than configured max %d"
                                               % (len(body), max_body)})
        if self.fast:
            return self.reply(200)
        if url.path.endswith("/push.v1.PusherService/Push"):
            return self.push(body)
        if url.path.endswith("/ingest"):
            return self.ingest(url, body)
        self.reply(404, {"code": "not_found", "message": "no such path"})

    def push(self, body):
        if self.headers.get("Content-Type") != "application/proto":
            return self.reply(415, {"code": "unimplemented", "message": "bad content type"})
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        req = push_pb2.PushRequest()
        req.ParseFromString(body)
        refused = []
        status = 200
        now = time.time()
        with LOCK:
            fail_ids = FAULTS.get("fail_ids", {})
            times = FAULTS.get("fail_ids_times", 1 << 30)
            every = FAULTS.get("partial_every", 0)
            slow = FAULTS.get("slow_ms", 0)
            self.rec["ids"] = [smp.ID for s in req.series for smp in s.samples]
            for i, s in enumerate(req.series):
                labels = {lp.name: lp.value for lp in s.labels}
                for smp in s.samples:
                    sid = smp.ID
                    st = None
                    if sid in fail_ids and FAILED_ONCE.get(sid, 0) < times:
                        st = fail_ids[sid]
                    elif every and (i % every) == every - 1 and not FAILED_ONCE.get(sid):
                        st = 503
                    if st:
                        FAILED_ONCE[sid] = FAILED_ONCE.get(sid, 0) + 1
                        refused.append("series %d (id %s): injected failure %d" % (i, sid, st))
                        status = max(status, st) if status != 200 else st
                        continue
                    STATE["profiles"].append({"id": sid, "labels": labels,
                                              "head": smp.raw_profile[:40].decode("latin-1"),
                                              "len": len(smp.raw_profile), "t": now})
        if slow:
            time.sleep(slow / 1000)
        if refused:
            code = "unavailable" if status >= 500 else "invalid_argument"
            return self.reply(status, {"code": code, "message": "; ".join(refused)})
        self.reply(200)

    def ingest(self, url, body):
        q = urllib.parse.parse_qs(url.query)
        name = q.get("name", [""])[0]
        app, _, rest = name.partition("{")
        labels = {"service_name": app}
        for kv in rest.rstrip("}").split(","):
            if "=" in kv:
                k, v = kv.split("=", 1)
                labels[k] = v
        with LOCK:
            STATE["profiles"].append({"id": None, "labels": labels, "query": q,
                                      "head": body[:40].decode("latin-1"), "len": len(body),
                                      "t": time.time()})
        self.reply(200, {})


class Control(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_ref = None

    def log_message(self, *a):
        pass

    def reply(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with LOCK:
            if self.path == "/accepted":
                return self.reply({"profiles": STATE["profiles"], "requests": STATE["requests"],
                                   "bytes": STATE["bytes"]})
            if self.path == "/requests":
                return self.reply(STATE["seen"])
        self.reply({})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        obj = json.loads(self.rfile.read(n) or b"{}")
        if self.path == "/reset":
            with LOCK:
                STATE.update({"profiles": [], "requests": 0, "seen": [], "bytes": 0})
                FAULTS.clear()
                FAILED_ONCE.clear()
            return self.reply({})
        down = obj.pop("down_for", None)
        with LOCK:
            FAULTS.update(obj)
        if down:
            self.server_ref.go_down(float(down))
        self.reply({})


class Front:
    """The push listener, which can go down (refuse connections) and come back."""

    def __init__(self, port, fast, tls=None):
        Push.fast = fast
        self.port = port
        self.srv = None
        self.tls = tls
        self.held = None
        self.up()

    def up(self):
        ThreadingHTTPServer.allow_reuse_address = True
        ThreadingHTTPServer.daemon_threads = True
        for _ in range(100):
            try:
                self.srv = ThreadingHTTPServer(("127.0.0.1", self.port), Push)
                break
            except OSError:
                time.sleep(0.05)
        self.port = self.srv.server_address[1]
        if self.held:
            self.held.close()  # listening again: the placeholder can go
            self.held = None
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def go_down(self, seconds):
        srv = self.srv
        Push.down = True
        srv.shutdown()
        srv.server_close()
        # Down, the port stays ours: connections are refused, and no other
        # test's server can be given it meanwhile and answer in our place.
        self.held = lib.hold_port(self.port)

        def later():
            time.sleep(seconds)
            Push.down = False
            self.up()
        threading.Thread(target=later, daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--proto-dir", default=os.path.join(here, "..", "..", "proto"))
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--tls-cert", help="serve push over TLS with this certificate (PEM)")
    ap.add_argument("--tls-key", help="... and this key")
    a = ap.parse_args()
    if not a.fast:
        load_protos(a.proto_dir)
    front = Front(a.port, a.fast, (a.tls_cert, a.tls_key) if a.tls_cert else None)
    Control.server_ref = front
    ctl = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    print(json.dumps({"port": front.port, "control": ctl.server_address[1]}), flush=True)
    try:
        ctl.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
