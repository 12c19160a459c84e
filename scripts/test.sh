#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what is missing, builds, and runs every test suite: unit,
# integration, conformance and fuzz (corpus replay) in a normal build; unit
# and integration again under AddressSanitizer + UBSan; and the fuzz corpora
# under libFuzzer in an instrumented clang build with the same sanitizers,
# where each target must reach its coverage floor; and the unit suite of a
# build without ISA-L (every output setting on libdeflate). Ends with one
# line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests || exit 1

export GOCACHE=${GOCACHE:-/tmp/proflet-gocache}
export GOFLAGS=${GOFLAGS:-}
export GO111MODULE=off

status=0

run_suites() { # build_dir suites...
  local dir=$1; shift
  local args=()
  for s in "$@"; do args+=(--suite "$s"); done
  meson test -C "$dir" --print-errorlogs --num-processes 2 "${args[@]}" || status=1
}

if ! BUILD_DIR=build scripts/build.sh -Dwerror=true; then
  echo "build failed"; echo "0 passed, 1 failed"; exit 1
fi
run_suites build unit conformance fuzz integration
cp build/meson-logs/testlog.json /tmp/proflet-testlog-main.json

if [ "${PROFLET_SKIP_ASAN:-0}" != 1 ]; then
  if BUILD_DIR=build-asan scripts/build.sh -Db_sanitize=address,undefined -Db_lundef=false; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    run_suites build-asan unit integration
    cp build-asan/meson-logs/testlog.json /tmp/proflet-testlog-asan.json
  else
    echo "sanitizer build failed"; status=1
    echo '{"name": "asan-build", "result": "FAIL"}' > /tmp/proflet-testlog-asan.json
  fi

  # Without ISA-L: the fallback encoder, on the code paths that compress.
  if BUILD_DIR=build-noisal scripts/build.sh -Dwerror=true -Disal=disabled; then
    meson test -C build-noisal --print-errorlogs --num-processes 2 pprof forward-unit \
      forward-dir forward-remote it-compression || status=1
    cp build-noisal/meson-logs/testlog.json /tmp/proflet-testlog-noisal.json
  else
    echo "build without ISA-L failed"; status=1
    echo '{"name": "noisal-build", "result": "FAIL"}' > /tmp/proflet-testlog-noisal.json
  fi

  if CC=clang CXX=clang++ BUILD_DIR=build-fuzz scripts/build.sh -Dfuzzing=true \
       -Db_sanitize=address,undefined -Db_lundef=false; then
    run_suites build-fuzz fuzz
    cp build-fuzz/meson-logs/testlog.json /tmp/proflet-testlog-fuzz.json
  else
    echo "fuzz build failed"; status=1
    echo '{"name": "fuzz-build", "result": "FAIL"}' > /tmp/proflet-testlog-fuzz.json
  fi
fi

/usr/bin/python3 - "$status" /tmp/proflet-testlog-main.json \
    $( [ "${PROFLET_SKIP_ASAN:-0}" != 1 ] && echo /tmp/proflet-testlog-asan.json /tmp/proflet-testlog-fuzz.json /tmp/proflet-testlog-noisal.json ) <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[2:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        failed += 1
        continue
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
if skipped:
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
else:
    print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed or int(sys.argv[1]) else 0)
PY
