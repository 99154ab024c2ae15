#!/usr/bin/env bash
# Builds the Kubernetes components a real cluster needs, from the Go module
# proxy only (this workplace reaches package registries, not release
# downloads), into .cache/k8s/bin. Idempotent: a binary already built at the
# pinned version is kept, so a warm run takes seconds.
#
#   tools/k8s/build-binaries.sh                       # everything
#   tools/k8s/build-binaries.sh etcd kube-apiserver   # only these
#
# Why a wrapper module: k8s.io/kubernetes and go.etcd.io/etcd/server/v3
# cannot be `go install`ed, because their go.mod replaces staged or sibling
# modules with local folders. A small module that requires them and replaces
# each of those with its published version builds every command.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
K8S_VERSION="${K8S_VERSION:-v1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.12.1}"
LOCAL_PATH_VERSION="${LOCAL_PATH_VERSION:-v0.0.30}"
OUT="${K8S_BIN:-$ROOT/.cache/k8s/bin}"
WORK="$ROOT/.cache/k8s/src"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

K8S_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kubeadm kube-proxy)
ALL=(etcd "${K8S_COMMANDS[@]}" helm kind coredns local-path-provisioner)
WANTED=("$@")
[[ ${#WANTED[@]} -eq 0 ]] && WANTED=("${ALL[@]}")

command -v go >/dev/null || { echo "k8s build: go is not on PATH; install Go first" >&2; exit 1; }
mkdir -p "$OUT" "$WORK"
# One builder at a time (.ci/run builds the kind tier's binaries beside the tests): a second waits, then finds them built.
exec 9>"$OUT/.build.lock"
flock -w 3600 9 || { echo "k8s build: another build has held $OUT/.build.lock for an hour" >&2; exit 1; }

version_of() {  # the version a binary is pinned to
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    kind) echo "$KIND_VERSION" ;;
    coredns) echo "$COREDNS_VERSION" ;;
    local-path-provisioner) echo "$LOCAL_PATH_VERSION" ;;
    *) echo "$K8S_VERSION" ;;
  esac
}

is_built() { [[ -x "$OUT/$1" && "$(cat "$OUT/.$1.version" 2>/dev/null)" == "$(version_of "$1")" ]]; }

mark_built() { version_of "$1" >"$OUT/.$1.version"; echo "k8s build: $1 $(version_of "$1") ($(( SECONDS - $2 )) s)"; }

# A module in $WORK/<name> requiring <module>@<version>, with every local
# replace of that module's go.mod turned into the published <replace_version>.
wrapper_module() {
  local name=$1 module=$2 version=$3 replace_version=$4 dir="$WORK/$name"
  [[ -f "$dir/.ready-$version" ]] && { echo "$dir"; return; }
  rm -rf "$dir" && mkdir -p "$dir"
  local gomod
  gomod=$(go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module tinystream.local/build/$name"
    echo "go 1.24.0"
    echo "require $module $version"
    # lines like `k8s.io/api => ./staging/src/k8s.io/api` or `go.etcd.io/etcd/api/v3 => ../api`
    # (a replace to ./FORBIDDEN_DEPENDENCY marks a module that must not be required at all: left out)
    grep -v FORBIDDEN_DEPENDENCY "$gomod" \
      | sed -n 's/^[[:space:]]*\(replace[[:space:]]\+\)\?\([^[:space:]]\+\)[[:space:]]*=>[[:space:]]*\.\{1,2\}\/.*/\2/p' \
      | sort -u | while read -r staged; do echo "replace $staged => $staged $replace_version"; done
  } >"$dir/go.mod"
  echo "package main" >"$dir/tools.go"
  (cd "$dir" && go mod download "$module" >/dev/null 2>&1 || true)
  touch "$dir/.ready-$version"
  echo "$dir"
}

build_kubernetes() {
  local cmd=$1 start=$SECONDS dir minor
  dir=$(wrapper_module kubernetes k8s.io/kubernetes "$K8S_VERSION" "v0.${K8S_VERSION#v1.}")
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  local v="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
  v+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  v+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1"
  v+=" -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  (cd "$dir" && go get "k8s.io/kubernetes/cmd/$cmd@$K8S_VERSION" >/dev/null 2>&1 || true
   go build -trimpath -ldflags "-s -w $v" -o "$OUT/$cmd" "k8s.io/kubernetes/cmd/$cmd")
  mark_built "$cmd" "$start"
}

build_etcd() {
  local start=$SECONDS dir
  dir=$(wrapper_module etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "$ETCD_VERSION")
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1 || true
   go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3)
  mark_built etcd "$start"
}

go_install() {  # name, package@version, [ldflags]
  local name=$1 pkg=$2 flags=${3:-} start=$SECONDS
  GOBIN="$OUT" go install -trimpath -ldflags "-s -w $flags" "$pkg"
  mark_built "$name" "$start"
}

for name in "${WANTED[@]}"; do
  is_built "$name" && { echo "k8s build: $name $(version_of "$name") (cached)"; continue; }
  case "$name" in
    etcd) build_etcd ;;
    kube-*|kubectl|kubelet|kubeadm) build_kubernetes "$name" ;;
    helm)
      h="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
      for p in pkg/chartutil pkg/lint/rules; do
        h+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
      done
      go_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$h" ;;
    kind) go_install kind "sigs.k8s.io/kind@$KIND_VERSION" ;;
    coredns) go_install coredns "github.com/coredns/coredns@$COREDNS_VERSION" ;;
    local-path-provisioner) go_install local-path-provisioner "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION" ;;
    *) echo "k8s build: unknown component $name (known: ${ALL[*]})" >&2; exit 2 ;;
  esac
done
