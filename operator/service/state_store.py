"""Where the controller's state lives between runs: a `StateStore`.

The service saves the whole `ControllerState` (its `to_dict()` form) after
every change to the image and loads it at start-up, so a restart loses
nothing a client was told. Two stores:

* `FileStateStore`, the local driver's: one JSON file (orjson), replaced
  atomically (`tinystream.atomic_file`: write `<file>.tmp`, fsync it, rename
  it over the file, fsync the directory) so a crash at any point leaves the
  old or the new state, never a torn one. An advisory lock (`<file>.lock`,
  flock) keeps a second controller off the same file: two writers would fork
  the cluster's history.
* `MemoryStateStore`: a dict in memory, for tests and embedding.

The Kubernetes driver will implement the same protocol over a CR status.
Methods are async so such a store can talk to its API without a thread;
the file store moves its blocking calls to a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from pathlib import Path
from typing import Any, Protocol

import orjson

from tinystream.atomic_file import temporary_path, write_atomically
from tinystream.operator.controller import ControllerState, StateFormatError
from tinystream.operator.service.errors import StateFileError


class StateStore(Protocol):
    async def load(self) -> ControllerState | None:
        """The saved state, or None when nothing was ever saved; StateFileError if unusable."""

    async def save(self, state: ControllerState) -> None:
        """Replace the saved state; an OSError means the old one is still in place."""

    async def close(self) -> None:
        """Release what the store holds (locks, handles)."""


class FileStateStore:
    """The state as one JSON file, replaced atomically, locked against a second controller."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock_fd: int | None = None

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def _lock(self) -> None:
        if self._lock_fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateFileError(f"{self.path} is in use by another controller (lock {self.lock_path})") from None
        self._lock_fd = fd

    def load_sync(self) -> ControllerState | None:
        self._lock()
        with contextlib.suppress(FileNotFoundError):
            temporary_path(self.path).unlink()  # a save cut short by a crash
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateFileError(f"{self.path}: cannot read the state file: {exc}") from exc
        try:
            data: Any = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise StateFileError(f"{self.path}: not valid JSON ({exc}); refusing to start on it") from exc
        try:
            return ControllerState.from_dict(data)
        except StateFormatError as exc:
            raise StateFileError(f"{self.path}: not a controller state: {exc}") from exc

    def save_sync(self, state: ControllerState) -> None:
        self._lock()
        payload = orjson.dumps(state.to_dict(), option=orjson.OPT_INDENT_2)
        write_atomically(self.path, payload)

    async def load(self) -> ControllerState | None:
        return await asyncio.to_thread(self.load_sync)

    async def save(self, state: ControllerState) -> None:
        await asyncio.to_thread(self.save_sync, state)

    async def close(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None


class MemoryStateStore:
    """The state as a plain dict in memory (goes through to_dict/from_dict like a file)."""

    def __init__(self) -> None:
        self.data: dict[str, Any] | None = None
        self.saves = 0

    async def load(self) -> ControllerState | None:
        return None if self.data is None else ControllerState.from_dict(self.data)

    async def save(self, state: ControllerState) -> None:
        self.data = state.to_dict()
        self.saves += 1

    async def close(self) -> None:
        return None
