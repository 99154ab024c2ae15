"""A controller connection that goes silent must not cost the broker its session (kind's upgrade test).

When the operator (which hosts the controller) is restarted, a broker's pooled keep-alive connection can
go on pointing at the gone pod: no reset, no answer. A heartbeat sent on it used to wait out the client's
10 s timeout, longer than the 9 s session, and heartbeats go one at a time: the new controller fenced the
broker and its leaderships moved (seen on kind: ISRs down to one member for two seconds). The broker now
gives up on a heartbeat after a third of the session and sends the next one on a new connection.

Here a TCP proxy stands between the broker and a real controller; `silence()` turns every connection
open at that moment into a black hole (bytes read and dropped both ways, nothing closed), while new
connections are forwarded, as the Service forwards them to the new pod.
"""

from __future__ import annotations

import asyncio
import contextlib

from tinystream.broker.app import Broker
from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import broker_principal, read_secret, token_for, write_token_file
from tinystream.operator.service.app import ControllerServer
from tinystream.testing.broker import test_settings
from tinystream.testing.waiting import wait_until_async

SESSION_TIMEOUT_MS = 3000


class SilenceableProxy:
    """Forwards TCP both ways; connections open when `silence()` is called stop forwarding, silently."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.generation = 0  # connections of an older generation are black holes
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def silence(self) -> None:
        self.generation += 1

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        generation = self.generation
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        pumps = [asyncio.create_task(self._pump(reader, up_writer, generation)),
                 asyncio.create_task(self._pump(up_reader, writer, generation))]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
                self._tasks.discard(task)
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, generation: int) -> None:
        while data := await reader.read(65536):
            if generation == self.generation:  # silenced: read and drop, like a pod that is gone
                writer.write(data)
                await writer.drain()


async def test_a_silent_controller_connection_does_not_fence_the_broker(tmp_path):
    controller = ControllerServer(ControllerSettings(**{
        "port": 0, "state.file": str(tmp_path / "controller" / "state.json"),
        "controller.secret.file": str(tmp_path / "controller.secret"),
        "broker.session.timeout.ms": SESSION_TIMEOUT_MS, "dashboard.enabled": False}))
    info = await controller.start()
    proxy = SilenceableProxy(int(info.url.rsplit(":", 1)[1]))
    await proxy.start()
    token_file = tmp_path / "broker-1.token"
    write_token_file(token_file, token_for(read_secret(info.secret_file), broker_principal(1)))
    broker = Broker(test_settings(tmp_path / "broker-1", **{
        "broker.id": 1, "host": "127.0.0.1", "controller.url": f"http://127.0.0.1:{proxy.port}",
        "controller.token.file": str(token_file), "broker.heartbeat.interval.ms": 200}))
    await broker.start()
    try:
        assert controller.service is not None
        service = controller.service
        await wait_until_async(lambda: not service.image.brokers[1].fenced, timeout=5, what="broker 1 unfenced")
        before = proxy.connections

        proxy.silence()
        fenced_at: list[int] = []
        for tick in range(2 * SESSION_TIMEOUT_MS // 50):  # watched for two sessions: never fenced in them
            if service.image.brokers[1].fenced:
                fenced_at.append(tick)
            await asyncio.sleep(0.05)

        assert fenced_at == [], f"fenced {len(fenced_at) * 50} ms of the {2 * SESSION_TIMEOUT_MS} ms watched"
        assert proxy.connections > before, "the broker never opened a new connection to the controller"
    finally:
        await broker.stop()
        await proxy.stop()
        await controller.stop()
