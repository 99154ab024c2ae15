#!/usr/bin/env bash
# The kind end-to-end suite from a fresh machine: `make test-kind` builds the
# Kubernetes binaries, the offline node image where kind's stock one cannot
# be pulled, the project's images, then runs the suite (see conftest.py).
#
#   bash e2e/kind/run.sh              # TINYSTREAM_E2E_KEEP=1 keeps the kind cluster afterwards
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exec make -C "$ROOT" test-kind PYTEST_ARGS="$*"
