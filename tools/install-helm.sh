#!/usr/bin/env bash
# Helm for the chart tests (tests/operator/k8s) and the kind suite (e2e/kind).
# Built from source through the Go module proxy: this workplace reaches
# package registries only, so the usual get-helm script (a binary download)
# cannot run. Idempotent: does nothing when the pinned version is installed.
#
#   tools/install-helm.sh              # installs into $GOBIN (default ~/go/bin)
#   HELM_VERSION=v3.22.0 tools/install-helm.sh
#
# Needs: go >= 1.24 on PATH. Takes a few minutes on 2 cores the first time.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
GOBIN="${GOBIN:-$(go env GOPATH)/bin}"
export GOBIN

if [[ -x "$GOBIN/helm" ]] && "$GOBIN/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$HELM_VERSION"; then
  echo "helm: $GOBIN/helm ($HELM_VERSION, already installed)"
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "helm: go is not on PATH; install Go (or helm) first" >&2
  exit 1
fi
# -ldflags as helm's own Makefile sets them: the version helm reports, and the
# default Kubernetes version of `helm template`/`helm lint` (client-go's minor,
# major 1), which a plain `go install` would leave at v1.20.
K8S_MINOR=37
go install -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} \
  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${K8S_MINOR} \
  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${K8S_MINOR}" \
  "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
echo "helm: $GOBIN/helm ($("$GOBIN/helm" version --short))"
