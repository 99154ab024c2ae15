"""hand_over.install: a real SIGTERM stands the controller down before kopf is told to stop."""

from __future__ import annotations

import asyncio
import os
import signal

from tinystream.operator.k8s import hand_over


class RecordingController:
    def __init__(self, stop_flag: asyncio.Event) -> None:
        self.stop_flag = stop_flag
        self.stood_down: list[bool] = []  # whether kopf had been told to stop at each call

    def stand_down(self) -> None:
        self.stood_down.append(self.stop_flag.is_set())


async def test_sigterm_stands_the_controller_down_then_stops_kopf():
    stop_flag = asyncio.Event()
    controller = RecordingController(stop_flag)
    loop = asyncio.get_running_loop()
    assert hand_over.install(controller, stop_flag)  # type: ignore[arg-type]
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop_flag.wait(), timeout=5)
        assert controller.stood_down == [False]  # first the controller, then kopf
    finally:
        for sig in hand_over.SIGNALS:
            loop.remove_signal_handler(sig)


async def test_outside_the_main_thread_nothing_is_installed():
    def in_thread() -> bool:
        async def attempt() -> bool:
            return hand_over.install(RecordingController(asyncio.Event()), asyncio.Event())  # type: ignore[arg-type]
        return asyncio.run(attempt())

    assert await asyncio.to_thread(in_thread) is False
