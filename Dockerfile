# syntax=docker/dockerfile:1.7
# One image for the broker and the operator.
#
#   docker build -t tinystream:0.1.0 .
#   docker run tinystream:0.1.0 broker --help       # default command: broker
#   docker run tinystream:0.1.0 operator --help
#
# Non-root (uid 10001), no compilers or pip caches in the final stage; the
# TinyStream CRDs ride along in /opt/tinystream/crds so the operator can
# upgrade the installed ones at start-up (charts/tinystream/README.md).

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY tinystream/ tinystream/
COPY broker/ broker/
COPY operator/ operator/
COPY spark-on-k8s/connector/ spark-on-k8s/connector/
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-compile '.[operator]' \
 && find /opt/venv -name '__pycache__' -prune -exec rm -rf {} +

FROM python:3.11-slim
LABEL org.opencontainers.image.title="tinystream" \
      org.opencontainers.image.description="TinyStream: Kafka-compatible broker and Kubernetes operator" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --gid 10001 tinystream \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/tinystream \
            --shell /usr/sbin/nologin tinystream \
 && install -d -o 10001 -g 10001 /var/lib/tinystream /etc/tinystream
COPY --from=build /opt/venv /opt/venv
COPY crds/ /opt/tinystream/crds/
# `operator` runs the operator even where the CLI does not list the command yet.
COPY --chmod=0755 <<'SCRIPT' /usr/local/bin/tinystream-entrypoint
#!/bin/sh
set -e
if [ "$1" = "operator" ] && ! tinystream operator --help >/dev/null 2>&1; then
  shift
  exec python -m tinystream.operator.k8s "$@"
fi
exec tinystream "$@"
SCRIPT
USER 10001:10001
WORKDIR /var/lib/tinystream
# Kafka 9092, broker admin HTTP 8080, controller API 9091, dashboard 3200, operator health 8081.
EXPOSE 9092 8080 9091 3200 8081
ENTRYPOINT ["tinystream-entrypoint"]
CMD ["broker"]
