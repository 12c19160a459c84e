#!/usr/bin/env bash
# Installs every Debian package proflet needs to build, run its demo and run
# all of its tests. Idempotent: installs only what is missing.
set -euo pipefail

PKGS=(
  # build
  build-essential meson ninja-build pkg-config
  # the libraries proflet links (see README "Dependencies")
  libuv1-dev libcurl4-openssl-dev libzstd-dev libprotobuf-c-dev
  protobuf-c-compiler libcyaml-dev libre2-dev libdeflate-dev libjson-c-dev
  libhttp-parser-dev libxxhash-dev libssl-dev libcrypt-dev libyaml-dev zlib1g-dev
  # the demo app and the real Go peers used by the tests
  golang-go golang-github-google-pprof-dev golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev
  # test oracles and clients
  prometheus protobuf-compiler python3 python3-yaml python3-protobuf python3-bcrypt openssl systemd
  nghttp2-server tinyproxy
  python3-kubernetes curl
  # a real browser for the web UI tests (headless, loopback only)
  chromium
  # sanitizers, fuzzing, memory checks
  clang libclang-rt-14-dev valgrind
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's prometheus package may start a server on install; tests do not want it.
pkill -x prometheus 2>/dev/null || true
