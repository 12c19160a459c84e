# SPDX-License-Identifier: Apache-2.0
"""The Debian package, built with Debian's tools and installed into a fresh
Debian root.

1. deploy/package/build.sh builds proflet_VERSION_ARCH.deb from a copy of
   the checkout (dpkg-buildpackage, debhelper's meson build system); its
   Build-Depends cover what `scripts/install-deps.sh --build` installs.
2. Its files: the binary, the unit and the sysusers file exactly as in
   deploy/systemd/, /etc/proflet/proflet.yaml (a conffile) exactly as
   deploy/proflet.example.yaml, a man page made from --help.
3. lintian: every tag it reports (pedantic and info included) is one that
   docs/deploy.md lists and explains.
4. A fresh root of this machine's Debian release (mmdebstrap, this
   machine's apt sources) with the package and systemd installed by apt, so
   the package's Depends bring what it links: the proflet user exists, the
   configuration is root:proflet 0750/0640, `proflet --check-config` passes
   there as that user, and `systemd-analyze verify` accepts the installed
   unit there.
5. In that root, as the unit runs it (its ExecStartPre and ExecStart, as its
   User=, with its EnvironmentFile=, the state directory systemd would
   make): it scrapes the demo Go service into a directory sink, answers
   /-/ready, reloads on the unit's ExecReload=, and exits 0 on SIGTERM.
6. Upgrades keep an edited configuration: to a version that ships the same
   example (no question asked) and to one whose example changed (dpkg's
   --force-confold, as unattended upgrades run); owner and mode stay.
7. Purge removes the configuration and the state directory.
"""
import gzip
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import (SRC, Procs, alive, check, free_port, http_get, metric_value, mmdebstrap_command,  # noqa: E402
                  need_file, project_version, run_tests, sink_profiles, start_demoapp, tail, wait_for, work_dir)

STATE = {}
UNIT = "/lib/systemd/system/proflet.service"


def _arch():
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_build_depends_cover_the_build_packages():
    """What scripts/install-deps.sh --build installs is what the package
    builds with: a library added there and not here fails the package build
    on a clean machine."""
    p = subprocess.run([os.path.join(SRC, "scripts", "install-deps.sh"), "--build", "--list"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"install-deps.sh --build --list: {p.stderr}")
    with open(os.path.join(SRC, "deploy", "package", "debian", "control")) as f:
        m = re.search(r"^Build-Depends:(.*?)^\S", f.read(), re.S | re.M)
    check(m, "no Build-Depends in deploy/package/debian/control")
    declared = {x.strip().split()[0] for x in m.group(1).split(",") if x.strip()}
    # Implied by Debian (build-essential), for the image only, for the test suites only.
    not_needed = {"build-essential", "ca-certificates", "zlib1g-dev"}
    missing = set(p.stdout.split()) - declared - not_needed
    check(not missing, f"Build-Depends lacks {sorted(missing)}")


def test_build_package():
    for tool in ("dpkg-buildpackage", "dh", "help2man", "lintian"):
        need_file(shutil.which(tool), f"{tool} (scripts/install-deps.sh --tests installs it)")
    tmp = STATE["tmp"] = work_dir("proflet-package-")
    os.chmod(tmp, 0o755)
    out = os.path.join(tmp, "out")
    log = os.path.join(tmp, "build.log")
    t0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.run([os.path.join(SRC, "deploy", "package", "build.sh"), out], stdout=f,
                           stderr=subprocess.STDOUT, timeout=900)
    print(f"package built in {time.monotonic() - t0:.0f}s")
    check(p.returncode == 0, f"deploy/package/build.sh failed ({p.returncode}):\n{tail(log, 60)}")
    deb = os.path.join(out, f"proflet_{project_version()}_{_arch()}.deb")
    check(os.path.isfile(deb), f"no {os.path.basename(deb)} in {sorted(os.listdir(out))}")
    STATE["deb"] = deb
    STATE["changes"] = deb[:-len(".deb")] + ".changes"


def _deb():
    check("deb" in STATE, "the package was not built (see the first failure)")
    return STATE["deb"]


def _member(deb, path):
    p = subprocess.run(f"dpkg-deb --fsys-tarfile '{deb}' | tar -xOf - '.{path}'", shell=True, capture_output=True,
                       timeout=60)
    check(p.returncode == 0, f"{path} is not in the package: {p.stderr.decode()}")
    return p.stdout


def test_package_files():
    deb = _deb()
    p = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True)
    files = {l.split()[-1].lstrip(".") for l in p.stdout.splitlines()}
    for want in ("/usr/bin/proflet", UNIT, "/usr/lib/sysusers.d/proflet.conf", "/etc/proflet/proflet.yaml",
                 "/usr/share/man/man1/proflet.1.gz", "/usr/share/doc/proflet/deploy.md",
                 "/usr/share/doc/proflet/copyright"):
        check(want in files, f"{want} in the package")
    for path, src in ((UNIT, "deploy/systemd/proflet.service"),
                      ("/usr/lib/sysusers.d/proflet.conf", "deploy/systemd/proflet.sysusers"),
                      ("/etc/proflet/proflet.yaml", "deploy/proflet.example.yaml")):
        with open(os.path.join(SRC, src), "rb") as f:
            check(_member(deb, path) == f.read(), f"{path} differs from {src}")
    version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True).stdout.strip()
    check(version == project_version(), f"package version {version}, meson.build says {project_version()}")
    p = subprocess.run(f"dpkg-deb --ctrl-tarfile '{deb}' | tar -xOf - ./conffiles", shell=True,
                       capture_output=True, text=True)
    check(p.stdout.split() == ["/etc/proflet/proflet.yaml"], f"conffiles: {p.stdout!r}")
    man = gzip.decompress(_member(deb, "/usr/share/man/man1/proflet.1.gz")).decode()
    check(man.startswith('.\\" DO NOT MODIFY THIS FILE!  It was generated by help2man'), "man page by help2man")
    for want in (r"\-\-check\-config", r"enable\-lifecycle", f"proflet {project_version()}"):
        check(want in man, f"the man page has {want}")


