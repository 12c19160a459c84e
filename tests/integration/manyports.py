# SPDX-License-Identifier: Apache-2.0
"""A pprof fixture listening on many 127.0.0.1 ports at once (asyncio), for
scale tests and benchmarks. Every GET on any port answers a small valid
gzip pprof (the same bytes as badtarget.py's "ok" mode) over keep-alive.

Usage: manyports.py COUNT OUT_FILE [BODY_DIR]
With BODY_DIR, a request for a path ending in NAME answers BODY_DIR/NAME
when that file exists (e.g. profile, allocs, goroutine, mutex, block).
When BODY_DIR holds a series NAME.1, NAME.2, ... instead, each port answers
the next one of the series on each request (cumulative snapshots, so every
scrape of that type brings a real delta), from the first again after the
last.
Writes "first_port control_port" to OUT_FILE once listening; the ports are
consecutive from first_port. GET /stats on the control port returns JSON
{port: [unix times of requests]}.
"""
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from badtarget import PPROF  # noqa: E402

BODY = PPROF
BODIES = {}   # name -> [body, ...]: one, or a series served in turn
HITS = {}
NEXT = {}     # (port, name) -> index of the next body of a series


async def serve(reader, writer, port):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if port is None:
                body = json.dumps(HITS).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                continue
            HITS.setdefault(port, []).append(time.time())
            path = head.split(b" ", 2)[1].split(b"?")[0]
            name = path.rsplit(b"/", 1)[-1]
            series = BODIES.get(name, [BODY])
            i = NEXT.get((port, name), 0)
            NEXT[(port, name)] = (i + 1) % len(series)
            body = series[i]
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % len(body))
            writer.write(body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main():
    count, out = int(sys.argv[1]), sys.argv[2]
    if len(sys.argv) > 3:
        for name in sorted(os.listdir(sys.argv[3])):
            base, _, n = name.rpartition(".")
            key = (base if n.isdigit() and base else name).encode()
            BODIES.setdefault(key, []).append((int(n) if n.isdigit() and base else 0,
                                               open(os.path.join(sys.argv[3], name), "rb").read()))
        for key in BODIES:
            BODIES[key] = [b for _, b in sorted(BODIES[key])]
    # Find a run of free consecutive ports.
    base = 20000 + (os.getpid() % 20000)
    servers = []
    while True:
        try:
            for i in range(count):
                p = base + i
                servers.append(await asyncio.start_server(lambda r, w, p=p: serve(r, w, p), "127.0.0.1", p, backlog=256))
            break
        except OSError:
            for s in servers:
                s.close()
            servers = []
            base = 20000 + (base + count + 7) % 25000
    ctl = await asyncio.start_server(lambda r, w: serve(r, w, None), "127.0.0.1", 0)
    cport = ctl.sockets[0].getsockname()[1]
    with open(out + ".tmp", "w") as f:
        f.write(f"{base} {cport}\n")
    os.rename(out + ".tmp", out)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
