"""Fixtures for the controller service tests: a real server on 127.0.0.1.

Each test gets its own controller on a free port with its own state file
(service_helpers.Controller), and talks to it through the real
ControllerClient or raw HTTP. Helper code lives in service_helpers.py beside
this file (pyproject's pytest `pythonpath` lists this folder).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from service_helpers import Controller


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[Controller]:
    """A running controller (session timeout 9 s, ticks every 50 ms)."""
    ctl = Controller(tmp_path / "controller" / "state.json")
    await ctl.start()
    try:
        yield ctl
    finally:
        await ctl.stop()


@pytest.fixture
async def two_brokers(controller: Controller) -> Controller:
    """Brokers 1 and 2 registered and unfenced."""
    await controller.start_broker(1)
    await controller.start_broker(2)
    return controller
