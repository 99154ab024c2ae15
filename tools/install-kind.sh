#!/usr/bin/env bash
# kind (Kubernetes in Docker) for the e2e/kind suite, built through the Go
# module proxy (no binary downloads here). kind also needs a running Docker
# engine; without one the suite skips and says so.
#
#   tools/install-kind.sh              # installs into $GOBIN (default ~/go/bin)
#   KIND_VERSION=v0.33.0 tools/install-kind.sh
set -euo pipefail

KIND_VERSION="${KIND_VERSION:-v0.33.0}"
GOBIN="${GOBIN:-$(go env GOPATH)/bin}"
export GOBIN

if [[ -x "$GOBIN/kind" ]] && "$GOBIN/kind" version 2>/dev/null | grep -q "kind ${KIND_VERSION} "; then
  echo "kind: $GOBIN/kind ($KIND_VERSION, already installed)"
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "kind: go is not on PATH; install Go (or kind) first" >&2
  exit 1
fi
go install "sigs.k8s.io/kind@${KIND_VERSION}"
echo "kind: $GOBIN/kind ($("$GOBIN/kind" version))"
