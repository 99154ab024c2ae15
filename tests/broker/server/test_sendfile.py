"""A plaintext Fetch writes its record sets from the segment files with sendfile (response_writer.py).

A real broker, real sockets: the bytes a client reads equal the copying path's
(the same request dispatched for a TLS-like client), across segment rolls, when
the client's receive buffer is tiny (sendfile writes in parts and waits), with
a request pipelined behind the Fetch, and when the client leaves in the middle
(every file range the fetch took is let go). A Fetch opens no file: its ranges
share the segments' descriptors (storage/file_range.py), so answers waiting to
be written hold none of their own.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from pathlib import Path

import pytest

from tinystream.broker.protocol.codec import decode_request
from tinystream.broker.protocol.response_parts import ResponseParts
from tinystream.broker.security.peer import ClientInfo
from tinystream.broker.server.response_writer import INLINE_BYTES
from tinystream.broker.storage.file_range import ranges_held
from tinystream.testing.broker import BrokerThread, fetch_request, open_log_fds, raw_connection, request, test_settings
from tinystream.testing.peers.wire import encode_request

SEGMENT_BYTES = 1 << 20  # an answer (one segment's batches) far larger than the sockets' buffers
VALUE = 2000  # bytes per record: batches of a few records
RECORDS = 1500  # ~3 MB: several segments


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("sendfile") / "data")) as b:
        yield b


def values(n: int) -> list[bytes]:
    return [b"%06d" % i + b"x" * (VALUE - 6) for i in range(n)]


@pytest.fixture(scope="module")
def topic(running) -> str:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    name = f"sf-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=running.bootstrap)
    admin.create_topics([NewTopic(name, 1, 1, topic_configs={"segment.bytes": str(SEGMENT_BYTES)})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=running.bootstrap, linger_ms=5, batch_size=8192)
    for v in values(RECORDS):
        producer.send(name, value=v)
    producer.flush(30)
    producer.close()
    return name


def segment_files(running, topic: str) -> list[Path]:
    return sorted(Path(running.settings.log_dirs).glob(f"{topic}-0/*.log"))


def connect(running, *, rcvbuf: int | None = None) -> socket.socket:
    return raw_connection(running.bootstrap, rcvbuf=rcvbuf, timeout=20)


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "connection closed mid-frame"
            out += chunk
        return bytes(out)

    head = exactly(4)
    return head + exactly(struct.unpack(">i", head)[0])


def copying_path(running, frame: bytes) -> bytes:
    """The same request answered for a context without file ranges: the record sets copied into bytes."""
    decoded = decode_request(memoryview(frame)[4:])

    async def dispatch(b):
        return await b.server.dispatcher.dispatch(decoded, ClientInfo(999, "copy", 0, file_ranges=False))

    return bytes(running.call(dispatch))


def whole_topic_fetch(topic: str, offset: int = 0, correlation_id: int = 7) -> bytes:
    return encode_request(fetch_request([(topic, 0, offset)], version=12, partition_max_bytes=8 << 20),
                          correlation_id=correlation_id)


def test_plaintext_fetch_is_sent_from_the_file_and_byte_identical(running, topic):
    assert len(segment_files(running, topic)) >= 3
    before = running.broker.server.sendfile_slices
    frame = whole_topic_fetch(topic)
    with connect(running) as sock:
        sock.sendall(frame)
        got = read_frame(sock)
    assert running.broker.server.sendfile_slices == before + 1
    assert len(got) > SEGMENT_BYTES // 2  # one segment's batches (a fetch stops at a segment's end)
    assert got == copying_path(running, frame)


def test_tiny_receive_buffer_partial_sendfile_and_pipelined_answer_in_order(running, topic):
    fetches = [whole_topic_fetch(topic, offset, correlation_id=10 + i) for i, offset in enumerate((0, 300, 900))]
    versions = encode_request(request(18, 3, client_software_name="t", client_software_version="1"),
                              correlation_id=50)
    sent_before = running.broker.server.sendfile_bytes
    with connect(running, rcvbuf=4096) as sock:
        sock.sendall(b"".join(fetches) + versions)
        time.sleep(0.5)  # the broker's sendfile fills the tiny window and waits for the socket
        answers = [read_frame(sock) for _ in range(4)]
    assert [struct.unpack_from(">i", a, 4)[0] for a in answers] == [10, 11, 12, 50]  # request order
    for frame, answer in zip(fetches, answers[:3], strict=True):
        assert answer == copying_path(running, frame)
    assert running.broker.server.sendfile_bytes - sent_before == sum(_records_bytes(a) for a in answers[:3])


def test_a_small_answer_is_read_into_one_write_not_sent_from_the_file(running, topic):
    """An answer under INLINE_BYTES goes as one buffer (its record sets read with pread): same bytes, no sendfile,
    and no range left held."""
    slices, sent, held = running.broker.server.sendfile_slices, running.broker.server.sendfile_bytes, ranges_held()
    frame = encode_request(fetch_request([(topic, 0, 40)], version=12, partition_max_bytes=INLINE_BYTES // 2),
                           correlation_id=9)
    with connect(running) as sock:
        sock.sendall(frame)
        got = read_frame(sock)
    assert INLINE_BYTES // 4 < _records_bytes(got) <= INLINE_BYTES // 2
    assert got == copying_path(running, frame)
    assert (running.broker.server.sendfile_slices, running.broker.server.sendfile_bytes) == (slices, sent)
    assert ranges_held() <= held  # its ranges were closed once read


def _records_bytes(frame: bytes) -> int:
    from kio.schema.fetch.v12.response import FetchResponse

    from tinystream.testing.peers.wire import decode_response

    _, body = decode_response(FetchResponse, memoryview(frame)[4:])
    return sum(len(p.records or b"") for t in body.responses for p in t.partitions)


def test_a_consumer_reads_across_segment_boundaries(running, topic):
    from kafka import KafkaConsumer

    before = running.broker.server.sendfile_slices
    consumer = KafkaConsumer(topic, bootstrap_servers=running.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None, max_partition_fetch_bytes=100_000)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < RECORDS and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got += [m.value for m in records]
    consumer.close()
    assert got == values(RECORDS)
    assert running.broker.server.sendfile_slices - before >= len(segment_files(running, topic))


def test_fetch_answers_waiting_to_be_written_hold_no_descriptor_of_their_own(running, topic):
    """200 Fetch answers held unwritten (as for clients that do not read), each a range of one of the
    topic's segments: the broker's descriptors on the topic's files, and in all, stay what they were."""
    offsets = [0, 300, 600, 900, 1200]
    decoded = [decode_request(memoryview(whole_topic_fetch(topic, o))[4:]) for o in offsets]

    def descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def fetch_all(b) -> list[ResponseParts]:
        return [await b.server.dispatcher.dispatch(d, ClientInfo(999, "held", 0, file_ranges=True))
                for _ in range(40) for d in decoded]

    log_fds, held, total = open_log_fds(topic), ranges_held(), descriptors()
    answers = running.call(fetch_all)
    try:
        assert all(type(a) is ResponseParts and len(a.slices()) == 1 for a in answers)
        assert ranges_held() - held >= len(answers) == 200
        assert open_log_fds(topic) == log_fds
        assert descriptors() < total + 10  # no descriptor per answer (a few for the broker's other work)
    finally:
        for a in answers:
            a.close()
    assert ranges_held() == held


