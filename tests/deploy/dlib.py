"""Shared helpers for tests/deploy: a tiny runner (each check is a named
function; the run prints "N passed, N failed" and exits non-zero on any
failure), process handling on 127.0.0.1 with bounded waits, and chart
rendering through tools/helm-render."""
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
import urllib.request

import yaml


def _terminated(signum, frame):
    # meson sends SIGTERM on a timeout: unwind so the cleanup code (finally
    # blocks, context managers) still stops the children and removes temp dirs.
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _terminated)

SRC = os.environ.get("PROFLET_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(SRC, "helm", "proflet")


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def need_file(path, what):
    """A missing prerequisite is a failure, never a skip."""
    if not path or not os.path.exists(path):
        raise Failure(f"{what} is missing ({path or 'not configured'}); it must be built first")
    return path


def run_tests(tests):
    passed = failed = 0
    only = sys.argv[1:] and [a for a in sys.argv[1:] if not a.startswith("-")]
    for t in tests:
        if only and t.__name__ not in only:
            continue
        t0 = time.monotonic()
        try:
            t()
        except Exception as e:  # report every failure, keep going
            failed += 1
            print(f"FAIL {t.__name__} ({time.monotonic() - t0:.1f}s): {e}")
            if not isinstance(e, Failure):
                traceback.print_exc()
        else:
            passed += 1
            print(f"ok   {t.__name__} ({time.monotonic() - t0:.1f}s)")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


def helm_render():
    return need_file(os.environ.get("HELM_RENDER"), "tools/helm-render (env HELM_RENDER)")


def render(*args, name="proflet", namespace="profiling", expect_fail=False, notes=False):
    cmd = [helm_render(), "--name", name, "--namespace", namespace]
    if notes:
        cmd.append("--notes")
    cmd += list(args) + [CHART]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if expect_fail:
        check(p.returncode != 0, f"render {args} should have failed")
        return p.stderr
    check(p.returncode == 0, f"render {args} failed: {p.stderr}")
    if notes:
        return p.stdout
    return [d for d in yaml.safe_load_all(p.stdout) if d is not None]


def find(docs, kind, name=None):
    out = [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    return out


def one(docs, kind):
    found = find(docs, kind)
    check(len(found) == 1, f"want exactly one {kind}, got {len(found)}")
    return found[0]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, fn, timeout=30.0, interval=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Failure:
            raise
        except Exception as e:
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise Failure(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def alive(p):
    """For wait_for conditions: a child that exited fails the wait at once."""
    if p.poll() is not None:
        raise Failure(f"process {p.args[0] if isinstance(p.args, list) else p.args} exited with {p.returncode}: "
                      f"{tail(getattr(p, '_log', ''), 30)}")
    return True


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


class Procs:
    """Children started by a test; all stopped (TERM, then KILL) at the end."""

    def __init__(self):
        self.procs = []

    def start(self, cmd, log, **kw):
        f = open(log, "wb")
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, **kw)
        p._log = log
        self.procs.append(p)
        return p

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            stop(p)


def stop(p, timeout=15):
    if p.poll() is not None:
        return p.returncode
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return p.wait(5)


def tail(path, n=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""
