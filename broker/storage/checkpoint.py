"""Checkpoint files in Kafka's text format, replaced atomically.

``write_checkpoint`` replaces the file with ``tinystream.atomic_file`` (write
``<name>.tmp``, fsync, rename, fsync the directory), so a reader sees the old
entries or the new ones, never a mix; an OSError becomes LogStorageError.

``OffsetCheckpoint`` is one offset in Kafka's checkpoint text format (the
layout of Kafka's ``log-start-offset-checkpoint`` and
``recovery-point-offset-checkpoint``, reduced to one partition)::

    0          <- format version
    1          <- entry count
    <offset>
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from tinystream.atomic_file import temporary_path, write_atomically
from tinystream.broker.storage.base import LogStorageError

CHECKPOINT_VERSION = 0


class CheckpointFormatError(ValueError):
    """A checkpoint file does not parse; the caller decides whether to rebuild."""


def format_checkpoint(entries: list[tuple[int, ...]]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [" ".join(str(value) for value in entry) for entry in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def write_checkpoint(path: Path, entries: list[tuple[int, ...]], *, fsync: bool = True) -> None:
    """Replace ``path`` with ``entries`` atomically; OSError becomes LogStorageError."""
    try:
        write_atomically(path, format_checkpoint(entries), durable=fsync)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary_path(path).unlink(missing_ok=True)  # a full disk gets its space back now
        raise LogStorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


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
        write_checkpoint(self.path, [(offset,)], fsync=self._fsync)
