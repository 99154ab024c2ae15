"""The Dockerfile, checked without a Docker engine: base, user, ports, entry point.

`docker build` cannot run here (no engine); the build stage's install was
checked by hand with the same commands in a plain venv. These tests keep the
Dockerfile consistent with the chart and the operator.
"""

from __future__ import annotations

from k8s_requirements import require

require('yaml', 'kopf')

import os
import re
import subprocess
from pathlib import Path

from k8s_helpers import ROOT

from tinystream.operator.k8s.cli import DEFAULT_CRDS_DIRS
from tinystream.operator.k8s.resources import RUN_AS

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_base_and_non_root_user():
    assert re.findall(r"^FROM (\S+)", DOCKERFILE, re.M) == ["python:3.11-slim", "python:3.11-slim"]
    user = re.findall(r"^USER (\S+)", DOCKERFILE, re.M)
    assert user == [f"{RUN_AS}:{RUN_AS}"]  # numeric: runAsNonRoot can verify it


def test_ports_and_paths_match_the_chart_and_operator():
    exposed = {int(p) for line in re.findall(r"^EXPOSE (.+)$", DOCKERFILE, re.M) for p in line.split()}
    assert {9092, 8080, 9091, 3200, 8081} <= exposed
    assert "COPY crds/ /opt/tinystream/crds/" in DOCKERFILE
    assert DEFAULT_CRDS_DIRS[0] == Path("/opt/tinystream/crds")
    assert "'.[operator]'" in DOCKERFILE  # kopf and kubernetes come with the operator extra


def entrypoint_script() -> str:
    match = re.search(r"<<'SCRIPT' /usr/local/bin/tinystream-entrypoint\n(.*?)\nSCRIPT\n", DOCKERFILE, re.S)
    assert match
    return match.group(1)


def run_entrypoint(tmp_path: Path, *args: str, cli_has_operator: bool) -> str:
    script = tmp_path / "entrypoint"
    script.write_text(entrypoint_script() + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "tinystream").write_text(
        "#!/bin/sh\n"
        f"if [ \"$1 $2\" = \"operator --help\" ]; then exit {0 if cli_has_operator else 2}; fi\n"
        "echo tinystream \"$@\"\n")
    (bin_dir / "python").write_text("#!/bin/sh\necho python \"$@\"\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    return subprocess.run(["sh", str(script), *args], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_entrypoint_routes_broker_and_operator(tmp_path):
    assert run_entrypoint(tmp_path, "broker", "--config", "x", cli_has_operator=False) == \
        "tinystream broker --config x"
    assert run_entrypoint(tmp_path, "operator", "--log-level=INFO", cli_has_operator=False) == \
        "python -m tinystream.operator.k8s --log-level=INFO"
    assert run_entrypoint(tmp_path, "operator", cli_has_operator=True) == "tinystream operator"
