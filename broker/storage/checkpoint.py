"""Small durable files, replaced atomically.

``write_atomically`` is the one way storage writes a file that must survive a
crash whole or not at all: write ``<name>.tmp``, fsync it, rename it over the
target, fsync the directory (so the rename itself is durable). A reader sees
either the old content or the new one, never a mix.

``OffsetCheckpoint`` is one offset in Kafka's checkpoint text format (the
layout of Kafka's ``log-start-offset-checkpoint`` and
``recovery-point-offset-checkpoint``, reduced to one partition)::

    0          <- format version
    1          <- entry count
    <offset>
"""

from __future__ import annotations

import os
from pathlib import Path

from tinystream.broker.storage.base import LogStorageError

CHECKPOINT_VERSION = 0


def fsync_directory(directory: Path) -> None:
    """Make renames and unlinks in ``directory`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; nothing more we can do
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; OSError becomes LogStorageError."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
        if fsync:
            fsync_directory(path.parent)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise LogStorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


class CheckpointFormatError(ValueError):
    """A checkpoint file does not parse; the caller decides whether to rebuild."""


def format_checkpoint(entries: list[tuple[int, ...]]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [" ".join(str(value) for value in entry) for entry in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_checkpoint(data: bytes, *, width: int) -> list[tuple[int, ...]]:
    """Entries of ``width`` integers each; CheckpointFormatError on any mismatch."""
    try:
        lines = data.decode("ascii").splitlines()
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            raise CheckpointFormatError("missing or unknown checkpoint version")
        count = int(lines[1])
        if count != len(lines) - 2:
            raise CheckpointFormatError(f"checkpoint declares {count} entries, holds {len(lines) - 2}")
        entries = []
        for line in lines[2:]:
            values = tuple(int(part) for part in line.split())
            if len(values) != width:
                raise CheckpointFormatError(f"checkpoint line {line!r} needs {width} values")
            entries.append(values)
        return entries
    except (UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, CheckpointFormatError):
            raise
        raise CheckpointFormatError(str(exc)) from exc


class OffsetCheckpoint:
    """One durable offset (the partition's log start offset)."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self._fsync = fsync

    def read(self) -> int | None:
        """The stored offset; None when the file is missing or unreadable (callers fall back safely)."""
        try:
            entries = parse_checkpoint(self.path.read_bytes(), width=1)
        except (OSError, CheckpointFormatError):
            return None
        if len(entries) != 1 or entries[0][0] < 0:
            return None
        return entries[0][0]

    def write(self, offset: int) -> None:
        write_atomically(self.path, format_checkpoint([(offset,)]), fsync=self._fsync)
