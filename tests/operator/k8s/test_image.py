"""The Dockerfile, checked without a Docker engine: base, user, ports, entry point.

These keep the Dockerfile consistent with the chart and the operator; the
image itself is built and run by e2e/image (where a Docker engine runs).
"""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'kopf')

import re
from pathlib import Path

from k8s_helpers import ROOT

from tinystream.operator.k8s.cli import DEFAULT_CRDS_DIRS
from tinystream.operator.k8s.resources import RUN_AS

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_base_and_non_root_user():
    assert re.findall(r"^ARG BASE_IMAGE=(\S+)", DOCKERFILE, re.M) == ["python:3.11-slim-bookworm"]
    assert re.findall(r"^FROM (\S+)", DOCKERFILE, re.M) == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    user = re.findall(r"^USER (\S+)", DOCKERFILE, re.M)
    assert user == [f"{RUN_AS}:{RUN_AS}"]  # numeric: runAsNonRoot can verify it


def test_ports_and_paths_match_the_chart_and_operator():
    exposed = {int(p) for line in re.findall(r"^EXPOSE (.+)$", DOCKERFILE, re.M) for p in line.split()}
    assert {9092, 8080, 9091, 3200, 8081} <= exposed
    assert "COPY crds/ /opt/tinystream/crds/" in DOCKERFILE
    assert DEFAULT_CRDS_DIRS[0] == Path("/opt/tinystream/crds")
    assert "'.[operator,registry]'" in DOCKERFILE  # kopf and kubernetes (operator), the schema registry's (registry)


def test_default_command_is_a_reachable_standalone_broker():
    # Kubernetes replaces CMD with the StatefulSet's args; a bare `docker run` must listen beyond loopback.
    assert re.findall(r"^ENTRYPOINT (.+)$", DOCKERFILE, re.M) == ['["tinystream"]']
    cmd = re.findall(r"^CMD (.+)$", DOCKERFILE, re.M)
    assert cmd and '"broker", "--host", "0.0.0.0"' in cmd[0]


def test_plain_syntax_builds_without_buildkit():
    # The classic builder knows no heredocs or COPY --chmod, and a `# syntax=` line makes BuildKit pull a frontend.
    assert "<<" not in DOCKERFILE and "--chmod" not in DOCKERFILE and "# syntax=" not in DOCKERFILE
