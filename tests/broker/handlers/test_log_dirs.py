"""DescribeLogDirs over a real socket: which dir holds each partition, sizes, the volume's bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.log_dirs import HostedLog, group_by_dir
from tinystream.testing.broker import create_topic, entity, now_batch, produce_request, request


@pytest.fixture
def settings_overrides(tmp_path) -> dict:
    return {"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}"}


def describe(topics=None, *, version: int = 4):
    if topics is not None:
        topics = tuple(entity(35, version, "DescribableLogDirTopic", topic=t, partitions=tuple(ps))
                       for t, ps in topics.items())
    return request(35, version, topics=topics)


def _sizes(results) -> dict[tuple[str, str, int], int]:
    return {(Path(r.log_dir).name, t.name, p.partition_index): p.partition_size
            for r in results for t in r.topics for p in t.partitions}


async def test_each_partition_is_reported_in_the_dir_that_holds_it(broker, client, tmp_path):
    await create_topic(client, "dirs", partitions=4)
    for index in range(4):
        reply = await client.request(produce_request("dirs", index, now_batch([(None, b"x" * 100)] * (index + 1))))
        assert reply.responses[0].partition_responses[0].error_code == ErrorCode.none
    answer = await client.request(describe())
    assert answer.error_code == ErrorCode.none
    assert [r.log_dir for r in answer.results] == [str(tmp_path / "a"), str(tmp_path / "b")]
    sizes = _sizes(answer.results)
    mine = {k: v for k, v in sizes.items() if k[1] == "dirs"}
    assert sorted(k[2] for k in mine) == [0, 1, 2, 3]  # each partition once, in one dir
    assert {k[0] for k in mine} == {"a", "b"}  # new partitions go to the emptiest dir
    for (dir_name, _, index), size in mine.items():
        on_disk = sum(f.stat().st_size for f in (tmp_path / dir_name / f"dirs-{index}").glob("*.log"))
        assert size == on_disk > 0
    by_partition = {index: size for (_, _, index), size in mine.items()}
    assert by_partition[0] < by_partition[3]  # one record against four
    for result in answer.results:
        assert result.error_code == ErrorCode.none and 0 < result.usable_bytes <= result.total_bytes


async def test_a_request_for_some_partitions_gets_only_those_and_every_dir(broker, client):
    await create_topic(client, "some", partitions=3)
    answer = await client.request(describe({"some": [1], "absent": [0]}))
    assert len(answer.results) == 2
    assert sorted((t, p) for _, t, p in _sizes(answer.results)) == [("some", 1)]


async def test_versions_before_kip_827_have_no_volume_bytes(broker, client):
    answer = await client.request(describe(version=1))
    assert len(answer.results) == 2 and not hasattr(answer.results[0], "total_bytes")


def test_grouping_keeps_every_dir_and_filters_by_request():
    a, b = Path("/a"), Path("/b")
    logs = [HostedLog(b, "t", 1, 10, 0), HostedLog(a, "t", 0, 5, 0), HostedLog(b, "s", 0, 1, 0)]
    assert group_by_dir([a, b], logs, None) == [(a, (logs[1],)), (b, (logs[2], logs[0]))]
    assert group_by_dir([a, b], logs, {("t", 1)}) == [(a, ()), (b, (logs[0],))]


async def test_an_unreadable_dir_answers_a_storage_error_and_the_others_still_answer(broker, client, tmp_path,
                                                                                    monkeypatch):
    import shutil

    real = shutil.disk_usage

    def failing(path):
        if os.fspath(path).endswith("/b"):
            raise OSError("volume gone")
        return real(path)

    monkeypatch.setattr(shutil, "disk_usage", failing)
    answer = await client.request(describe())
    by_dir = {Path(r.log_dir).name: r for r in answer.results}
    assert by_dir["b"].error_code == ErrorCode.kafka_storage_error and by_dir["b"].topics == ()
    assert by_dir["a"].error_code == ErrorCode.none
