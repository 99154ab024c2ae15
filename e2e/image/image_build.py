"""Building the TinyStream image in tests (e2e/image, e2e/kind): the engine check and the base image.

Where Docker Hub answers, the Dockerfile's own base (python:3.11-slim-bookworm)
is used; elsewhere tools/build-base-image.sh makes a Debian bookworm base by
debootstrap. TINYSTREAM_BASE_IMAGE chooses one outright. The kind suite's
offline path builds with podman instead of Docker (`engine="podman"`): same
Dockerfile, same local base, in podman's store.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL_BASE = "tinystream-base:bookworm"
UPSTREAM_BASE = "python:3.11-slim-bookworm"


def docker(*args: str, timeout: float = 120, check: bool = True, engine: str = "docker"
           ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([engine, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{engine} {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client (bash tools/install-docker.sh)"
    probe = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                           timeout=30)
    if probe.returncode != 0 or not probe.stdout.strip():
        return "no running Docker engine (bash tools/install-docker.sh starts one where the machine allows)"
    return None


def base_image(engine: str = "docker") -> str:
    """TINYSTREAM_BASE_IMAGE, else the Dockerfile's own base if it can be pulled, else a local Debian base.

    With podman (the kind suite's offline path, no registry) the local base is used without a pull."""
    chosen = os.environ.get("TINYSTREAM_BASE_IMAGE")
    if chosen:
        return chosen
    if engine == "docker":
        if docker("image", "inspect", UPSTREAM_BASE, check=False).returncode == 0:
            return UPSTREAM_BASE
        if docker("pull", UPSTREAM_BASE, check=False, timeout=300).returncode == 0:
            return UPSTREAM_BASE
    subprocess.run(["bash", str(ROOT / "tools" / "build-base-image.sh")], check=True, timeout=900,
                   env={**os.environ, "TAG": LOCAL_BASE, "ENGINE": engine})
    # podman files an unqualified name under localhost/
    return LOCAL_BASE if engine == "docker" else f"localhost/{LOCAL_BASE}"


def build_image(tag: str, dockerfile: str = "Dockerfile", engine: str = "docker") -> None:
    docker("build", "-q", "-f", str(ROOT / dockerfile), "--build-arg", f"BASE_IMAGE={base_image(engine)}", "-t", tag,
           str(ROOT), timeout=1800, engine=engine)
