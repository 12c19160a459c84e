#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds proflet in ./build (or $BUILD_DIR). Extra arguments
# go to `meson setup` (e.g. -Db_sanitize=address,undefined).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  meson setup "$BUILD_DIR" "$@" >/dev/null
fi
ninja -C "$BUILD_DIR" >/dev/null
echo "built $BUILD_DIR/agent/proflet"
