"""FileRange: whole stored batches left in their segment file, for a Fetch answer written from the file.

A Fetch does not read its record sets into memory: the segment returns where
they lie, and the connection hands a plaintext socket the file's pages
(``os.sendfile``: page cache to socket, as Kafka's FileRecords.writeTo), and a
TLS socket pieces read from the file as its transport has room
(server/response_writer.py).

Invariants:
- the range holds its own open file (opened by path under the log's read
  lock), so retention, compaction or a roll that closes or replaces the
  segment later cannot change what is sent, and its seek position is its own
  (asyncio's sendfile moves it; the log's writer keeps its own fd);
- whoever takes the range closes it once (`close` is idempotent; a range
  dropped without it is closed when collected, a safety net);
- `len()` is the byte count promised in the response's length prefix.
"""

from __future__ import annotations

import io
import os
from pathlib import Path


class FileRange:
    __slots__ = ("file", "position", "length")

    def __init__(self, path: Path, position: int, length: int) -> None:
        self.file: io.FileIO = io.FileIO(path, "rb")
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRange({self.file.name!s}, position={self.position}, length={self.length})"

    @property
    def closed(self) -> bool:
        return self.file.closed

    def read(self) -> bytes:
        """The bytes at once (a caller that needs them in memory, a test). Short when the file was cut meanwhile."""
        return os.pread(self.file.fileno(), self.length, self.position)

    def close(self) -> None:
        self.file.close()

    def __del__(self) -> None:
        file = getattr(self, "file", None)  # unset when the open failed
        if file is not None:
            file.close()
