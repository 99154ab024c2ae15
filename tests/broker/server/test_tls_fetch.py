"""On TLS a Fetch's record sets are read from the segment files a piece at a time (response_writer.py).

A real broker on an SSL listener, a topic whose one Fetch answer holds three
record sets of 5 MB each (each many TLS_PIECEs, the answer larger than the
connection's WRITE_BUFFER_HIGH): a real client (kafka-python over SSL, CRCs
checked) reads every record; the raw answer is byte-identical to the copying
path's; a client that does not read holds the SSL transport's buffer near its
high-water mark while the whole answer stays counted against the answers
budget, and once it reads, every byte and every file slice is given back.
"""

from __future__ import annotations

import ssl
import struct
import uuid
from pathlib import Path

import pytest

from tinystream.broker.protocol.codec import decode_request
from tinystream.broker.security.peer import ClientInfo
from tinystream.broker.server.connection import WRITE_BUFFER_HIGH
from tinystream.broker.server.response_writer import TLS_PIECE
from tinystream.broker.storage.file_range import ranges_held
from tinystream.testing.broker import BrokerThread, fetch_request, open_log_fds, raw_connection, test_settings, throwaway_tls
from tinystream.testing.peers.wire import encode_request
from tinystream.testing.waiting import wait_until

PARTITIONS = 3
VALUE = 10_000  # bytes per record
PER_PARTITION = 500  # 5 MB per partition: one record set of about ten TLS_PIECEs each


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    pytest.importorskip("trustme")
    folder = tmp_path_factory.mktemp("tls-fetch")
    keystore, truststore = throwaway_tls(folder / "tls")
    settings = test_settings(folder / "data", **{
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(truststore)})
    with BrokerThread(settings) as broker:
        yield broker, truststore


def values(partition: int) -> list[bytes]:
    return [b"p%d-%06d-" % (partition, i) + bytes([i % 251]) * VALUE for i in range(PER_PARTITION)]


@pytest.fixture(scope="module")
def topic(running) -> str:
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient, NewTopic  # noqa: PLC0415

    broker, truststore = running
    conf = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(truststore),
            "log_level": 0}
    name = f"tlsf-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf)  # held: its futures fail once it is collected
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(30)
    producer = Producer({**conf, "linger.ms": 5, "message.max.bytes": 1 << 20})
    for p in range(PARTITIONS):
        for v in values(p):
            producer.produce(name, value=v, partition=p)
        producer.poll(0)
    assert producer.flush(60) == 0
    return name


def whole_topic_fetch(topic: str) -> bytes:
    return encode_request(fetch_request([(topic, p, 0) for p in range(PARTITIONS)], version=12,
                                        partition_max_bytes=8 << 20), correlation_id=7)


def copying_path(broker: BrokerThread, frame: bytes) -> bytes:
    """The same request answered with the record sets copied into one frame (no file ranges)."""
    decoded = decode_request(memoryview(frame)[4:])

    async def dispatch(b):
        return await b.server.dispatcher.dispatch(decoded, ClientInfo(999, "copy", 0, file_ranges=False))

    return bytes(broker.call(dispatch))


def connect_tls(broker: BrokerThread, truststore: Path, *, rcvbuf: int | None = None) -> ssl.SSLSocket:
    sock = raw_connection(broker.bootstrap, rcvbuf=rcvbuf, timeout=30)
    host = broker.bootstrap.rsplit(":", 1)[0]
    return ssl.create_default_context(cafile=str(truststore)).wrap_socket(sock, server_hostname=host)


def read_frame(sock: ssl.SSLSocket) -> bytes:
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(min(n - len(out), 1 << 20))
            assert chunk, "connection closed mid-frame"
            out += chunk
        return bytes(out)

    head = exactly(4)
    return head + exactly(struct.unpack(">i", head)[0])


def test_kafka_python_over_tls_reads_every_record_of_large_record_sets(running, topic):
    kafka = pytest.importorskip("kafka")
    broker, truststore = running
    before = broker.broker.server.sendfile_slices
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap, security_protocol="SSL", ssl_cafile=str(truststore),
        ssl_check_hostname=False, auto_offset_reset="earliest", enable_auto_commit=False, group_id=None,
        max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20, check_crcs=True)
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}

    def all_read() -> bool:
        for tp, records in consumer.poll(timeout_ms=500).items():
            got[tp.partition] += [m.value for m in records]
        return all(len(v) >= PER_PARTITION for v in got.values())

    try:
        wait_until(all_read, timeout=60, what="every record over TLS", interval=0)
    finally:
        consumer.close()
    assert got == {p: values(p) for p in range(PARTITIONS)}
    assert broker.broker.server.sendfile_slices == before  # TLS: read from the files, never sendfile


def test_a_slow_tls_reader_holds_the_transport_near_its_mark_then_gets_the_exact_bytes(running, topic):
    broker, truststore = running
    frame = whole_topic_fetch(topic)
    expected = copying_path(broker, frame)
    assert len(expected) > 3 * WRITE_BUFFER_HIGH  # more than the client's and the broker's buffers hold
    baseline, held = open_log_fds(topic), ranges_held()

    def state(b) -> list[tuple[bool, bool, int]]:
        b.server.recount_unwritten()
        return [(c._writer is not None and c._writer.busy, c._transport_full, c._transport.get_write_buffer_size())
                for c in b.server._connections if c._writer is not None]

    with connect_tls(broker, truststore, rcvbuf=4096) as sock:
        sock.sendall(frame)
        # The client reads nothing: the writer waits for room with the answer still in its queue.
        stalled = wait_until(lambda: [s for s in broker.call(state) if s[0] and s[1]], timeout=30,
                             what="the TLS writer paused on a full transport")
        assert len(stalled) == 1
        # What the SSL transport holds: up to its mark and the one piece that crossed it (ciphertext).
        assert stalled[0][2] <= WRITE_BUFFER_HIGH + 2 * TLS_PIECE
        assert broker.broker.server.unwritten_bytes >= len(expected)  # the whole answer counts on the budget
        got = read_frame(sock)
    assert got == expected  # byte-exact, through several TLS_PIECE reads of three files
    wait_until(lambda: (open_log_fds(topic), ranges_held(), broker.broker.server.unwritten_bytes) == (baseline, held, 0),
               timeout=30, what="every file slice closed and every answer byte given back")
