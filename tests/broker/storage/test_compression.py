"""Codecs: round trips, every framing Kafka clients send, and the decompression bound."""

from __future__ import annotations

import os
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.broker.storage.base import CorruptRecordError
from tinystream.broker.storage.compression import (
    XERIAL_MAGIC,
    Compression,
    DecompressionLimitError,
    compress,
    decompress,
)

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=3000), codec=st.sampled_from(list(Compression)))
def test_round_trip(data, codec):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_output_bigger_than_the_first_buffer_grows_it(codec):
    # 1 MiB of text from a few KiB: more than the initial 64 KiB buffer, so this
    # pins cramjam's "buffer full" message that the growth loop relies on.
    data = b"tinystream " * 100_000
    assert decompress(codec, compress(codec, data), max_bytes=2 * len(data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_bomb_stops_at_the_bound(codec):
    data = bytes(8 * 1024 * 1024)
    packed = compress(codec, data)
    with pytest.raises(DecompressionLimitError):
        decompress(codec, packed, max_bytes=1024 * 1024)


def test_snappy_bomb_is_refused_before_allocating():
    # A raw snappy block that *declares* 2 GiB (varint) but holds nothing (CVE-2023-34455).
    declared = 2**31 - 1
    varint = bytearray()
    value = declared
    while value >= 0x80:
        varint.append((value & 0x7F) | 0x80)
        value >>= 7
    varint.append(value)
    with pytest.raises(DecompressionLimitError, match="declares"):
        decompress(Compression.SNAPPY, bytes(varint) + b"\x00" * 10, max_bytes=1 << 20)
    # The same inside xerial framing.
    xerial = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">I", len(varint) + 10) + bytes(varint) + b"\0" * 10
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.SNAPPY, xerial, max_bytes=1 << 20)


def test_xerial_blocks_add_up_against_the_bound():
    data = os.urandom(100_000)  # four 32 KiB xerial blocks
    packed = compress(Compression.SNAPPY, data)
    assert packed.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, packed, max_bytes=100_000) == data
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.SNAPPY, packed, max_bytes=99_999)


def test_snappy_reads_raw_xerial_and_frame_formats():
    data = b"hello kafka " * 500
    raw = compress(Compression.SNAPPY, data, snappy_framing="raw")
    assert not raw.startswith(XERIAL_MAGIC)
    framed = bytes(cramjam.snappy.compress(data))  # the official framing format
    for packed in (raw, compress(Compression.SNAPPY, data), framed):
        assert decompress(Compression.SNAPPY, packed) == data


def test_lz4_frames_use_independent_blocks():
    # Kafka's Java reader refuses linked blocks: FLG bit 5 must be set.
    packed = compress(Compression.LZ4, os.urandom(200_000))
    assert packed[:4] == b"\x04\x22\x4d\x18"
    assert packed[4] & 0x20


@pytest.mark.parametrize("codec", CODECS)
def test_corrupt_input_is_corrupt_not_a_crash(codec):
    packed = bytearray(compress(codec, b"abc" * 1000))
    for garbage in (b"garbage" * 5, bytes(packed[: len(packed) // 2])):
        with pytest.raises(CorruptRecordError):
            decompress(codec, garbage)


def test_none_codec_is_bounded_too():
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.NONE, b"x" * 11, max_bytes=10)
