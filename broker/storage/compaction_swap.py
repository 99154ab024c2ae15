"""The cleaner's swap: how a compacted segment replaces the old one so a crash leaves one or the other.

Files (Kafka's `.cleaned` / `.swap` protocol, LogCleaner and LocalLog.replaceSegments):

    <base>.log.cleaned   the compacted bytes being written (fsynced, not yet committed)
    <base>.log.swap      committed: the rename to .swap is the commit point
    <base>.log           the live segment; the swap file is renamed over it

`write_cleaned` writes and fsyncs the new bytes without any log lock (appends
go on); `commit` renames `.cleaned` to `.swap` under the writer lock;
`install` (under the exclusive lock) drops the old indexes and renames the
swap file over the `.log`, after which the indexes are rebuilt from it.
`recover` runs when a log opens: it deletes a `.cleaned` file (never
committed), finishes a `.swap` (committed), and drops temporary files.
The cleaner's decisions (what to keep) are cleaner.py's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from tinystream.atomic_file import fsync_directory
from tinystream.broker.storage.base import LogStorageError
from tinystream.broker.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_segment_file_name,
    segment_file_name,
)

_log = logging.getLogger(__name__)


def cleaned_path(directory: Path, base_offset: int) -> Path:
    return directory / segment_file_name(base_offset, LOG_SUFFIX + CLEANED_SUFFIX)


def swap_path(directory: Path, base_offset: int) -> Path:
    return directory / segment_file_name(base_offset, LOG_SUFFIX + SWAP_SUFFIX)


def write_cleaned(directory: Path, base_offset: int, batches: Iterable[bytes | memoryview]) -> int:
    """Write and fsync `<base>.log.cleaned`; returns the bytes written (0: the segment empties)."""
    cleaned = cleaned_path(directory, base_offset)
    written = 0
    try:
        with open(cleaned, "wb") as handle:
            for data in batches:
                handle.write(data)
                written += len(data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        cleaned.unlink(missing_ok=True)
        raise LogStorageError(f"cannot write compacted segment {base_offset}: {exc.strerror or exc}") from exc
    except BaseException:
        cleaned.unlink(missing_ok=True)
        raise
    return written


def abandon(directory: Path, base_offset: int) -> None:
    """Drop the cleaned output (the segment changed meanwhile: retention and truncation win)."""
    cleaned_path(directory, base_offset).unlink(missing_ok=True)


def commit(directory: Path, base_offset: int, written: int) -> None:
    """The commit point: `.cleaned` becomes `.swap` (or, when nothing is left, is dropped)."""
    cleaned = cleaned_path(directory, base_offset)
    try:
        if written:
            os.replace(cleaned, swap_path(directory, base_offset))
            fsync_directory(directory)
        else:
            cleaned.unlink()
    except OSError as exc:
        cleaned.unlink(missing_ok=True)
        raise LogStorageError(f"cannot commit compacted segment {base_offset}: {exc.strerror or exc}") from exc


def install(directory: Path, base_offset: int) -> None:
    """Rename the committed swap file over the live `.log`, dropping its stale indexes."""
    (directory / segment_file_name(base_offset, INDEX_SUFFIX)).unlink(missing_ok=True)
    (directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)).unlink(missing_ok=True)
    os.replace(swap_path(directory, base_offset), directory / segment_file_name(base_offset, LOG_SUFFIX))


def recover(directory: Path) -> None:
    """At open: drop uncommitted output and temporary files; finish every committed swap."""
    for path in directory.iterdir():
        name = path.name
        if name.endswith(CLEANED_SUFFIX) or name.endswith(".tmp") or name.endswith(".deleted"):
            path.unlink(missing_ok=True)
    for path in directory.iterdir():
        if path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            base = parse_segment_file_name(path.name[: -len(SWAP_SUFFIX)])
            if base is None:
                continue
            install(directory, base)
            _log.warning("%s: finished an interrupted compaction swap of segment %d", directory, base)
    fsync_directory(directory)
