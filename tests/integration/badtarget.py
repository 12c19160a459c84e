# SPDX-License-Identifier: Apache-2.0
"""A misbehaving pprof target for proflet's tests (127.0.0.1 only).

Serves GET /<mode>/debug/pprof/<anything> where mode is one of:
  ok        a small valid gzip pprof (generated with Go-free code below)
  slow      waits 60 s before answering
  404, 500  that status
  html      200 text/html
  json      200 application/json
  truncated a gzip stream cut in the middle
  endless   an endless body
  oversized an 8 MiB body
  empty     200 with no body
  bigraw    a valid gzip pprof that inflates to 24 MiB (a padding field),
            its size announced honestly in the gzip trailer
Usage: badtarget.py PORT_FILE. Writes its port to PORT_FILE, logs each
request as "mode unix_time" lines to PORT_FILE.log.
"""
import gzip
import http.server
import os
import socketserver
import sys
import threading
import time


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def tiny_pprof(function=b"main.main"):
    """A minimal valid goroutine-like profile: one sample, one location in
    `function`."""
    strings = [b"", b"goroutine", b"count", function, b"main.go"]
    vt = varint(1 << 3) + varint(1) + varint(2 << 3) + varint(2)
    sample = varint(1 << 3 | 0) + varint(1) + varint(2 << 3 | 0) + varint(3)
    line = varint(1 << 3) + varint(1) + varint(2 << 3) + varint(10)
    loc = varint(1 << 3) + varint(1) + varint(3 << 3) + varint(0x401000) + field(4, line)
    fn = varint(1 << 3) + varint(1) + varint(2 << 3) + varint(3) + varint(4 << 3) + varint(4)
    body = field(1, vt) + field(2, sample) + field(4, loc) + field(5, fn)
    for s in strings:
        body += field(6, s)
    body += field(11, vt) + varint(12 << 3) + varint(1)
    return gzip.compress(body)


def pprof_profile(sample_types, samples, default_type=None, period_type=None, period=0,
                  time_nanos=0, duration_nanos=0):
    """A gzip pprof profile, written here field by field: `sample_types` is
    [(type, unit)], `samples` [(stack, values)] with each stack a list of
    function names, leaf first. Each name gets one function and one
    location (one line); values may be negative."""
    strings = [b""]
    index = {}

    def s(x):
        x = x.encode() if isinstance(x, str) else x
        if x not in index:
            index[x] = len(strings)
            strings.append(x)
        return index[x]

    def u64(v):
        return varint(v & 0xFFFFFFFFFFFFFFFF)

    body = b""
    for t, u in sample_types:
        body += field(1, varint(1 << 3) + varint(s(t)) + varint(2 << 3) + varint(s(u)))
    funcs = {}
    for stack, _ in samples:
        for name in stack:
            funcs.setdefault(name, len(funcs) + 1)
    for stack, values in samples:
        locs = b"".join(varint(funcs[n]) for n in stack)
        vals = b"".join(u64(v) for v in values)
        body += field(2, field(1, locs) + field(2, vals))
    for name, i in funcs.items():
        line = varint(1 << 3) + varint(i) + varint(2 << 3) + varint(1)
        body += field(4, varint(1 << 3) + varint(i) + varint(3 << 3) + varint(0x1000 + 16 * i) +
                      field(4, line))
    for name, i in funcs.items():
        body += field(5, varint(1 << 3) + varint(i) + varint(2 << 3) + varint(s(name)) +
                      varint(3 << 3) + varint(s(name)) + varint(4 << 3) + varint(s("x.go")))
    if period_type:
        pt = varint(1 << 3) + varint(s(period_type[0])) + varint(2 << 3) + varint(s(period_type[1]))
    dflt = s(default_type) if default_type else 0
    for x in strings:
        body += field(6, x)
    if time_nanos:
        body += varint(9 << 3) + u64(time_nanos)
    if duration_nanos:
        body += varint(10 << 3) + u64(duration_nanos)
    if period_type:
        body += field(11, pt) + varint(12 << 3) + u64(period)
    if dflt:
        body += varint(14 << 3) + varint(dflt)
    return gzip.compress(body)


PPROF = tiny_pprof()
# Field 99 is unknown to pprof readers, who skip it.
BIGRAW = gzip.compress(gzip.decompress(PPROF) + field(99, bytes(24 << 20)))
LOG_LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_body(self, code, ctype, body):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        mode = self.path.strip("/").split("/")[0]
        with LOG_LOCK:
            with open(sys.argv[1] + ".log", "a") as f:
                f.write(f"{mode} {time.time():.3f}\n")
        try:
            if mode == "ok":
                self.send_body(200, "application/octet-stream", PPROF)
            elif mode == "slow":
                time.sleep(60)
                self.send_body(200, "application/octet-stream", PPROF)
            elif mode in ("404", "500"):
                self.send_body(int(mode), "text/plain", b"no such profile\n")
            elif mode == "html":
                self.send_body(200, "text/html", b"<html><body>login</body></html>")
            elif mode == "json":
                self.send_body(200, "application/json", b'{"error": "nope"}')
            elif mode == "truncated":
                self.send_body(200, "application/octet-stream", PPROF[: len(PPROF) // 2])
            elif mode == "bigraw":
                self.send_body(200, "application/octet-stream", BIGRAW)
            elif mode == "empty":
                self.send_body(200, "application/octet-stream", b"")
            elif mode == "oversized":
                self.send_body(200, "application/octet-stream", b"\x1f\x8b" + os.urandom(8 << 20))
            elif mode == "endless":
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"\x1f\x8b" + b"x" * 65534
                deadline = time.time() + 60
                while time.time() < deadline:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            else:
                self.send_body(404, "text/plain", b"unknown mode\n")
        except (BrokenPipeError, ConnectionResetError):
            pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
