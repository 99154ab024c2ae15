"""AlterReplicaLogDirs over a real socket: a partition moves to the other log dir and stays readable,
by a real client, across a restart; the per-partition refusals; what a move cut short leaves at start-up."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.alter_log_dirs import check
from tinystream.broker.storage.log_manager import MOVE_OLD, MOVE_TMP, resolve_moves
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import create_topic, entity, request, test_settings
from tinystream.testing.consumers import read_partition
from tinystream.testing.waiting import wait_until_async


@pytest.fixture
def settings_overrides(tmp_path) -> dict:
    return {"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}"}


def alter(path: Path | str, topic: str, partitions=(0,), *, version: int = 2):
    return request(34, version, dirs=(entity(34, version, "AlterReplicaLogDir", path=str(path), topics=(
        entity(34, version, "AlterReplicaLogDirTopic", name=topic, partitions=tuple(partitions)),)),))


def codes(answer) -> dict[tuple[str, int], int]:
    return {(t.topic_name, p.partition_index): p.error_code for t in answer.results for p in t.partitions}


def holders(answer, topic: str) -> set[str]:
    """Names of the log dirs DescribeLogDirs reports `topic` in."""
    return {Path(r.log_dir).name for r in answer.results for t in r.topics if t.name == topic and t.partitions}


def produce(bootstrap: str, topic: str, values: list[bytes], *, chunk: int = 0) -> None:
    """Produce and wait for every ack; `chunk` > 0 waits for acks after each `chunk` records (a steady writer)."""
    from confluent_kafka import Producer  # noqa: PLC0415  # the test extra's client

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors: list[object] = []
    for index, value in enumerate(values, 1):
        producer.produce(topic, value, partition=0, on_delivery=lambda err, _msg: err and errors.append(err))
        if chunk and index % chunk == 0:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0 and errors == []


async def test_a_moved_partition_stays_readable_takes_appends_and_reopens_there(broker, client, tmp_path,
                                                                                settings_overrides):
    await create_topic(client, "mv")
    bootstrap = f"{broker.info.host}:{broker.info.port}"
    first = [b"r%d" % i for i in range(100)]
    await asyncio.to_thread(produce, bootstrap, "mv", first)
    source = broker.replicas.logs.partition_dir(TopicPartition("mv", 0))
    target = tmp_path / ("b" if source.parent.name == "a" else "a")

    answer = await client.request(alter(target, "mv"))
    assert codes(answer) == {("mv", 0): ErrorCode.none}
    assert broker.replicas.logs.partition_dir(TopicPartition("mv", 0)) == target / "mv-0"
    assert not source.exists() and (target / "mv-0").is_dir()
    assert holders(await client.request(request(35, 4, topics=None)), "mv") == {target.name}
    assert await asyncio.to_thread(read_partition, bootstrap, "mv", 100) == first
    more = [b"s%d" % i for i in range(20)]
    await asyncio.to_thread(produce, bootstrap, "mv", more)
    assert await asyncio.to_thread(read_partition, bootstrap, "mv", 120) == first + more
    again = await client.request(alter(target, "mv"))  # already there: nothing to do
    assert codes(again) == {("mv", 0): ErrorCode.none}

    await broker.stop()
    leftover = source.parent / ("mv-0" + MOVE_TMP)  # as if a second move had been cut short
    shutil.copytree(target / "mv-0", leftover)
    restarted = Broker(test_settings(tmp_path / "data", **settings_overrides))
    await restarted.start()
    try:
        assert not leftover.exists() and not source.exists()
        assert restarted.replicas.logs.partition_dir(TopicPartition("mv", 0)) == target / "mv-0"
        bootstrap = f"{restarted.info.host}:{restarted.info.port}"
        assert await asyncio.to_thread(read_partition, bootstrap, "mv", 120) == first + more
    finally:
        await restarted.stop()


async def test_refusals_per_partition(broker, client, tmp_path):
    await create_topic(client, "ref", partitions=1)
    assert codes(await client.request(alter(tmp_path / "elsewhere", "ref"))) == {
        ("ref", 0): ErrorCode.log_dir_not_found}
    assert codes(await client.request(alter(tmp_path / "a", "absent"))) == {
        ("absent", 0): ErrorCode.unknown_topic_or_partition}
    assert codes(await client.request(alter(tmp_path / "a", "ref", (0, 5), version=1))) == {
        ("ref", 0): ErrorCode.none, ("ref", 5): ErrorCode.unknown_topic_or_partition}  # moved or already there
    assert broker.replicas.logs.partition_dir(TopicPartition("ref", 0)) == tmp_path / "a" / "ref-0"


def test_check_answers_in_kafkas_order():
    a, b = Path("/d/a"), Path("/d/b")
    assert check("/d/c", [a, b], a, True) == ErrorCode.log_dir_not_found
    assert check("/d/c", [a, b], None, False) == ErrorCode.log_dir_not_found  # the dir is checked first
    assert check("/d/b", [a, b], None, True) == ErrorCode.not_leader_or_follower
    assert check("/d/b", [a, b], None, False) == ErrorCode.unknown_topic_or_partition
    assert check("/d/a", [a, b], a, True) == ErrorCode.none
    assert check("/d/b", [a, b], a, True) is None  # to be moved
    assert check("/d/b/", [a, b], a, True) == ErrorCode.log_dir_not_found  # Kafka compares the exact path


def test_start_up_drops_what_moves_left_and_keeps_one_complete_copy(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
    (a / "t-0").mkdir()
    (a / "t-0" / "00000000000000000000.log").write_bytes(b"x" * 10)
    (b / ("t-0" + MOVE_TMP)).mkdir()  # a copy cut short
    (b / ("t-0" + MOVE_TMP) / "00000000000000000000.log").write_bytes(b"x" * 4)
    (b / ("u-0" + MOVE_OLD)).mkdir()  # a finished move's source, not yet deleted
    for d, size in ((a, 6), (b, 8)):  # a crash between the two renames: the bigger copy wins
        (d / "v-0").mkdir()
        (d / "v-0" / "00000000000000000000.log").write_bytes(b"y" * size)
    for d in (a, b):
        (d / "w-0").mkdir()  # equal copies: the earlier dir wins
    resolve_moves([a, b])
    assert sorted(p.name for p in a.iterdir()) == ["t-0", "w-0"]
    assert sorted(p.name for p in b.iterdir()) == ["v-0"]
    assert (a / "t-0" / "00000000000000000000.log").read_bytes() == b"x" * 10


async def test_a_producer_writing_during_the_move_loses_nothing(broker, client, tmp_path, monkeypatch):
    """Appends during the copy are refused with a retriable error; the client's retries land in the new dir."""
    import time  # noqa: PLC0415

    from tinystream.broker.handlers import alter_log_dirs  # noqa: PLC0415

    real_copy = alter_log_dirs.copy_partition

    def slow_copy(source, target_dir):  # a copy long enough for the producer to hit it
        time.sleep(0.5)
        return real_copy(source, target_dir)

    monkeypatch.setattr(alter_log_dirs, "copy_partition", slow_copy)
    await create_topic(client, "busy")
    bootstrap = f"{broker.info.host}:{broker.info.port}"
    await asyncio.to_thread(produce, bootstrap, "busy", [b"a" * 1000] * 500)  # something to copy
    source = broker.replicas.logs.partition_dir(TopicPartition("busy", 0))
    target = tmp_path / ("b" if source.parent.name == "a" else "a")
    values = [b"w%d" % i for i in range(2000)]
    writing = asyncio.create_task(asyncio.to_thread(produce, bootstrap, "busy", values, chunk=5))
    partition = broker.replicas.get(TopicPartition("busy", 0))
    await wait_until_async(lambda: partition.log_end_offset > 500, what="the producer's first appends")
    answer = await client.request(alter(target, "busy"))
    await writing
    assert codes(answer) == {("busy", 0): ErrorCode.none}
    got = await asyncio.to_thread(read_partition, bootstrap, "busy", 2500)
    assert got[500:] == values and len(got) == 2500  # each once, in order (idempotent retries)


