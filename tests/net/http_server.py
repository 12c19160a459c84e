#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Test HTTP(S) server for tests/net: a scrape target that misbehaves on
demand. Listens on 127.0.0.1, port 0, prints "PORT <n>" on stdout and serves
until killed. Thread per connection, HTTP/1.1 keep-alive.

Paths (any method):
  /bytes?n=N[&ct=TYPE]  N bytes of a repeating pattern, Content-Length set
  /slow?ms=M            answers after M milliseconds
  /endless              a chunked body that never ends (stops when the peer goes)
  /closemid             announces 100000 bytes, sends 1000, closes
  /conns                number of TCP connections accepted so far
  /echo                 request line, headers and body, as text
  /status?code=N        status N
  /gzip?n=N             N bytes of 'a', Content-Encoding: gzip
  /bomb                 10 MiB of zeros, gzip-encoded (about 10 KiB on the wire)
  /redirect             302 to /bytes?n=5
  /token?expires=S[&ms=M]  an OAuth2 token answer {"access_token": "tok-<k>",
                        "token_type": "bearer", "expires_in": S} after M ms,
                        k counting the tokens minted; its request (the
                        Authorization header and the form body) goes to /lasttoken
An absolute request target (a proxy request) is served as its path, and the
echo then starts with "PROXY ".

Options: --tls CERT KEY [--client-ca CA] serves HTTPS (client certificate
required when --client-ca is given).

The server exits with the test process that started it, even when that one
dies without stopping it (a failed assertion, a sanitizer's exit): left
running, it would hold the test runner's stderr open until its timeout.
"""
import ctypes
import gzip
import http.server
import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.parse

conns = 0
tokens = 0
last_token_request = b""
conns_lock = threading.Lock()
tls_ctx = None
PATTERN = b"0123456789abcdef" * 4096
BOMB = gzip.compress(b"\0" * (10 * 1024 * 1024), 9)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def process_request(self, request, client_address):
        global conns
        with conns_lock:
            conns += 1
        super().process_request(request, client_address)

    def finish_request(self, request, client_address):
        # The TLS handshake happens here, on the connection's own thread, so
        # a client that never finishes one cannot stall the accept loop.
        if tls_ctx is not None:
            request.settimeout(10)
            try:
                request = tls_ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, *args):
        pass

    def send(self, code, body, ctype="text/plain", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def dispatch(self):
        proxied = self.path.startswith("http://") or self.path.startswith("https://")
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        path = url.path
        n = int(q.get("n", ["0"])[0])
        length = int(self.headers.get("Content-Length", "0") or "0")
        body = self.rfile.read(length) if length else b""

        if path == "/bytes":
            data = (PATTERN * (n // len(PATTERN) + 1))[:n]
            self.send(200, data, q.get("ct", ["application/octet-stream"])[0])
        elif path == "/slow":
            time.sleep(int(q.get("ms", ["1000"])[0]) / 1000.0)
            self.send(200, b"slow")
        elif path == "/endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"%x\r\n" % len(PATTERN) + PATTERN + b"\r\n"
            try:
                for _ in range(16384):  # 1 GiB at most, should the peer hang
                    self.wfile.write(chunk)
            except OSError:
                pass
            self.close_connection = True
        elif path == "/closemid":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(PATTERN[:1000])
            self.wfile.flush()
            self.close_connection = True
        elif path == "/conns":
            with conns_lock:
                self.send(200, str(conns).encode())
        elif path == "/echo":
            out = "%s%s %s\n" % ("PROXY " if proxied else "", self.command, self.path)
            for k, v in self.headers.items():
                out += "%s: %s\n" % (k, v)
            self.send(200, out.encode() + b"\n" + body)
        elif path == "/status":
            code = int(q.get("code", ["500"])[0])
            self.send(code, b"status %d" % code)
        elif path == "/gzip":
            self.send(200, gzip.compress(b"a" * n), extra=[("Content-Encoding", "gzip")])
        elif path == "/bomb":
            self.send(200, BOMB, extra=[("Content-Encoding", "gzip")])
        elif path == "/token":
            global tokens, last_token_request
            time.sleep(int(q.get("ms", ["0"])[0]) / 1000.0)
            with conns_lock:
                tokens += 1
                k = tokens
                last_token_request = (self.headers.get("Authorization", "") + "\n").encode() + body
            self.send(200, json.dumps({"access_token": "tok-%d" % k, "token_type": "bearer",
                                       "expires_in": int(q.get("expires", ["3600"])[0])}).encode(),
                      "application/json")
        elif path == "/lasttoken":
            with conns_lock:
                self.send(200, last_token_request)
        elif path == "/redirect":
            self.send(302, b"moved", extra=[("Location", "/bytes?n=5")])
        else:
            self.send(404, b"not found")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = dispatch


def die_with_parent():
    parent = os.getppid()
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the prctl
        os._exit(0)


def main():
    global tls_ctx
    die_with_parent()
    args = sys.argv[1:]
    if args[:1] == ["--tls"]:
        tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_ctx.load_cert_chain(args[1], args[2])
        if args[3:4] == ["--client-ca"]:
            tls_ctx.verify_mode = ssl.CERT_REQUIRED
            tls_ctx.load_verify_locations(args[4])
    srv = Server(("127.0.0.1", 0), Handler)
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
