# SPDX-License-Identifier: Apache-2.0
"""Query parameters of the status server are read as Go's url.ParseQuery
reads them, so links that browsers and scripts encode work: ?job= with a
job name holding a space and a slash, spelled '+', '%20' or '%2F'; a pair
with a bad escape is skipped (all jobs, as when absent); a value too long
for any job name is refused with 400, never cut to a shorter name; the UI's
?format=text is decoded too. The targets are loopback ports nothing
listens on: only the filtering is under test."""
import json
import urllib.error

from lib import *


def pools(sport, query):
    code, body = http_get(f"http://127.0.0.1:{sport}/api/v1/targets{query}")
    check(code == 200, f"{query}: HTTP {code}")
    return sorted({t["scrapePool"] for t in json.loads(body)["data"]["activeTargets"]})


def main():
    with environment() as (tmp, procs):
        sport, dead = free_port(), free_port()
        start_proflet(tmp, procs, f"""
server:
  listen-address: 127.0.0.1:{sport}
scrape-configs:
  - job-name: team a/profiles
    scrape-interval: 1h
    enabled-profiles: [goroutine]
    static-configs:
      - application: a
        targets: [127.0.0.1:{dead}]
  - job-name: team b
    scrape-interval: 1h
    enabled-profiles: [goroutine]
    static-configs:
      - application: b
        targets: [127.0.0.2:{dead}]
remote-write:
  - url: file://{tmp}/sink
""")
        wait_ready(sport)
        both = ["team a/profiles", "team b"]
        check(pools(sport, "") == both, "both jobs without ?job=")
        for q in ("?job=team+a%2Fprofiles", "?job=team%20a/profiles", "?job=team+a/profiles&job=team+b",
                  "?x=1&%6Aob=team%20a%2fprofiles"):
            check(pools(sport, q) == ["team a/profiles"], f"{q} did not keep the one job")
        check(pools(sport, "?job=team+b") == ["team b"], "?job=team+b")
        check(pools(sport, "?job=team+a") == [], "?job=team+a matched a longer name")
        check(pools(sport, "?job=team%2") == both, "a bad escape is skipped as Go skips it")
        try:
            code = http_get(f"http://127.0.0.1:{sport}/api/v1/targets?job={'x' * 2000}")[0]
        except urllib.error.HTTPError as e:
            code = e.code
        check(code == 400, f"a 2000-byte job name: HTTP {code}, want 400")
        code, body = http_get(f"http://127.0.0.1:{sport}/targets?format=%74ext")
        check(code == 200 and b"<html" not in body.lower() and b"127.0.0.2" in body,
              f"?format=%74ext did not give the text view: HTTP {code} {body[:80]!r}")


run_test(main)
