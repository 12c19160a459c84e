# SPDX-License-Identifier: Apache-2.0
"""Remote-write transport options through proflet, against real peers:
  * HTTP/2 when offered: nghttpd (Debian's nghttp2-server) serves TLS with
    ALPN h2; its frame log must show proflet's push as an HTTP/2 POST to
    /push.v1.PusherService/Push with the Connect headers;
  * proxy-url: a small HTTP proxy of this test forwards to the receiver;
    every push goes through it and arrives at the receiver."""
import json
import os
import subprocess
import sys

from lib import *

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
        proxy = RecordingProxy()
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
    proxy-url: http://127.0.0.1:{proxy.port}
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
        proxied = [u for u, _ in proxy.records()]
        check(proxied, "nothing went through the proxy")
        check(all(u.startswith(f"http://127.0.0.1:{info['port']}/push.v1.PusherService/Push") for u in proxied),
              f"proxy saw {proxied[:3]}")
        check(stop(p) == 0, "exit status after SIGTERM")
        proxy.close()


run_test(main)
