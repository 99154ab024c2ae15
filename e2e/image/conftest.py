"""The container engine the image tests build and run with (image_build.choose_engine)."""

from __future__ import annotations

import functools

import pytest
from image_build import Cli, choose_engine, docker


@pytest.fixture(scope="module")
def engine() -> str:
    return choose_engine()


@pytest.fixture(scope="module")
def cli(engine: str) -> Cli:
    """`docker(...)` or `podman(...)`: image_build.docker bound to the chosen engine."""
    return functools.partial(docker, engine=engine)
