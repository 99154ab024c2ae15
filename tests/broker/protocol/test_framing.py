"""FrameDecoder: fed whole, split at every byte, oversized and undersized prefixes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinystream.broker.protocol.errors import FrameTooLarge, InvalidFrame
from tinystream.broker.protocol.framing import ASSEMBLE_FROM, MIN_REQUEST_SIZE, FrameDecoder, frame


def frames_of(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while (f := decoder.next_frame()) is not None:
        out.append(bytes(f))
    return out


PAYLOADS = [b"A" * 8, bytes(range(200)), b"\x00" * 9, b"xyz" * 1000]
STREAM = b"".join(frame(p) for p in PAYLOADS)


def test_whole_stream_in_one_chunk() -> None:
    d = FrameDecoder(1 << 20)
    d.receive_data(STREAM)
    assert frames_of(d) == PAYLOADS
    assert d.buffered == 0 and not d.in_frame


def test_fed_byte_by_byte() -> None:
    d = FrameDecoder(1 << 20)
    got = []
    for i in range(len(STREAM)):
        d.receive_data(STREAM[i : i + 1])
        got.extend(frames_of(d))
    assert got == PAYLOADS


@pytest.mark.parametrize("split", range(1, 40))
def test_split_at_every_point_of_the_start(split: int) -> None:
    d = FrameDecoder(1 << 20)
    d.receive_data(STREAM[:split])
    got = frames_of(d)
    d.receive_data(STREAM[split:])
    got += frames_of(d)
    assert got == PAYLOADS


def test_frame_inside_one_chunk_is_a_view_without_copy() -> None:
    chunk = frame(b"B" * 64)
    d = FrameDecoder(1 << 20)
    d.receive_data(chunk)
    f = d.next_frame()
    assert isinstance(f, memoryview) and f.obj is chunk


def test_size_over_limit_fails_before_the_body_arrives() -> None:
    d = FrameDecoder(1000)
    d.receive_data(struct.pack(">i", 1001))  # only the prefix: nothing allocated for the body
    with pytest.raises(FrameTooLarge):
        d.next_frame()
    with pytest.raises(InvalidFrame):
        d.receive_data(b"more")


def test_huge_declared_size_is_refused_at_once() -> None:
    d = FrameDecoder(100 * 1024 * 1024)
    d.receive_data(b"\x7f\xff\xff\xff")
    with pytest.raises(FrameTooLarge):
        d.next_frame()


@pytest.mark.parametrize("size", [-1, -(2**31), 0, MIN_REQUEST_SIZE - 1])
def test_negative_or_tiny_size_is_invalid(size: int) -> None:
    d = FrameDecoder(1000)
    d.receive_data(struct.pack(">i", size))
    with pytest.raises(InvalidFrame):
        d.next_frame()


def test_limit_is_inclusive() -> None:
    d = FrameDecoder(16)
    d.receive_data(frame(b"C" * 16))
    assert frames_of(d) == [b"C" * 16]


def test_partial_prefix_needs_more() -> None:
    d = FrameDecoder(1000)
    d.receive_data(b"\x00\x00")
    assert d.next_frame() is None and d.in_frame


LARGE = [b"s" * 10, bytes(range(256)) * (ASSEMBLE_FROM // 256 + 3), b"t" * 20, b"u" * ASSEMBLE_FROM, b"v" * 9]
LARGE_STREAM = b"".join(frame(p) for p in LARGE)


@given(cuts=st.lists(st.integers(1, len(LARGE_STREAM) - 1), max_size=30, unique=True))
def test_large_frames_are_assembled_from_any_chunking(cuts: list[int]) -> None:
    d = FrameDecoder(4 << 20)
    got: list[bytes] = []
    bounds = [0, *sorted(cuts), len(LARGE_STREAM)]
    for start, stop in zip(bounds, bounds[1:]):
        d.receive_data(LARGE_STREAM[start:stop])
        got.extend(frames_of(d))
    assert got == LARGE
    assert d.buffered == 0 and not d.in_frame


def test_an_assembled_frame_is_read_only_like_a_received_one() -> None:
    d = FrameDecoder(4 << 20)
    d.receive_data(frame(b"w" * ASSEMBLE_FROM)[:1000])
    assert d.next_frame() is None
    d.receive_data(frame(b"w" * ASSEMBLE_FROM)[1000:])
    assembled = d.next_frame()
    assert assembled is not None and assembled.readonly  # kio refuses writable buffers
