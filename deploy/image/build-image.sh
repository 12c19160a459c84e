#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the image of deploy/Dockerfile with a container engine, stamped
# with the OCI annotations of this source tree.
#
#   deploy/image/build-image.sh [--engine podman|docker] [--tag TAG]
#                               [--build-base IMAGE] [-- ENGINE BUILD ARGS...]
#
# The build context is the source tree (deploy/Dockerfile.dockerignore
# leaves out build trees and .git). org.opencontainers.image.version is
# meson.build's project version, .revision the checkout's commit
# ($PROFLET_REVISION if set, "unknown" outside git), .source and .licenses fixed; they are image labels (the
# Dockerfile's LABEL) and, with podman, manifest annotations too. The tag
# defaults to proflet/proflet:VERSION. --build-base replaces the build
# stage's debian:bookworm-slim (the tests use a base made by mmdebstrap).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
engine=podman
tag=
base=
while [ "$#" -gt 0 ]; do
  case "$1" in
    --engine) engine=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --build-base) base=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [--engine podman|docker] [--tag TAG] [--build-base IMAGE] [-- ARGS...]" >&2; exit 2 ;;
  esac
done

version=$(sed -n "s/^  version : '\([^']*\)',\$/\1/p" "$src/meson.build" | head -n1)
[ -n "$version" ] || { echo "$0: no version in meson.build" >&2; exit 1; }
revision=${PROFLET_REVISION:-$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)}
tag=${tag:-proflet/proflet:$version}

args=(build -f "$src/deploy/Dockerfile" -t "$tag"
      --build-arg "PROFLET_VERSION=$version" --build-arg "PROFLET_REVISION=$revision")
[ -z "$base" ] || args+=(--build-arg "BUILD_BASE=$base")
if [ "$engine" = podman ]; then
  # podman reads no <Dockerfile>.dockerignore by itself; BuildKit does.
  args+=(--ignorefile "$src/deploy/Dockerfile.dockerignore" --format oci)
  for kv in "version=$version" "revision=$revision" "source=https://github.com/proflet/proflet" \
            "licenses=Apache-2.0" "title=proflet"; do
    args+=(--annotation "org.opencontainers.image.$kv")
  done
fi
exec "$engine" "${args[@]}" "$@" "$src"
