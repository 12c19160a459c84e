#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The runtime stage's content (the image's whole root), staged by the
# Dockerfile's build stage; it also runs outside a container.
#
#   deploy/image/runtime-libs.sh BINARY STAGING_ROOT [CONFIG]
#
# Fills STAGING_ROOT with exactly what proflet needs at run time and nothing
# else (no shell, no package manager):
#   /usr/bin/proflet                     the binary
#   its ldd closure and the dynamic loader, at their Debian paths (the
#   usr-merge symlinks /lib, /lib64 are recreated like the build host's)
#   /etc/ssl/certs/ca-certificates.crt   for https endpoints
#   /etc/passwd, /etc/group              uid/gid 65532 "proflet"
#   /etc/proflet/proflet.yaml            CONFIG (default deploy/proflet.example.yaml)
#   /var/lib/proflet/spool               the only writable path, owned by 65532
#   /usr/share/proflet/runtime-packages.txt   Debian packages the files come from
#   /usr/share/doc/<package>/copyright   their licences
set -euo pipefail

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
  echo "usage: $0 BINARY STAGING_ROOT [CONFIG]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
root=$2
config=${3:-$here/../proflet.example.yaml}
uid=65532

[ -x "$bin" ] || { echo "$0: $bin is not an executable" >&2; exit 1; }
[ -f "$config" ] || { echo "$0: no config $config" >&2; exit 1; }
mkdir -p "$root"
root=$(cd "$root" && pwd)

# Mirror the host's usr-merge layout (/lib -> usr/lib, ...).
for d in lib lib64 lib32 libx32 bin sbin; do
  if [ -L "/$d" ]; then
    mkdir -p "$root/$(readlink "/$d" | sed 's#^/##')"
    ln -sfn "$(readlink "/$d")" "$root/$d"
  fi
done
mkdir -p "$root/usr/bin" "$root/etc/proflet" "$root/etc/ssl/certs" \
         "$root/var/lib/proflet/spool" "$root/usr/share/proflet" "$root/usr/share/doc"

install -m 0755 "$bin" "$root/usr/bin/proflet"
install -m 0644 "$config" "$root/etc/proflet/proflet.yaml"

# The shared-library closure. ldd prints "name => /path (addr)" for libraries
# and "/path (addr)" for the loader; "not found" is fatal.
libs=()
if ldd_out=$(ldd "$bin" 2>&1); then :; else
  echo "$0: ldd $bin failed: $ldd_out" >&2
  exit 1
fi
if grep -q "not found" <<<"$ldd_out"; then
  echo "$0: unresolved libraries:" >&2
  grep "not found" <<<"$ldd_out" >&2
  exit 1
fi
while read -r p; do
  [ -n "$p" ] && libs+=("$p")
done < <(awk '/=>/ { if ($3 ~ /^\//) print $3; next } $1 ~ /^\// { print $1 }' <<<"$ldd_out")
# glibc loads libgcc_s on demand (thread cancellation unwinding). awk reads
# to the end: an early exit would kill ldconfig with SIGPIPE, which
# pipefail turns into a silent exit of this script.
gcc_s=$(ldconfig -p | awk '/libgcc_s\.so\.1 .*x86-64|libgcc_s\.so\.1 .*AArch64/ && !found { found = $NF }
                          END { if (found) print found }')
[ -n "$gcc_s" ] && libs+=("$gcc_s")

files=()
for p in "${libs[@]}"; do
  # Keep the path the loader asks for; copy the real file's bytes there.
  dir=$(dirname "$p")
  canon=$(readlink -f "$dir")
  mkdir -p "$root$canon"
  cp -L --preserve=mode "$p" "$root$canon/$(basename "$p")"
  files+=("$(readlink -f "$p")")
done

# Without it every https endpoint fails; install-deps.sh --build installs it.
if [ ! -f /etc/ssl/certs/ca-certificates.crt ]; then
  echo "$0: no /etc/ssl/certs/ca-certificates.crt (Debian package ca-certificates)" >&2
  exit 1
fi
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
files+=(/usr/share/ca-certificates)

cat >"$root/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/usr/sbin/nologin
proflet:x:$uid:$uid:proflet:/var/lib/proflet:/usr/sbin/nologin
PASSWD
cat >"$root/etc/group" <<GROUP
root:x:0:
proflet:x:$uid:
GROUP
chown -R "$uid:$uid" "$root/var/lib/proflet"
chmod 0750 "$root/var/lib/proflet" "$root/var/lib/proflet/spool"

# Which Debian packages the runtime files come from, with versions and licences.
pkgs=()
for f in "${files[@]}"; do
  owner=$(dpkg -S "$f" 2>/dev/null | head -n1 | cut -d: -f1 || true)
  if [ -z "$owner" ]; then
    # usr-merged paths are registered under /lib in dpkg's database.
    alt=$(sed 's#^/usr/lib/#/lib/#' <<<"$f")
    owner=$(dpkg -S "$alt" 2>/dev/null | head -n1 | cut -d: -f1 || true)
  fi
  [ -n "$owner" ] && pkgs+=("$owner")
done
: >"$root/usr/share/proflet/runtime-packages.txt"
if [ "${#pkgs[@]}" -gt 0 ]; then
  for p in $(printf '%s\n' "${pkgs[@]}" | sort -u); do
    dpkg-query -W -f='${Package} ${Version}\n' "$p" >>"$root/usr/share/proflet/runtime-packages.txt"
    if [ -f "/usr/share/doc/$p/copyright" ]; then
      mkdir -p "$root/usr/share/doc/$p"
      cp "/usr/share/doc/$p/copyright" "$root/usr/share/doc/$p/copyright"
    fi
  done
fi
echo "staged $(wc -l <"$root/usr/share/proflet/runtime-packages.txt") runtime packages into $root"
