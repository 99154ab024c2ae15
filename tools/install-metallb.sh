#!/usr/bin/env bash
# Build MetalLB's controller (the part that assigns LoadBalancer Services an address from an IPAddressPool)
# and take its CRDs, for tests/operator/k8s/api_server/test_metallb.py. Both come through the Go module
# proxy at the pinned version (v0.16.2 needs github.com/metallb/frr-k8s v0.0.27, which the proxy here
# refuses; v0.13.5's go.mod has replace directives, so `go install` refuses it). Idempotent: does nothing
# when that version is already built.
#
#   tools/install-metallb.sh [DEST]      # DEST: .cache/go-tools by default (TINYSTREAM_GO_TOOLS)
#
# Makes DEST/metallb-controller and DEST/metallb-crds/*.yaml. Needs: go >= 1.24 on PATH or in
# /usr/local/go/bin. The speaker (which answers ARP/BGP for the addresses) is not built: the API-server
# tier only needs the addresses assigned.
set -euo pipefail

VERSION="v0.15.2"
MODULE="go.universe.tf/metallb"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-${TINYSTREAM_GO_TOOLS:-$ROOT/.cache/go-tools}}"
export PATH="$PATH:/usr/local/go/bin"

stamp="$DEST/.metallb"
if [[ -x "$DEST/metallb-controller" && -f "$stamp" && "$(cat "$stamp")" == "$VERSION" ]]; then
  echo "metallb: $VERSION up to date in $DEST"
  exit 0
fi
command -v go >/dev/null || { echo "metallb: go not found (install Go 1.24+)" >&2; exit 1; }
mkdir -p "$DEST"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
GOBIN="$scratch" go install "$MODULE/controller@$VERSION"
mv "$scratch/controller" "$DEST/metallb-controller"
src="$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')"
rm -rf "$DEST/metallb-crds"
mkdir -p "$DEST/metallb-crds"
cp "$src"/config/crd/bases/*.yaml "$DEST/metallb-crds/"
chmod u+w "$DEST"/metallb-crds/*.yaml
echo "$VERSION" > "$stamp"
echo "metallb: built $DEST/metallb-controller ($VERSION) and $DEST/metallb-crds"
