#!/usr/bin/env bash
# The kind end-to-end suite, from a fresh machine with Docker running:
# installs kind and helm through the Go module proxy, then runs the suite.
#
#   bash e2e/kind/run.sh              # TINYSTREAM_E2E_KEEP=1 keeps the kind cluster afterwards
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
export PATH="$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin:$PATH"

if ! docker info >/dev/null 2>&1; then
  echo "e2e/kind: no Docker engine here (docker info fails); the suite would skip" >&2
fi
bash "$ROOT/tools/install-kind.sh"
bash "$ROOT/tools/install-helm.sh"
"$PY" -m pip install -q pytest pytest-timeout kafka-python
exec "$PY" -m pytest "$ROOT/e2e/kind" -v -p no:cacheprovider "$@"
