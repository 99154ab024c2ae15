#!/usr/bin/env bash
# Build kadmcheck (tests/compat/go/kadmcheck: franz-go's admin client, kadm, run against a cluster) for
# tests/compat/test_kadm.py. franz-go and kadm come through the Go module proxy at the versions pinned
# in that folder's go.mod/go.sum. Idempotent: rebuilds only when the sources changed.
#
#   tools/install-kadmcheck.sh [DEST]      # DEST: .cache/go-tools by default (TINYSTREAM_GO_TOOLS)
#
# Needs: go >= 1.26 (franz-go v1.22's own minimum) on PATH or in /usr/local/go/bin.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-${TINYSTREAM_GO_TOOLS:-$ROOT/.cache/go-tools}}"
SRC="$ROOT/tests/compat/go/kadmcheck"
export PATH="$PATH:/usr/local/go/bin"

want="$(cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go | sha256sum | cut -c1-16)"
stamp="$DEST/.kadmcheck"
if [[ -x "$DEST/kadmcheck" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "kadmcheck: up to date in $DEST"
  exit 0
fi
command -v go >/dev/null || { echo "kadmcheck: go not found (install Go 1.26+)" >&2; exit 1; }
mkdir -p "$DEST"
(cd "$SRC" && GOFLAGS=-mod=readonly go build -trimpath -o "$DEST/kadmcheck" .)
echo "$want" > "$stamp"
echo "kadmcheck: built $DEST/kadmcheck"
