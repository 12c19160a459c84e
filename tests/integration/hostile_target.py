# SPDX-License-Identifier: Apache-2.0
"""A pprof target on 127.0.0.1 that serves profile files in versions, for
proflet's memory-bound test.

Usage: hostile_target.py DIR PORT_FILE. GET /<case>[-<n>]/debug/pprof/<type>
answers DIR/<case>.<v>.pb.gz, where v counts the requests of that path from
1 and stays at the last version there is (so consecutive scrapes of one
target see versions 1, 2, 3...; `-<n>` makes more targets of one case).
Writes its port to PORT_FILE.
"""
import http.server
import os
import socketserver
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counts = {}
    lock = threading.Lock()
    root = "."

    def log_message(self, *a):
        pass

    def reply(self, code, body):
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        case = self.path.strip("/").split("/")[0].split("-")[0]
        with self.lock:
            v = self.counts.get(self.path, 0) + 1
            self.counts[self.path] = v
        # The tests write a few versions: looking from the 16th is enough.
        for version in range(min(v, 16), 0, -1):
            path = os.path.join(self.root, f"{case}.{version}.pb.gz")
            if os.path.exists(path):
                with open(path, "rb") as f:
                    return self.reply(200, f.read())
        self.reply(404, b"")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    Handler.root = sys.argv[1]
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, sys.argv[2])
    srv.serve_forever()


if __name__ == "__main__":
    main()
