"""A response in parts: its encoded bytes with record sets left in files, written from them (sendfile, or on TLS
read a piece at a time: broker/server/response_writer.py).

Pure: building the parts does no I/O (the connection's writer does it,
broker/server/response_writer.py). The encoder meets a record set that is a
`FileSlice` (storage/file_range.py's FileRange) and, instead of copying it,
writes its length prefix and marks the place (`FrameBuffer.splice`); `split`
cuts the buffer at those places:

    [header and fields ... length] [slice 1] [fields ... length] [slice 2] [the rest]

The frame's size prefix counts the slices' bytes. Whoever holds the parts
closes them once written or dropped (`close`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class FileSlice(Protocol):
    """Bytes in a file, sent without being copied into the response: `len()` bytes of the open file `fileno()`
    from `position`. The descriptor may be shared (a segment's): read it only at explicit offsets."""

    def fileno(self) -> int: ...

    @property
    def position(self) -> int: ...

    def __len__(self) -> int: ...

    def read(self) -> bytes: ...

    def close(self) -> None: ...


class FrameBuffer(bytearray):
    """A response being encoded, and where each file slice goes (offsets into the buffer)."""

    __slots__ = ("slices",)
    slices: list[tuple[int, FileSlice]]  # set by encode_response

    def splice(self, piece: FileSlice) -> None:
        self.slices.append((len(self), piece))

    @property
    def spliced_bytes(self) -> int:
        return sum(len(piece) for _, piece in self.slices)


Part = bytes | bytearray | memoryview | FileSlice


@dataclass(frozen=True, slots=True)
class ResponseParts:
    """A framed response: bytes and file slices, in the order they go on the wire."""

    parts: tuple[Part, ...]
    size: int  # every byte, the size prefix's 4 included

    def __len__(self) -> int:
        return self.size

    def slices(self) -> list[FileSlice]:
        return [p for p in self.parts if not isinstance(p, bytes | bytearray | memoryview)]

    def to_bytes(self) -> bytes:
        """The same bytes, copied (for tests)."""
        return b"".join(p if isinstance(p, bytes | bytearray | memoryview) else p.read() for p in self.parts)

    def close(self) -> None:
        for piece in self.slices():
            piece.close()


def split(frame: FrameBuffer) -> ResponseParts:
    """The parts of an encoded frame whose encoder spliced in file slices."""
    view = memoryview(frame)
    parts: list[Part] = []
    start = 0
    for at, piece in frame.slices:
        if at > start:
            parts.append(view[start:at])
        parts.append(piece)
        start = at
    if start < len(frame):
        parts.append(view[start:])
    return ResponseParts(tuple(parts), len(frame) + frame.spliced_bytes)