def _documented_tags():
    """The tags of the list that follows 'lintian reports these tags' in
    docs/deploy.md."""
    with open(os.path.join(SRC, "docs", "deploy.md")) as f:
        text = f.read()
    at = text.find("lintian reports these tags")
    check(at >= 0, "docs/deploy.md explains the lintian tags ('lintian reports these tags', then a list)")
    tags = set()
    for line in text[at:].splitlines()[1:]:
        if line.startswith("- `"):
            tags.add(line[3:].split("`", 1)[0])
        elif line.strip() and not line.startswith("  "):
            break
    return tags


def test_lintian():
    _deb()
    p = subprocess.run(["lintian", "--fail-on", "none", "--display-info", "--pedantic", "--tag-display-limit", "0",
                        STATE["changes"]], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"lintian failed ({p.returncode}): {p.stderr[-2000:]}")
    tags = set()
    for line in p.stdout.splitlines():
        m = re.match(r"^([EWIPX]): proflet[^:]*: (\S+)", line)
        if m:
            tags.add(m.group(2))
    documented = _documented_tags()
    check(tags <= documented, f"lintian tags not explained in docs/deploy.md: {sorted(tags - documented)}\n{p.stdout}")
    check(documented <= tags, f"docs/deploy.md explains tags lintian no longer reports: {sorted(documented - tags)}")


def _root():
    check("root" in STATE, "no Debian root with the package (see the first failure)")
    return STATE["root"]


def _in_root(*cmd, user=None, timeout=60, env=None):
    """Runs cmd chrooted into the root, with /proc and /dev bound in a
    mount namespace of its own; as `user` (a name in the root) if given."""
    root = _root()
    spec = ""
    if user:
        pw = _passwd(user)
        spec = f"--userspec={pw[2]}:{pw[3]} --groups={pw[3]} "
    script = (f'mount --bind /proc "{root}/proc" && mount --rbind /dev "{root}/dev" && '
              f'exec chroot {spec}"{root}" "$@"')
    args = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *cmd]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                          env=env or {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})


def _passwd(user):
    with open(os.path.join(_root(), "etc", "passwd")) as f:
        for line in f:
            fields = line.rstrip("\n").split(":")
            if fields[0] == user:
                return fields
    raise AssertionError(f"no user {user} in the root's /etc/passwd")


