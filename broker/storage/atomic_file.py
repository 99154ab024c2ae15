"""Replace a small metadata file so that a crash leaves the old or the new content.

Write a temporary sibling, fsync it, rename it over the target, fsync the
directory (the rename itself must be durable). Used for topics.json,
producer-ids.json, meta.properties and producer-state snapshots.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, payload: bytes, *, durable: bool = True) -> None:
    """`durable=False` skips both fsyncs: for caches that are rebuilt when lost or torn."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(payload)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if not durable:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
