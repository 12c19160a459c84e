# SPDX-License-Identifier: Apache-2.0
"""Reads `go tool pprof -raw` output into {stack key: [values]}.

A stack key is (tuple of location addresses, leaf first; the sample's label
lines as printed). Duplicate keys are summed, as pprof's own merge would.
Shared by the oracle and fixture tests; no third-party modules."""

import os
import re
import subprocess

SAMPLE_RE = re.compile(r"^\s*(-?\d+(?:\s+-?\d+)*):\s*([\d ]*)$")
LOC_RE = re.compile(r"^\s*(\d+): (0x[0-9a-f]+)")


class RawProfile:
    def __init__(self, columns, samples, functions):
        self.columns = columns      # ["alloc_objects/count", ...]
        self.samples = samples      # {key: [int, ...]}
        self.functions = functions  # {key: [function names, leaf first]}


def parse_raw(text):
    lines = text.splitlines()
    i = 0
    while i < len(lines) and lines[i] != "Samples:":
        i += 1
    if i == len(lines):
        raise ValueError("no Samples: section")
    columns = [c.replace("[dflt]", "") for c in lines[i + 1].split()]
    i += 2
    raw_samples = []
    while i < len(lines) and lines[i] != "Locations":
        m = SAMPLE_RE.match(lines[i])
        if not m:
            raise ValueError("unexpected sample line: %r" % lines[i])
        values = [int(v) for v in m.group(1).split()]
        locs = [int(x) for x in m.group(2).split()]
        i += 1
        labels = []
        while i < len(lines) and lines[i].startswith(" " * 16) and not SAMPLE_RE.match(lines[i]):
            labels.append(lines[i].strip())
            i += 1
        if len(values) != len(columns):
            raise ValueError("sample has %d values for %d columns" % (len(values), len(columns)))
        raw_samples.append((values, locs, " ".join(labels)))
    i += 1
    addr = {}
    func = {}
    lid = None
    while i < len(lines) and lines[i] != "Mappings":
        m = LOC_RE.match(lines[i])
        rest = lines[i].split()
        if m:
            lid = int(m.group(1))
            addr[lid] = int(m.group(2), 16)
            func[lid] = []
            rest = lines[i][m.end():].split()
        # "[M=1] [[F]] name file:line s=0"; inlined frames continue below.
        names = [w for w in rest if not w.startswith("M=") and w != "[F]"]
        if lid is not None and names:
            func[lid].append(names[0])
        i += 1
    samples = {}
    functions = {}
    for values, locs, labels in raw_samples:
        key = (tuple(addr[l] for l in locs), labels)
        if key in samples:
            samples[key] = [a + b for a, b in zip(samples[key], values)]
        else:
            samples[key] = list(values)
        functions[key] = [f for l in locs for f in func[l]]
    return RawProfile(columns, samples, functions)


def go_raw(args, go="go"):
    """Runs `go tool pprof -raw -symbolize=none ARGS` and parses its output."""
    env = dict(os.environ)
    env["PPROF_TMPDIR"] = env.get("TMPDIR", "/tmp")
    env["PPROF_BINARY_PATH"] = "/nonexistent"
    out = subprocess.run([go, "tool", "pprof", "-raw", "-symbolize=none"] + list(args),
                         capture_output=True, text=True, env=env, timeout=120)
    if out.returncode != 0:
        raise RuntimeError("go tool pprof %s failed: %s" % (" ".join(args), out.stderr))
    return parse_raw(out.stdout)
