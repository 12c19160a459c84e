# SPDX-License-Identifier: Apache-2.0
"""scripts/embed.py, the generator that builds the web UI's assets in: its
output depends only on the files' names and bytes (the same bytes from two
runs, from another folder, from the files given in another order), holds
each file's bytes as they are, and a file that would end the element it is
written into (`</script`, `<!--`, `</style`), that is not UTF-8 text or that
holds a NUL is refused, as are two files of one name."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("PROFLET_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EMBED = os.path.join(SRC, "scripts", "embed.py")
ASSETS = os.path.join(SRC, "agent", "assets")


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def embed(out, files, expect_ok=True):
    p = subprocess.run([sys.executable, EMBED, "--prefix", "t_", "--c", os.path.join(out, "a.c"),
                        "--h", os.path.join(out, "a.h")] + files, capture_output=True, text=True)
    if expect_ok:
        check(p.returncode == 0, f"embed.py failed: {p.stderr}")
        return [open(os.path.join(out, n), "rb").read() for n in ("a.c", "a.h")]
    check(p.returncode != 0, f"embed.py accepted {files}")
    return p.stderr


def assets():
    return sorted(os.path.join(ASSETS, f) for f in os.listdir(ASSETS) if not f.startswith("."))


def test_deterministic():
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        first = embed(a, assets())
        check(embed(a, assets()) == first, "two runs differ")
        moved = [shutil.copy(f, b) for f in assets()]
        check(embed(b, list(reversed(moved))) == first,
              "the output depends on the files' folder or order")
        check(ASSETS.encode() not in first[0] + first[1] and a.encode() not in first[0] + first[1],
              "the output names a folder")


def test_bytes_as_they_are():
    with tempfile.TemporaryDirectory() as d:
        data = "/* SPDX-License-Identifier: Apache-2.0 */\nbody { content: \"\u2026 100% \\\\ \"; }\n"
        path = os.path.join(d, "x.css")
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
        c, h = embed(d, [path])
        raw = data.encode()
        want = ", ".join(f"0x{b:02x}" for b in raw + b"\0")
        check(want in " ".join(c.decode().split()),
              "the array is not the file's bytes then a NUL")
        check(f"t_x_css_len = {len(raw)};".encode() in c, "wrong length")
        check(b"extern const unsigned char t_x_css[" in h and b"t_table[]" in h, "header declarations")


def test_refused():
    cases = {
        "a.js": b"var s = '</SCRIPT>';\n",
        "b.js": b"// <!-- a comment opener\n",
        "c.css": b"p::after { content: '</style>'; }\n",
        "d.css": b"p { color: red; }\xff\n",
        "e.js": b"var z = '\0';\n",
    }
    with tempfile.TemporaryDirectory() as d:
        for name, data in cases.items():
            path = os.path.join(d, name)
            with open(path, "wb") as f:
                f.write(data)
            err = embed(d, [path], expect_ok=False)
            check(name in err, f"the refusal of {name} does not name it: {err}")
        os.mkdir(os.path.join(d, "sub"))
        for p in (os.path.join(d, "f.js"), os.path.join(d, "sub", "f.js")):
            with open(p, "w") as f:
                f.write("1;\n")
        embed(d, [os.path.join(d, "f.js"), os.path.join(d, "sub", "f.js")], expect_ok=False)


def main():
    passed = failed = 0
    for t in (test_deterministic, test_bytes_as_they_are, test_refused):
        try:
            t()
        except Failure as e:
            failed += 1
            print(f"FAIL {t.__name__}: {e}")
        else:
            passed += 1
            print(f"ok   {t.__name__}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
