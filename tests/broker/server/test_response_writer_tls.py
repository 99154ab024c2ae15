"""On TLS a large answer goes to the transport in TLS_PIECE pieces, each once the transport has room
(response_writer.py): ciphertext no longer piles up whole in asyncio's socket buffer. A Fetch's record sets
are read from their files the same way, a piece at a time, never joined into one frame."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

from tinystream.broker.protocol.response_parts import ResponseParts
from tinystream.broker.server.response_writer import INLINE_BYTES, TLS_PIECE, ResponseWriter, _AtOffset
from tinystream.broker.storage.file_range import FileRange, SharedFile
from tinystream.testing.broker import throwaway_tls


class FakeTlsTransport:
    """Records what is written; says it is TLS (an SSL object) and has no socket of its own."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def get_extra_info(self, name: str) -> object:
        return object() if name == "ssl_object" else None

    def write(self, data: bytes | memoryview) -> None:
        self.writes.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def writer(transport: FakeTlsTransport, drained: list[int]) -> ResponseWriter:
    return ResponseWriter(transport, on_drained=lambda: drained.append(1),  # type: ignore[arg-type]
                          on_failed=lambda exc: drained.append(-1), after_sendfile=lambda sent: None)


async def test_a_large_answer_waits_for_room_then_goes_in_pieces_in_order() -> None:
    transport, drained = FakeTlsTransport(), []
    w = writer(transport, drained)
    answer = bytes(range(256)) * (2 * TLS_PIECE // 256 + 7)  # two whole pieces and a short third
    w.transport_paused()
    w.write([answer, b"pipelined behind it"])
    await settle()
    assert transport.writes == [] and w.queued == len(answer) + len(b"pipelined behind it")
    w.transport_resumed()
    await settle()
    assert [len(piece) for piece in transport.writes] == [TLS_PIECE, TLS_PIECE, len(answer) - 2 * TLS_PIECE,
                                                           len(b"pipelined behind it")]
    assert b"".join(transport.writes) == answer + b"pipelined behind it"
    assert drained == [1] and w.queued == 0 and not w.busy


async def test_a_pause_between_pieces_holds_the_rest() -> None:
    transport, drained = FakeTlsTransport(), []
    w = writer(transport, drained)
    answer = b"x" * (3 * TLS_PIECE)
    original = transport.write

    def write_then_fill(data: bytes | memoryview) -> None:  # the first piece fills the transport
        original(data)
        w.transport_paused()

    transport.write = write_then_fill  # type: ignore[method-assign]
    w.write([answer])
    await settle()
    assert len(transport.writes) == 1
    transport.write = original  # type: ignore[method-assign]
    w.transport_resumed()
    await settle()
    assert b"".join(transport.writes) == answer and drained == [1]


async def test_a_small_answer_is_written_at_once() -> None:
    transport, drained = FakeTlsTransport(), []
    w = writer(transport, drained)
    w.transport_paused()  # the fast path does not wait: asyncio buffers it, as before
    w.write([b"small"])
    assert transport.writes == [b"small"] and not w.busy and drained == []


def parts_answer(tmp_path: Path, sizes: list[int]) -> tuple[ResponseParts, bytes, list[FileRange]]:
    """An answer of byte parts and file slices (one file per slice, each from an offset into it)."""
    parts: list[object] = []
    expected = b""
    ranges = []
    for i, size in enumerate(sizes):
        head = b"head-%d" % i
        content = bytes((i * 7 + k) % 256 for k in range(256)) * (size // 256 + 2)
        path = tmp_path / f"{i}.log"
        path.write_bytes(content)
        ranges.append(FileRange.open(path, 100, size))
        parts += [head, ranges[-1]]
        expected += head + content[100:100 + size]
    parts.append(b"tail")
    return ResponseParts(tuple(parts), len(expected) + 4), expected + b"tail", ranges  # type: ignore[arg-type]


async def test_file_slices_are_read_a_piece_at_a_time_each_once_there_is_room(tmp_path: Path) -> None:
    transport, drained = FakeTlsTransport(), []
    w = writer(transport, drained)
    answer, expected, ranges = parts_answer(tmp_path, [2 * TLS_PIECE + 5, TLS_PIECE // 3])
    original = transport.write

    def write_then_fill(data: bytes | memoryview) -> None:  # every write fills the transport
        original(data)
        w.transport_paused()

    transport.write = write_then_fill  # type: ignore[method-assign]
    w.write([answer])
    for step in range(1, 20):
        await settle()
        assert len(transport.writes) == step  # nothing more is read or written before the next resume
        if not w.busy:
            break
        w.transport_resumed()
    assert b"".join(transport.writes) == expected
    assert max(len(piece) for piece in transport.writes) == TLS_PIECE
    assert drained == [1] and w.queued == 0 and all(r.closed for r in ranges)


async def test_a_file_cut_short_fails_the_connection_and_closes_the_slices(tmp_path: Path) -> None:
    transport, drained = FakeTlsTransport(), []
    w = writer(transport, drained)
    answer, _, ranges = parts_answer(tmp_path, [TLS_PIECE + 10, 50])
    os.truncate(tmp_path / "0.log", 100 + TLS_PIECE)  # ten bytes promised by the size prefix are gone
    w.write([answer])
    await settle()
    assert drained == [-1] and w.queued == 0 and all(r.closed for r in ranges)


async def test_small_parts_are_gathered_into_one_write(tmp_path: Path) -> None:
    """A Fetch of many small partitions, too large to be read whole before writing (INLINE_BYTES): one write
    (one send), not two per partition."""
    transport, drained = FakeTlsTransport(), []
    w = writer(transport, drained)
    answer, expected, ranges = parts_answer(tmp_path, [2000] * 40)
    assert INLINE_BYTES < len(answer) < TLS_PIECE
    w.write([answer])
    await settle()
    assert transport.writes == [expected]
    assert drained == [1] and w.queued == 0 and all(r.closed for r in ranges)


async def test_a_small_answer_is_written_at_once_with_no_task(tmp_path: Path) -> None:
    """Under INLINE_BYTES an answer in parts is read whole and written before `write` returns, its ranges closed."""
    transport, drained = FakeTlsTransport(), []
    w = writer(transport, drained)
    answer, expected, ranges = parts_answer(tmp_path, [300] * 10)
    w.write([answer])
    assert transport.writes == [expected] and not w.busy and w.queued == 0
    assert all(r.closed for r in ranges) and drained == []


async def test_a_small_answer_whose_file_was_cut_fails_the_connection(tmp_path: Path) -> None:
    transport, drained = FakeTlsTransport(), []
    w = writer(transport, drained)
    answer, _, ranges = parts_answer(tmp_path, [300] * 3)
    os.truncate(tmp_path / "1.log", 150)  # the second slice promised bytes 100..400
    w.write([answer])
    assert transport.writes == [] and drained == [-1] and all(r.closed for r in ranges)


async def test_asyncio_sendfile_from_one_shared_descriptor_on_two_connections_sends_each_its_bytes(tmp_path: Path) -> None:
    """Two slices of one segment share its descriptor. asyncio's sendfile on a TLS transport takes its fallback
    (seek, then readinto on a worker thread, between awaits: the path a plaintext one takes when os.sendfile
    refuses at once); sent at the same time on two connections, each `_AtOffset` reads at its own position."""
    keystore, truststore = throwaway_tls(tmp_path / "tls")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(keystore)
    client_tls = ssl.create_default_context(cafile=str(truststore))
    content = os.urandom(3 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(content)
    shared = SharedFile(os.open(path, os.O_RDONLY), path)
    ranges = [FileRange(shared, 0, 1 << 20), FileRange(shared, (1 << 20) + 5, 1 << 20)]
    shared.close()  # the ranges hold it now
    loop = asyncio.get_running_loop()
    accepted: asyncio.Queue[asyncio.Transport] = asyncio.Queue()

    class Accept(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.put_nowait(transport)  # type: ignore[arg-type]

    server = await loop.create_server(Accept, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    clients = [await asyncio.open_connection("127.0.0.1", port, ssl=client_tls) for _ in ranges]
    transports = [await accepted.get() for _ in ranges]
    try:
        sending = asyncio.gather(*(loop.sendfile(t, _AtOffset(r.fileno()), r.position, len(r))
                                   for t, r in zip(transports, ranges, strict=True)))
        got = await asyncio.gather(*(reader.readexactly(len(r)) for (reader, _), r in zip(clients, ranges, strict=True)))
        assert await sending == [len(r) for r in ranges]
        assert got == [content[r.position:r.position + len(r)] for r in ranges]
    finally:
        for _, w in clients:
            w.close()
        for t in transports:
            t.close()
        server.close()
        for r in ranges:
            r.close()
