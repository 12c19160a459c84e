# SPDX-License-Identifier: Apache-2.0
"""The one helper module of proflet's Python test drivers (integration,
deploy, cluster, forward, k8s, relabel, pprof, benchmarks; the others add
this folder to sys.path). Importing it makes meson's SIGTERM unwind, so
cleanup runs.

Every test starts real processes on 127.0.0.1 only, waits on conditions with
bounded deadlines (never a bare sleep standing in for a condition), and
cleans up its children and temporary directories, even on failure.

Every proflet started through start_proflet() is watched: when it stops
(stop(), or the end of environment()), the longest stall of its event loop
must stay under LOOP_LAG_MAX, or the test fails, naming itself and the
stall. The stall counted is the part of a late loop iteration the loop
thread spent on the CPU (proflet_loop_busy_max_seconds, or the "proflet
stopped" log line): on a loaded machine a process can wait for a core
longer than that, which is not proflet's doing; proflet_loop_lag_max_seconds
(wall clock) is reported beside it.
"""
import base64
import contextlib
import fcntl
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def _terminated(signum, frame):
    # meson sends SIGTERM on a timeout: unwind so the cleanup code (finally
    # blocks, context managers) still stops the children and removes temp dirs.
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _terminated)

SRC = os.environ.get("PROFLET_SRC", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
PROFLET = os.environ.get("PROFLET", os.path.join(SRC, "build", "agent", "proflet"))
BUILD = os.environ.get("PROFLET_BUILD", os.path.dirname(os.path.dirname(PROFLET)))
GOENV = dict(os.environ, GO111MODULE="off", GOCACHE=os.environ.get("GOCACHE", "/tmp/proflet-gocache"))


class TestFailure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def wait_for(what, fn, timeout=30.0, interval=0.05):
    """Polls fn() until it returns a truthy value; fails after `timeout`, or
    at once when fn() itself fails the test (e.g. alive() of a dead child)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except TestFailure:
            raise
        except Exception as e:  # a server not up yet, a file half-written
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise TestFailure(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def hold_port(port=0):
    """Binds 127.0.0.1:port (0: any free port) without listening. While the
    socket is open, connecting to the port is refused, and the kernel hands
    the port to nobody else (bind(0) skips it, and so does a connection's
    source port). A server that sets SO_REUSEADDR (libuv, Go, Python's
    HTTPServer, nghttpx) can still bind and listen on it meanwhile. Returns
    the socket; closing it lets the port go."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        raise
    return s


_HELD_PORTS = []


def free_port():
    """A port for this test alone: held (see hold_port) until the process
    exits, so that no other test running beside it can take it, whether it
    is meant for a server of ours or as a port where nothing answers."""
    s = hold_port()
    _HELD_PORTS.append(s)
    return s.getsockname()[1]


def go_build(pkg_dir, out):
    """Builds a standard-library Go program (GO111MODULE=off)."""
    subprocess.run(["go", "build", "-o", out, "."], cwd=pkg_dir, env=GOENV, check=True)
    return out


def demoapp_binary(tmp):
    return go_build(os.path.join(SRC, "examples", "demoapp"), os.path.join(tmp, "demoapp"))


def _sanitized_build():
    """An ASan/UBSan build: meson's own record of the options, else the name."""
    try:
        with open(os.path.join(BUILD, "meson-info", "intro-buildoptions.json")) as f:
            for o in json.load(f):
                if o.get("name") == "b_sanitize":
                    return o.get("value") not in (None, "", "none")
    except (OSError, ValueError):
        pass
    return "asan" in os.path.basename(BUILD)


# The longest the event loop may stall in any test, in seconds: a stall
# delays every scrape timer, connection and request of the process at once.
# Sanitized builds run several times slower.
LOOP_LAG_MAX = float(os.environ.get("PROFLET_LOOP_LAG_MAX") or (0.5 if _sanitized_build() else 0.1))
_TEST_NAME = os.path.basename(sys.argv[0] or "test")


def _listen_port(config_text):
    m = re.search(r"listen[-_]address:\s*[\"']?(?:127\.0\.0\.1|localhost)?:(\d+)", config_text)
    return int(m.group(1)) if m else None


def loop_lag(proc, name="proflet_loop_busy_max_seconds"):
    """The longest loop stall of a running proflet so far, in seconds, from
    its /metrics (None when it cannot be read, e.g. behind TLS). The gauge is
    rendered before the rest, so this read does not count its own cost.
    `name` may also be proflet_loop_lag_max_seconds (wall clock)."""
    port = getattr(proc, "lag_port", None)
    if port is None or proc.poll() is not None:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            head = r.read(1 << 16).decode(errors="replace")
    except Exception:
        return None
    return metric_value(head, name)


def _logged_lag(proc, name="loop_busy_max_seconds"):
    """A stall figure of the "proflet stopped" line of an exited proflet."""
    try:
        with open(proc.log_path, errors="replace") as f:
            m = re.findall(r'msg="proflet stopped".*?' + name + r'=([0-9.]+)', f.read())
    except (OSError, AttributeError, TypeError):
        return None
    return float(m[-1]) if m else None


def _note_lag(proc, value, wall=None):
    if value is not None:
        proc.lag_seen = max(getattr(proc, "lag_seen", 0.0), value)
    if wall is not None:
        proc.lag_wall = max(getattr(proc, "lag_wall", 0.0), wall)


def _read_lags(proc):
    _note_lag(proc, loop_lag(proc), loop_lag(proc, "proflet_loop_lag_max_seconds"))


def _read_logged_lags(proc):
    _note_lag(proc, _logged_lag(proc), _logged_lag(proc, "loop_lag_max_seconds"))


def lag_failures(procs):
    """Messages for the watched proflets whose loop stalled past LOOP_LAG_MAX."""
    out = []
    for p in procs:
        lag = getattr(p, "lag_seen", None)
        if getattr(p, "lag_port", False) is not False and lag is not None and lag > LOOP_LAG_MAX:
            wall = getattr(p, "lag_wall", None)
            out.append(f"{_TEST_NAME}: proflet's event loop stalled {lag * 1000:.0f} ms on the CPU "
                       f"(limit {LOOP_LAG_MAX * 1000:.0f} ms; wall-clock lag "
                       f"{'?' if wall is None else f'{wall * 1000:.0f}'} ms)\n{tail(getattr(p, 'log_path', None), 15)}")
    return out


class Procs:
    """Owns child processes; whatever is left at the end is stopped. With
    `log`, a child writes stdout and stderr to that file and runs in a
    session of its own, and is stopped with its whole group: SIGTERM, then
    SIGKILL after 15 s. Others are killed at once."""

    def __init__(self):
        self.procs = []

    def start(self, args, log=None, **kw):
        if log is not None:
            kw.update(stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        kw.setdefault("stdout", subprocess.DEVNULL)
        p = subprocess.Popen(args, **kw)
        p._log = log
        self.procs.append(p)
        return p

    def close(self):
        """Stops every child; returns the loop-stall messages of the watched
        proflets (see lag_failures)."""
        for p in reversed(self.procs):
            if getattr(p, "lag_port", False) is not False and p.poll() is None:
                _read_lags(p)
                if getattr(p, "lag_seen", None) is None:
                    # No /metrics to read (TLS, no listener): its last log line says.
                    with contextlib.suppress(Exception):
                        p.send_signal(signal.SIGTERM)
                        p.wait(timeout=15)
                        _read_logged_lags(p)
            if getattr(p, "_log", None) is not None:
                stop_group(p)
            elif p.poll() is None:
                p.kill()
        for p in self.procs:
            with contextlib.suppress(Exception):
                p.wait(timeout=10)
        return lag_failures(self.procs)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        failures = self.close()
        if failures and exc_type is None:
            raise TestFailure("; ".join(failures))
        for f in failures:
            print(f"also: {f}", file=sys.stderr)


def stop_group(p, timeout=15):
    """SIGTERM to a child's process group, SIGKILL if it outlives `timeout`;
    its exit status."""
    if p.poll() is not None:
        return p.returncode
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGTERM)
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        return p.wait(5)


def tail(path, n=40):
    """The last `n` lines of a log file ("" if unreadable)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except (OSError, TypeError):
        return ""


def alive(p):
    """For wait_for conditions: a child that exited fails the wait at once."""
    if p.poll() is not None:
        raise TestFailure(f"process {p.args[0] if isinstance(p.args, list) else p.args} exited "
                          f"with {p.returncode}: {tail(getattr(p, '_log', ''), 30)}")
    return True


@contextlib.contextmanager
def environment():
    tmp = tempfile.mkdtemp(prefix="proflet-it-")
    procs = Procs()
    failures = []
    ok = False
    try:
        yield tmp, procs
        ok = True
    finally:
        failures = procs.close()
        shutil.rmtree(tmp, ignore_errors=True)
        for f in failures if not ok else ():
            print(f"also: {f}", file=sys.stderr)
    if failures:
        raise TestFailure("; ".join(failures))


def start_demoapp(tmp, procs, name="demoapp"):
    binary = os.path.join(tmp, "demoapp")
    if not os.path.exists(binary):
        demoapp_binary(tmp)
    port_file = os.path.join(tmp, name + ".port")
    procs.start([binary, "-addr", "127.0.0.1:0", "-port-file", port_file], stderr=subprocess.DEVNULL)
    port = wait_for("demoapp port", lambda: open(port_file).read().strip())
    return int(port)


def start_proflet(tmp, procs, config_text, name="proflet", extra=()):
    cfg = os.path.join(tmp, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(config_text)
    log = open(os.path.join(tmp, name + ".log"), "w")
    p = procs.start([PROFLET, "--config", cfg, *extra], stderr=log)
    p.config_path = cfg
    p.log_path = log.name
    p.lag_port = _listen_port(config_text)  # watched (see LOOP_LAG_MAX)
    return p


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def http_post(url, timeout=10):
    req = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_ready(port, timeout=20):
    return wait_for("proflet /-/ready", lambda: http_get(f"http://127.0.0.1:{port}/-/ready")[0] == 200, timeout)


def metrics(port):
    return http_get(f"http://127.0.0.1:{port}/metrics")[1].decode()


def metric_value(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    found = False
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, lbl = head.partition("{")
        if metric != name:
            continue
        ok = all(f'{k}="{v}"' in lbl for k, v in labels.items())
        if ok:
            total += float(value)
            found = True
    return total if found else None


def peak_rss(pid):
    """The peak resident set (VmHWM) of a process, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise TestFailure(f"no VmHWM in /proc/{pid}/status")


def unread_request(port, data):
    """A connection that sends `data` and will never read: a 4 KiB receive
    buffer, so the server cannot push much into the kernel either."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    s.sendall(data)
    return s


def late_ticks(text):
    """(scrape ticks that started more than 100 ms late, all ticks) from /metrics text."""
    total = metric_value(text, "proflet_scrape_start_lateness_seconds_count") or 0
    on_time = metric_value(text, "proflet_scrape_start_lateness_seconds_bucket", le="0.1") or 0
    return total - on_time, total


def stop(proc, timeout=20):
    """SIGTERM, and the exit status (proflet exits 0 only if uv_loop_close succeeded).
    A watched proflet's loop stalls are noted on the way (checked at the end
    of environment())."""
    watched = getattr(proc, "lag_port", False) is not False
    # Its log line, not /metrics: the whole of /metrics is built on the loop,
    # and with thousands of jobs that read would be the stall it reports.
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=timeout)
    if watched:
        _read_logged_lags(proc)
    return code


def sink_profiles(root):
    """[(path, labels_dict)] for every profile in a directory sink."""
    out = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".pb.gz"):
                p = os.path.join(dirpath, f)
                meta = p[: -len(".pb.gz")] + ".json"
                if os.path.exists(meta):
                    with open(meta) as m:
                        out.append((p, json.load(m)))
    return out


def labels_of(meta):
    """The labels of a sink .json, whatever its exact layout."""
    if isinstance(meta, dict) and "labels" in meta:
        l = meta["labels"]
        if isinstance(l, list):
            return {x["name"]: x["value"] for x in l}
        return l
    return meta


def pprof_raw(path):
    """Parses a profile with `go tool pprof -raw`; raises on failure."""
    r = subprocess.run(["go", "tool", "pprof", "-raw", path], env=GOENV, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise TestFailure(f"go tool pprof -raw {path} failed: {r.stderr.strip()}")
    return r.stdout


def run_test(fn):
    try:
        fn()
    except TestFailure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
    print("ok")


def sanitized():
    """True when proflet was built with AddressSanitizer (its memory use differs)."""
    r = subprocess.run(["ldd", PROFLET], capture_output=True, text=True)
    return "libasan" in r.stdout or "asan" in BUILD


def make_ca(tmp):
    ca_key, ca_crt = os.path.join(tmp, "ca.key"), os.path.join(tmp, "ca.crt")
    key, csr, crt = os.path.join(tmp, "srv.key"), os.path.join(tmp, "srv.csr"), os.path.join(tmp, "srv.crt")
    ext = os.path.join(tmp, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:pyroscope.test,IP:127.0.0.1\n")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_crt,
        "-days", "2", "-subj", "/CN=proflet test CA")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=pyroscope.test")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
        "-days", "2", "-extfile", ext)
    return ca_crt, crt, key


class RecordingProxy:
    """An HTTP relay on 127.0.0.1 that records what passes through it.

    With `upstream` (a port) it is a reverse proxy: requests go to
    127.0.0.1:upstream. Without, it is a forward proxy: clients send it an
    absolute URI (proxy-url). `seen` lists (request target, sha256 of the
    response body) for every request relayed."""

    def __init__(self, upstream=None):
        import hashlib
        import http.server
        import socketserver
        import threading

        self.seen = []
        self.lock = threading.Lock()
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def relay(self, method):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
                url = self.path if upstream is None else f"http://127.0.0.1:{upstream}{self.path}"
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() not in ("host", "proxy-connection", "connection", "content-length")}
                req = urllib.request.Request(url, data=body, headers=hdrs, method=method)
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        code, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
                except urllib.error.HTTPError as e:
                    code, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
                with rec.lock:
                    rec.seen.append((self.path, hashlib.sha256(data).hexdigest()))
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.relay("GET")

            def do_POST(self):
                self.relay("POST")

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.srv = S(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def records(self):
        with self.lock:
            return list(self.seen)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


# Debian's chromium, headless, reaching nothing but loopback: every other
# address goes to a proxy where nothing listens, and nothing runs in the
# background (updates, safe browsing, first-run pages).
CHROMIUM = ["chromium", "--headless", "--disable-gpu", "--no-sandbox",
            "--proxy-server=http://127.0.0.1:9", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--hide-scrollbars",
            "--mute-audio", "--disable-extensions", "--disable-default-apps", "--disable-sync"]


class Browser:
    """Chromium driven over the DevTools protocol on a pipe
    (--remote-debugging-pipe: file descriptors 3 and 4, JSON messages ended
    by NUL), so no port is opened for it. One page; every navigation
    records the console errors and uncaught exceptions of the page and the
    URLs it requested, so a test can check there were none beyond the page
    itself. Use as a context manager, or close()."""

    def __init__(self, tmp, width=1280, height=900):
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
        cmd_r, cmd_w = os.pipe()
        out_r, out_w = os.pipe()
        # Above 9, so that neither is already 3 or 4 in the shell below.
        for name in ("cmd_r", "out_w"):
            fd = locals()[name]
            high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
            os.close(fd)
            if name == "cmd_r":
                cmd_r = high
            else:
                out_w = high
        # The browser wants the pipes as fds 3 and 4: bash puts them there
        # (dash takes no fd above 9).
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{cmd_r} 4>&{out_w} {cmd_r}<&- {out_w}>&-', "bash", *CHROMIUM,
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            pass_fds=(cmd_r, out_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(cmd_r)
        os.close(out_w)
        self.w = os.fdopen(cmd_w, "wb", buffering=0)
        self.r = os.fdopen(out_r, "rb", buffering=0)
        self.next_id = 0
        self.replies = {}
        self.events = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.session = None
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True, session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")
        self.size(width, height)

    def _read(self):
        buf = b""
        while True:
            chunk = self.r.read(1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                m = json.loads(msg)
                with self.cond:
                    if "id" in m:
                        self.replies[m["id"]] = m
                    else:
                        self.events.append(m)
                    self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def call(self, method, timeout=60, session=True, **params):
        """Sends a command (to the page's session unless `session` is
        False) and returns its result; fails the test on an error."""
        with self.cond:
            self.next_id += 1
            mid = self.next_id
        msg = {"id": mid, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        self.w.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self.cond:
            while mid not in self.replies:
                left = deadline - time.monotonic()
                if left <= 0 or getattr(self, "closed", False):
                    raise TestFailure(f"chromium did not answer {method} within {timeout}s")
                self.cond.wait(left)
            reply = self.replies.pop(mid)
        if "error" in reply:
            raise TestFailure(f"chromium: {method}: {reply['error']}")
        return reply.get("result", {})

    def size(self, width, height):
        """The page's viewport, as a window of that size."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=width < 600)

    def open(self, url, timeout=60):
        """Loads `url` and waits for its load event; then the console and
        the requests recorded are this page's."""
        with self.cond:
            self.events = []
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        with self.cond:
            while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TestFailure(f"{url} did not load within {timeout}s")
                self.cond.wait(left)
        return self

    def eval(self, expr):
        """The value of a JavaScript expression in the page (promises awaited)."""
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise TestFailure(f"javascript failed: {expr[:200]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def dom(self):
        """The page's HTML as the browser holds it (scripts run)."""
        return self.eval("document.documentElement.outerHTML")

    def console(self):
        """Console errors and warnings, uncaught exceptions and error log
        entries since the page was opened; not the 404 of the browser's own
        /favicon.ico, which it asks for a plain text page and whose answer
        can land after the next page is opened (as requests() leaves it
        out)."""
        out = []
        with self.cond:
            events = list(self.events)
        for e in events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif (m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning")
                  and not p["entry"].get("url", "").endswith("/favicon.ico")):
                out.append(p["entry"].get("text", ""))
        return out

    def requests(self):
        """Every URL the page asked for since it was opened (not the
        browser's own /favicon.ico, which it asks for a plain text page)."""
        with self.cond:
            return [e["params"]["request"]["url"] for e in self.events
                    if e.get("method") == "Network.requestWillBeSent" and
                    not e["params"]["request"]["url"].endswith("/favicon.ico")]

    def click(self, selector_expr):
        """A real mouse click in the middle of the element the expression
        names (scrolled into view first)."""
        box = self.eval(f"""(() => {{ const e = {selector_expr}; e.scrollIntoView({{block: 'center'}});
            const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def follow(self, selector_expr, timeout=60):
        """Clicks a link and waits for the page it opens to load; then the
        console and the requests recorded are that page's."""
        with self.cond:
            self.events = []
        self.click(selector_expr)
        deadline = time.monotonic() + timeout
        with self.cond:
            while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TestFailure(f"the link did not load a page within {timeout}s")
                self.cond.wait(left)
        return self

    def key(self, key, code=None):
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code or key,
                      windowsVirtualKeyCode=27 if key == "Escape" else 0)

    def type(self, selector_expr, text):
        """Focuses the element and types `text` into it (input events fire)."""
        self.eval(f"{selector_expr}.focus()")
        self.call("Input.insertText", text=text)

    def screenshot(self, path, width, height):
        """A PNG of the page at a window of width x height."""
        self.size(width, height)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        with contextlib.suppress(Exception):
            self.call("Browser.close", session=False, timeout=10)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        with contextlib.suppress(Exception):
            self.w.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
