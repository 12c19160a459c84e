# SPDX-License-Identifier: Apache-2.0
"""The container image, built and run by a real container engine: podman as
root, with the runc runtime and the cgroupfs cgroup manager, all of its
state (images, layers, caches, run files) under this test's scratch
directory in the build tree, inside a mount namespace of its own.

1. The build base: no registry is reachable, so debian:bookworm-slim is
   stood in for by a root that mmdebstrap makes from this machine's apt
   sources with the packages `scripts/install-deps.sh --build` installs,
   imported with `podman import`. The build stage's scripts then run as in
   any build (install-deps.sh finds nothing missing).
2. deploy/image/build-image.sh builds deploy/Dockerfile from a copy of the
   files a clean checkout has, without network.
3. The image: OCI annotations and labels (version, revision, source,
   licenses), its size against the one docs/deploy.md states, its files (no
   shell, no package manager, the CA bundle, the spool owned by 65532).
4. Run as a user runs it: read-only root with no tmpfs, uid 65532, no
   capabilities, no new privileges, the config directory mounted read-only,
   the spool the one writable volume, the host's network (loopback only).
   It scrapes the demo Go service into a directory sink on the spool volume,
   answers /-/healthy and /-/ready, reloads on `podman kill -s HUP`, leaves
   its root unchanged, and on `podman stop` exits 0 within its 10 s.
5. A bad config: the container exits 2 and names file, line and column.
"""
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dlib import (SRC, Procs, Failure, check, copy_source_tree, free_port, host_codename,  # noqa: E402
                  http_get, metric_value, mmdebstrap_command, need_file, project_license, project_version,
                  run_tests, sink_profiles, start_demoapp, tail, wait_for, work_dir)

DOCKERFILE = os.path.join(SRC, "deploy", "Dockerfile")
UID = 65532
IMAGE = "localhost/proflet/proflet:test"
BASE = f"localhost/proflet-build-base:{host_codename()}"
SOURCE_URL = "https://github.com/proflet/proflet"

STATE = {}


