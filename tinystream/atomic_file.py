"""Replace a small file so that a crash leaves the old content or the new, never a mix.

Write `<name>.tmp` beside the target, fsync it, rename it over the target,
fsync the directory so the rename itself survives a power cut (Kafka's
`Utils.atomicMoveWithFallback` with `needFlushParentDir`). A reader sees one
whole version. A write that fails raises the OSError and may leave
`temporary_path(target)` behind, as a crash would; whoever opens the file
next clears it (the controller's state store, a partition's recovery), and
callers translate the error at their boundary (storage: LogStorageError).

The one way every layer writes such a file: the broker's checkpoints,
topics.json, producer-ids.json and meta.properties, the controller's state
file, the local ACL and credential file, SCRAM users files. `durable=False`
skips both fsyncs: the rename stays atomic, but a power cut may lose the
latest write (producer snapshots and transaction indexes are rebuilt; the
ACL and users files have never been fsynced).
"""

from __future__ import annotations

import os
from pathlib import Path


def temporary_path(path: Path) -> Path:
    """Where `write_atomically` writes before the rename: `<name>.tmp` beside the target."""
    return path.with_name(path.name + ".tmp")


def fsync_directory(directory: Path) -> None:
    """Make renames and unlinks in ``directory`` durable (no-op where directories cannot be opened).

    Best effort: some filesystems refuse fsync on a directory, and once the
    rename happened the new content is in place, so failing the caller would
    report a write that took effect as one that did not.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, durable: bool = True, mode: int = 0o666, parents: bool = False) -> None:
    """Replace ``path`` with ``data``.

    `mode` is the new file's permission bits before the umask (0o600 for
    secrets: salted keys). `parents=True` creates missing parent folders
    first; without it a missing folder is an error, so a write never brings
    back a directory that was deleted meanwhile (a partition's).
    """
    path = Path(path)
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_directory(path.parent)
