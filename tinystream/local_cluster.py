"""A local cluster: broker processes on 127.0.0.1, supervised but never restarted.

Each broker is `python -m tinystream broker --broker-id N --port P --log-dirs D`
with its settings on the command line, so the recorded command line is all it
takes to start it again on its data. The supervisor reads each child's
`bootstrap=` and `admin=` lines to know when it is ready, then prints one
`bootstrap=` line for the whole cluster and one HTTP address per component.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
_BOOTSTRAP = re.compile(r"bootstrap=(\S+)")
_ADMIN = re.compile(r"admin=(\S+)")


@dataclass(slots=True)
class BrokerProcess:
    broker_id: int
    argv: list[str]
    process: asyncio.subprocess.Process | None = None
    bootstrap: str | None = None
    admin_url: str | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)


def broker_argv(*, broker_id: int, port: int, log_dir: Path, overrides: list[str]) -> list[str]:
    argv = [sys.executable, "-m", "tinystream", "broker", "--broker-id", str(broker_id),
            "--port", str(port), "--log-dirs", str(log_dir), "--admin-port", "0"]
    for item in overrides:
        argv += ["--set", item]
    return argv


class LocalCluster:
    """Starts brokers, reports readiness and deaths, stops them on request."""

    def __init__(self, *, brokers: int, data_dir: str | Path, first_port: int, overrides: list[str],
                 echo: Callable[[str], None] = print) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.echo = echo
        self.failed = False
        self.brokers = [
            BrokerProcess(i, broker_argv(broker_id=i, port=(first_port + i) if first_port else 0,
                                         log_dir=self.data_dir / f"broker-{i}", overrides=overrides))
            for i in range(brokers)
        ]
        self._stopping = False
        self._watchers: list[asyncio.Task[None]] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap or "?" for b in self.brokers)

    async def start(self) -> str:
        """Start every broker and wait until all are ready; returns the bootstrap list."""
        self._watchers = [asyncio.create_task(self._start(b)) for b in self.brokers]
        ready = asyncio.gather(*(b.ready.wait() for b in self.brokers))
        done, _ = await asyncio.wait([asyncio.ensure_future(ready), *self._watchers],
                                     timeout=READY_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
        if not all(b.ready.is_set() for b in self.brokers):
            ready.cancel()
            self.failed = True
            await self.stop()
            raise RuntimeError("local cluster: a broker exited or did not become ready in time (see its log above)")
        self.echo("cluster ready bootstrap=" + self.bootstrap)
        for b in self.brokers:
            self.echo(f"broker {b.broker_id} admin {b.admin_url}")
        return self.bootstrap

    async def run_until_stopped(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await self.start()
        except RuntimeError as exc:
            self.echo(f"dev: {exc}")
            return
        await stop.wait()
        self.echo("dev: stopping")
        await self.stop()

    async def _start(self, broker: BrokerProcess) -> None:
        broker.process = await asyncio.create_subprocess_exec(
            *broker.argv, stdout=asyncio.subprocess.PIPE, stderr=None, env=dict(os.environ),
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops children in order
        )
        assert broker.process.stdout is not None
        async for raw in broker.process.stdout:
            line = raw.decode(errors="replace").rstrip()
            if match := _BOOTSTRAP.search(line):
                broker.bootstrap = match.group(1)
            if match := _ADMIN.search(line):
                broker.admin_url = match.group(1)
                broker.ready.set()
        code = await broker.process.wait()
        if not self._stopping:
            self.failed = True
            self.echo(f"dev: broker {broker.broker_id} exited with code {code}; the others keep running. "
                      f"Restart it with: {' '.join(broker.argv)}")

    async def stop(self) -> None:
        self._stopping = True
        running = [b.process for b in self.brokers if b.process and b.process.returncode is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        for process in running:
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                process.kill()
                await process.wait()
        for task in self._watchers:
            task.cancel()
