"""Timing a coroutine's steps on the loop (the request quota's measure) and the answer's throttle field."""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest
from kio.schema.metadata.v12.response import MetadataResponse

from tinystream.broker.protocol.codec import build, millis
from tinystream.broker.server.loop_time import LoopTime, timed
from tinystream.broker.server.request_quota import with_throttle


async def test_steps_count_and_waits_do_not():
    async def handler():
        time.sleep(0.05)  # busy on the loop
        await asyncio.sleep(0.3)  # waiting: a long poll holds no loop
        time.sleep(0.05)
        return "answer"

    meter = LoopTime(0.01)  # the decode time it started with
    started = time.perf_counter()
    assert await timed(handler(), meter) == "answer"
    wall = time.perf_counter() - started
    assert meter.seconds >= 0.11  # both busy steps and the decode time
    assert meter.seconds <= wall - 0.3 + 0.01, (meter.seconds, wall)  # the 0.3 s wait is not counted


async def test_errors_and_values_pass_through():
    async def failing():
        await asyncio.sleep(0)
        raise KeyError("x")

    async def with_future():
        fut = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, fut.set_result, 7)
        return await fut

    with pytest.raises(KeyError):
        await timed(failing(), LoopTime())
    assert await timed(with_future(), LoopTime()) == 7


async def test_cancellation_reaches_the_handler():
    cancelled = asyncio.Event()

    async def parked():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    meter = LoopTime()
    task = asyncio.ensure_future(timed(parked(), meter))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


async def test_an_exception_the_handler_catches_is_its_own():
    async def recovers():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "recovered"

    task = asyncio.ensure_future(timed(recovers(), LoopTime()))
    await asyncio.sleep(0.01)
    task.cancel()
    assert await task == "recovered"


def test_the_answer_carries_the_larger_throttle():
    answer = build(MetadataResponse, {"throttle_time": millis(0), "brokers": (), "cluster_id": None,
                                      "controller_id": 0, "topics": ()})
    assert with_throttle(answer, 250).throttle_time == datetime.timedelta(milliseconds=250)
    longer = build(MetadataResponse, {"throttle_time": millis(900), "brokers": (), "cluster_id": None,
                                      "controller_id": 0, "topics": ()})
    assert with_throttle(longer, 250).throttle_time == datetime.timedelta(milliseconds=900)
    assert with_throttle(b"encoded", 250) == b"encoded"
    assert with_throttle(None, 250) is None
