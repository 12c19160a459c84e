#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian package proflet_VERSION_ARCH.deb with Debian's tools.
#
#   deploy/package/build.sh OUT_DIR
#
# Copies the source tree into OUT_DIR/proflet-VERSION (the files git knows,
# untracked ones it does not ignore included; without git, the tree minus
# build*/ and dot folders), puts deploy/package/debian there as debian/
# with a changelog entry for meson.build's version, and runs
# `dpkg-buildpackage -b` (unsigned). The .deb, .buildinfo and .changes land
# in OUT_DIR; the checkout itself is not written to. Needs the Build-Depends
# of deploy/package/debian/control (scripts/install-deps.sh --tests
# installs them).
set -euo pipefail

if [ "$#" -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)

version=$(sed -n "s/^  version : '\([^']*\)',\$/\1/p" "$src/meson.build" | head -n1)
[ -n "$version" ] || { echo "$0: no version in meson.build" >&2; exit 1; }
tree=$out/proflet-$version
rm -rf "$tree"
mkdir -p "$tree"

if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$src" ls-files -z --cached --others --exclude-standard |
    tar -C "$src" --null -T - --ignore-failed-read -cf - | tar -C "$tree" -xf -
  revision=$(git -C "$src" rev-parse HEAD)
  when=$(git -C "$src" log -1 --format=%cD HEAD)
else
  tar -C "$src" --exclude='./build*' --exclude='./.*' --exclude=./proflet-data -cf - . | tar -C "$tree" -xf -
  revision=unknown
  when=$(date -R)
fi

rm -rf "$tree/debian"
cp -rL "$src/deploy/package/debian" "$tree/debian"
maintainer=$(sed -n 's/^Maintainer: //p' "$tree/debian/control")
cat >"$tree/debian/changelog" <<CHANGELOG
proflet ($version) unstable; urgency=medium

  * Built from the proflet source tree,
    revision $revision.

 -- $maintainer  $when
CHANGELOG

(cd "$tree" && dpkg-buildpackage -b --no-sign)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
test -f "$out/proflet_${version}_${arch}.deb"
echo "built $out/proflet_${version}_${arch}.deb"
