#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Regenerates the plain manifests daemonset.yaml, statefulset.yaml,
# deployment.yaml and deployment-clustered.yaml from the Helm chart (helm/proflet), so that both install
# paths deploy the same thing. tests/deploy checks they are up to date.
#
#   deploy/kubernetes/generate.sh [--check] [HELM_RENDER]
#
# HELM_RENDER is tools/helm-render built (default: built into a temp dir).
# --check changes nothing and exits 1 if a committed manifest is stale.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
checkonly=0
if [ "${1:-}" = "--check" ]; then
  checkonly=1
  shift
fi
render=${1:-}
stale=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$render" ]; then
  render=$tmp/helm-render
  GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE=${GOCACHE:-$tmp/gocache} \
    go build -o "$render" "$src/tools/helm-render/main.go"
fi
for mode in daemonset statefulset deployment deployment-clustered; do
  case $mode in
    daemonset) release=proflet ;;
    statefulset) release=proflet-sharded ;;
    deployment) release=proflet-cluster ;;
    deployment-clustered) release=proflet-clustered ;;
  esac
  {
    echo "# proflet as a ${mode/-clustered/ of clustered replicas}. Generated from helm/proflet by deploy/kubernetes/generate.sh"
    echo "# with deploy/kubernetes/values/$mode.yaml; do not edit by hand."
    echo "# Apply after namespace.yaml and remote-credentials.yaml (see docs/deploy.md)."
    "$render" --name "$release" --namespace proflet --release-service kubectl \
      -f "$here/values/$mode.yaml" "$src/helm/proflet"
  } >"$tmp/$mode.yaml"
  if [ "$checkonly" -eq 1 ]; then
    if ! diff -u "$here/$mode.yaml" "$tmp/$mode.yaml"; then
      echo "deploy/kubernetes/$mode.yaml is stale: run deploy/kubernetes/generate.sh" >&2
      stale=1
    fi
  else
    mv "$tmp/$mode.yaml" "$here/$mode.yaml"
  fi
done
exit "$stale"
