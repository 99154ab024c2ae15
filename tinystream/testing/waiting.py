"""Poll a condition until it holds: the one "eventually" of the test suites.

`wait_until(check, ...)` (plain tests, threads) and `await
wait_until_async(check, ...)` (coroutines; `check` may also return an
awaitable) call `check()` every `interval` seconds until it returns something
truthy, and return that value. After `timeout` seconds they raise
AssertionError naming `what`: a string, or a function called at that moment
for the latest state ("3 records (read 2)").

An exception listed in `retry_on` counts as "not yet" (checks written as
assertions, clients that fail while a cluster settles); past the deadline the
last one is raised again, with the timeout added as a note. Any other
exception fails at once.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

What = str | Callable[[], object]


def _timed_out(what: What, timeout: float) -> str:
    return f"timed out after {timeout:g} s waiting for {what() if callable(what) else what}"


def wait_until(check: Callable[[], T], *, timeout: float = 10.0, what: What = "condition", interval: float = 0.1,
               retry_on: tuple[type[Exception], ...] = ()) -> T:
    """`check()`'s first truthy value; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except retry_on as exc:
            if time.monotonic() > deadline:
                exc.add_note(_timed_out(what, timeout))
                raise
        else:
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(_timed_out(what, timeout))
        time.sleep(interval)


async def wait_until_async(check: Callable[[], T | Awaitable[T]], *, timeout: float = 10.0, what: What = "condition",
                           interval: float = 0.05, retry_on: tuple[type[Exception], ...] = ()) -> T:
    """`wait_until` for coroutines: sleeps with asyncio, awaits what `check()` returns when it is awaitable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value: Any = check()
            if inspect.isawaitable(value):
                value = await value
        except retry_on as exc:
            if time.monotonic() > deadline:
                exc.add_note(_timed_out(what, timeout))
                raise
        else:
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(_timed_out(what, timeout))
        await asyncio.sleep(interval)
