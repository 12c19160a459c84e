"""Remote-write transport options through proflet, against real peers:
  * HTTP/2 when offered: nghttpd (Debian's nghttp2-server) serves TLS with
    ALPN h2; its frame log must show proflet's push as an HTTP/2 POST to
    /push.v1.PusherService/Push with the Connect headers;
  * proxy-url: a small HTTP proxy of this test forwards to the receiver;
    every push goes through it and arrives at the receiver."""
import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
import urllib.request

from lib import *

PROXIED = []


def start_proxy():
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            PROXIED.append(self.path)  # absolute URI: the client used us as a proxy
            hdrs = {k: v for k, v in self.headers.items()
                    if k.lower() not in ("host", "proxy-connection", "connection", "content-length")}
            req = urllib.request.Request(self.path, data=body, headers=hdrs, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    code, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
            except urllib.error.HTTPError as e:
                code, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    srv = S(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main():
    with environment() as (tmp, procs):
        ca, crt, key = make_ca(tmp)
        port = start_demoapp(tmp, procs)
        h2port = free_port()
        docs = os.path.join(tmp, "htdocs")
        os.makedirs(docs)
        h2log = open(os.path.join(tmp, "nghttpd.log"), "w")
        procs.start(["nghttpd", "-v", "-d", docs, str(h2port), key, crt], stdout=h2log, stderr=subprocess.STDOUT)
        rx = procs.start([sys.executable, os.path.join(SRC, "tests", "receiver", "receiver.py")],
                         stdout=subprocess.PIPE, text=True)
        info = json.loads(rx.stdout.readline())
        proxy = start_proxy()
        wait_for("nghttpd", lambda: subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{h2port}"]).returncode == 0)
        sport = free_port()
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: transports
    scrape-interval: 1s
    enabled-profiles: [goroutine]
    static-configs:
      - application: transports
        targets: [127.0.0.1:{port}]
remote-write:
  - url: https://127.0.0.1:{h2port}
    name: h2
    max-retries: 1
    tls-config:
      ca-file: {ca}
      server-name: pyroscope.test
  - url: http://127.0.0.1:{info['port']}
    name: proxied
    proxy-url: http://127.0.0.1:{proxy.server_address[1]}
    batch:
      max-wait: 100ms
""")
        wait_ready(sport)
        log_path = h2log.name

        def h2_push_seen():
            text = open(log_path).read()
            return ":path: /push.v1.PusherService/Push" in text and ":method: POST" in text and text

        text = wait_for("an HTTP/2 push at nghttpd", h2_push_seen, timeout=30)
        check("content-type: application/proto" in text, "the h2 push lacks its content type")
        check("connect-protocol-version: 1" in text, "the h2 push lacks Connect-Protocol-Version")

        def accepted():
            return json.loads(http_get(f"http://127.0.0.1:{info['control']}/accepted")[1])["profiles"]

        wait_for("profiles through the proxy", lambda: len(accepted()) >= 3, timeout=30)
        check(PROXIED and all(u.startswith(f"http://127.0.0.1:{info['port']}/push.v1.PusherService/Push")
                              for u in PROXIED), f"proxy saw {PROXIED[:3]}")
        check(len(PROXIED) >= 1, "nothing went through the proxy")
        check(stop(p) == 0, "exit status after SIGTERM")
        proxy.shutdown()


run_test(main)