class Engine:
    """podman as root (runc, cgroupfs) whose whole state lives under `top`.
    A sleeping child holds a private mount namespace in which `top/lib` is
    bound over /var/lib/containers (the blob-info cache has no setting of
    its own); containers.conf and storage.conf put storage, run files,
    events and temporary files under `top`. Every command enters that
    namespace, so the overlay mounts of containers never show on the host
    and go away with the namespace. ulimits: the machine's hard limits, at
    most."""

    def __init__(self, top, procs):
        self.top = top
        for d in ("lib", "graph", "run", "tmp", "copytmp", "cni"):
            os.makedirs(os.path.join(top, d), mode=0o700)
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nofile = 1048576 if nofile == resource.RLIM_INFINITY else nofile
        nproc = 32768 if nproc == resource.RLIM_INFINITY else min(nproc, 32768)
        with open(os.path.join(top, "containers.conf"), "w") as f:
            f.write(f"""[containers]
default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]
[network]
network_config_dir = "{top}/cni"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{top}/events.log"
tmp_dir = "{top}/tmp"
image_copy_tmp_dir = "{top}/copytmp"
""")
        with open(os.path.join(top, "storage.conf"), "w") as f:
            f.write(f"""[storage]
driver = "overlay"
graphroot = "{top}/graph"
runroot = "{top}/run"
""")
        self.env = dict(os.environ, CONTAINERS_CONF=f"{top}/containers.conf",
                        CONTAINERS_STORAGE_CONF=f"{top}/storage.conf", TMPDIR=f"{top}/copytmp")
        for tool in ("podman", "runc", "conmon"):
            need_file(shutil.which(tool) or (os.path.exists(f"/usr/bin/{tool}") and f"/usr/bin/{tool}"),
                      f"{tool} (scripts/install-deps.sh --tests installs podman and runc)")
        os.makedirs("/var/lib/containers", mode=0o700, exist_ok=True)  # the mount point
        ready = os.path.join(top, "ns.ready")
        self.holder = procs.start(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             f'mount --bind "{top}/lib" /var/lib/containers && touch "{ready}" && exec sleep 3600'],
            os.path.join(top, "ns.log"))
        wait_for("the engine's mount namespace", lambda: os.path.exists(ready), 30)

    def cmd(self, *args):
        return ["nsenter", f"--target={self.holder.pid}", "--mount", "--", *args]

    def run(self, *args, timeout=120, ok=True, **kw):
        """`podman ARGS` in the namespace; with ok, a non-zero exit fails."""
        kw.setdefault("capture_output", True)
        t0 = time.monotonic()
        p = subprocess.run(self.cmd("podman", *args), env=self.env, timeout=timeout, **kw)
        if time.monotonic() - t0 > 10:  # where the test's time goes
            print(f"podman {' '.join(args[:4])}: {time.monotonic() - t0:.1f}s")
        if ok:
            out = (p.stdout or b"") + (p.stderr or b"")
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            check(p.returncode == 0, f"podman {' '.join(args[:3])} failed ({p.returncode}):\n{out[-3000:]}")
        return p

    def run_to_exit(self, *args, timeout=60):
        """`podman run ARGS` to its end: (exit code, stdout, stderr). The
        container runs detached and its state is polled: `podman run`
        attached and `podman wait` both often take 20 s more than the
        container here (podman 4.3 waits for a state its cleanup process has
        not written yet, until a 20 s timer fires)."""
        cid = self.run("run", "--detach", *args).stdout.decode().strip()
        try:
            def ended():
                state = self.run("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", cid)
                status, code = state.stdout.decode().split()
                return status in ("exited", "stopped") and (int(code),)
            code = wait_for(f"the container {' '.join(args[-3:])} to exit", ended, timeout, interval=0.2)[0]
            logs = self.run("logs", cid)
        finally:
            self.run("rm", "--force", cid, ok=False)
        return code, logs.stdout.decode(errors="replace"), logs.stderr.decode(errors="replace")

    def close(self):
        if self.holder.poll() is None:
            for args in (("rm", "--all", "--force", "--time", "0"), ("rmi", "--all", "--force")):
                subprocess.run(self.cmd("podman", *args), env=self.env, timeout=120, capture_output=True)
            self.holder.kill()
            self.holder.wait(10)


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


def _engine():
    check("engine" in STATE, "the engine was not set up (see the first failure)")
    return STATE["engine"]


