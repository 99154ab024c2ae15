"""Shared fixtures for the storage tests.

``log_factory`` is parametrised over both PartitionLog implementations, so
every contract test runs against MemoryLog and SegmentedLog alike.

Tests marked ``slow`` (long property runs) are skipped here unless the run
selects them with ``-m slow`` (``make test-slow``); ``make test`` already
deselects them with ``-m "not slow"``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tinystream.broker.storage.base import LogConfig, PartitionLog
from tinystream.broker.storage.batch import Record, build_batch
from tinystream.broker.storage.memory import MemoryLog
from tinystream.broker.storage.segmented import SegmentedLog

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow storage suite: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow") and _HERE in Path(str(item.path)).parents:
            item.add_marker(skip)


def batch(
    count: int = 1,
    *,
    value_size: int = 10,
    timestamp: int = 0,
    key: bytes | None = b"k",
    **kwargs,
) -> bytes:
    """A producer batch of ``count`` records with ``value_size``-byte values."""
    records = [Record(key=key, value=bytes([65 + i % 26]) * value_size, timestamp_delta=i) for i in range(count)]
    return build_batch(records, base_timestamp=timestamp, **kwargs)


@pytest.fixture
def make_batch():
    return batch


@pytest.fixture(params=["memory", "segmented"])
def log_factory(request, tmp_path):
    """``factory(config=None, now_ms=0) -> PartitionLog``; closes what it opened."""
    opened: list[PartitionLog] = []

    def factory(config: LogConfig | None = None, *, now_ms: int = 0, name: str = "log") -> PartitionLog:
        config = config or LogConfig()
        if request.param == "memory":
            log = MemoryLog(config, now_ms=now_ms)
        else:
            log = SegmentedLog.open(tmp_path / name, config, now_ms=now_ms)
        opened.append(log)
        return log

    factory.kind = request.param
    yield factory
    for log in opened:
        try:
            log.close()
        except Exception:
            pass
