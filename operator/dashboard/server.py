"""Serving the dashboard: on its own port in a running loop (`DashboardServer`), or in a thread
with a loop of its own (`ThreadedDashboard`, for the synchronous `tinystream dev` supervisor).

    server = DashboardServer(make_dashboard_app(source), host="127.0.0.1", port=3200)
    url = await server.start(); ...; await server.stop()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from aiohttp import web


class DashboardServer:
    def __init__(self, app: web.Application, *, host: str = "127.0.0.1", port: int = 3200) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Listen; returns the URL (port 0 picks a free one). OSError when the port is taken."""
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class ThreadedDashboard:
    """A DashboardServer on a daemon thread's own event loop; `start` blocks until it listens."""

    def __init__(self, make_app: Callable[[], web.Application], *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._make_app = make_app
        self.host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: DashboardServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 10.0) -> str:
        ready: dict[str, object] = {}
        started = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._server = DashboardServer(self._make_app(), host=self.host, port=self.port)
                ready["url"] = loop.run_until_complete(self._server.start())
            except BaseException as exc:  # handed to the caller of start()
                ready["error"] = exc
                started.set()
                loop.close()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._server.stop())
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True, name="dashboard")
        self._thread.start()
        if not started.wait(timeout_s):
            raise TimeoutError("the dashboard did not start")
        if "error" in ready:
            raise ready["error"]  # type: ignore[misc]
        return str(ready["url"])

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop = None
        self._thread = None
