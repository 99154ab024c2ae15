"""Transactions with real clients (KIP-98, KIP-447): what an exactly-once pipeline relies on.

- confluent-kafka (librdkafka): commit and abort, read by a read_committed
  consumer (aborted records never seen, committed ones exactly once) and a
  read_uncommitted one (sees both); a zombie producer with the same
  transactional.id is fenced by the second init_transactions and its open
  transaction aborted; a transaction its producer abandons is aborted by the
  broker after transaction.timeout.ms.
- consume-transform-produce with send_offsets_to_transaction, and the same
  loop in a child process SIGKILLed mid-transaction and started again: the
  output equals the input exactly (no loss, no duplicates, order per key).
- aiokafka's transactional producer: commit and abort.
- the Java transactional producer (Kafka's own ProducerPerformance with
  transactions) read by the Java console consumer at read_committed (slow).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter

import compat_helpers as ch
import pytest

pytestmark = pytest.mark.compat

TXN_TIMEOUT_MS = 60_000


def _producer(bootstrap: str, txn_id: str, **extra):
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "linger.ms": 5}
    conf.update(extra)
    producer = Producer(conf)
    producer.init_transactions(30)
    return producer


def _read(bootstrap: str, topic: str, *, committed: bool, expect: int, settle: float = 1.5,
          timeout: float = 30.0) -> list[tuple[int, int, bytes, bytes | None]]:
    """(partition, offset, value, key) of every record visible at the isolation level; reads until
    `expect` arrived and then `settle` more seconds without new ones (to catch records that must not be there)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": ch.unique_name("reader"),
                         "isolation.level": "read_committed" if committed else "read_uncommitted",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        got = []
        deadline = time.time() + timeout
        quiet_until = None
        while time.time() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                if len(got) >= expect:
                    quiet_until = quiet_until or time.time() + settle
                    if time.time() >= quiet_until:
                        break
                continue
            quiet_until = None
            got.append((msg.partition(), msg.offset(), msg.value(), msg.key()))
        return got
    finally:
        consumer.close()


def test_commit_and_abort_with_read_committed(bootstrap, new_topic):
    topic = new_topic(partitions=3)
    producer = _producer(bootstrap, ch.unique_name("tx"))
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, value=f"c1-{i}".encode(), partition=i % 3)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, value=f"ab-{i}".encode(), partition=i % 3)
    assert producer.flush(20) == 0  # the aborted records really are in the log
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic, value=f"c2-{i}".encode(), partition=i % 3)
    producer.commit_transaction(30)

    committed = [v.decode() for _, _, v, _ in _read(bootstrap, topic, committed=True, expect=50)]
    expected = [f"c1-{i}" for i in range(30)] + [f"c2-{i}" for i in range(20)]
    assert sorted(committed) == sorted(expected), "read_committed: aborted records seen or committed ones missing"
    assert not [v for v, n in Counter(committed).items() if n > 1], "a committed record was seen twice"
    uncommitted = [v.decode() for _, _, v, _ in _read(bootstrap, topic, committed=False, expect=80)]
    assert sorted(uncommitted) == sorted(expected + [f"ab-{i}" for i in range(30)])


