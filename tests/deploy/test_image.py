# SPDX-License-Identifier: Apache-2.0
"""The container image recipe, without a container engine.

deploy/Dockerfile's two RUN steps are deploy/image/build.sh and
deploy/image/runtime-libs.sh; this test runs both for real (build.sh with
--no-deps: the test machine already has the packages, and install-deps.sh
stops prometheus servers that a concurrent test may own) into a temporary
directory, then runs the staged binary:

1. `--check-config` as uid/gid 65532 (setpriv, no new privileges) through
   the staged dynamic loader with --inhibit-cache and only the staged
   library directories, checking with LD_DEBUG that every library loaded
   came from the staging root;
2. a short real run chrooted into the staging root (as a container runtime
   would), with the root bind-mounted read-only, /proc and /dev bound in,
   only the spool volume writable, as 65532 (chroot --userspec after
   setpriv --no-new-privs), scraping a real Go service into a directory
   sink under the spool: profiles arrive, the process runs as 65532, and
   nothing in the staging root changed.
"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import SRC, Procs, alive, check, free_port, http_get, run_tests, tail, wait_for  # noqa: E402

DOCKERFILE = os.path.join(SRC, "deploy", "Dockerfile")
BUILD_SH = os.path.join(SRC, "deploy", "image", "build.sh")
LIBS_SH = os.path.join(SRC, "deploy", "image", "runtime-libs.sh")
UID = 65532

STATE = {}


def test_dockerfile_runs_exactly_the_scripts():
    with open(DOCKERFILE) as f:
        lines = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
    runs = [l[4:].strip() for l in lines if l.startswith("RUN ")]
    check(runs == ["/src/deploy/image/build.sh /src /build",
                   "/src/deploy/image/runtime-libs.sh /build/agent/proflet /staging"], f"RUN lines: {runs}")
    froms = [l for l in lines if l.startswith("FROM ")]
    check(len(froms) == 2 and "AS build" in froms[0] and "AS runtime" in froms[1], f"two stages: {froms}")
    check("ARG BUILD_BASE=debian:bookworm-slim" in lines, "build stage on debian:bookworm-slim")
    final = lines[lines.index(froms[1]):]
    copies = [l for l in final if l.startswith("COPY")]
    check(copies == ["COPY --from=build /staging/ /"], f"runtime stage holds only the staging root: {copies}")
    check(f"USER {UID}:{UID}" in final, "non-root user")
    check('ENTRYPOINT ["/usr/bin/proflet"]' in final, "entrypoint")
    with open(BUILD_SH) as f:
        text = f.read()
    for want in ("scripts/install-deps.sh", "meson setup", "ninja -C"):
        check(want in text, f"build.sh runs {want}")


def test_build_and_stage():
    tmp = tempfile.mkdtemp(prefix="proflet-image-")
    os.chmod(tmp, 0o755)  # the non-root run must be able to reach the staging root
    STATE["tmp"] = tmp
    build, root = os.path.join(tmp, "build"), os.path.join(tmp, "staging")
    p = subprocess.run([BUILD_SH, "--no-deps", SRC, build], capture_output=True, text=True, timeout=1500)
    check(p.returncode == 0, f"build.sh failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    p = subprocess.run([LIBS_SH, os.path.join(build, "agent", "proflet"), root], capture_output=True, text=True,
                       timeout=300)
    check(p.returncode == 0, f"runtime-libs.sh failed:\n{p.stdout}\n{p.stderr}")
    STATE["root"] = root
    check(os.access(os.path.join(root, "usr/bin/proflet"), os.X_OK), "binary staged")
    for absent in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/apt-get", "usr/bin/dpkg"):
        check(not os.path.lexists(os.path.join(root, absent)) or not os.path.exists(os.path.join(root, absent)),
              f"{absent} must not be in the runtime root")
    with open(os.path.join(root, "usr/share/proflet/runtime-packages.txt")) as f:
        pkgs = {l.split()[0] for l in f if l.strip()}
    for want in ("libc6", "libuv1", "libcurl4", "libzstd1", "libcyaml1", "libre2-9", "libdeflate0",
                 "libjson-c5", "libprotobuf-c1", "ca-certificates"):
        check(want in pkgs, f"runtime package {want} listed: {sorted(pkgs)}")
    st = os.stat(os.path.join(root, "var/lib/proflet/spool"))
    check(st.st_uid == UID and st.st_gid == UID, "spool owned by 65532")
    with open(os.path.join(root, "etc/passwd")) as f:
        check(re.search(rf"^proflet:x:{UID}:{UID}:", f.read(), re.M), "passwd entry")


def _root():
    check("root" in STATE, "test_build_and_stage did not produce a staging root")
    return STATE["root"]


def _loader(root):
    for cand in ("lib64/ld-linux-x86-64.so.2", "lib/ld-linux-aarch64.so.1"):
        if os.path.exists(os.path.join(root, cand)):
            return os.path.join(root, cand)
    raise AssertionError("no dynamic loader staged")


def test_check_config_with_only_staged_libraries_as_non_root():
    root = _root()
    libdirs = sorted({os.path.dirname(os.path.join(dp, f)) for dp, _, fs in os.walk(os.path.join(root, "usr"))
                      for f in fs if ".so" in f})
    cmd = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--no-new-privs", "--inh-caps=-all",
           "env", "-i", "LD_DEBUG=libs", _loader(root), "--inhibit-cache", "--library-path", ":".join(libdirs),
           os.path.join(root, "usr/bin/proflet"), "--check-config", os.path.join(root, "etc/proflet/proflet.yaml"),
           "--config.expand-env"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"staged --check-config failed rc={p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    inits = re.findall(r"calling init: (\S+)", p.stderr)
    check(inits, "LD_DEBUG shows the libraries initialised")
    outside = [x for x in inits if not os.path.realpath(x).startswith(os.path.realpath(root) + "/")]
    check(not outside, f"libraries loaded from outside the staging root: {outside}")


def _manifest(root):
    out = {}
    for dp, dns, fs in os.walk(root):
        for n in dns + fs:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_uid)
    return out


def test_read_only_root_run_writes_only_the_spool():
    root = _root()
    tmp = STATE["tmp"]
    for d in ("proc", "dev"):
        os.makedirs(os.path.join(root, d), exist_ok=True)  # mount points, as a runtime creates
    spool, conf = os.path.join(tmp, "spool-volume"), os.path.join(tmp, "config-volume")
    os.makedirs(spool)
    os.makedirs(conf)
    os.chown(spool, UID, UID)
    os.chmod(spool, 0o750)
    with Procs() as procs:
        demo = os.path.join(tmp, "demoapp")
        subprocess.run(["go", "build", "-o", demo, "."], cwd=os.path.join(SRC, "examples", "demoapp"),
                       env=dict(os.environ, GO111MODULE="off", GOCACHE=os.environ.get("GOCACHE", os.path.join(tmp, "gocache"))),
                       check=True, timeout=300)
        portf = os.path.join(tmp, "demo.port")
        procs.start([demo, "-addr", "127.0.0.1:0", "-port-file", portf], os.path.join(tmp, "demo.log"))
        demo_port = int(wait_for("demoapp", lambda: open(portf).read().strip(), 30))
        status = free_port()
        with open(os.path.join(conf, "proflet.yaml"), "w") as f:
            f.write(f"""log-level: info
