# SPDX-License-Identifier: Apache-2.0
"""The profile page's merges and diffs are exact, against `go tool pprof`.

proflet scrapes the demo service's CPU and memory profiles (memory as
proflet's deltas) into a directory sink and keeps them for the UI. Then,
for each profile type and every sample type:

  - the merge of all kept profiles (range=all, the JSON view) has, per
    function, the flat and cum values `go tool pprof -raw` gives when it
    merges the same delivered files (found in the sink by their end time);
  - a diff of the newer half against the older half has, per function,
    the values of each side's `go tool pprof` merge and their difference;
  - the merged range downloaded as pprof (/profile.pb.gz with a range)
    reads in `go tool pprof` with the same values per function;
  - the collapsed stacks of the merge sum, per leaf, to the flat values.
"""
import json
import os
import re
import sys
import urllib.request
from collections import defaultdict

from lib import *

sys.path.insert(0, os.path.join(SRC, "tests", "pprof"))
from pprof_raw import go_raw  # noqa: E402


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read()


def per_function(raw, column):
    """{function: (flat, cum)} of one column of a parsed -raw output, as
    pprof counts them: flat to the leaf, cum once per sample."""
    col = raw.columns.index(column)
    out = defaultdict(lambda: [0, 0])
    for key, values in raw.samples.items():
        v = values[col]
        names = raw.functions[key]
        if not v or not names:
            continue
        out[names[0]][0] += v
        for n in set(names):
            out[n][1] += v
    return {n: tuple(fc) for n, fc in out.items() if fc != [0, 0]}


def ours(doc, field_self="self", field_total="total"):
    return {f["name"]: (f[field_self], f[field_total]) for f in doc["functions"]
            if (f[field_self], f[field_total]) != (0, 0)}


def files_of(doc_side, by_end):
    ends = [p["end_ns"] for p in doc_side["profiles"]]
    missing = [e for e in ends if e not in by_end]
    check(not missing, f"{len(missing)} merged profiles are not in the sink")
    return [by_end[e] for e in ends]


def compare(what, want, got):
    if want == got:
        return
    diff = {n: (want.get(n), got.get(n)) for n in set(want) | set(got) if want.get(n) != got.get(n)}
    raise TestFailure(f"{what}: {len(diff)} functions differ from go tool pprof, e.g. "
                      f"{list(diff.items())[:5]}")


def main():
    with environment() as (tmp, procs):
        port = start_demoapp(tmp, procs)
        sport = free_port()
        sink = os.path.join(tmp, "sink")
        p = start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: demo
    scrape-interval: 2s
    enabled-profiles: [cpu, mem]
    static-configs:
      - application: demo
        targets: [127.0.0.1:{port}]
remote-write:
  - url: file://{sink}
""")
        wait_ready(sport)
        base = f"http://127.0.0.1:{sport}"

        def delivered(name):
            return [(f, m) for f, m in sink_profiles(sink) if labels_of(m).get("__name__") == name]

        wait_for("eight CPU and six memory profiles", lambda: alive(p) and len(delivered("process_cpu")) >= 8
                 and len(delivered("memory")) >= 6, timeout=90)
        page = http_get(base + "/targets")[1].decode()
        keys = {}
        for row in re.findall(r'<tr class="t".*?</tr>', page, re.S):
            m = re.search(r'href="/profile\?key=([0-9a-f]+)"', row)
            if m:
                keys["process_cpu" if "process_cpu" in row else "memory"] = m.group(1)
        check(set(keys) == {"process_cpu", "memory"}, f"both profile types' pages: {keys}")
        checked = 0
        for name, key in keys.items():
            by_end = {m["end_ns"]: f for f, m in delivered(name)}
            url = f"{base}/profile?key={key}&range=all&format=json"
            doc = json.loads(get(url))
            n = doc["comparison"]["merged"]
            check(n >= 6 and doc["skipped"] == 0, f"{name}: {n} profiles merged, {doc['skipped']} skipped")
            files = files_of(doc["comparison"], by_end)
            merged = go_raw(files)
            ends = [x["end_ns"] for x in doc["comparison"]["profiles"]]
            half = len(ends) // 2
            # Milliseconds around profiles lo..hi (their end times).
            f0, t0 = ends[0] // 1000000, (ends[half - 1] + 999999) // 1000000
            f1, t1 = ends[half] // 1000000, (ends[-1] + 999999) // 1000000
            base_files, comp_files = files[:half], files[half:]
            go_base, go_comp = go_raw(base_files), go_raw(comp_files)
            pb = get(f"{base}/profile.pb.gz?key={key}&from={f0}&to={t1}")
            dl = os.path.join(tmp, f"{name}-merged.pb.gz")
            with open(dl, "wb") as f:
                f.write(pb)
            downloaded = go_raw([dl])
            for t in doc["sample_types"]:
                d = json.loads(get(f"{url}&type={t}"))
                check([x["end_ns"] for x in d["comparison"]["profiles"]][:n] == ends[:n],
                      f"{name}: the same profiles merged for {t}")
                # The range may have grown meanwhile: compare on the same files.
                d = json.loads(get(f"{base}/profile?key={key}&from={f0}&to={t1}&type={t}&format=json"))
                check(d["comparison"]["merged"] == len(ends), f"{name} {t}: {d['comparison']['merged']} merged")
                compare(f"{name} {t}: the merge", per_function(merged, t), ours(d))
                compare(f"{name} {t}: the downloaded merge", per_function(merged, t),
                        per_function(downloaded, t))
                # The diff: newer half against older half.
                dd = json.loads(get(f"{base}/profile?key={key}&from={f1}&to={t1}&bfrom={f0}&bto={t0}"
                                    f"&type={t}&format=json"))
                check(dd["comparison"]["merged"] == len(comp_files) and dd["baseline"]["merged"] == len(base_files),
                      f"{name} {t}: the diff's sides")
                wb, wc = per_function(go_base, t), per_function(go_comp, t)
                compare(f"{name} {t}: the diff's baseline", wb, ours(dd, "base_self", "base_total"))
                compare(f"{name} {t}: the diff's comparison", wc, ours(dd))
                want = {fn: (wc.get(fn, (0, 0))[0] - wb.get(fn, (0, 0))[0],
                             wc.get(fn, (0, 0))[1] - wb.get(fn, (0, 0))[1]) for fn in set(wb) | set(wc)}
                compare(f"{name} {t}: the diff", {k: v for k, v in want.items() if v != (0, 0)},
                        ours(dd, "diff_self", "diff_total"))
                # Collapsed stacks: per leaf, the flat values.
                text = get(f"{base}/profile?key={key}&from={f0}&to={t1}&type={t}&format=collapsed").decode()
                leaf = defaultdict(int)
                for line in text.splitlines():
                    stack, _, v = line.rpartition(" ")
                    leaf[stack.split(";")[-1]] += int(v)
                compare(f"{name} {t}: collapsed stacks per leaf",
                        {k: v[0] for k, v in per_function(merged, t).items() if v[0]},
                        {k: v for k, v in leaf.items() if v})
                checked += 1
                print(f"{name} {t}: {len(ends)} profiles merged, {len(per_function(merged, t))} functions "
                      f"equal to go tool pprof; diff of {len(comp_files)} against {len(base_files)} equal")
        check(checked >= 4, f"{checked} sample types checked")
        code = stop(p)
        check(code == 0, f"exit status {code}")


run_test(main)
