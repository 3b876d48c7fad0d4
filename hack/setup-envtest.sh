#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver and etcd) from Go sources
# served by the Go module proxy, at the Kubernetes release that matches k8s.io/api
# in go.mod, and caches the binaries outside the repository.
#
# Prints progress on stderr and, on stdout, the one folder to use as
# KUBEBUILDER_ASSETS. Idempotent: a second run finds the cache and returns at once.
#
#   KUBEBUILDER_ASSETS="$(hack/setup-envtest.sh)" go test ./...
#
# Environment:
#   REGIONWARDEN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/regionwarden)
#   K8S_VERSION         override the Kubernetes release (default: from go.mod)
#   ETCD_VERSION        override the etcd release (default: what that release requires)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'setup-envtest: %s\n' "$*" >&2; }

modversion() { awk -v m="$1" '{ for (i = 1; i < NF; i++) if ($i == m) { print $(i + 1); exit } }' "$2"; }
api_version="$(modversion k8s.io/api "${root}/go.mod")"
if [[ -z "${api_version}" ]]; then
  log "cannot find k8s.io/api in ${root}/go.mod"
  exit 1
fi
k8s_version="${K8S_VERSION:-v1.${api_version#v0.}}"
cache="${REGIONWARDEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regionwarden}"
assets="${cache}/envtest/${k8s_version}-$(go env GOOS)-$(go env GOARCH)"

if [[ -x "${assets}/kube-apiserver" && -x "${assets}/etcd" ]]; then
  log "using cached control plane ${k8s_version} in ${assets}"
  echo "${assets}"
  exit 0
fi

work="${cache}/envtest/build-${k8s_version}"
rm -f "${work}/apiserver/tools.go"
mkdir -p "${work}/apiserver" "${work}/etcd" "${assets}.partial"
log "building kube-apiserver and etcd for Kubernetes ${k8s_version} (first run only: about 10 minutes on 2 cores)"

# The kubernetes module replaces every staging module (k8s.io/api, k8s.io/apiserver, ...)
# with a folder of its own repository. Outside that repository, the same code is
# published as k8s.io/<name> v0.X.Y: replace each with that.
log "fetching k8s.io/kubernetes@${k8s_version} module graph"
gomod="$(cd "${work}" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${k8s_version}" | awk -F'"' '$2 == "GoMod" { print $4 }')"
staging_version="v0.${k8s_version#v1.}"
{
  echo "module regionwarden.local/envtest-apiserver"
  echo
  echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
  echo
  echo "require k8s.io/kubernetes ${k8s_version}"
  echo
  echo "replace ("
  awk '/=> \.\/staging\/src\// { printf "\t%s => %s %s\n", $1, $1, v }' v="${staging_version}" "${gomod}"
  echo ")"
} > "${work}/apiserver/go.mod"

etcd_version="${ETCD_VERSION:-$(modversion go.etcd.io/etcd/server/v3 "${gomod}")}"
cat > "${work}/etcd/go.mod" <<GOMOD
module regionwarden.local/envtest-etcd

go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')

require go.etcd.io/etcd/server/v3 ${etcd_version}
GOMOD

# Both builds also require every module this repository's go.mod requires, at
# its version or later. Libraries both sides use (client-go, apimachinery,
# gRPC, protobuf, golang.org/x/...) then resolve to the same versions, and
# with the same flags (-trimpath, -gcflags below) their packages compile once:
# `make demo` and `make test` take them from the Go build cache instead of
# compiling them again, which saves minutes on a fresh machine. The control
# plane only runs tests, and `make test` checks that it works.
if [[ -z "${K8S_VERSION:-}" ]]; then
  requires="$(awk '/^require \(/ { r = 1; next } r && /^\)/ { r = 0 } r && NF >= 2 { print "\t" $1, $2 } /^require [^(]/ { print "\t" $2, $3 }' "${root}/go.mod")"
  for m in "${work}/apiserver/go.mod" "${work}/etcd/go.mod"; do
    printf '\nrequire (\n%s\n)\n' "${requires}" >> "${m}"
  done
fi
cat > "${work}/etcd/main.go" <<'GO'
// Command etcd is etcd's own server entry point, built from its server module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO

# The binaries carry no debug information (-s -w), so the compiler need not
# produce any either (-dwarf=false): less work, same programs. The Makefile
# builds and tests with the same -trimpath and -gcflags (GO_BUILD_FLAGS).
ldflags="-s -w"
gcflags="all=-dwarf=false"
# etcd builds in the background while kube-apiserver builds.
(
  cd "${work}/etcd"
  log "resolving etcd ${etcd_version} dependencies"
  GOFLAGS=-mod=mod go mod tidy >/dev/null
  log "compiling etcd ${etcd_version}"
  GOFLAGS=-mod=mod go build -trimpath -gcflags="${gcflags}" -ldflags="${ldflags}" -o "${assets}.partial/etcd" .
  log "etcd done"
) &
etcd_pid=$!
(
  cd "${work}/apiserver"
  log "resolving kube-apiserver dependencies"
  go get k8s.io/kubernetes/cmd/kube-apiserver 2>&1 | grep -v '^go: ' >&2 || true
  log "compiling kube-apiserver"
  GOFLAGS=-mod=mod go build -trimpath -gcflags="${gcflags}" -ldflags="${ldflags}" -o "${assets}.partial/" k8s.io/kubernetes/cmd/kube-apiserver
  log "kube-apiserver done"
) || { kill "${etcd_pid}" 2>/dev/null || true; exit 1; }
wait "${etcd_pid}"

rm -rf "${assets}"
mv "${assets}.partial" "${assets}"
log "control plane ready in ${assets}"
echo "${assets}"
