"""Committed offsets and seeking: commit, restart, resume; beginning, end, timestamp.

* A consumer in a group reads part of a topic, commits exactly what it
  processed and closes; a new instance of the group resumes at the committed
  offsets: the two runs together see every record once.
* Seeking on one partition whose records carry timestamps one second apart:
  to the beginning (offset 0), to the end (nothing until a new record
  arrives, which then comes next), and to a timestamp (ListOffsets with a
  timestamp: the first record at or after it, even inside a batch; none
  after the last record).
"""

from __future__ import annotations

import asyncio
import time

import compat_helpers as ch
import pytest
from compat_helpers import client_params, require_client

pytestmark = pytest.mark.compat

N = 100
FIRST_RUN = 37


def _produce_spread(bootstrap: str, topic: str, partitions: int) -> list[ch.Rec]:
    records = [ch.Rec(value=f"r-{i:04d}".encode(), partition=i % partitions) for i in range(N)]
    return ch.produce("confluent", bootstrap, topic, records)


# --------------------------------------------------------------------------- commit, restart, resume


def _group_run_kafka_python(bootstrap, topic, group, count) -> list[bytes]:
    from kafka import KafkaConsumer, OffsetAndMetadata

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    seen, positions = [], {}
    try:
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=200, max_records=count - len(seen)).items():
                for m in msgs:
                    seen.append(m.value)
                    positions[tp] = OffsetAndMetadata(m.offset + 1, "", -1)
        consumer.commit(positions)
    finally:
        consumer.close(autocommit=False)
    return seen


def _group_run_aiokafka(bootstrap, topic, group, count) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer

    async def run():
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=100)
        await consumer.start()
        seen, positions = [], {}
        try:
            deadline = time.monotonic() + 30
            while len(seen) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200, max_records=count - len(seen))
                for tp, msgs in batches.items():
                    for m in msgs:
                        seen.append(m.value)
                        positions[tp] = m.offset + 1
            await consumer.commit(positions)
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(run())


def _group_run_confluent(bootstrap, topic, group, count) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    seen, positions = [], {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(seen) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=count - len(seen), timeout=0.2):
                if m.error():
                    raise AssertionError(str(m.error()))
                seen.append(m.value())
                positions[m.partition()] = m.offset() + 1
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
    finally:
        consumer.close()
    return seen


def _group_run_kcat(bootstrap, topic, group, count) -> list[bytes]:
    # kcat stores each offset as it prints the record and commits on exit.
    return [g.value for g in ch.consume_kcat(bootstrap, topic, count, timeout=40, group=group)]


def _group_run_java(bootstrap, topic, group, count) -> list[bytes]:
    # One record per poll, so the position auto-committed on close is right after the last printed record.
    got = ch.consume_java(bootstrap, topic, count, timeout=40, group=group, offset="group",
                          config={"max.poll.records": "1", "auto.offset.reset": "earliest"})
    return [g.value for g in got]


GROUP_RUNS = {
    "kafka-python": _group_run_kafka_python,
    "aiokafka": _group_run_aiokafka,
    "confluent": _group_run_confluent,
    "kcat": _group_run_kcat,
    "java": _group_run_java,
}


@pytest.mark.parametrize("client", client_params())
def test_commit_restart_resume(client, bootstrap, new_topic):
    require_client(client)
    topic = new_topic(partitions=3)
    records = _produce_spread(bootstrap, topic, 3)
    group = ch.unique_name(f"compat-resume-{client}")
    run = GROUP_RUNS[client]

    first = run(bootstrap, topic, group, FIRST_RUN)
    assert len(first) == FIRST_RUN
    second = run(bootstrap, topic, group, N - FIRST_RUN)
    assert not set(first) & set(second), f"re-read after restart: {sorted(set(first) & set(second))[:5]}"
    assert sorted(first + second) == sorted(r.value for r in records)


# --------------------------------------------------------------------------- seek


T0 = int(time.time() * 1000) - 3_600_000  # an hour ago: inside any retention
SEEK_N = 30


def _produce_timed(bootstrap: str, topic: str) -> None:
    records = [ch.Rec(value=f"t-{i:03d}".encode(), partition=0, timestamp_ms=T0 + i * 1000) for i in range(SEEK_N)]
    ch.produce("confluent", bootstrap, topic, records, config={"linger.ms": 50})


def _seek_kafka_python(bootstrap, topic) -> dict:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    out = {}
    try:
        consumer.assign([tp])

        def first():
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                for msgs in consumer.poll(timeout_ms=200, max_records=1).values():
                    return msgs[0]
            return None

        consumer.seek_to_beginning(tp)
        m = first()
        out["beginning"] = (m.offset, m.value, m.timestamp)
        found = consumer.offsets_for_times({tp: T0 + 10_500})[tp]
        out["by_time"] = found.offset
        consumer.seek(tp, found.offset)
        out["by_time_value"] = first().value
        out["past_last"] = consumer.offsets_for_times({tp: T0 + 10_000_000})[tp]
        out["end_offsets"] = consumer.end_offsets([tp])[tp]
        consumer.seek_to_end(tp)
        out["end_position"] = consumer.position(tp)
        ch.produce("kafka-python", bootstrap, topic, [ch.Rec(value=b"after-end", partition=0)])
        m = first()
        out["after_end"] = (m.offset, m.value)
    finally:
        consumer.close()
    return out