def test_build_base_from_debian_packages():
    tmp = STATE["tmp"] = work_dir("proflet-image-")
    os.chmod(tmp, 0o755)  # uid 65532 reaches the volumes below it
    procs = STATE["procs"] = Procs()
    engine = STATE["engine"] = Engine(os.path.join(tmp, "engine"), procs)
    p = subprocess.run([os.path.join(SRC, "scripts", "install-deps.sh"), "--build", "--list"],
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and p.stdout.split(), f"install-deps.sh --build --list: {p.stderr}")
    # Without documentation, manual pages and translations, as Debian's slim
    # images; the copyright files stay (runtime-libs.sh copies them).
    slim = ["path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
            "path-exclude=/usr/share/man/*", "path-exclude=/usr/share/locale/*", "path-exclude=/usr/share/info/*"]
    cmd, env = mmdebstrap_command("-", p.stdout.split(), tmp, dpkgopts=slim)
    mm = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                          stderr=open(os.path.join(tmp, "mmdebstrap.log"), "w"))
    imp = subprocess.Popen(engine.cmd("podman", "import", "--change", "CMD [\"/bin/bash\"]", "-", BASE),
                           stdin=mm.stdout, env=engine.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    mm.stdout.close()
    try:
        out = imp.communicate(timeout=900)[0].decode(errors="replace")
        mm.wait(60)
    finally:
        for x in (mm, imp):
            if x.poll() is None:
                x.kill()
    check(mm.returncode == 0, f"mmdebstrap failed ({mm.returncode}):\n{tail(os.path.join(tmp, 'mmdebstrap.log'))}")
    check(imp.returncode == 0, f"podman import failed: {out[-2000:]}")
    engine.run("image", "exists", BASE)


def test_build_image_without_network():
    engine = _engine()
    tmp = STATE["tmp"]
    ctx = copy_source_tree(os.path.join(tmp, "context"))
    rev = subprocess.run(["git", "-C", SRC, "rev-parse", "HEAD"], capture_output=True, text=True)
    STATE["revision"] = rev.stdout.strip() if rev.returncode == 0 else "unknown"
    log = os.path.join(tmp, "build.log")
    t0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.run(engine.cmd(os.path.join(ctx, "deploy", "image", "build-image.sh"), "--engine", "podman",
                                      "--tag", IMAGE, "--build-base", BASE, "--", "--network=none", "--layers=false"),
                           env=dict(engine.env, PROFLET_REVISION=STATE["revision"]), stdout=f,
                           stderr=subprocess.STDOUT, timeout=1200)
    print(f"image built in {time.monotonic() - t0:.0f}s")
    check(p.returncode == 0, f"build-image.sh failed ({p.returncode}):\n{tail(log, 60)}")
    engine.run("image", "exists", IMAGE)
    STATE["image"] = IMAGE


def _image():
    check("image" in STATE, "no image was built (see the first failure)")
    return STATE["image"]


def test_image_annotations_and_size():
    engine, image = _engine(), _image()
    info = json.loads(engine.run("image", "inspect", image).stdout)[0]
    want = {"version": project_version(), "revision": STATE["revision"], "source": SOURCE_URL,
            "licenses": project_license()}
    labels = info.get("Labels") or {}
    annotations = info.get("Annotations") or {}
    for k, v in want.items():
        key = "org.opencontainers.image." + k
        check(annotations.get(key) == v, f"annotation {key}={annotations.get(key)!r}, want {v!r}")
        check(labels.get(key) == v, f"label {key}={labels.get(key)!r}, want {v!r}")
    check(info["Config"].get("User") == f"{UID}:{UID}", f"user {info['Config'].get('User')}")
    check(list((info["Config"].get("Volumes") or {}).keys()) == ["/var/lib/proflet/spool"], "one volume, the spool")
    size_mb = info["Size"] / 1e6
    print(f"image size {size_mb:.1f} MB")
    with open(os.path.join(SRC, "docs", "deploy.md")) as f:
        m = re.search(r"The image is about ([0-9.]+) MB", f.read())
    check(m, "docs/deploy.md states the image size as 'The image is about N MB'")
    stated = float(m.group(1))
    check(abs(size_mb - stated) <= 0.15 * stated, f"image is {size_mb:.1f} MB, docs/deploy.md says {stated} MB")


def test_image_files():
    engine, image = _engine(), _image()
    tmp = STATE["tmp"]
    cid = engine.run("create", image).stdout.decode().strip()
    tar_path = os.path.join(tmp, "rootfs.tar")
    try:
        engine.run("export", "-o", tar_path, cid)
    finally:
        engine.run("rm", cid, ok=False)
    with tarfile.open(tar_path) as t:
        members = {m.name.lstrip("./").rstrip("/"): m for m in t.getmembers()}
        pkgs = t.extractfile("usr/share/proflet/runtime-packages.txt").read().decode()
    for absent in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/bash", "usr/bin/apt-get", "usr/bin/dpkg"):
        check(absent not in members, f"{absent} must not be in the image")
    for present in ("usr/bin/proflet", "etc/ssl/certs/ca-certificates.crt", "etc/proflet/proflet.yaml", "etc/passwd"):
        check(present in members and members[present].isfile(), f"{present} in the image")
    spool = members.get("var/lib/proflet/spool")
    check(spool is not None and spool.isdir() and spool.uid == UID and spool.gid == UID, "spool owned by 65532")
    names = {l.split()[0] for l in pkgs.splitlines() if l.strip()}
    for want in ("libc6", "libuv1", "libcurl4", "libzstd1", "libcyaml1", "libre2-9", "libdeflate0",
                 "libjson-c5", "libprotobuf-c1", "ca-certificates"):
        check(want in names, f"runtime package {want} listed: {sorted(names)}")
    # The configuration it carries is valid.
    code, _, err = engine.run_to_exit("--read-only", "--network=none", image, "--check-config",
                                      "/etc/proflet/proflet.yaml", "--config.expand-env")
    check(code == 0, f"the image's own config: rc={code} {err}")


def _config(status, demo, jobs):
    out = f"""log-level: info
server:
  listen-address: 127.0.0.1:{status}
scrape-configs:
"""
    for job in jobs:
        out += f"""  - job-name: {job}
    scrape-interval: 2s
    scrape-timeout: 2s
    enabled-profiles: [cpu, mem, goroutines]
    static-configs:
      - application: image-{job}
        targets: ["127.0.0.1:{demo}"]
"""
    return out + """remote-write:
  - url: file:///var/lib/proflet/spool/profiles
spool:
  dir: /var/lib/proflet/spool/queue
"""


def _write(path, text):
    """Replaces the file in one rename, as an editor does; the container
    sees it through its directory mount."""
    with open(path + ".new", "w") as f:
        f.write(text)
    os.chmod(path + ".new", 0o644)
    os.rename(path + ".new", path)


def _status(pid):
    with open(f"/proc/{pid}/status") as f:
        return f.read()


def test_runs_as_a_user_would():
    engine, image = _engine(), _image()
    tmp, procs = STATE["tmp"], STATE["procs"]
    spool, conf = os.path.join(tmp, "spool-volume"), os.path.join(tmp, "config")
    os.makedirs(spool, mode=0o750)
    os.chown(spool, UID, UID)
    os.makedirs(conf, mode=0o755)
    demo = start_demoapp(tmp, procs)
    status = free_port()
    _write(os.path.join(conf, "proflet.yaml"), _config(status, demo, ["first"]))
    name = "proflet-as-a-user"
    engine.run("run", "--detach", "--name", name, "--read-only", "--read-only-tmpfs=false", "--network=host",
               "--cap-drop=all", "--security-opt=no-new-privileges", "-v", f"{conf}:/etc/proflet:ro",
               "-v", f"{spool}:/var/lib/proflet/spool", image)

    def logs():
        p = engine.run("logs", name, ok=False)
        return (p.stdout + p.stderr).decode(errors="replace")

    def running():
        p = engine.run("inspect", "--format", "{{.State.Running}}", name, ok=False)
        if p.stdout.decode().strip() != "true":
            raise Failure(f"the container stopped:\n{logs()[-3000:]}")
        return True

    base = f"http://127.0.0.1:{status}"
    try:
        wait_for("/-/healthy", lambda: running() and http_get(base + "/-/healthy")[0] == 200, 30)
        wait_for("/-/ready", lambda: running() and http_get(base + "/-/ready")[0] == 200, 30)
        pid = int(engine.run("inspect", "--format", "{{.State.Pid}}", name).stdout.decode())
        st = _status(pid)
        check(re.search(rf"^Uid:\s+{UID}\s+{UID}\s+{UID}\s+{UID}$", st, re.M), f"runs as {UID}: {st}")
        check(re.search(r"^NoNewPrivs:\s+1$", st, re.M), "no new privileges")
        check(re.search(r"^CapEff:\s+0+$", st, re.M), "no effective capabilities")

        def profiles(job):
            got = [p for p, meta in sink_profiles(os.path.join(spool, "profiles"))
                   if f"image-{job}" in json.dumps(meta)]
            return len(got) >= 2 and got

        wait_for("profiles of the demo service on the spool volume", lambda: running() and profiles("first"), 60)

        # SIGHUP reloads the edited file: a second job appears and scrapes.
        before = metric_value(http_get(base + "/metrics")[1].decode(), "proflet_config_reloads_total",
                              result="success") or 0
        _write(os.path.join(conf, "proflet.yaml"), _config(status, demo, ["first", "after-hup"]))
        engine.run("kill", "--signal", "HUP", name)
        wait_for("a successful reload", lambda: running() and (metric_value(
            http_get(base + "/metrics")[1].decode(), "proflet_config_reloads_total", result="success") or 0) > before,
            30)
        targets = json.loads(http_get(base + "/api/v1/targets")[1])
        jobs = {t["labels"].get("job") for t in targets["data"]["activeTargets"]}
        check(jobs == {"first", "after-hup"}, f"jobs after the reload: {jobs}")
        wait_for("profiles of the job added by the reload", lambda: running() and profiles("after-hup"), 60)
        check("SIGHUP" in logs(), f"the reload is logged with its trigger:\n{logs()[-2000:]}")
    except Exception as e:
        raise AssertionError(f"{e}\ncontainer log:\n{logs()[-4000:]}")

    # Only the engine's own mount points (/etc/hosts, /etc/resolv.conf...)
    # may show; what proflet wrote would.
    diff = engine.run("diff", name).stdout.decode().splitlines()
    check(all(re.fullmatch(r"[AC] (/etc|/etc/(hosts|hostname|resolv\.conf)|/run|/run/\.containerenv|/dev|/proc|/sys)",
                           x) for x in diff), f"the container's root changed: {diff}")
    t0 = time.monotonic()
    engine.run("stop", "--time", "15", name, timeout=60)
    took = time.monotonic() - t0
    state = json.loads(engine.run("inspect", name).stdout)[0]["State"]
    text = logs()
    engine.run("rm", name)
    check(state["ExitCode"] == 0, f"exit code {state['ExitCode']} after podman stop:\n{text[-3000:]}")
    check(took < 11, f"podman stop took {took:.1f}s; proflet promises 10 s")
    check("Read-only file system" not in text, f"proflet tried to write outside the spool:\n{text[-3000:]}")
    for dp, _, fs in os.walk(spool):
        for x in fs:
            check(os.stat(os.path.join(dp, x)).st_uid == UID, f"{x} written by {UID}")


def test_bad_config_exits_2_with_the_position():
    engine, image = _engine(), _image()
    conf = os.path.join(STATE["tmp"], "bad-config")
    os.makedirs(conf, mode=0o755)
    _write(os.path.join(conf, "proflet.yaml"), _config(free_port(), 6060, ["bad"]).replace(
        "scrape-interval: 2s", "scrape-interval: fifteen"))
    line = 6  # scrape-interval of the only job
    for extra in ([], ["--check-config", "/etc/proflet/proflet.yaml", "--config.expand-env"]):
        code, _, err = engine.run_to_exit("--read-only", "--read-only-tmpfs=false", "--network=host",
                                          "-v", f"{conf}:/etc/proflet:ro", image, *extra)
        check(code == 2, f"{extra or 'the default command'}: exit {code}, want 2: {err}")
        check(re.search(rf"/etc/proflet/proflet\.yaml:{line}:\d+: .*fifteen", err),
              f"{extra or 'the default command'} names file, line and column: {err}")


def cleanup():
    if "engine" in STATE:
        STATE["engine"].close()
    if "procs" in STATE:
        STATE["procs"].close()
    if "tmp" in STATE:
        shutil.rmtree(STATE["tmp"], ignore_errors=True)


if __name__ == "__main__":
    try:
        run_tests([test_dockerfile_runs_exactly_the_scripts, test_build_base_from_debian_packages,
                   test_build_image_without_network, test_image_annotations_and_size, test_image_files,
                   test_runs_as_a_user_would, test_bad_config_exits_2_with_the_position])
    finally:
        cleanup()