server:
  listen-address: 127.0.0.1:{status}
scrape-configs:
  - job-name: ro-root
    scrape-interval: 2s
    scrape-timeout: 2s
    enabled-profiles: [cpu, mem, goroutines]
    static-configs:
      - application: ro-root-demo
        targets: ["127.0.0.1:{demo_port}"]
remote-write:
  - url: file:///var/lib/proflet/spool/profiles
spool:
  dir: /var/lib/proflet/spool/queue
""")
        before = _manifest(root)
        script = f"""set -e
mount --bind {root} {root}
mount -o remount,bind,ro {root}
mount --bind /proc {root}/proc
mount --rbind /dev {root}/dev
mount --bind {conf} {root}/etc/proflet
mount -o remount,bind,ro {root}/etc/proflet
mount --bind {spool} {root}/var/lib/proflet/spool
exec setpriv --no-new-privs chroot --userspec={UID}:{UID} --groups={UID} {root} /usr/bin/proflet --config /etc/proflet/proflet.yaml
"""
        log = os.path.join(tmp, "ro.log")
        p = procs.start(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], log,
                        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        try:
            wait_for("/-/healthy", lambda: alive(p) and http_get(f"http://127.0.0.1:{status}/-/healthy")[0] == 200, 30)
            with open(f"/proc/{p.pid}/status") as f:
                st = f.read()
            check(re.search(rf"^Uid:\s+{UID}\s+{UID}\s+{UID}\s+{UID}$", st, re.M), f"runs as {UID}: {st}")
            check(re.search(r"^NoNewPrivs:\s+1$", st, re.M), "no new privileges")
            check(re.search(r"^CapEff:\s+0+$", st, re.M), "no effective capabilities")

            def profiles():
                out = []
                for dp, _, fs in os.walk(os.path.join(spool, "profiles")):
                    out += [os.path.join(dp, x) for x in fs if x.endswith(".pb.gz")]
                return len(out) >= 2 and out

            wait_for("profiles written to the spool volume", lambda: alive(p) and profiles(), 60)
        except Exception as e:
            raise AssertionError(f"{e}\nproflet log:\n{tail(log)}")
        check(p.poll() is None, f"proflet exited: {tail(log)}")
    check("Read-only file system" not in tail(log, 400), f"proflet tried to write outside the spool:\n{tail(log)}")
    after = _manifest(root)
    check(after == before, f"the staging root changed: {set(after.items()) ^ set(before.items())}")
    for dp, _, fs in os.walk(spool):
        for x in fs:
            check(os.stat(os.path.join(dp, x)).st_uid == UID, f"{x} written by {UID}")


def cleanup():
    if "tmp" in STATE:
        shutil.rmtree(STATE["tmp"], ignore_errors=True)


if __name__ == "__main__":
    try:
        run_tests([test_dockerfile_runs_exactly_the_scripts, test_build_and_stage,
                   test_check_config_with_only_staged_libraries_as_non_root,
                   test_read_only_root_run_writes_only_the_spool])
    finally:
        cleanup()
