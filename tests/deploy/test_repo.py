"""The source tree stands alone: every symbolic link it holds resolves to a
path inside it, so a checkout on any machine builds and tests the same."""
import os
import subprocess
import sys

from dlib import SRC, check, run_tests


def tracked_links():
    """(path, target) of the links git tracks; without git, every link
    below the source root outside build trees."""
    p = subprocess.run(["git", "-C", SRC, "ls-files", "-s"], capture_output=True, text=True)
    if p.returncode == 0:
        for line in p.stdout.splitlines():
            meta, path = line.split("\t", 1)
            if meta.startswith("120000 "):
                full = os.path.join(SRC, path)
                yield path, os.readlink(full) if os.path.islink(full) else None
        return
    for root, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs if not d.startswith(("build", "."))]
        for name in dirs + files:
            full = os.path.join(root, name)
            if os.path.islink(full):
                yield os.path.relpath(full, SRC), os.readlink(full)


def test_links_stay_inside():
    root = os.path.realpath(SRC)
    bad = []
    for path, target in tracked_links():
        if target is None:
            continue  # deleted in the work tree
        if os.path.isabs(target):
            bad.append(f"{path} -> {target} (absolute)")
            continue
        resolved = os.path.realpath(os.path.join(SRC, os.path.dirname(path), target))
        if resolved != root and not resolved.startswith(root + os.sep):
            bad.append(f"{path} -> {target} (leaves the tree)")
        elif not os.path.exists(resolved):
            bad.append(f"{path} -> {target} (dangles)")
    check(not bad, "links that do not resolve inside the tree: " + "; ".join(bad))


if __name__ == "__main__":
    sys.exit(run_tests([test_links_stay_inside]))
