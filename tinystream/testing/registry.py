"""`RegistryThread`: a schema registry on its own event loop in a background thread.

For tests that use blocking clients (confluent-kafka's SchemaRegistryClient,
urllib): `start()` returns the URL once `_schemas` has been read to its end.
"""

from __future__ import annotations

import asyncio
import threading

from tinystream.registry.app import RegistryOptions, RegistryServer


class RegistryThread:
    def __init__(self, options: RegistryOptions) -> None:
        self.options = options
        self.server: RegistryServer | None = None
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> str:
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self.server = RegistryServer(self.options)
            try:
                self.url = loop.run_until_complete(self.server.start())
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.run_until_complete(self.server.stop())
                loop.close()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self.server.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="tinystream-registry", daemon=True)
        self._thread.start()
        if not started.wait(timeout):
            raise TimeoutError("schema registry did not start")
        if failure:
            raise failure[0]
        return self.url

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        self._thread = None

    def __enter__(self) -> RegistryThread:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
