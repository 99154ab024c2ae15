#!/usr/bin/env bash
# Build franzbench (tests/compat/go/franzbench: franz-go's kgo client consuming or producing N records as
# fast as it can) for `tinystream bench consume|compare --client franz`. franz-go comes through the Go
# module proxy at the version pinned in that folder's go.mod/go.sum. Idempotent: rebuilds only when the
# sources changed.
#
#   tools/install-franzbench.sh [DEST]      # DEST: .cache/go-tools by default (TINYSTREAM_GO_TOOLS)
#
# Needs: go >= 1.26 (franz-go v1.22's own minimum) on PATH or in /usr/local/go/bin.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-${TINYSTREAM_GO_TOOLS:-$ROOT/.cache/go-tools}}"
SRC="$ROOT/tests/compat/go/franzbench"
export PATH="$PATH:/usr/local/go/bin"

want="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go | sha256sum | cut -c1-16)"
stamp="$DEST/.franzbench"
if [[ -x "$DEST/franzbench" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "franzbench: up to date in $DEST"
  exit 0
fi
command -v go >/dev/null || { echo "franzbench: go not found (install Go 1.26+)" >&2; exit 1; }
mkdir -p "$DEST"
(cd "$SRC" && GOFLAGS=-mod=readonly go build -trimpath -o "$DEST/franzbench" .)
echo "$want" > "$stamp"
echo "franzbench: built $DEST/franzbench"
