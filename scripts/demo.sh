#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The demo: installs what is missing, builds proflet and the example Go
# service, runs the service on 127.0.0.1:6060 and proflet on its embedded
# default configuration for about 30 s, then shows what was collected.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=build scripts/build.sh

export GOCACHE=${GOCACHE:-/tmp/proflet-gocache} GO111MODULE=off
work=$(mktemp -d /tmp/proflet-demo.XXXXXX)
(cd examples/demoapp && go build -o "$work/demoapp" .)

if (exec 3<>/dev/tcp/127.0.0.1/6060) 2>/dev/null; then
  echo "demo: something already listens on 127.0.0.1:6060; stop it first" >&2
  exit 1
fi

cleanup() {
  kill "${app_pid:-}" "${agent_pid:-}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT

"$work/demoapp" -addr 127.0.0.1:6060 2>"$work/demoapp.log" &
app_pid=$!
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/6060) 2>/dev/null && break
  sleep 0.1
done

rm -rf proflet-data
secs=${DEMO_SECONDS:-32}
echo "demo: running proflet on its embedded default config for ${secs}s (log: $work/proflet.log)"
build/agent/proflet 2>"$work/proflet.log" &
agent_pid=$!
sleep "$secs"
kill -TERM "$agent_pid"
wait "$agent_pid" && echo "demo: proflet exited cleanly" || echo "demo: proflet exited with $?"
agent_pid=

echo
echo "== profiles collected under ./proflet-data (per type: count, bytes) =="
for d in proflet-data/*/*/; do
  [ -d "$d" ] || continue
  n=$(find "$d" -name '*.pb.gz' | wc -l)
  b=$(find "$d" -name '*.pb.gz' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  printf '  %-40s %3d profiles %9d bytes\n' "${d#proflet-data/}" "$n" "$b"
done
cpu=$(find proflet-data -path '*process_cpu*' -name '*.pb.gz' | sort | tail -1)
if [ -n "$cpu" ]; then
  echo
  echo "== go tool pprof -top $cpu =="
  go tool pprof -top "$cpu" 2>/dev/null | head -20
  echo
  echo "labels: $(cat "${cpu%.pb.gz}.json")"
else
  echo "no CPU profile yet (first scrapes happen at each target's offset in the 15 s interval)"
fi