def test_install_into_a_fresh_debian_root():
    deb = _deb()
    tmp = STATE["tmp"]
    root = os.path.join(tmp, "root")
    log = os.path.join(tmp, "mmdebstrap.log")
    t0 = time.monotonic()
    cmd, env = mmdebstrap_command(root, ["systemd", deb], tmp)
    with open(log, "w") as f:
        p = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=900)
    print(f"root made in {time.monotonic() - t0:.0f}s")
    check(p.returncode == 0, f"mmdebstrap failed ({p.returncode}):\n{tail(log, 40)}")
    STATE["root"] = root
    pw = _passwd("proflet")
    check(pw[5] == "/var/lib/proflet" and pw[6] == "/usr/sbin/nologin", f"the proflet user: {pw}")
    for path, mode in (("etc/proflet", 0o750), ("etc/proflet/proflet.yaml", 0o640)):
        st = os.stat(os.path.join(root, path))
        check(st.st_uid == 0 and st.st_gid == int(pw[3]) and st.st_mode & 0o7777 == mode,
              f"/{path}: {st.st_uid}:{st.st_gid} {oct(st.st_mode & 0o7777)}, want root:proflet {oct(mode)}")
    p = _in_root("proflet", "--check-config", "/etc/proflet/proflet.yaml", "--config.expand-env", user="proflet")
    check(p.returncode == 0, f"proflet --check-config in the root as proflet: rc={p.returncode} {p.stdout}{p.stderr}")
    p = _in_root("systemd-analyze", "verify", UNIT)
    check(p.returncode == 0 and not p.stderr.strip(), f"systemd-analyze verify {UNIT}: rc={p.returncode} {p.stderr}")
    p = _in_root("dpkg-query", "-W", "-f", "${Conffiles}", "proflet")
    check("/etc/proflet/proflet.yaml" in p.stdout, f"registered conffiles: {p.stdout}")


def _unit_lines(key):
    with open(os.path.join(_root(), UNIT.lstrip("/"))) as f:
        return [l.split("=", 1)[1].strip() for l in f if l.startswith(key + "=")]


def test_runs_as_the_unit_runs_it():
    root, tmp = _root(), STATE["tmp"]
    user = _unit_lines("User")
    check(user == ["proflet"], f"User= {user}")
    pw = _passwd("proflet")
    state = os.path.join(root, "var/lib/proflet")  # StateDirectory=proflet, StateDirectoryMode=0750
    os.makedirs(state, mode=0o750, exist_ok=True)
    os.chown(state, int(pw[2]), int(pw[3]))
    with Procs() as procs:
        demo = start_demoapp(tmp, procs)
        status = free_port()
        env_file = _unit_lines("EnvironmentFile")
        check(env_file == ["-/etc/default/proflet"], f"EnvironmentFile= {env_file}")
        settings = {"PROFLET_TARGET": f"127.0.0.1:{demo}", "PROFLET_LISTEN_ADDRESS": f"127.0.0.1:{status}",
                    "PYROSCOPE_URL": "file:///var/lib/proflet/profiles", "PROFLET_APPLICATION": "from-the-package"}
        with open(os.path.join(root, "etc/default/proflet"), "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in settings.items()))
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", **settings}
        pre = _unit_lines("ExecStartPre")
        check(len(pre) == 1, f"ExecStartPre= {pre}")
        p = _in_root(*pre[0].split(), user="proflet", env=env)
        check(p.returncode == 0, f"ExecStartPre {pre[0]}: rc={p.returncode} {p.stderr}")
        start = _unit_lines("ExecStart")
        check(len(start) == 1, f"ExecStart= {start}")
        script = (f'mount --bind /proc "{root}/proc" && mount --rbind /dev "{root}/dev" && '
                  f'exec chroot --userspec={pw[2]}:{pw[3]} --groups={pw[3]} "{root}" "$@"')
        log = os.path.join(tmp, "proflet.log")
        proc = procs.start(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                            *start[0].split()], log, env=env)
        try:
            base = f"http://127.0.0.1:{status}"
            wait_for("/-/ready", lambda: alive(proc) and http_get(base + "/-/ready")[0] == 200, 30)
            wait_for("profiles of the demo service", lambda: alive(proc) and len(
                [m for _, m in sink_profiles(os.path.join(state, "profiles")) if "from-the-package" in str(m)]) >= 2,
                90)
            # systemctl reload: the unit's ExecReload=, as root, with $MAINPID.
            reload = _unit_lines("ExecReload")
            check(len(reload) == 1 and "$MAINPID" in reload[0], f"ExecReload= {reload}")
            before = metric_value(http_get(base + "/metrics")[1].decode(), "proflet_config_reloads_total",
                                  result="success") or 0
            p = _in_root(*reload[0].replace("$MAINPID", str(proc.pid)).split())
            check(p.returncode == 0, f"ExecReload {reload[0]}: rc={p.returncode} {p.stderr}")
            wait_for("the reload", lambda: alive(proc) and (metric_value(
                http_get(base + "/metrics")[1].decode(), "proflet_config_reloads_total", result="success")
                or 0) > before, 30)
        except Exception as e:
            raise AssertionError(f"{e}\nproflet log:\n{tail(log)}")
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        code = proc.wait(15)
        check(code == 0 and time.monotonic() - t0 < 11, f"exit {code} after {time.monotonic() - t0:.1f}s on SIGTERM")
    for dp, _, fs in os.walk(state):
        for x in fs:
            check(os.stat(os.path.join(dp, x)).st_uid == int(pw[2]), f"{x} written by proflet")


