#!/usr/bin/env bash
# Fetch Apache Kafka's broker and tool jars from Maven Central into a cache
# folder, for the compatibility suite (tests/compat) and the benchmarks'
# `--peer kafka` / `--client java`. Idempotent: a complete cache is kept.
#
#   tools/install-kafka-jars.sh [DEST]      # DEST: .cache/kafka-jars by default
#   KAFKA_VERSION=3.9.1 tools/install-kafka-jars.sh .cache/kafka-jars-3.9
#
# Needs Java 17+ and Maven (both on the project's machines).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-${TINYSTREAM_KAFKA_JARS:-$ROOT/.cache/kafka-jars}}"
VERSION_ARGS=()
if [[ -n "${KAFKA_VERSION:-}" ]]; then
  VERSION_ARGS=("-Dkafka.version=$KAFKA_VERSION")
fi

stamp="$DEST/.complete"
want="$(sha256sum "$ROOT/tools/java/pom.xml" | cut -c1-16)${KAFKA_VERSION:+-$KAFKA_VERSION}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "kafka jars: up to date in $DEST"
  exit 0
fi

command -v java >/dev/null || { echo "java not found (Java 17+ needed)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "mvn not found" >&2; exit 1; }

rm -rf "$DEST"
mkdir -p "$DEST"
mvn -q -B -Dstyle.color=never -f "$ROOT/tools/java/pom.xml" "${VERSION_ARGS[@]}" \
  dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$DEST"
echo "$want" > "$stamp"
echo "kafka jars: $(ls "$DEST"/*.jar | wc -l) jars in $DEST"
