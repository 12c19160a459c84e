# SPDX-License-Identifier: Apache-2.0
"""Helpers of tests/deploy on top of the shared ones (tests/integration/lib):
a tiny runner (each check is a named function; the run prints "N passed,
N failed" and exits non-zero on any failure), chart rendering through
tools/helm-render, and what the image and package tests share: the
project's version, a copy of the source tree as a clean checkout has it,
and fresh Debian roots made by mmdebstrap from the apt sources this
machine uses."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from lib import (Procs, TestFailure, alive, check, free_port, http_get, metric_value,  # noqa: E402,F401
                 sink_profiles, start_demoapp, stop_group as stop, tail, wait_for)

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


# The image and package tests: the project as a clean checkout has it, and
# Debian roots made from this machine's apt sources.

def project_version():
    with open(os.path.join(SRC, "meson.build")) as f:
        m = re.search(r"project\(\s*'proflet'.*?version\s*:\s*'([^']+)'", f.read(), re.S)
    check(m, "no version in meson.build's project()")
    return m.group(1)


def project_license():
    with open(os.path.join(SRC, "meson.build")) as f:
        return f.read().split("license : '", 1)[1].split("'", 1)[0]


def work_dir(prefix):
    """A scratch directory in the test's build directory (DEPLOY_TMP; the
    system's temporary directory without it), removed by the caller."""
    base = os.environ.get("DEPLOY_TMP") or None
    if base:
        os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def source_files():
    """The files of the source tree a checkout has: what git tracks plus
    untracked files it does not ignore (no build trees, no .git); without
    git, everything outside build*/, dot folders and proflet-data/."""
    p = subprocess.run(["git", "-C", SRC, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, timeout=60)
    if p.returncode == 0:
        names = [n for n in p.stdout.decode().split("\0") if n]
        return sorted(n for n in set(names) if os.path.lexists(os.path.join(SRC, n)))
    out = []
    for root, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs if not d.startswith(("build", ".")) and d != "proflet-data"]
        out += [os.path.relpath(os.path.join(root, f), SRC) for f in files]
    return sorted(out)


def copy_source_tree(dest):
    """Copies the checkout's files (source_files) into dest, which must not
    exist; returns dest."""
    os.makedirs(dest)
    listing = "\0".join(source_files()).encode() + b"\0"
    pack = subprocess.Popen(["tar", "-C", SRC, "--null", "-T", "-", "-cf", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    unpack = subprocess.Popen(["tar", "-C", dest, "-xf", "-"], stdin=pack.stdout)
    pack.stdout.close()
    pack.stdin.write(listing)
    pack.stdin.close()
    check(unpack.wait(120) == 0 and pack.wait(120) == 0, "copying the source tree failed")
    return dest


def host_codename():
    with open("/etc/os-release") as f:
        m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", f.read(), re.M)
    check(m, "no VERSION_CODENAME in /etc/os-release")
    return m.group(1)


def _deb822_stanzas(text):
    for block in re.split(r"\n\s*\n", text):
        fields, key = {}, None
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0] in " \t" and key:
                fields[key] += "\n" + line
                continue
            key, _, value = line.partition(":")
            key = key.strip()
            fields[key] = value.strip()
        if fields:
            yield fields


def apt_sources(dest_dir):
    """Writes the Debian sources this machine's apt uses for its own release
    (the entries of /etc/apt/sources.list and sources.list.d whose suite is
    the host's codename or one of its -updates/-security suites, signed-by
    keys kept) as one deb822 file in dest_dir; returns its path."""
    codename = host_codename()
    suite_ok = re.compile(rf"^{codename}(-[a-z-]+)?(/updates)?$")
    stanzas = []
    files = (["/etc/apt/sources.list"] if os.path.exists("/etc/apt/sources.list") else []) + \
        sorted(glob.glob("/etc/apt/sources.list.d/*.list") + glob.glob("/etc/apt/sources.list.d/*.sources"))
    for path in files:
        with open(path) as f:
            text = f.read()
        if path.endswith(".sources"):
            for st in _deb822_stanzas(text):
                if st.get("Enabled", "yes").lower() == "no" or "deb" not in st.get("Types", "").split():
                    continue
                suites = [x for x in st.get("Suites", "").split() if suite_ok.match(x)]
                if suites:
                    st = dict(st, Types="deb", Suites=" ".join(suites))
                    stanzas.append(st)
            continue
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            m = re.match(r"^deb\s+(?:\[([^]]*)\]\s+)?(\S+)\s+(\S+)\s+(.+)$", line)
            if not m or not suite_ok.match(m.group(3)):
                continue
            st = {"Types": "deb", "URIs": m.group(2), "Suites": m.group(3), "Components": m.group(4)}
            for opt in (m.group(1) or "").split():
                k, _, v = opt.partition("=")
                if k == "signed-by":
                    st["Signed-By"] = v
                elif k == "arch":
                    st["Architectures"] = v.replace(",", " ")
            stanzas.append(st)
    check(stanzas, f"no apt source for {codename} in /etc/apt/sources.list*")
    path = os.path.join(dest_dir, "host.sources")
    with open(path, "w") as f:
        f.write("\n\n".join("\n".join(f"{k}: {v}" for k, v in st.items()) for st in stanzas) + "\n")
    return path


def apt_options():
    """This machine's apt settings that decide whether its mirror can be
    used at all (proxies, Release file date checks), as --aptopt values."""
    p = subprocess.run(["apt-config", "dump"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"apt-config dump: {p.stderr}")
    keep = re.compile(r"^Acquire::(Check-Valid-Until|Check-Date|(https?|ftp)::Proxy(::\S+)?) ")
    return [line.rstrip(";") for line in p.stdout.splitlines() if keep.match(line)]


def mmdebstrap_command(target, include, work, variant="apt", dpkgopts=()):
    """The command (and its environment: mmdebstrap's temporary root goes
    in work) that makes a Debian root of the host's release into
    target ("-" for a tarball on stdout) with the packages in include (names
    or paths of .deb files), from the host's apt sources; dpkgopts go to
    dpkg (path-exclude=...)."""
    mm = need_file(shutil.which("mmdebstrap"), "mmdebstrap (scripts/install-deps.sh --tests installs it)")
    # In a mount namespace of its own: whatever it mounts in the root
    # (/proc, /dev, the .deb files) goes away with it, even on a failure.
    cmd = ["unshare", "--mount", "--propagation", "private", mm, "--quiet", f"--variant={variant}", "--mode=root"]
    if any(p.startswith("/") for p in include):
        # apt runs dpkg inside the root: the .deb files must be seen there.
        cmd.append("--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount")
    cmd += [f"--aptopt={o}" for o in apt_options()]
    cmd += [f"--dpkgopt={o}" for o in dpkgopts]
    if include:
        cmd.append("--include=" + ",".join(include))
    return cmd + [host_codename(), target, apt_sources(work)], dict(os.environ, TMPDIR=work)
