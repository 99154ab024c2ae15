"""The image's lock file (image-constraints.txt, tools/lock_image.py) pins what the image installs.

The Dockerfile installs `.[operator,registry]` with `-c image-constraints.txt`: every direct requirement of the
project and its operator and registry extras must be pinned there, to a version its range in pyproject.toml allows
(else pip refuses the build, or the lock would hold back a bound we raised).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, str]:
    found = {}
    for line in (ROOT / "image-constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            found[canonicalize_name(name)] = version
    return found


def test_every_requirement_of_the_image_is_pinned_within_its_range():
    pinned = pins()
    direct = [Requirement(line) for line in metadata.distribution("tinystream").requires or ()]
    needed = [r for r in direct if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("operator", "registry"))]
    assert {canonicalize_name(r.name) for r in needed} <= set(pinned)
    for requirement in needed:
        version = pinned[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
    assert pinned["kio"].startswith("0.6.")  # protocol/bounds.py reads kio internals of this minor


def test_the_dockerfile_installs_with_the_lock():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "-c image-constraints.txt '.[operator,registry]'" in dockerfile
    assert "image-constraints.txt ./" in dockerfile  # copied into the build stage
