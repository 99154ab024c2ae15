#!/usr/bin/env bash
# Build the Go programs of tests/compat/go into .cache/go-tools, each from its own folder's go.mod/go.sum
# (the Go module proxy serves the pinned franz-go and kadm):
#   kadmcheck    franz-go's admin client (kadm) run against a cluster, for tests/compat/test_kadm.py;
#   franzbench   franz-go's kgo consuming or producing N records as fast as it can, for
#                `tinystream bench consume|produce|compare --client franz`.
# Idempotent: a program is rebuilt only when its sources changed (a stamp of their hash beside it).
#
#   tools/install-go-programs.sh [NAME ...]   # NAME: a folder of tests/compat/go; all of them by default
#   TINYSTREAM_GO_TOOLS=DIR tools/install-go-programs.sh   # another destination
#
# Needs: go >= 1.26 (franz-go v1.22's own minimum) on PATH or in /usr/local/go/bin.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${TINYSTREAM_GO_TOOLS:-$ROOT/.cache/go-tools}"
export PATH="$PATH:/usr/local/go/bin"

if [[ $# -eq 0 ]]; then
  set -- $(cd "$ROOT/tests/compat/go" && ls -d */ | tr -d /)
fi
status=0
for name in "$@"; do
  src="$ROOT/tests/compat/go/$name"
  [[ -f "$src/go.mod" ]] || { echo "$name: no Go program in $src" >&2; status=1; continue; }
  want="$(cat "$src"/go.mod "$src"/go.sum* "$src"/*.go 2>/dev/null | sha256sum | cut -c1-16)"
  stamp="$DEST/.$name"
  if [[ -x "$DEST/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "$name: up to date in $DEST"
    continue
  fi
  command -v go >/dev/null || { echo "$name: go not found (install Go 1.26+)" >&2; exit 1; }
  mkdir -p "$DEST"
  if (cd "$src" && GOFLAGS=-mod=readonly go build -trimpath -o "$DEST/$name" .); then
    echo "$want" > "$stamp"
    echo "$name: built $DEST/$name"
  else
    echo "$name: build failed" >&2
    status=1
  fi
done
exit $status
