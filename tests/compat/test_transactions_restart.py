"""A TinyStream broker SIGKILLed with transactions committed, aborted and open, then restarted.

What must survive (confluent-kafka as the client, our broker only: it is
started here, in its own directory, on a fixed port so clients find it again):
the aborted-transaction index (read_committed still drops the aborted
records), the committed records exactly once, the coordinator's state in
__transaction_state (the open transaction is found again, and a new
producer with the same transactional.id fences and aborts it), and the
last stable offset (held at the open transaction until it ends).
"""

from __future__ import annotations

import os
import signal
import time

import compat_helpers as ch
import pytest
from test_transactions import _producer, _read

from tinystream.testing.peers.ports import free_port
from tinystream.testing.peers.tinystream_broker import start_tinystream

pytestmark = pytest.mark.compat

OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "transaction.state.log.num.partitions": 4,
             "offsets.topic.num.partitions": 4}


@pytest.fixture
def own_broker(tmp_path):
    if (os.environ.get("TINYSTREAM_COMPAT_TARGET") or "tinystream") != "tinystream":
        pytest.skip("restarts a TinyStream broker of its own")
    port = free_port()
    started = [start_tinystream(workdir=tmp_path, port=port, overrides=OVERRIDES)]

    def restart():
        os.killpg(started[-1].process.pid, signal.SIGKILL)
        started[-1].process.wait(10)
        started.append(start_tinystream(workdir=tmp_path, port=port, overrides=OVERRIDES))
        return started[-1]

    yield started[0], restart
    for b in started:
        b.stop()


def test_transactions_survive_a_broker_sigkill(own_broker):
    broker, restart = own_broker
    bootstrap = broker.bootstrap
    topic = ch.create_topic(bootstrap, ch.unique_name("restart"), 2)
    producer = _producer(bootstrap, "restart-committer")
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic, value=f"c{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(topic, value=f"a{i}".encode(), partition=i % 2)
    assert producer.flush(20) == 0
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=f"open{i}".encode(), partition=i % 2)
    assert producer.flush(20) == 0  # written, never ended: the broker dies now
    time.sleep(0.5)
    restart()
    assert sorted(v.decode() for _, _, v, _ in _read(bootstrap, topic, committed=True, expect=20)) == \
        sorted(f"c{i}" for i in range(20))
    successor = _producer(bootstrap, "restart-committer")  # fences the pre-crash producer, aborts its open txn
    successor.begin_transaction()
    successor.produce(topic, value=b"after", partition=0)
    successor.commit_transaction(30)
    assert sorted(v.decode() for _, _, v, _ in _read(bootstrap, topic, committed=True, expect=21)) == \
        sorted([f"c{i}" for i in range(20)] + ["after"])
    assert len(_read(bootstrap, topic, committed=False, expect=51)) == 51
