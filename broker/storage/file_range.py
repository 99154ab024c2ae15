"""FileRange: whole stored batches left in their segment file, for a Fetch answer written from the file.

A Fetch does not read its record sets into memory: the segment returns where
they lie, and the connection hands a plaintext socket the file's pages
(``os.sendfile``: page cache to socket, as Kafka's FileRecords.writeTo), and a
TLS socket pieces read from the file as its transport has room
(server/response_writer.py).

A range opens no file: it shares its segment's open descriptor (`SharedFile`),
as Kafka's FileRecords slices share the segment's FileChannel. One client
fetching many partitions and reading nothing, or a thousand of them, holds
bytes (bounded by the connection budget), never descriptors: a broker's open
files do not grow with its fetches (topics/manager.py's model: the partitions'
segments, the connections, a reserve).

Invariants:
- a range holds its `SharedFile`, and the descriptor is closed when the last
  holder lets go (the segment's `close`, each range's `close`), so retention,
  compaction or a log's close that closes, unlinks or replaces the segment
  while a range waits to be written cannot change what is sent: an unlinked
  file stays readable through an open descriptor. A truncation cuts the same
  file, so the range reads short and the writer fails the connection;
- every read through the shared descriptor names its offset (``os.pread``,
  ``os.sendfile`` with an offset): the descriptor's file position is shared by
  the segment and all its ranges, and nothing reads or writes at it (the
  segment only preads, pwrites, ftruncates and fsyncs it); asyncio's sendfile,
  which lseeks it and whose fallback reads at a position, gets a wrapper with a
  position of its own (response_writer.py's `_AtOffset`);
- whoever takes the range closes it once (`close` is idempotent; a range
  dropped without it is closed when collected, a safety net);
- `len()` is the byte count promised in the response's length prefix.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

# Guards every SharedFile's holder count and the count of ranges held: a range is taken on a reader's
# thread (under its log's shared lock) and let go on the event loop's, while a segment may close on another.
_lock = threading.Lock()
_ranges_held = 0


def ranges_held() -> int:
    """FileRanges taken and not yet closed in this process (tests: every answer's ranges were let go)."""
    return _ranges_held


class SharedFile:
    """An open file shared by its owner (a segment's .log) and the ranges read from it.

    The owner holds it from the start; `close` lets go of the owner's hold
    and the descriptor is closed by whichever holder lets go last.
    """

    __slots__ = ("fd", "path", "_holders", "_owner_closed")

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path
        self._holders = 1  # the owner
        self._owner_closed = False

    def acquire(self) -> None:
        """A range takes a hold; OSError(EBADF) when the descriptor is already closed."""
        global _ranges_held
        with _lock:
            if self._holders == 0:
                raise OSError(errno.EBADF, "the segment file was closed", str(self.path))
            self._holders += 1
            _ranges_held += 1

    def release(self) -> None:
        """A range lets go of its hold."""
        global _ranges_held
        with _lock:
            _ranges_held -= 1
            self._holders -= 1
            last = self._holders == 0
        if last:
            self._close_fd()

    def close(self) -> None:
        """The owner lets go (once; later calls do nothing): the descriptor closes now, or with the last range."""
        with _lock:
            if self._owner_closed:
                return
            self._owner_closed = True
            self._holders -= 1
            last = self._holders == 0
        if last:
            self._close_fd()

    def _close_fd(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class FileRange:
    """``length`` bytes of a shared file from ``position``, holding the file open until closed."""

    __slots__ = ("_file", "position", "length")

    def __init__(self, file: SharedFile, position: int, length: int) -> None:
        file.acquire()
        self._file: SharedFile | None = file
        self.position = position
        self.length = length

    @classmethod
    def open(cls, path: Path, position: int, length: int) -> FileRange:
        """A range over a file of its own, opened by path (tests, tools): its descriptor closes with the range."""
        file = SharedFile(os.open(path, os.O_RDONLY), path)
        try:
            return cls(file, position, length)
        finally:
            file.close()

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        where = "closed" if self._file is None else self._file.path
        return f"FileRange({where!s}, position={self.position}, length={self.length})"

    @property
    def closed(self) -> bool:
        return self._file is None

    @property
    def path(self) -> Path | None:
        """The file's name when the range was taken (None once closed); it may have been unlinked or replaced since."""
        return None if self._file is None else self._file.path

    def fileno(self) -> int:
        """The shared descriptor: read it only at explicit offsets (os.pread, os.sendfile with an offset)."""
        if self._file is None:
            raise ValueError("I/O operation on a closed FileRange")
        return self._file.fd

    def read(self) -> bytes:
        """The bytes at once (a caller that needs them in memory, a test). Short when the file was cut meanwhile."""
        return os.pread(self.fileno(), self.length, self.position)

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.release()

    def __del__(self) -> None:
        if getattr(self, "_file", None) is not None:  # unset when the acquire failed
            self.close()
