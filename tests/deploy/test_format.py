# SPDX-License-Identifier: Apache-2.0
"""The C sources keep one layout, the one .clang-format at the top of the
tree describes: clang-format changes nothing in any tracked .c, .h or .cc
file. A deliberately misformatted snippet must be flagged, so that a
clang-format that silently accepts everything fails this test too."""
import os
import shutil
import subprocess
import sys
import tempfile

from dlib import SRC, check, run_tests

C_ENDINGS = (".c", ".h", ".cc")


def clang_format():
    exe = os.environ.get("CLANG_FORMAT") or shutil.which("clang-format")
    check(exe is not None, "clang-format is missing; scripts/install-deps.sh --tests installs it")
    return exe


def c_files():
    p = subprocess.run(["git", "-C", SRC, "ls-files", "--", *("*" + e for e in C_ENDINGS)],
                       capture_output=True, text=True)
    if p.returncode == 0:
        return p.stdout.split()
    out = []
    for root, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs if not d.startswith(("build", "."))]
        out += [os.path.relpath(os.path.join(root, f), SRC) for f in files if f.endswith(C_ENDINGS)]
    return out


def unformatted(exe, paths, cwd):
    """The paths clang-format would change (it reads .clang-format from cwd up)."""
    bad = []
    for i in range(0, len(paths), 50):
        batch = paths[i:i + 50]
        p = subprocess.run([exe, "--dry-run", "--Werror", *batch], cwd=cwd,
                           capture_output=True, text=True)
        if p.returncode != 0:
            bad += sorted({line.split(":", 1)[0] for line in p.stderr.splitlines()
                           if line.split(":", 1)[0] in batch})
    return bad


def test_the_check_can_fail():
    exe = clang_format()
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(os.path.join(SRC, ".clang-format"), d)
        with open(os.path.join(d, "bad.c"), "w") as f:
            f.write("int  f(int a){return a+1;}\n")
        check(unformatted(exe, ["bad.c"], d) == ["bad.c"],
              "clang-format accepted a misformatted file")


def test_tree_is_formatted():
    exe = clang_format()
    check(os.path.exists(os.path.join(SRC, ".clang-format")), "no .clang-format at the top of the tree")
    files = c_files()
    check(len(files) > 100, f"only {len(files)} C files found under {SRC}")
    bad = unformatted(exe, files, SRC)
    check(not bad, f"{len(bad)} files differ from .clang-format (run clang-format -i on them): "
          + ", ".join(bad[:20]))


if __name__ == "__main__":
    sys.exit(run_tests([test_the_check_can_fail, test_tree_is_formatted]))
