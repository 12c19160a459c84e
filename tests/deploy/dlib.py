# SPDX-License-Identifier: Apache-2.0
"""Helpers of tests/deploy on top of the shared ones (tests/integration/lib):
a tiny runner (each check is a named function; the run prints "N passed,
N failed" and exits non-zero on any failure) and chart rendering through
tools/helm-render."""
import os
import subprocess
import sys
import time
import traceback

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lib import (Procs, TestFailure, alive, check, free_port, http_get,  # noqa: E402,F401
                 stop_group as stop, tail, wait_for)

SRC = os.environ.get("PROFLET_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(SRC, "helm", "proflet")
Failure = TestFailure


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


