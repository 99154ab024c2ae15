"""Run a server in the foreground: until cancelled, or until SIGINT / SIGTERM.

Every long-running component (broker, controller) has the same shape: start,
announce readiness, wait to be cancelled, then stop even if the cancellation
arrives mid-shutdown. This module holds that shape once.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

Info = TypeVar("Info")


async def serve_until_cancelled(
    start: Callable[[], Awaitable[Info]],
    stop: Callable[[], Awaitable[None]],
    ready: Callable[[Info], None] | None = None,
    *,
    until: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Start, tell `ready`, then wait (for `until()`, if given); on cancellation run `stop` to the end (shielded)."""
    info = await start()
    try:
        if ready is not None:
            ready(info)
        await (until() if until is not None else asyncio.Event().wait())
    finally:
        await asyncio.shield(stop())


def run_until_signalled(serve: Callable[[], Awaitable[None]]) -> None:
    """Run `serve()` in a new event loop; SIGINT and SIGTERM cancel it cleanly."""

    async def runner() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread, or no signals
                loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serve()

    asyncio.run(runner())
