# SPDX-License-Identifier: Apache-2.0
"""deploy/systemd: the unit passes `systemd-analyze verify`, its sandbox
scores at most 2.0 in `systemd-analyze security` (offline), it keeps the
hardening the docs promise, and the example config passes
`proflet --check-config` (and a broken copy of it does not)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import SRC, check, need_file, run_tests  # noqa: E402

UNIT = os.path.join(SRC, "deploy", "systemd", "proflet.service")
EXAMPLE = os.path.join(SRC, "deploy", "proflet.example.yaml")


def unit_copy(tmp, exe):
    """The unit with ExecStart pointing at a binary that exists here
    (verify checks that the command is executable)."""
    with open(UNIT) as f:
        text = f.read().replace("/usr/bin/proflet", exe)
    path = os.path.join(tmp, "proflet.service")
    with open(path, "w") as f:
        f.write(text)
    return path


def directives():
    out = {}
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                out.setdefault(k, []).append(v)
    return out


def test_unit_verifies():
    sa = need_file(shutil.which("systemd-analyze"), "systemd-analyze (Debian package systemd)")
    tmp = tempfile.mkdtemp()
    try:
        exe = os.environ.get("PROFLET") or "/bin/true"
        path = unit_copy(tmp, exe if os.path.exists(exe) else "/bin/true")
        p = subprocess.run([sa, "verify", path], capture_output=True, text=True, timeout=60, cwd=tmp)
        check(p.returncode == 0 and not p.stderr.strip(), f"systemd-analyze verify: rc={p.returncode} {p.stderr}")
        # The check works: a misspelt directive is reported.
        with open(path, "a") as f:
            f.write("\n[Service]\nProtectSystm=strict\n")
        p = subprocess.run([sa, "verify", path], capture_output=True, text=True, timeout=60, cwd=tmp)
        check("ProtectSystm" in p.stderr, f"verify reports unknown directives: {p.stderr}")
    finally:
        shutil.rmtree(tmp)


def test_unit_sandbox_exposure():
    sa = need_file(shutil.which("systemd-analyze"), "systemd-analyze")
    tmp = tempfile.mkdtemp()
    try:
        path = unit_copy(tmp, "/bin/true")
        p = subprocess.run([sa, "security", "--offline=true", "--no-pager", path],
                           capture_output=True, text=True, timeout=60, cwd=tmp)
        m = re.search(r"Overall exposure level for proflet.service: ([0-9.]+)", p.stdout + p.stderr)
        check(m, f"no exposure score: {p.stdout[-500:]} {p.stderr}")
        check(float(m.group(1)) <= 2.0, f"exposure {m.group(1)} > 2.0:\n{p.stdout}")
    finally:
        shutil.rmtree(tmp)


def test_unit_hardening():
    d = directives()
    want = {
        "User": "proflet", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ReadWritePaths": "/var/lib/proflet",
        "StateDirectory": "proflet", "ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes",
        "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes", "ProtectKernelTunables": "yes",
        "SystemCallArchitectures": "native", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
    }
    for k, v in want.items():
        check(d.get(k) == [v], f"{k}={v} (have {d.get(k)})")
    check("@system-service" in d.get("SystemCallFilter", []), "syscall filter")
    check(any(x.startswith("/usr/bin/proflet --config /etc/proflet/proflet.yaml") for x in d["ExecStart"]), "ExecStart")
    check(any("--check-config" in x for x in d.get("ExecStartPre", [])), "config checked before start")
    # Environment expansion is opt-in (as Grafana's servers): the unit opts
    # in where it runs and where it checks, so both read the same values.
    for key in ("ExecStart", "ExecStartPre"):
        check(all("--config.expand-env" in x.split() for x in d.get(key, [])), f"{key} expands the environment")
    with open(os.path.join(SRC, "deploy", "systemd", "proflet.sysusers")) as f:
        check(re.search(r"^u proflet ", f.read(), re.M), "sysusers entry for the proflet user")


def test_example_config_checks():
    exe = need_file(os.environ.get("PROFLET"), "the proflet binary (env PROFLET)")
    p = subprocess.run([exe, "--check-config", EXAMPLE, "--config.expand-env"], capture_output=True,
                       text=True, timeout=30,
                       env={"PATH": "/usr/bin:/bin"})
    check(p.returncode == 0, f"--check-config {EXAMPLE}: rc={p.returncode} {p.stdout} {p.stderr}")
    with open(EXAMPLE) as f:
        text = f.read()
    check("/var/lib/proflet/spool" in text and "remote-write" in text, "example has a spool and an endpoint")
    tmp = tempfile.mkdtemp()
    try:
        bad = os.path.join(tmp, "bad.yaml")
        with open(bad, "w") as f:
            f.write(text.replace("scrape-interval: 15s", "scrape-interval: fifteen"))
        p = subprocess.run([exe, "--check-config", bad], capture_output=True, text=True, timeout=30)
        check(p.returncode == 2, f"a broken copy must fail with 2, got {p.returncode}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    run_tests([test_unit_verifies, test_unit_sandbox_exposure, test_unit_hardening, test_example_config_checks])
