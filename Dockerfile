# One image for the broker and the operator.
#
#   docker build -t tinystream:0.2.0 .
#   docker run tinystream:0.2.0 broker --help       # default command: broker
#   docker run tinystream:0.2.0 operator --help
#
# Non-root (uid 10001), no compilers or pip caches in the final stage; the
# TinyStream CRDs ride along in /opt/tinystream/crds so the operator can
# upgrade the installed ones at start-up (charts/tinystream/README.md).
# Dependencies at the versions the tests ran against: image-constraints.txt (tools/lock_image.py).
# Plain Dockerfile syntax (no heredocs, no chmod flag on COPY): it builds with the
# classic builder and with BuildKit. Where Docker Hub is out of reach,
# `tools/build-base-image.sh` makes a Debian bookworm base with Python 3.11
# and `--build-arg BASE_IMAGE=tinystream-base:bookworm` uses it.

ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml setup.py README.md image-constraints.txt ./
COPY tinystream/ tinystream/
COPY broker/ broker/
COPY operator/ operator/
COPY spark-on-k8s/connector/ spark-on-k8s/connector/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-compile -c image-constraints.txt '.[operator,registry]' \
 && find /opt/venv -name '__pycache__' -prune -exec rm -rf {} +

FROM ${BASE_IMAGE}
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
USER 10001:10001
WORKDIR /var/lib/tinystream
# Kafka 9092, broker admin HTTP 8080, controller API 9091, dashboard 3200, operator health 8081.
EXPOSE 9092 8080 9091 3200 8081
ENTRYPOINT ["tinystream"]
# `docker run` alone: a standalone broker on every interface (advertise with -e
# TINYSTREAM_ADVERTISED_HOST/PORT). Kubernetes replaces these args with its own.
CMD ["broker", "--host", "0.0.0.0", "--admin-port", "8080", "--log-dirs", "/var/lib/tinystream/data"]
