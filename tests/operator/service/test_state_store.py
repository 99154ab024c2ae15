"""FileStateStore writes atomically; the service saves image changes, not heartbeats."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tinystream.operator.controller import BrokerHeartbeat, ControllerState, CreateTopic, RegisterBroker
from tinystream.operator.service import ApiError, ControllerService, FileStateStore, MemoryStateStore


def _state() -> ControllerState:
    return ControllerState.bootstrap(cluster_id="c1", seed=3)


async def test_save_and_load_round_trip(tmp_path: Path) -> None:
    store = FileStateStore(tmp_path / "deep" / "state.json")
    assert await store.load() is None
    state = _state()
    await store.save(state)
    assert (await store.load()) == state
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["state.json", "state.json.lock"]
    assert orjson.loads((tmp_path / "deep" / "state.json").read_bytes())["image"]["cluster_id"] == "c1"
    await store.close()
    reopened = FileStateStore(tmp_path / "deep" / "state.json")
    assert (await reopened.load()) == state
    await reopened.close()


async def test_save_fsyncs_the_file_and_the_directory_and_renames(tmp_path: Path, monkeypatch) -> None:
    calls: list[tuple[str, object]] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(("fsync", fd)), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append(("replace", Path(b).name)), real_replace(a, b))[1])
    store = FileStateStore(tmp_path / "state.json")
    store.save_sync(_state())
    assert [c[0] for c in calls] == ["fsync", "replace", "fsync"]  # file, rename, directory
    assert calls[1][1] == "state.json"
    await store.close()


async def test_a_crash_before_the_rename_leaves_the_old_state(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "state.json"
    store = FileStateStore(path)
    old = _state()
    store.save_sync(old)

    def crash(a, b):
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.save_sync(ControllerState.bootstrap(cluster_id="other", seed=4))
    monkeypatch.undo()
    assert (tmp_path / "state.json.tmp").exists()
    await store.close()
    fresh = FileStateStore(path)
    assert await fresh.load() == old  # and the leftover temp file is cleared
    assert not (tmp_path / "state.json.tmp").exists()
    await fresh.close()


async def test_only_image_changes_are_saved() -> None:
    store = MemoryStateStore()
    now = [1000]
    service = await ControllerService.open(store, clock=lambda: now[0], cluster_id="c", seed=1)
    assert store.saves == 1  # the new cluster itself
    reg = await service.submit(RegisterBroker(broker_id=1, incarnation_id="i", host="h", port=1))
    assert reg.image_changed and store.saves == 2
    epoch = service.image.brokers[1].epoch

    behind = await service.submit(BrokerHeartbeat(broker_id=1, broker_epoch=epoch, metadata_version=epoch - 1))
    assert not behind.image_changed and store.saves == 2  # a session renewal is not saved
    now[0] += 10
    unfence = await service.submit(BrokerHeartbeat(broker_id=1, broker_epoch=epoch, metadata_version=epoch))
    assert unfence.image_changed and store.saves == 3
    refused = await service.submit(CreateTopic(topic="t", replication_factor=5))
    assert refused.error is not None and store.saves == 3
    await service.submit(CreateTopic(topic="t"))
    assert store.saves == 4
    assert ControllerState.from_dict(store.data).image == service.image
    await service.close()
    with pytest.raises(ApiError) as info:
        await service.submit(CreateTopic(topic="u"))
    assert info.value.status == 503 and info.value.error == "NOT_CONTROLLER"