def _seek_aiokafka(bootstrap, topic) -> dict:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        tp = TopicPartition(topic, 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        out = {}
        try:
            consumer.assign([tp])

            async def first():
                return await asyncio.wait_for(consumer.getone(tp), 10)

            await consumer.seek_to_beginning(tp)
            m = await first()
            out["beginning"] = (m.offset, m.value, m.timestamp)
            found = (await consumer.offsets_for_times({tp: T0 + 10_500}))[tp]
            out["by_time"] = found.offset
            consumer.seek(tp, found.offset)
            out["by_time_value"] = (await first()).value
            out["past_last"] = (await consumer.offsets_for_times({tp: T0 + 10_000_000}))[tp]
            out["end_offsets"] = (await consumer.end_offsets([tp]))[tp]
            await consumer.seek_to_end(tp)
            out["end_position"] = await consumer.position(tp)
            await asyncio.to_thread(ch.produce, "aiokafka", bootstrap, topic,
                                    [ch.Rec(value=b"after-end", partition=0)])
            m = await first()
            out["after_end"] = (m.offset, m.value)
        finally:
            await consumer.stop()
        return out

    return asyncio.run(run())


def _seek_confluent(bootstrap, topic) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": ch.unique_name("compat-seek"),
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    out = {}

    def first():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                return m
        return None

    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        m = first()
        out["beginning"] = (m.offset(), m.value(), m.timestamp()[1])
        (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, T0 + 10_500)], timeout=10)
        out["by_time"] = found.offset
        consumer.assign([TopicPartition(topic, 0, found.offset)])
        out["by_time_value"] = first().value()
        (past,) = consumer.offsets_for_times([TopicPartition(topic, 0, T0 + 10_000_000)], timeout=10)
        out["past_last"] = None if past.offset < 0 else past.offset
        out["end_offsets"] = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        assert consumer.poll(1.0) is None
        (pos,) = consumer.position([TopicPartition(topic, 0)])
        out["end_position"] = pos.offset if pos.offset >= 0 else out["end_offsets"]
        ch.produce("confluent", bootstrap, topic, [ch.Rec(value=b"after-end", partition=0)])
        m = first()
        out["after_end"] = (m.offset(), m.value())
    finally:
        consumer.close()
    return out


SEEKS = {"kafka-python": _seek_kafka_python, "aiokafka": _seek_aiokafka, "confluent": _seek_confluent}


@pytest.mark.parametrize("client", ch.PY_CLIENTS)
def test_seek_beginning_end_timestamp(client, bootstrap, new_topic):
    topic = new_topic()
    _produce_timed(bootstrap, topic)
    out = SEEKS[client](bootstrap, topic)
    assert out["beginning"] == (0, b"t-000", T0), out
    assert out["by_time"] == 11 and out["by_time_value"] == b"t-011", out
    assert out["past_last"] is None, out
    assert out["end_offsets"] == SEEK_N and out["end_position"] == SEEK_N, out
    assert out["after_end"] == (SEEK_N, b"after-end"), out


def test_seek_with_kcat(bootstrap, new_topic):
    require_client("kcat")
    topic = new_topic()
    _produce_timed(bootstrap, topic)
    begin = ch.consume_kcat(bootstrap, topic, 1, timeout=20, offset="beginning", partition=0)
    assert [(g.offset, g.value, g.timestamp_ms) for g in begin] == [(0, b"t-000", T0)]
    by_time = ch.consume_kcat(bootstrap, topic, 1, timeout=20, offset=f"s@{T0 + 10_500}", partition=0)
    assert [(g.offset, g.value) for g in by_time] == [(11, b"t-011")]
    tail = ch.consume_kcat(bootstrap, topic, 3, timeout=20, offset="-3", partition=0)
    assert [g.offset for g in tail] == [SEEK_N - 3, SEEK_N - 2, SEEK_N - 1]


@pytest.mark.slow
def test_seek_with_java_console_consumer(bootstrap, new_topic):
    require_client("java")
    topic = new_topic()
    _produce_timed(bootstrap, topic)
    begin = ch.consume_java(bootstrap, topic, 1, timeout=30, offset="earliest", partition=0)
    assert [(g.offset, g.value, g.timestamp_ms) for g in begin] == [(0, b"t-000", T0)]
    at = ch.consume_java(bootstrap, topic, 2, timeout=30, offset="11", partition=0)
    assert [(g.offset, g.value) for g in at] == [(11, b"t-011"), (12, b"t-012")]
