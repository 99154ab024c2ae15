#!/usr/bin/env bash
# A Docker engine for the image tests (e2e/image) and the kind suite, where the
# machine allows one: Debian's docker.io, and dockerd started in the background
# when none answers (root only; a CI machine's processes end with its run).
# Best effort: without an engine those tests skip and say why.
set -uo pipefail

if docker info >/dev/null 2>&1; then
  echo "docker: engine $(docker info --format '{{.ServerVersion}}') already running"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "docker: no engine answers and this is not root; the image tests will skip" >&2
  exit 1
fi
if ! command -v dockerd >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null 2>&1; } \
    || { echo "docker: apt-get install docker.io failed" >&2; exit 1; }
  if docker info >/dev/null 2>&1; then  # systemd hosts start docker.service on install
    echo "docker: engine $(docker info --format '{{.ServerVersion}}') started by the package"
    exit 0
  fi
fi
mkdir -p /var/log
nohup dockerd >/var/log/tinystream-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    echo "docker: started dockerd $(docker info --format '{{.ServerVersion}}') (log /var/log/tinystream-dockerd.log)"
    exit 0
  fi
  sleep 1
done
echo "docker: dockerd did not come up; see /var/log/tinystream-dockerd.log" >&2
exit 1
