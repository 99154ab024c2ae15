"""On TLS a large answer goes to the transport in TLS_PIECE pieces, each once the transport has room
(response_writer.py): ciphertext no longer piles up whole in asyncio's socket buffer."""

from __future__ import annotations

import asyncio

from tinystream.broker.server.response_writer import TLS_PIECE, ResponseWriter


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
