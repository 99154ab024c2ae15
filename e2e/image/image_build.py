"""Building the TinyStream image in tests (e2e/image, e2e/kind): the engine check and the base image.

Where Docker Hub answers, the Dockerfile's own base (python:3.11-slim-bookworm)
is used; elsewhere tools/build-base-image.sh makes a Debian bookworm base by
debootstrap. TINYSTREAM_BASE_IMAGE chooses one outright. The kind suite's
offline path builds with podman instead of Docker (`engine="podman"`): same
Dockerfile, same local base, in podman's store.

`ensure_image` builds each image once per source tree, whichever engine asks
first: the image carries a label with a hash of its Dockerfile and the files
a build can see, and an engine that lacks it copies it from the other one
(save | load) instead of building again.

`choose_engine` chooses the engine the image tests run containers with: podman
where it runs (as root: the kind suite's offline path builds there), else
Docker. .ci/run runs the slow suites beside the kind suite, and with one
engine for both each image is built once and stored once: a copy between
engines holds the image twice, and `docker load` briefly needs twice its
size again (the Spark image is 1.3 GB; a CI machine ran out of disk there).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCAL_BASE = "tinystream-base:bookworm"
UPSTREAM_BASE = "python:3.11-slim-bookworm"
CONTEXT_LABEL = "io.tinystream.build-context"
#: `docker(...)` bound to one engine (e2e/image's `cli` fixture)
Cli = Callable[..., "subprocess.CompletedProcess[str]"]
LOCKS = ROOT / ".cache" / "images"


def docker(*args: str, timeout: float = 120, check: bool = True, engine: str = "docker"
           ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([engine, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{engine} {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def choose_engine() -> str:
    """podman where it runs as root, else Docker; skips the calling test (with the reason) where neither does."""
    if os.geteuid() == 0 and _podman_up():
        return "podman"
    problem = engine_problem()
    if problem:
        pytest.skip(f"image tests need a container engine: no podman as root, and {problem}")
    return "docker"


def _podman_up() -> bool:
    return shutil.which("podman") is not None and docker("info", check=False, engine="podman", timeout=60
                                                         ).returncode == 0


def engine_problem() -> str | None:
    """Why Docker cannot run containers here (None: it can)."""
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


def build_image(tag: str, dockerfile: str = "Dockerfile", engine: str = "docker", label: str = "",
                context: Path = ROOT) -> None:
    labels = ["--label", f"{CONTEXT_LABEL}={label}"] if label else []
    docker("build", "-q", "-f", str(context / dockerfile), "--build-arg", f"BASE_IMAGE={base_image(engine)}",
           *labels, "-t", tag, str(context), timeout=1800, engine=engine)


def context_key(dockerfile: str) -> str:
    """A hash of the Dockerfile and of every file git sees in the tree (tracked or not, unignored).

    A superset of the build context (.dockerignore leaves tests, tools and charts out): an edit
    anywhere means a new build, never a stale image."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True).stdout.split(b"\0")
    digest = hashlib.sha256(dockerfile.encode())
    for name in sorted(n for n in listed if n):
        path = ROOT / os.fsdecode(name)
        if path.is_file():
            digest.update(name + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def _engines_up() -> list[str]:
    up = ["docker"] if engine_problem() is None else []
    if _podman_up():
        up.append("podman")
    return up


def _image_with(engine: str, key: str) -> str | None:
    """An image of `engine` labelled with `key`, by id (bare hex: the form both engines accept)."""
    found = docker("images", "-q", "--no-trunc", "--filter", f"label={CONTEXT_LABEL}={key}", check=False,
                   engine=engine).stdout.split()
    return found[0].removeprefix("sha256:") if found else None


@contextmanager
def _build_lock(dockerfile: str) -> Iterator[None]:
    """One builder per Dockerfile across processes: the other suite waits, then copies."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    with open(LOCKS / (dockerfile.replace("/", "_") + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_image(tag: str, dockerfile: str = "Dockerfile", engine: str = "docker", *, context: Path = ROOT,
                 key: str | None = None) -> str:
    """`tag` in `engine`'s store, for this source tree: kept, copied from the other engine, or built.

    Another `context` (a tree git archived from an older commit) names its own `key` (the commit).
    Returns which of the three happened (the suites print it with the time it took)."""
    key = key or context_key(dockerfile)
    with _build_lock(dockerfile):
        own = _image_with(engine, key)
        if own is not None:
            docker("tag", own, tag, engine=engine)
            return "kept"
        for other in (e for e in _engines_up() if e != engine):
            source = _image_with(other, key)
            if source is not None:
                _copy(other, source, engine)
                docker("tag", source, tag, engine=engine)  # save | load keeps the image id
                return f"copied from {other}"
        build_image(tag, dockerfile, engine, label=key, context=context)
        return "built"


def _copy(source_engine: str, image_id: str, target_engine: str) -> None:
    saver = subprocess.Popen([source_engine, "save", image_id], stdout=subprocess.PIPE)
    try:
        loaded = subprocess.run([target_engine, "load"], stdin=saver.stdout, capture_output=True, text=True,
                                timeout=900)
    finally:
        assert saver.stdout is not None
        saver.stdout.close()
        saver.wait(timeout=900)
    if saver.returncode != 0 or loaded.returncode != 0:
        raise AssertionError(f"{source_engine} save | {target_engine} load failed:\n{loaded.stdout}\n{loaded.stderr}")
