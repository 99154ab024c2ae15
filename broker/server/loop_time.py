"""How long a coroutine runs on the event loop: the sum of its steps, not the time it waits.

Kafka's request quota counts the time a request handler thread spends on a
request; while a request waits (a long-poll Fetch, acks=all, a parked
JoinGroup, a forwarded admin call) it holds no thread. Here it holds no event
loop either, so the same measure is the time its coroutine's steps take.
`timed(coro, meter)` drives `coro` one step at a time, as its Task would, and
adds each step's clock time to `meter.seconds`; what it yields, the values sent
back, exceptions thrown in (cancellation) and close pass through unchanged.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any


class LoopTime:
    """Seconds a request kept the event loop (and its worker, for an off-loop decode) busy."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds


@types.coroutine
def timed(coro: Coroutine[Any, Any, Any], meter: LoopTime,
          clock: Callable[[], float] = time.perf_counter) -> Generator[Any, Any, Any]:
    """Await `coro`, adding the time of each of its steps to `meter`."""
    value: Any = None
    error: BaseException | None = None
    while True:
        started = clock()
        try:
            yielded = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as stop:
            meter.seconds += clock() - started
            return stop.value
        except BaseException:
            meter.seconds += clock() - started
            raise
        meter.seconds += clock() - started
        value, error = None, None
        try:
            value = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown in by the Task (cancellation): pass it on
            error = exc
