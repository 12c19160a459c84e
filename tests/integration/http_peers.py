# SPDX-License-Identifier: Apache-2.0
"""Real HTTP peers for the tests of the HTTP client settings (127.0.0.1
only): a pprof target that records every request's headers and can demand
credentials and limit its TLS versions, a server of fixed bodies, an OAuth2
token endpoint that mints short-lived tokens, and Debian's tinyproxy as a
forward proxy."""
import base64
import http.server
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse

from lib import TestFailure, free_port, wait_for
from badtarget import PPROF


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class Target:
    """A pprof target on 127.0.0.1. `auth(headers)` returns None to serve the
    profile or an HTTP status to refuse (with `refused_body`). `tls` is an
    ssl.SSLContext."""

    def __init__(self, auth=None, tls=None, refused_body=b"refused\n"):
        self.lock = threading.Lock()
        self.seen = []  # [(path, [(name, value)...])]
        me = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                hdrs = list(self.headers.items())
                with me.lock:
                    me.seen.append((self.path, hdrs))
                status = auth(self.headers) if auth else None
                body = PPROF if status is None else refused_body
                self.send_response(status or 200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.srv = _Server(("127.0.0.1", 0), H)
        if tls:
            self.srv.socket = tls.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def requests(self):
        with self.lock:
            return list(self.seen)

    def header_values(self, name):
        """Every value of header `name` over all requests, per request."""
        return [[v for k, v in h if k.lower() == name.lower()] for _, h in self.requests()]

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def serve_bytes(routes):
    """A loopback HTTP server answering GET path (the query ignored) with
    routes[path]: bytes, or a function giving the bytes of each request;
    404 for any other path. Returns the server (server_address, shutdown)."""

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = routes.get(self.path.split("?")[0])
            body = body() if callable(body) else body
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *a):
            pass

    srv = _Server(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def tls_context(crt, key, min_version=None, max_version=None, client_ca=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    if min_version:
        ctx.minimum_version = min_version
    if max_version:
        ctx.maximum_version = max_version
    if client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(client_ca)
    return ctx


class TokenEndpoint:
    """An OAuth2 token endpoint (client credentials grant) on 127.0.0.1/token.
    It checks the client's Basic credentials (`clients`: id -> secret), the
    grant type, the scope and the extra parameters, and mints random bearer
    tokens that live `expires_in` seconds (or always `fixed`, for a peer
    that accepts one token only). `valid(token)` says whether a
    token was minted here and has not expired; `fetches[id]` counts the
    tokens minted for a client, `refused` the requests it turned down,
    `vias` the Via header of each request (a proxy's mark). `tls` is an
    ssl.SSLContext: the endpoint then answers on https only."""

    def __init__(self, clients, expires_in, scope=None, params=None, fixed=None, tls=None):
        self.lock = threading.Lock()
        self.vias = []  # the Via header of every token request (None: none)
        self.tokens = {}  # token -> expiry (monotonic)
        self.fetches = {c: 0 for c in clients}
        self.refused = 0
        self.fail = False  # answer 503 to every request
        self.first_delay = 0.0  # seconds before the first answer
        self.minted = set()
        me = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def answer(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                with me.lock:
                    delay, me.first_delay = me.first_delay, 0.0
                time.sleep(delay)  # a slow first answer: requests must wait, not fail
                with me.lock:
                    me.vias.append(self.headers.get("Via"))
                n = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(n).decode(), keep_blank_values=True)
                got = self.headers.get("Authorization") or ""
                try:
                    cid, _, sec = base64.b64decode(got[6:]).decode().partition(":")
                    cid, sec = urllib.parse.unquote(cid), urllib.parse.unquote(sec)
                except Exception:
                    cid = sec = None
                ok = (self.path == "/token" and not me.fail and got.startswith("Basic ")
                      and cid in clients and clients[cid] == sec
                      and form.get("grant_type") == ["client_credentials"]
                      and (scope is None or form.get("scope") == [scope])
                      and all(form.get(k) == [v] for k, v in (params or {}).items()))
                if not ok:
                    with me.lock:
                        me.refused += 1
                    self.answer(503 if me.fail else 401, {"error": "invalid_client"})
                    return
                tok = fixed or secrets.token_hex(16)
                with me.lock:
                    me.tokens[tok] = time.monotonic() + expires_in
                    me.minted.add(tok)
                    me.fetches[cid] += 1
                self.answer(200, {"access_token": tok, "token_type": "bearer", "expires_in": expires_in})

        self.srv = _Server(("127.0.0.1", 0), H)
        if tls:
            self.srv.socket = tls.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/token"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def valid(self, token):
        with self.lock:
            exp = self.tokens.get(token)
        return exp is not None and time.monotonic() < exp

    def count(self):
        with self.lock:
            return dict(self.fetches), self.refused

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def tinyproxy(tmp, procs, basic_auth=None):
    """Starts Debian's tinyproxy on a free 127.0.0.1 port with a temporary
    config; returns its port. `basic_auth` (user, password) makes it demand
    Proxy-Authorization."""
    binary = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
    if not os.path.exists(binary):
        raise TestFailure("tinyproxy is not installed (scripts/install-deps.sh installs it)")
    port = free_port()
    conf = os.path.join(tmp, f"tinyproxy-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 20\n"
                f"LogLevel Info\nLogFile \"{tmp}/tinyproxy-{port}.log\"\n"
                "Allow 127.0.0.1\nDisableViaHeader No\n")
        if basic_auth:
            f.write(f"BasicAuth {basic_auth[0]} {basic_auth[1]}\n")
    procs.start([binary, "-d", "-c", conf], stderr=subprocess.DEVNULL)

    def up():
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    wait_for("tinyproxy to listen", up, timeout=15)
    return port
