#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages proflet needs, and only what is missing.
#
#   scripts/install-deps.sh           build proflet and run its demo
#   scripts/install-deps.sh --build   build proflet only (the image's build stage)
#   scripts/install-deps.sh --tests   build, demo, and every test suite
#   scripts/install-deps.sh --build --list   print the packages, install nothing
#                                     (the image test preinstalls them in its build base)
#
# It starts and stops nothing: daemons that a package would start on
# install (Debian's prometheus does) are kept from starting for the length
# of the install, and a machine's own policy, if it has one, is left alone.
set -euo pipefail

BUILD=(
  build-essential meson ninja-build pkg-config
  # the libraries proflet links (see README "Dependencies")
  libuv1-dev libcurl4-openssl-dev libzstd-dev libprotobuf-c-dev
  protobuf-c-compiler libcyaml-dev libre2-dev libdeflate-dev libisal-dev libjson-c-dev
  libhttp-parser-dev libxxhash-dev libssl-dev libcrypt-dev libyaml-dev zlib1g-dev
  # the CA bundle the image carries for https endpoints (deploy/image/runtime-libs.sh)
  ca-certificates
)
DEMO=(
  # the demo's Go service, and `go tool pprof` to show what it collected
  golang-go
)
TESTS=(
  # the real Go peers the tests build
  golang-github-google-pprof-dev golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev
  # test oracles and clients
  prometheus protobuf-compiler python3 python3-yaml python3-protobuf python3-bcrypt openssl systemd
  nghttp2-server tinyproxy
  python3-kubernetes curl
  # a real browser for the web UI tests (headless, loopback only)
  chromium
  # sanitizers, fuzzing, memory checks
  clang libclang-rt-14-dev valgrind
  # the C layout check (.clang-format)
  clang-format
  # the image run by a real engine (root, runc, cgroupfs) and its build base
  podman runc mmdebstrap git
  # the Debian package: built, checked, installed into a fresh Debian root
  debhelper dpkg-dev help2man lintian
)

list=0
mode=
for arg in "$@"; do
  case "$arg" in
    --list) list=1 ;;
    *) [ -z "$mode" ] || mode=bad; mode=${mode:-$arg} ;;
  esac
done
case "$mode" in
  --build) PKGS=("${BUILD[@]}") ;;
  "") PKGS=("${BUILD[@]}" "${DEMO[@]}") ;;
  --tests) PKGS=("${BUILD[@]}" "${DEMO[@]}" "${TESTS[@]}") ;;
  *) echo "usage: $0 [--build | --tests] [--list]" >&2; exit 2 ;;
esac
if [ "$list" -eq 1 ]; then
  printf '%s\n' "${PKGS[@]}"
  exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  # invoke-rc.d asks this file whether a package may start its service;
  # 101 means "not now". Removed again whatever the install's outcome.
  trap '$SUDO rm -f "$policy"' EXIT
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
