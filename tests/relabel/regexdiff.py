#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Differential test of relabel regexes against Go's regexp itself.

Prometheus compiles each relabel regex with Go as "^(?s:" + re + ")$".
proflet runs them on RE2 with a bridge for what RE2 and Go do differently
(relabel/regex.c). This test generates random regexes (Go syntax and
almost-syntax: escapes, classes, flags, repeats, \\Q...\\E, \\C, invalid
UTF-8...) and subjects (ASCII, Unicode, case-folding pairs, invalid UTF-8),
runs every pair through tests/relabel/regex_probe (our library) and
go_regex_probe.go (Go's regexp, built here with Debian's Go), and requires
the same answer: the same error message, word for word, or the same match
with the same submatch offsets.

Go here is Debian's 1.19; Prometheus 3 is built with a newer Go that also
accepts (?<name>re). Cases with that group are handed to Go 1.19 spelled
(?P<name>re), and its messages are mapped back. Unicode classes new since
Unicode 13 are not generated.

Usage: regexdiff.py REGEX_PROBE GO GO_REGEX_PROBE_SRC
Environment: RELABEL_REGEXDIFF_SEED (default fixed), RELABEL_REGEXDIFF_N
(patterns per mode, default 15000; each gets 3 subjects).
"""
import os
import random
import subprocess
import sys
import tempfile


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib  # noqa: E402  (the shared helpers; unwinds on meson's SIGTERM)

SEED = int(os.environ.get("RELABEL_REGEXDIFF_SEED", "20220601"))
N = int(os.environ.get("RELABEL_REGEXDIFF_N", "15000"))

# Syntax-heavy: valid and invalid pieces of Go regex syntax, concatenated
# at random, so that most patterns fail and the error messages are compared.
SYNTAX = [
    ("a", 10), ("b", 6), ("é", 3), ("中", 2), ("\n", 1), ("-", 2), (":", 1), ("1", 2),
    (".", 6), ("*", 5), ("+", 5), ("?", 5), ("|", 5), ("(", 6), (")", 6), ("(?:", 3),
    ("(?i)", 2), ("(?s:", 1), ("(?-s)", 1), ("(?U)", 1), ("(?m)", 1), ("(?i-s:", 1),
    ("(?P<n>", 2), ("[", 5), ("]", 5), ("^", 3), ("$", 3), ("[:alpha:]", 1),
    ("[:^digit:]", 1), ("[:foo:]", 1), ("\\", 3), ("\\\\", 1), ("{", 2), ("}", 2), (",", 1),
    ("{2}", 2), ("{1,3}", 2), ("{,2}", 1), ("{0}", 1), ("{3,1}", 1), ("{1001}", 1),
    ("{01}", 1), ("{1,02}", 1), ("{100000000}", 1), ("{2,}", 1), ("\\Q", 2), ("\\E", 2),
    ("\\C", 2), ("\\Z", 1), ("\\z", 1), ("\\A", 1), ("\\b", 1), ("\\B", 1), ("\\d", 2),
    ("\\w", 2), ("\\s", 2), ("\\D", 1), ("\\W", 1), ("\\S", 1), ("\\pL", 2), ("\\PL", 1),
    ("\\p{Greek}", 1), ("\\p{^Lu}", 1), ("\\pN", 1), ("\\p{Foo}", 1), ("\\p{Cs}", 1),
    ("\\x41", 1), ("\\x{4e2d}", 1), ("\\x{110000}", 1), ("\\x{D800}", 1), ("\\101", 1),
    ("\\0", 1), ("\\1", 1), ("\\8", 1), ("\\v", 1), ("\\a", 1), ("\\e", 1), ("\\.", 2),
    ("\\*", 1), ("\\(", 1), ("\\[", 1), ("\\]", 1), ("\xff", 1), ("(?P=n)", 1), ("(?=", 1),
    ("(?#", 1), ("(?i-)", 1), ("(?-)", 1), ("(?P<a-b>", 1), ("(?P<>", 1), ("(?P<n", 1),
    ("**", 1), ("+?", 2), ("*?", 2), ("??", 1), ("\\Qa\\\\E", 1), ("[\\pL-z]", 1),
    ("[a-\\pL]", 1), ("[^\\x00-\\x{10ffff}]", 1), ("(?i)\\x{212a}", 1), ("[\\Q]", 1),
]
# Match-heavy: mostly valid pieces, short patterns, subjects from the same
# letters, so that matches and submatch offsets are compared.
MATCHING = [
    ("a", 14), ("b", 8), ("é", 3), ("中", 2), ("\n", 1), ("-", 2), (":", 1), ("1", 2),
    (".", 6), ("*", 4), ("+", 4), ("?", 4), ("*?", 2), ("+?", 2), ("??", 1), ("|", 5),
    ("(a|ab)", 2), ("(a*)", 2), ("(?:a|b)", 2), ("(a?)", 2), ("(|a)", 1), ("(b+|a*)", 1),
    ("(?i:k)", 1), ("(?i)", 1), ("(?U)", 1), ("(?m:^)", 1), ("(?m:$)", 1), ("(?s:.)", 1),
    ("(?-s:.)", 1), ("[ab]", 2), ("[^a]", 2), ("[[:alpha:]]", 1), ("[\\d-]", 1),
    ("[é-中]", 1), ("(?i)[a-k]", 1), ("\\pL", 2), ("\\PL", 1), ("\\p{Greek}", 1),
    ("\\x{fffd}", 1), ("\\Qa.b\\E", 1), ("\\d", 2), ("\\w", 2), ("\\s", 1), ("\\b", 2),
    ("\\B", 1), ("\\A", 1), ("\\z", 1), ("^", 2), ("$", 2), ("{2}", 1), ("{1,2}", 1),
    ("{0,}", 1), ("(?P<n>a*)", 1), ("(?<m>b|)", 1), ("()", 1), ("(", 1), (")", 1),
]
SUBJECT_PIECES = ["a", "a", "b", "é", "中", "\n", "-", "_", "1", ":", " ", "\udcff", "aa", "ab",
                  "A", "É", "Ω", "ω", "k", "K", "\u212a", "\udced\udca0\udc80"]


def enc(s):
    return s.encode("utf-8", "surrogateescape").hex()


def gen_case(rng, matching):
    toks, weights = zip(*(MATCHING if matching else SYNTAX))
    pat = "".join(rng.choices(toks, weights, k=rng.randint(1, 6 if matching else 12)))
    subjects = []
    for _ in range(3):
        if matching and rng.random() < 0.7:
            subjects.append("".join(rng.choice("aaabbé-1\n") for _ in range(rng.randint(0, 6))))
        else:
            subjects.append("".join(rng.choice(SUBJECT_PIECES)
                                    for _ in range(rng.randint(0, 8))))
    return pat, subjects


def run(cmd, lines):
    p = subprocess.run(cmd, input="".join(lines).encode(), capture_output=True, timeout=300)
    out = p.stdout.decode().splitlines()
    if p.returncode != 0 or len(out) != len(lines):
        raise RuntimeError("%s failed (%d, %d of %d lines): %s" % (
            cmd[0], p.returncode, len(out), len(lines), p.stderr.decode()[-1000:]))
    return out


def show(line):
    if line.startswith("ERR "):
        return "error: " + bytes.fromhex(line[4:]).decode("utf-8", "replace")
    return line


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    probe, go, go_src = sys.argv[1:]
    rng = random.Random(SEED)
    cases = []
    for matching in (False, True):
        for _ in range(N):
            pat, subjects = gen_case(rng, matching)
            cases += [(pat, s) for s in subjects]
    ours_in, go_in = [], []
    for pat, subj in cases:
        ours_in.append("%s %s\n" % (enc(pat), enc(subj)))
        # Go 1.19 spells the named group (?P<m>; nothing else changes
        go_in.append("%s %s\n" % (enc(pat.replace("(?<m>", "(?P<m>")), enc(subj)))
    with tempfile.TemporaryDirectory(prefix="relabel-regexdiff-") as tmp:
        env = dict(os.environ, GO111MODULE="off",
                   GOCACHE=os.environ.get("GOCACHE", os.path.join(tmp, "gocache")))
        exe = os.path.join(tmp, "go_regex_probe")
        b = subprocess.run([go, "build", "-o", exe, go_src], env=env, capture_output=True,
                           timeout=240)
        if b.returncode != 0:
            print("cannot build %s with %s: %s" % (go_src, go, b.stderr.decode()[-1000:]))
            return 1
        theirs = run([exe], go_in)
    ours = run([probe], ours_in)
    diffs, errors, matches = [], 0, 0
    for (pat, subj), a, b in zip(cases, ours, theirs):
        if b.startswith("ERR ") and "(?<m>" in pat:
            b = "ERR " + bytes.fromhex(b[4:]).replace(b"(?P<m>", b"(?<m>").hex()
        errors += a.startswith("ERR ")
        matches += a.startswith("MATCH")
        if a != b:
            diffs.append((pat, subj, a, b))
    print("relabel regex differential: %d cases (%d errors, %d matches, rest no match), "
          "%d differences" % (len(cases), errors, matches, len(diffs)))
    for pat, subj, a, b in diffs[:20]:
        print("DIFF regex %r subject %r\n  ours: %s\n  go:   %s" % (
            pat, subj.encode("utf-8", "surrogateescape"), show(a)[:300], show(b)[:300]))
    if diffs:
        return 1
    if errors < len(cases) // 10 or matches < len(cases) // 100:
        print("too few errors or matches compared")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