async def test_two_requests_moving_one_partition_at_once_both_succeed_and_keep_every_record(broker, connect, tmp_path):
    first, second = await connect(), await connect()
    await create_topic(first, "twice")
    bootstrap = f"{broker.info.host}:{broker.info.port}"
    values = [b"t%d" % i for i in range(100)]
    await asyncio.to_thread(produce, bootstrap, "twice", values)
    source = broker.replicas.logs.partition_dir(TopicPartition("twice", 0))
    target = tmp_path / ("b" if source.parent.name == "a" else "a")
    answers = await asyncio.gather(first.request(alter(target, "twice")), second.request(alter(target, "twice")))
    assert [codes(a) for a in answers] == [{("twice", 0): ErrorCode.none}] * 2
    assert sorted(p.name for p in target.iterdir() if p.name.startswith("twice")) == ["twice-0"]
    assert not source.exists()
    assert await asyncio.to_thread(read_partition, bootstrap, "twice", 100) == values


async def test_a_failed_copy_answers_a_storage_error_and_the_log_stays_where_it_was(broker, client, tmp_path,
                                                                                     monkeypatch):
    from tinystream.broker.handlers import alter_log_dirs  # noqa: PLC0415

    def full_disk(source, target_dir):
        (target_dir / (source.name + MOVE_TMP)).mkdir()  # what a copy cut short by ENOSPC leaves
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(alter_log_dirs, "copy_partition", full_disk)
    await create_topic(client, "stay")
    bootstrap = f"{broker.info.host}:{broker.info.port}"
    await asyncio.to_thread(produce, bootstrap, "stay", [b"s%d" % i for i in range(50)])
    source = broker.replicas.logs.partition_dir(TopicPartition("stay", 0))
    target = tmp_path / ("b" if source.parent.name == "a" else "a")
    assert codes(await client.request(alter(target, "stay"))) == {("stay", 0): ErrorCode.kafka_storage_error}
    assert broker.replicas.logs.partition_dir(TopicPartition("stay", 0)) == source
    await asyncio.to_thread(produce, bootstrap, "stay", [b"t%d" % i for i in range(50)])  # the reopened log writes
    got = await asyncio.to_thread(read_partition, bootstrap, "stay", 100)
    assert got == [b"s%d" % i for i in range(50)] + [b"t%d" % i for i in range(50)]
