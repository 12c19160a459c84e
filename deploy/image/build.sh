#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The build stage of deploy/Dockerfile (CI builds that file with podman,
# tests/deploy/test_image.py); it also runs outside a container.
#
#   deploy/image/build.sh [--no-deps] SRC_DIR BUILD_DIR
#
# Runs the README's commands: scripts/install-deps.sh --build, then meson
# setup and ninja. The image build uses a release build without the test
# suites. --no-deps skips install-deps.sh (on a machine that has them).
set -euo pipefail

deps=1
if [ "${1:-}" = "--no-deps" ]; then
  deps=0
  shift
fi
if [ "$#" -ne 2 ]; then
  echo "usage: $0 [--no-deps] SRC_DIR BUILD_DIR" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=$2

if [ "$deps" -eq 1 ]; then
  "$src/scripts/install-deps.sh" --build
fi
if [ -e "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" "$src" --buildtype=release -Dtests=false
else
  meson setup "$build" "$src" --buildtype=release -Dtests=false
fi
ninja -C "$build"
test -x "$build/agent/proflet"
"$build/agent/proflet" --version >/dev/null 2>&1 || "$build/agent/proflet" --help >/dev/null 2>&1 || true
echo "built $build/agent/proflet"