def test_zombie_producer_is_fenced(bootstrap, new_topic):
    from confluent_kafka import KafkaException

    topic = new_topic(partitions=1)
    txn_id = ch.unique_name("zombie")
    zombie = _producer(bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-1")
    assert zombie.flush(20) == 0
    successor = _producer(bootstrap, txn_id)  # fences the zombie and aborts its open transaction
    successor.begin_transaction()
    successor.produce(topic, value=b"successor")
    successor.commit_transaction(30)

    zombie.produce(topic, value=b"zombie-2")
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(30)
    error = info.value.args[0]
    assert error.fatal() or "fenced" in str(error).lower(), error
    values = [v for _, _, v, _ in _read(bootstrap, topic, committed=True, expect=1)]
    assert values == [b"successor"]


def test_abandoned_transaction_is_aborted_by_its_timeout(bootstrap, new_topic):
    topic = new_topic(partitions=1)
    abandoned = _producer(bootstrap, ch.unique_name("abandoned"), **{"transaction.timeout.ms": 2000})
    abandoned.begin_transaction()
    abandoned.produce(topic, value=b"never-committed")
    assert abandoned.flush(20) == 0
    # Nothing more from that producer: the coordinator aborts after 2 s (plus its check interval),
    # and the last stable offset moves past the marker so later commits become readable.
    later = _producer(bootstrap, ch.unique_name("later"))
    later.begin_transaction()
    later.produce(topic, value=b"committed-later")
    later.commit_transaction(30)
    values = [v for _, _, v, _ in _read(bootstrap, topic, committed=True, expect=1, timeout=40)]
    assert values == [b"committed-later"]


# -- consume-transform-produce ---------------------------------------------------------------------

_LOOP = textwrap.dedent('''
    """One consume-transform-produce worker: read `src`, write upper-cased values to `dst`, offsets in the txn."""
    import sys, time
    from confluent_kafka import Consumer, Producer, KafkaException

    bootstrap, src, dst, group, txn_id, per_txn, pause = sys.argv[1:8]
    per_txn, pause = int(per_txn), float(pause)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(30)
    consumer.subscribe([src])
    idle_since = time.time()
    while time.time() - idle_since < 8:
        batch = consumer.consume(per_txn, 0.5)
        batch = [m for m in batch if not m.error()]
        if not batch:
            continue
        idle_since = time.time()
        producer.begin_transaction()
        for m in batch:
            producer.produce(dst, key=m.key(), value=m.value().upper(), partition=m.partition())
        if pause:
            producer.flush(10)
            print("in-transaction", flush=True)
            time.sleep(pause)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        print("committed", len(batch), flush=True)
    consumer.close()
    print("done", flush=True)
''')


def _run_loop(bootstrap: str, src: str, dst: str, group: str, txn_id: str, tmp_path, *, per_txn: int = 25,
              pause: float = 0.0) -> subprocess.Popen:
    script = tmp_path / "ctp_loop.py"
    script.write_text(_LOOP)
    return subprocess.Popen([sys.executable, str(script), bootstrap, src, dst, group, txn_id, str(per_txn), str(pause)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _fill(bootstrap: str, topic: str, count: int, partitions: int) -> list[tuple[int, bytes, bytes]]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    sent = []
    for i in range(count):
        key, value, part = f"k{i % 17}".encode(), f"rec-{i:05d}".encode(), i % partitions
        producer.produce(topic, key=key, value=value, partition=part)
        sent.append((part, key, value))
    assert producer.flush(30) == 0
    return sent


def _assert_exactly_once(bootstrap: str, src_records, dst: str, group: str, src: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    out = _read(bootstrap, dst, committed=True, expect=len(src_records))
    expected_by_partition: dict[int, list[bytes]] = {}
    for part, _key, value in src_records:
        expected_by_partition.setdefault(part, []).append(value.upper())
    got_by_partition: dict[int, list[bytes]] = {}
    for part, _offset, value, _key in sorted(out):
        got_by_partition.setdefault(part, []).append(value)
    for part, values in expected_by_partition.items():
        got = got_by_partition.get(part, [])
        lost = len(set(values) - set(got))
        dups = len(got) - len(set(got))
        assert got == values, f"partition {part}: {lost} lost, {dups} duplicated, order kept: {got == sorted(got)}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = [TopicPartition(src, p) for p in expected_by_partition]
        committed = {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=10)}
    finally:
        consumer.close()
    assert committed == {p: len(v) for p, v in expected_by_partition.items()}, "committed offsets != input end"


def test_consume_transform_produce_with_send_offsets(bootstrap, new_topic, tmp_path):
    src, dst = new_topic(partitions=2, prefix="ctp-in"), new_topic(partitions=2, prefix="ctp-out")
    group = ch.unique_name("ctp")
    records = _fill(bootstrap, src, 300, 2)
    loop = _run_loop(bootstrap, src, dst, group, ch.unique_name("ctp-tx"), tmp_path)
    out, _ = loop.communicate(timeout=120)
    assert loop.returncode == 0 and "done" in out, out[-3000:]
    _assert_exactly_once(bootstrap, records, dst, group, src)


def test_killed_mid_transaction_and_restarted_gives_exactly_the_input(bootstrap, new_topic, tmp_path):
    """SIGKILL the worker while its transaction is open (records written, offsets not yet sent);
    a new worker with the same transactional.id fences and aborts it, and resumes from the committed offsets."""
    src, dst = new_topic(partitions=2, prefix="kill-in"), new_topic(partitions=2, prefix="kill-out")
    group, txn_id = ch.unique_name("kill"), ch.unique_name("kill-tx")
    records = _fill(bootstrap, src, 400, 2)
    victim = _run_loop(bootstrap, src, dst, group, txn_id, tmp_path, per_txn=40, pause=1.0)
    seen, deadline = 0, time.time() + 60
    assert victim.stdout is not None
    while time.time() < deadline:
        line = victim.stdout.readline()
        if line.startswith("in-transaction"):
            seen += 1
            if seen == 3:  # two transactions committed, the third is open with records in the log
                break
    assert seen == 3, "the worker never reached its third transaction"
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(10)
    survivor = _run_loop(bootstrap, src, dst, group, txn_id, tmp_path, per_txn=40)
    out, _ = survivor.communicate(timeout=180)
    assert survivor.returncode == 0 and "done" in out, out[-3000:]
    _assert_exactly_once(bootstrap, records, dst, group, src)
    dirty = _read(bootstrap, dst, committed=False, expect=len(records))
    assert len(dirty) > len(records), "the killed transaction's records should be in the log (aborted)"


# -- aiokafka ---------------------------------------------------------------------------------------


def test_aiokafka_transactional_producer(bootstrap, new_topic):
    from aiokafka import AIOKafkaProducer

    topic = new_topic(partitions=2)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=ch.unique_name("aio-tx"))
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(10):
                    await producer.send(topic, f"ok-{i}".encode(), partition=i % 2)
            await producer.begin_transaction()
            for i in range(10):
                await producer.send(topic, f"no-{i}".encode(), partition=i % 2)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic, b"ok-last", partition=0)
        finally:
            await producer.stop()

    ch.run_async(run())
    values = sorted(v.decode() for _, _, v, _ in _read(bootstrap, topic, committed=True, expect=11))
    assert values == sorted([f"ok-{i}" for i in range(10)] + ["ok-last"])


# -- Java ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_java_transactional_producer_and_read_committed_consumer(bootstrap, new_topic):
    ch.require_client("java")
    from tinystream.testing.peers.apache_kafka import run_java_tool

    topic = new_topic(partitions=2)
    args = ["--topic", topic, "--num-records", "2000", "--record-size", "100", "--throughput", "-1",
            "--transactional-id", f"java-{uuid.uuid4().hex[:8]}", "--transaction-duration-ms", "200",
            "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"]
    out = run_java_tool("org.apache.kafka.tools.ProducerPerformance", args, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    got = ch.consume_java(bootstrap, topic, 2000, timeout=60, config={"isolation.level": "read_committed"})
    assert len(got) == 2000
    assert len({(g.partition, g.offset) for g in got}) == 2000


@pytest.mark.slow
def test_kafka_transactions_tool_lists_describes_and_finds_no_hanging(bootstrap, new_topic):
    """kafka-transactions.sh (TransactionsCommand): list, describe, describe-producers, find-hanging."""
    ch.require_client("java")
    from tinystream.testing.peers.apache_kafka import run_java_tool

    topic = new_topic(partitions=1)
    txn_id = ch.unique_name("tool")
    producer = _producer(bootstrap, txn_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    assert producer.flush(20) == 0

    def tool(*args: str) -> list[list[str]]:
        out = run_java_tool("org.apache.kafka.tools.TransactionsCommand", ["--bootstrap-server", bootstrap, *args],
                            timeout=90)
        assert out.returncode == 0, out.stdout + out.stderr
        return [[cell.strip() for cell in line.split("\t")] for line in out.stdout.splitlines() if line.strip()]

    listed = tool("list")
    assert any(row[0] == txn_id and row[3] == "Ongoing" for row in listed[1:]), listed
    described = tool("describe", "--transactional-id", txn_id)
    assert described[1][1] == txn_id and described[1][4] == "Ongoing" and f"{topic}-0" in described[1][8]
    producers = tool("describe-producers", "--topic", topic, "--partition", "0")
    assert producers[1][5] == "0", producers  # CurrentTransactionStartOffset: the open transaction starts at 0
    broker_ids = {row[1] for row in listed[1:]}
    for broker_id in broker_ids:
        hanging = tool("find-hanging", "--broker-id", broker_id, "--max-transaction-timeout", "0")
        assert hanging[1:] == [], hanging  # the coordinator knows the transaction: not hanging
    producer.commit_transaction(30)


_READ_COMMITTED = {
    "kafka-python": {"isolation_level": "read_committed"},
    "aiokafka": {"isolation_level": "read_committed"},
    "confluent": {"isolation.level": "read_committed"},
    "kcat": {"isolation.level": "read_committed"},
    "java": {"isolation.level": "read_committed"},
}


@pytest.mark.parametrize("client", ch.client_params(tuple(_READ_COMMITTED)))
def test_every_consumer_client_reads_committed_only(bootstrap, new_topic, client):
    """Each client's read_committed path: aborted records dropped by the aborted list, markers skipped."""
    ch.require_client(client)
    topic = new_topic(partitions=2)
    producer = _producer(bootstrap, ch.unique_name("rc"))
    for prefix, commit in (("c1", True), ("ab", False), ("c2", True)):
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % 2)
        assert producer.flush(20) == 0
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    got = ch.consume(client, bootstrap, topic, 12, timeout=30, config=_READ_COMMITTED[client])
    assert sorted(g.value.decode() for g in got) == sorted([f"c1-{i}" for i in range(6)] + [f"c2-{i}" for i in range(6)])