def test_a_client_leaving_mid_sendfile_frees_every_file_and_byte(running, topic):
    baseline, held = open_log_fds(topic), ranges_held()
    server = running.broker.server
    for _ in range(3):
        sock = connect(running, rcvbuf=4096)
        sock.sendall(whole_topic_fetch(topic, 0) + whole_topic_fetch(topic, 600, correlation_id=8))
        time.sleep(0.3)  # the first answer's sendfile is waiting on the full socket, the second queued
        assert sock.recv(1000)  # some of it arrived
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # a reset, not a FIN
        sock.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (
            open_log_fds(topic) != baseline or ranges_held() != held or server.unwritten_bytes
            or server.queued_bytes or running.call(lambda b: b.server.connection_count)):
        time.sleep(0.05)
    assert (open_log_fds(topic), ranges_held()) == (baseline, held)
    assert (server.unwritten_bytes, server.queued_bytes, running.call(lambda b: b.server.connection_count)) == (0, 0, 0)
    # The broker still serves the next client.
    with connect(running) as sock:
        sock.sendall(whole_topic_fetch(topic))
        assert len(read_frame(sock)) > SEGMENT_BYTES // 2


async def test_a_tls_listener_reads_the_files_without_sendfile(tmp_path):
    """sendfile cannot write through TLS: a Fetch's record sets are read from the files a piece at a time
    (test_tls_fetch.py), never with sendfile, and its records are right."""
    import ssl

    from tinystream.broker.app import Broker
    from tinystream.broker.protocol.client import KafkaClient
    from tinystream.broker.storage.batch import decode_records, split_batches
    from tinystream.testing.broker import create_topic, now_batch, produce_request, throwaway_tls

    keystore, truststore = throwaway_tls(tmp_path / "tls")
    broker = Broker(test_settings(tmp_path / "data", **{
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(truststore)}))
    info = await broker.start()
    client = await KafkaClient.connect(info.host, info.port,
                                       ssl_context=ssl.create_default_context(cafile=str(truststore)))
    try:
        await create_topic(client, "tls")
        sent = [b"%d" % i * 500 for i in range(50)]
        for v in sent:
            await client.request(produce_request("tls", 0, now_batch([(None, v)])))
        got: list[bytes] = []
        while len(got) < len(sent):
            data = (await client.request(fetch_request([("tls", 0, len(got))], version=12))).responses[0].partitions[0]
            got += [r.value for b in split_batches(data.records) for r in decode_records(b)]
        assert got == sent
        assert broker.server.sendfile_slices == 0
    finally:
        await client.close()
        await broker.stop()
