"""Kafka's record-batch codecs, with bounded decompression.

The codec id lives in attribute bits 0-2 of a RecordBatch v2 header:
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. The broker stores compressed batches
as they came and never decompresses on the produce or fetch path; only the
log cleaner (and tests) look inside, through this module.

Framing, per codec, as the Java client writes it (and what we accept):

- gzip: one RFC 1952 member (java.util.zip.GZIPOutputStream).
- snappy: the Java client uses xerial's SnappyOutputStream framing:
  an 8-byte magic ``\\x82SNAPPY\\x00``, int32 version, int32 minimum
  compatible version, then blocks of ``int32 BE length | raw snappy block``.
  librdkafka and other clients may send one raw snappy block instead, and a
  few send the official snappy *frame* format (``\\xff\\x06\\x00\\x00sNaPpY``).
  We read all three and write xerial (default) or raw.
- lz4: the LZ4 *frame* format with independent blocks; Kafka's Java reader
  rejects linked blocks ("Dependent block stream is unsupported"), so we
  write ``block_linked=False``.
- zstd: one standard zstd frame.

Bounded decompression (CVE-2023-34455, the snappy "bomb"): every
decompression takes ``max_bytes`` and raises ``DecompressionLimitError``
before producing more. Raw and xerial snappy declare each block's length up
front, so the limit is checked before any allocation. For the streaming
codecs we decompress into a fixed-size buffer (cramjam's ``decompress_into``
stops with an error when the buffer is full), starting small and doubling up
to the limit, so memory never exceeds ``max_bytes`` plus the input.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable

import cramjam

from tinystream.broker.storage.base import CorruptRecordError

#: Default ceiling for one batch's decompressed records. Kafka's default
#: max.message.bytes is ~1 MiB compressed; 64 MiB leaves room for very
#: compressible data while stopping bombs.
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, min compatible version
XERIAL_BLOCK_BYTES = 32 * 1024  # SnappyOutputStream's default block size
SNAPPY_FRAME_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_U32 = struct.Struct(">I")
#: What cramjam's ``decompress_into`` says when the output buffer is full
#: (tests/broker/storage/test_compression.py pins this, so an upgrade that
#: changes the text fails loudly instead of calling big inputs corrupt).
_OUTPUT_FULL = "write whole buffer"


class Compression(enum.IntEnum):
    """Codec ids of attribute bits 0-2 (Kafka's CompressionType)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class DecompressionLimitError(CorruptRecordError):
    """Decompressed data would exceed the caller's bound (a bomb, or simply too big)."""


def compress(codec: Compression, data: bytes | bytearray | memoryview, *, snappy_framing: str = "xerial") -> bytes:
    """Compress a records section the way Kafka clients do (see the module docstring)."""
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is Compression.SNAPPY:
        if snappy_framing == "raw":
            return bytes(cramjam.snappy.compress_raw(data))
        if snappy_framing != "xerial":
            raise ValueError(f"snappy_framing must be 'xerial' or 'raw', not {snappy_framing!r}")
        view = memoryview(data).cast("B")
        out = bytearray(XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
        for start in range(0, len(view), XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_BYTES]))
            out += _U32.pack(len(block))
            out += block
        return bytes(out)
    if codec is Compression.LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data))


def decompress(
    codec: Compression, data: bytes | bytearray | memoryview, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> bytes:
    """Decompress a records section; never produces more than ``max_bytes``.

    Raises DecompressionLimitError past the bound and CorruptRecordError on
    malformed input (both are Kafka's CORRUPT_MESSAGE).
    """
    codec = Compression(codec)
    data = bytes(data) if not isinstance(data, bytes) else data
    if codec is Compression.NONE:
        if len(data) > max_bytes:
            raise DecompressionLimitError(f"{len(data)} bytes exceed the {max_bytes}-byte bound")
        return data
    if codec is Compression.SNAPPY:
        if data.startswith(XERIAL_MAGIC):
            return _xerial_decompress(data, max_bytes)
        if not data.startswith(SNAPPY_FRAME_MAGIC):
            return _raw_snappy_decompress(data, max_bytes)
        return _bounded_stream(cramjam.snappy.decompress_into, data, max_bytes, "snappy")
    if codec is Compression.GZIP:
        return _bounded_stream(cramjam.gzip.decompress_into, data, max_bytes, "gzip")
    if codec is Compression.LZ4:
        return _bounded_stream(cramjam.lz4.decompress_into, data, max_bytes, "lz4")
    return _bounded_stream(cramjam.zstd.decompress_into, data, max_bytes, "zstd")


def _raw_snappy_decompress(data: bytes, max_bytes: int) -> bytes:
    try:
        declared = cramjam.snappy.decompress_raw_len(data)
    except Exception as exc:  # cramjam raises its own error types
        raise CorruptRecordError(f"bad snappy block: {exc}") from exc
    if declared > max_bytes:
        raise DecompressionLimitError(f"snappy block declares {declared} bytes, over the {max_bytes}-byte bound")
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except Exception as exc:
        raise CorruptRecordError(f"bad snappy block: {exc}") from exc


def _xerial_decompress(data: bytes, max_bytes: int) -> bytes:
    if len(data) < XERIAL_HEADER.size:
        raise CorruptRecordError("xerial snappy header cut short")
    pos = XERIAL_HEADER.size
    out = bytearray()
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("xerial snappy block length cut short")
        (length,) = _U32.unpack_from(data, pos)
        pos += 4
        if length > len(data) - pos:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes, only {len(data) - pos} left")
        out += _raw_snappy_decompress(data[pos : pos + length], max_bytes - len(out))
        pos += length
    return bytes(out)


def _bounded_stream(decompress_into: Callable[..., int], data: bytes, max_bytes: int, name: str) -> bytes:
    """Decompress into a fixed buffer, doubling it up to ``max_bytes`` (+1 to detect overflow)."""
    size = min(max_bytes + 1, max(64 * 1024, 4 * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(data, out)
        except Exception as exc:  # cramjam.DecompressionError
            if _OUTPUT_FULL not in str(exc):
                raise CorruptRecordError(f"bad {name} data: {exc}") from exc
            if size > max_bytes:
                raise DecompressionLimitError(f"{name} data exceeds the {max_bytes}-byte bound") from exc
            size = min(max_bytes + 1, size * 2)
            continue
        if written > max_bytes:
            raise DecompressionLimitError(f"{name} data exceeds the {max_bytes}-byte bound")
        del out[written:]
        return bytes(out)
