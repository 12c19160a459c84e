#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""proflet's dependency picture, and the check that keeps it drawn the way
data flows.

Two graphs:
  * modules, from `#include "<module>/..."` lines: an arrow A -> B means a
    file of A includes a header of B. Every arrow must point down the
    layer list below; an arrow up or sideways is an error.
  * files, from the symbols each object file of a build defines and uses
    (`nm`): an arrow a.c -> b.c means a.c calls (or reads) something b.c
    defines. No two files may reach each other through such arrows (no
    circle), whatever the module.

Usage:
  scripts/deps.py [--build DIR] [--check] [--markdown]
With --check it exits 1 and names every offending arrow or circle, or a
module picture in docs/design.md that is not the one the includes draw. With
--markdown it prints that picture.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# Lowest first. A module may use the ones before it, never the ones after
# it; modules on one line are peers and do not use each other.
LAYERS = [
    ["common"],
    ["proto"],
    ["conf"],
    ["relabel", "pprof"],
    ["net", "httpd"],
    ["discovery", "forward"],
    ["scrape", "cluster"],
    ["agent"],
]
MODULES = [m for layer in LAYERS for m in layer]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def sources():
    for m in MODULES:
        d = os.path.join(ROOT, m)
        for dirpath, _, files in os.walk(d):
            for f in sorted(files):
                if f.endswith((".c", ".h", ".cc")):
                    yield m, os.path.join(dirpath, f)


def module_graph():
    arrows = {}
    for m, path in sources():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for target in INCLUDE.findall(text):
            if target in RANK and target != m:
                arrows.setdefault((m, target), []).append(os.path.relpath(path, ROOT))
    return arrows


def objects(build):
    """{source path relative to ROOT: object path} for the product's objects
    (meson puts <module>/<file>.c's object in <build>/<module>/<target>.p/)."""
    out = {}
    for dirpath, _, files in os.walk(build):
        rel = os.path.relpath(dirpath, build).split(os.sep)
        if len(rel) != 2 or rel[0] not in RANK or not rel[1].endswith(".p"):
            continue
        for f in files:
            if f.endswith((".c.o", ".cc.o")):
                src = os.path.join(rel[0], f[:-2])
                if os.path.exists(os.path.join(ROOT, src)):
                    out[src] = os.path.join(dirpath, f)
    return out


def symbols(obj):
    r = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True)
    # Functions only: a const table of operations (a provider's or a sink's
    # vtable) is data its registry lists, not a call back into the user.
    defined = {l.split()[-1] for l in r.stdout.splitlines()
               if len(l.split()) == 3 and l.split()[1] in "TtWw"}
    r = subprocess.run(["nm", "-u", obj], capture_output=True, text=True)
    used = {l.split()[-1] for l in r.stdout.splitlines() if l.strip()}
    return defined, used


def file_graph(build):
    objs = objects(build)
    defs, uses = {}, {}
    for src, obj in objs.items():
        d, u = symbols(obj)
        uses[src] = u
        for s in d:
            defs.setdefault(s, set()).add(src)
    edges = {}
    for src, u in uses.items():
        for s in u:
            for owner in defs.get(s, ()):
                if owner != src:
                    edges.setdefault(src, set()).add(owner)
    return objs, edges


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def markdown(arrows):
    lines = ["| module | uses |", "| --- | --- |"]
    for m in reversed(MODULES):
        used = sorted({b for (a, b) in arrows if a == m}, key=lambda x: (-RANK[x], x))
        lines.append(f"| `{m}` | {', '.join(f'`{u}`' for u in used) or '(libraries only)'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    arrows = module_graph()
    bad = [(a, b, files) for (a, b), files in sorted(arrows.items()) if RANK[b] >= RANK[a]]
    if args.markdown:
        print(markdown(arrows))
    problems = []
    for a, b, files in bad:
        problems.append(f"{a} -> {b} points {'up' if RANK[b] > RANK[a] else 'sideways'}: "
                        + ", ".join(files[:5]))
    objs, edges = file_graph(args.build)
    if args.check and not objs:
        problems.append(f"no object files under {args.build}: build first")
    for comp in cycles(edges):
        problems.append("files that call each other in a circle: " + ", ".join(comp))
    if args.check and markdown(arrows) not in open(os.path.join(ROOT, "docs", "design.md")).read():
        problems.append("docs/design.md does not carry the module picture the includes draw: "
                        "paste the output of scripts/deps.py --markdown")
    if not args.markdown:
        for (a, b), files in sorted(arrows.items(), key=lambda kv: (-RANK[kv[0][0]], kv[0])):
            print(f"{a} -> {b}  ({len(files)} includes)")
        print(f"{len(objs)} object files, {sum(len(v) for v in edges.values())} file arrows, "
              f"{len(cycles(edges))} circles")
    for p in problems:
        print("error: " + p, file=sys.stderr)
    if args.check and problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
