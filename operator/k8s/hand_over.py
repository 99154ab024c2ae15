"""On SIGTERM, stop being the controller at once, then let kopf stop.

kopf stops in stages: its root tasks first (its peering record goes at once, so a replacement's handlers
resume), then it waits up to 5 s for other tasks, and only then runs the clean-up handlers that close the
controller API. Meanwhile this operator goes on answering brokers on their kept-alive connections, while
the replacement (the Deployment starts it at once) has loaded every cluster and restarted every session:
a broker still heartbeating here is fenced by the replacement when its session ends. Seen on kind in the
upgrade test: the `writes` topic's ISRs down to the leader for 2 s, acks=all writes refused.

So the operator's SIGTERM and SIGINT handlers are replaced (kopf installs its own before any start-up
handler runs): the controller stands down first (`ControllerPort.stand_down`: no decisions, every call
answered NOT_CONTROLLER with its connection closed), then kopf's stop flag is set and kopf stops as it
would have, but for one thing: kopf arms its own last-resort SIGKILL (10 min) only when it took the
signal itself; here the kubelet's, at the end of the pod's termination grace period, stands in.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from tinystream.operator.k8s.controller_port import ControllerPort

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install(controller: ControllerPort, stop_flag: asyncio.Event) -> bool:
    """Hand over on SIGTERM / SIGINT; False where signals cannot be handled (not the main thread)."""
    loop = asyncio.get_running_loop()

    def stop(sig: signal.Signals) -> None:
        log.info("%s: the controller API stands down, then the operator stops", sig.name)
        controller.stand_down()
        stop_flag.set()

    try:
        for sig in SIGNALS:
            loop.add_signal_handler(sig, stop, sig)
    except (RuntimeError, ValueError, NotImplementedError):  # a thread other than the main one (tests)
        return False
    return True
