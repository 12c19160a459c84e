# SPDX-License-Identifier: Apache-2.0
"""The source tree stands alone: every symbolic link it holds resolves to a
path inside it, so a checkout on any machine builds and tests the same; and
every source file says its license (an SPDX line at its top, the license
meson.build declares, whose text is LICENSE); and every C file outside
tests/ points, in its head comment, to the section of docs/design.md that
explains it."""
import os
import re
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


SOURCE_ENDINGS = (".c", ".h", ".cc", ".py", ".sh", ".go")
SOURCE_NAMES = ("meson.build", "meson_options.txt")


def tracked_files():
    p = subprocess.run(["git", "-C", SRC, "ls-files"], capture_output=True, text=True)
    if p.returncode == 0:
        return p.stdout.split()
    out = []
    for root, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs if not d.startswith(("build", "."))]
        out += [os.path.relpath(os.path.join(root, f), SRC) for f in files]
    return out


def test_every_source_file_says_its_license():
    with open(os.path.join(SRC, "meson.build")) as f:
        declared = f.read().split("license : '", 1)[1].split("'", 1)[0]
    check(os.path.exists(os.path.join(SRC, "LICENSE")), "no LICENSE file")
    tag = "SPDX-License-Identifier: " + declared
    missing = []
    for path in tracked_files():
        if not (path.endswith(SOURCE_ENDINGS) or os.path.basename(path) in SOURCE_NAMES):
            continue
        full = os.path.join(SRC, path)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        with open(full, encoding="utf-8", errors="replace") as f:
            head = [f.readline() for _ in range(2)]
        if not any(tag in line for line in head):
            missing.append(path)
    check(not missing, f"{len(missing)} source files lack '{tag}' in their first two lines: "
          + ", ".join(missing[:20]))


DESIGN = "docs/design.md"
CITE = re.compile(r'docs/design\.md "([^"]*)"')
COMMENT = re.compile(r"/\*.*?\*/", re.S)


def head_comment(text):
    """The file's first comment after its SPDX line, on one line, or None."""
    for m in COMMENT.finditer(text):
        body = m.group(0)[2:-2]
        if "SPDX-License-Identifier" in body:
            continue
        return " ".join(line.strip().lstrip("*").strip() for line in body.splitlines()).strip()
    return None


def test_every_c_file_points_to_its_design_section():
    with open(os.path.join(SRC, DESIGN), encoding="utf-8") as f:
        sections = {line[3:].strip() for line in f if line.startswith("## ")}
    check(sections, f"{DESIGN} has no '## ' heading")
    bad = []
    for path in tracked_files():
        if not path.endswith(".c") or path.startswith("tests/"):
            continue
        full = os.path.join(SRC, path)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        with open(full, encoding="utf-8", errors="replace") as f:
            head = head_comment(f.read())
        titles = CITE.findall(re.sub(r"\s+", " ", head or ""))
        if not titles:
            bad.append(f'{path}: no ({DESIGN} "Section") in its head comment')
        for t in titles:
            if t not in sections:
                bad.append(f'{path}: "{t}" is no \'## \' heading of {DESIGN}')
    check(not bad, f"{len(bad)} head comments without a valid pointer to {DESIGN}: "
          + "; ".join(bad[:20]))


if __name__ == "__main__":
    sys.exit(run_tests([test_links_stay_inside, test_every_source_file_says_its_license,
                        test_every_c_file_points_to_its_design_section]))
