"""Kafka Streams with processing.guarantee=exactly_once_v2 against TinyStream, across a broker SIGKILL.

A word count (tests/compat/java/EosWordCount.java, compiled here against the
Kafka jars; in-memory state, so its changelog is restored through
read_committed after every failure): half the input is counted, the broker
is SIGKILLed and restarted on the same port and directory, the other half
is produced, and the last count per word in the output (read_committed)
must be exactly the number of times the word was sent. Slow (Java, ~1 min).
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path

import compat_helpers as ch
import pytest
from test_transactions_restart import own_broker  # noqa: F401 - the fixture

pytestmark = [pytest.mark.compat, pytest.mark.slow]

SOURCE = Path(__file__).parent / "java" / "EosWordCount.java"


def _compile(tmp_path: Path) -> str:
    from tinystream.testing.peers.apache_kafka import jars_dir, java_executable

    jars = jars_dir()
    if not any(jars.glob("kafka-streams-*.jar")):
        pytest.skip("kafka-streams not in the Kafka jars: run tools/install-kafka-jars.sh")
    javac = Path(java_executable()).with_name("javac")
    if not javac.exists():
        pytest.skip("javac not found (a JDK is needed to compile the Streams application)")
    classes = tmp_path / "classes"
    classpath = f"{jars}/*"
    subprocess.run([str(javac), "-d", str(classes), "-cp", classpath, str(SOURCE)], check=True, timeout=120)
    return f"{classes}:{classpath}"


def _counts(bootstrap: str, topic: str, expect_keys: int) -> dict[str, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": ch.unique_name("counts"),
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
        last: dict[str, int] = {}
        deadline, quiet = time.time() + 90, None  # a JVM, a rebalance and EOS commits on a loaded machine
        while time.time() < deadline:
            msg = consumer.poll(0.3)
            if msg is not None and not msg.error():
                last[msg.key().decode()] = int(msg.value())
                quiet = None
            elif len(last) >= expect_keys:
                quiet = quiet or time.time() + 2
                if time.time() > quiet:
                    break
        return last
    finally:
        consumer.close()


def test_word_count_is_exact_across_a_broker_restart(own_broker, tmp_path):  # noqa: F811
    ch.require_client("java")
    from confluent_kafka import Producer

    from tinystream.testing.peers.apache_kafka import java_executable

    classpath = _compile(tmp_path)
    broker, restart = own_broker
    bootstrap = broker.bootstrap
    src = ch.create_topic(bootstrap, ch.unique_name("words"), 2)
    dst = ch.create_topic(bootstrap, ch.unique_name("counts"), 2)
    first = [f"w{i % 13}" for i in range(300)]
    second = [f"w{i % 17}" for i in range(300)]

    def send(words: list[str], offset: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for i, word in enumerate(words):
            producer.produce(src, key=str(offset + i).encode(), value=word.encode())
        assert producer.flush(30) == 0

    send(first, 0)
    app = subprocess.Popen([java_executable(), "-cp", classpath, "EosWordCount", bootstrap, ch.unique_name("wc"),
                            src, dst, str(tmp_path / "state"), "60"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        before = _counts(bootstrap, dst, 13)
        if before != dict(Counter(first)):
            app.kill()
            raise AssertionError(f"counts before the restart: {before}\n{app.communicate(timeout=30)[0][-6000:]}")
        restart()
        send(second, len(first))
        out, _ = app.communicate(timeout=150)
    finally:
        if app.poll() is None:
            app.kill()
    assert "closed" in out, out[-4000:]
    assert "-> ERROR" not in out, out[-4000:]
    assert _counts(bootstrap, dst, 17) == dict(Counter(first + second))
