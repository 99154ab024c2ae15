"""Fixtures for the controller core tests.

The core is pure, so every test drives a `ControllerState` through `apply`
with a hand-moved clock (controller_helpers.Cluster). Helper code lives in
controller_helpers.py beside this file (pyproject's pytest `pythonpath` lists
this folder).
"""

from __future__ import annotations

import pytest
from controller_helpers import Cluster


@pytest.fixture
def cluster() -> Cluster:
    """An empty cluster at time 0, seed 7."""
    return Cluster()


@pytest.fixture
def three(cluster: Cluster) -> Cluster:
    """Brokers 1, 2, 3 registered and unfenced."""
    cluster.start_brokers([1, 2, 3])
    return cluster