def _repack(version, config_extra=""):
    """The package at another version, its example config changed if
    config_extra is given; the path inside the root."""
    tmp = STATE["tmp"]
    work = os.path.join(tmp, f"repack-{version}")
    subprocess.run(["dpkg-deb", "-R", _deb(), work], check=True, timeout=60)
    ctl = os.path.join(work, "DEBIAN", "control")
    with open(ctl) as f:
        text = re.sub(r"^Version: .*$", f"Version: {version}", f.read(), flags=re.M)
    with open(ctl, "w") as f:
        f.write(text)
    if config_extra:
        conf = os.path.join(work, "etc/proflet/proflet.yaml")
        with open(conf, "a") as f:
            f.write(config_extra)
        md5 = subprocess.run(["md5sum", "etc/proflet/proflet.yaml"], cwd=work, capture_output=True,
                             text=True, check=True).stdout
        with open(os.path.join(work, "DEBIAN", "md5sums")) as f:
            sums = [l for l in f if not l.rstrip().endswith(" etc/proflet/proflet.yaml")]
        with open(os.path.join(work, "DEBIAN", "md5sums"), "w") as f:
            f.write("".join(sums) + md5)
    name = f"proflet_{version}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", work, os.path.join(_root(), "tmp", name)],
                   check=True, capture_output=True, timeout=120)
    return "/tmp/" + name


def test_upgrade_keeps_the_edited_config():
    root = _root()
    conf = os.path.join(root, "etc/proflet/proflet.yaml")
    with open(conf) as f:
        edited = f.read().replace("scrape-interval: 15s", "scrape-interval: 20s") + "# edited here\n"
    check("scrape-interval: 20s" in edited, "the edit applies")
    with open(conf, "w") as f:
        f.write(edited)
    v = project_version()
    for version, extra, opts in ((f"{v}+1", "", []),
                                 (f"{v}+2", "# a newer example\n", ["--force-confdef", "--force-confold"])):
        p = _in_root("dpkg", *opts, "-i", _repack(version, extra), timeout=180)
        check(p.returncode == 0, f"dpkg -i {version}: rc={p.returncode}\n{p.stdout}\n{p.stderr}")
        p = _in_root("dpkg-query", "-W", "-f", "${Version}", "proflet")
        check(p.stdout == version, f"installed {p.stdout}, want {version}")
        with open(conf) as f:
            check(f.read() == edited, f"the upgrade to {version} replaced the edited config")
        st = os.stat(conf)
        check(st.st_gid == int(_passwd("proflet")[3]) and st.st_mode & 0o7777 == 0o640,
              f"owner and mode after the upgrade to {version}: {st.st_gid} {oct(st.st_mode & 0o7777)}")
    with open(conf + ".dpkg-dist") as f:
        check("# a newer example" in f.read(), "the newer example is kept beside it as proflet.yaml.dpkg-dist")


def test_purge():
    root = _root()
    p = _in_root("dpkg", "--purge", "proflet", timeout=120)
    check(p.returncode == 0, f"dpkg --purge: {p.stdout}{p.stderr}")
    for gone in ("etc/proflet", "var/lib/proflet", "usr/bin/proflet", UNIT.lstrip("/")):
        check(not os.path.lexists(os.path.join(root, gone)), f"/{gone} is left after purge")
    p = _in_root("dpkg-statoverride", "--list")
    check("proflet" not in p.stdout, f"overrides left: {p.stdout}")


def cleanup():
    if "tmp" in STATE:
        shutil.rmtree(STATE["tmp"], ignore_errors=True)


if __name__ == "__main__":
    try:
        run_tests([test_build_depends_cover_the_build_packages, test_build_package, test_package_files, test_lintian,
                   test_install_into_a_fresh_debian_root, test_runs_as_the_unit_runs_it,
                   test_upgrade_keeps_the_edited_config, test_purge])
    finally:
        cleanup()
