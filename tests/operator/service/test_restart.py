"""A controller restart on the same state file loses nothing and fences nobody at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from service_helpers import Controller

from tinystream.operator.service import FileStateStore, StateFileError, monotonic_ms
from tinystream.testing.waiting import wait_until_async


async def test_restart_keeps_the_image_and_restarts_sessions(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    first = Controller(state_file)
    await first.start()
    try:
        for b in (1, 2, 3):
            await first.start_broker(b)
        await first.client.create_topic("orders", partitions=6, replication_factor=3, config={"min.insync.replicas": 2})
        await first.client.create_topic("logs", partitions=2, replication_factor=1)
        before = await first.image()
        epochs = dict(first.epochs)
        cluster_id = first.info.cluster_id
    finally:
        await first.stop()

    # The second controller's clock is 60 s ahead: as if it had been down for a minute.
    second = Controller(state_file, session_timeout_ms=1000, clock=lambda: monotonic_ms() + 60_000)
    await second.start()
    loop = asyncio.get_running_loop()
    restarted = loop.time()
    try:
        assert second.info.cluster_id == cluster_id
        after = await second.image()
        assert after == before  # version, brokers, topics, leaders, epochs: all of it
        assert all(not b["fenced"] for b in after["brokers"])
        await asyncio.sleep(0.2)  # several session checks later: still within the restarted sessions
        assert all(not b["fenced"] for b in (await second.image())["brokers"])
        # The old epochs are still valid: brokers just carry on heartbeating.
        reply = await second.client.heartbeat(1, broker_epoch=epochs[1], metadata_version=after["version"])
        assert reply.fenced is False and reply.newer_image_available is False

        # Silent brokers are fenced one full session timeout after the restart, not before.
        async def fenced() -> set[int]:
            return {b["broker_id"] for b in (await second.image())["brokers"] if b["fenced"]}

        async def two_and_three_fenced() -> bool:
            return {2, 3} <= await fenced()

        await wait_until_async(two_and_three_fenced, timeout=4.0, what="brokers 2 and 3 fenced")
        assert loop.time() - restarted >= 0.95
    finally:
        await second.stop()


async def test_a_second_controller_on_the_same_file_is_refused(controller: Controller) -> None:
    with pytest.raises(StateFileError, match="in use by another controller"):
        await FileStateStore(controller.state_file).load()


async def test_a_corrupt_state_file_stops_the_start_with_its_reason(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    state_file.write_bytes(b'{"schema_version": 1, "image": ')
    ctl = Controller(state_file)
    with pytest.raises(StateFileError, match="not valid JSON"):
        await ctl.start()
    state_file.write_bytes(b'{"schema_version": 99}')
    with pytest.raises(StateFileError, match="schema version 99"):
        await ctl.start()
    # A refused start leaves no lock behind.
    state_file.unlink()
    await ctl.start()
    await ctl.stop()


async def test_settings_apply_on_restart_and_are_saved(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    first = Controller(state_file, session_timeout_ms=9000)
    await first.start()
    await first.stop()
    assert orjson.loads(state_file.read_bytes())["config"]["broker.session.timeout.ms"] == 9000
    second = Controller(state_file, session_timeout_ms=1234, num_partitions=4)
    await second.start()
    try:
        reg = await second.register(1)
        assert reg.session_timeout_ms == 1234
        saved = orjson.loads(state_file.read_bytes())["config"]
        assert saved["broker.session.timeout.ms"] == 1234 and saved["num.partitions"] == 4
    finally:
        await second.stop()
