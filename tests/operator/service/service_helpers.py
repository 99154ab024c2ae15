"""A controller under test: real server, real client, raw HTTP, broker shortcuts."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import read_secret, token_for
from tinystream.controller_client import ControllerClient, RegisterReply
from tinystream.operator.service import ControllerInfo, ControllerServer, DriverTiming, StateStore, monotonic_ms
from tinystream.operator.service.controller_service import Clock

FAST = DriverTiming(tick_interval_s=0.05, preferred_election_interval_s=3600.0, max_wait_ms=5000)


class Controller:
    """Start/stop a ControllerServer on a free port; `client` and `http` talk to it."""

    def __init__(
        self,
        state_file: Path,
        *,
        session_timeout_ms: int = 9000,
        timing: DriverTiming = FAST,
        store: StateStore | None = None,
        clock: Clock = monotonic_ms,
        **settings: Any,
    ) -> None:
        self.state_file = state_file
        self.settings = ControllerSettings(
            host="127.0.0.1",
            port=0,
            state_file=str(state_file),
            broker_session_timeout_ms=session_timeout_ms,
            **settings,
        )
        self.timing = timing
        self.store = store
        self.clock = clock
        self.server: ControllerServer | None = None
        self.info: ControllerInfo | None = None
        self.client: ControllerClient | None = None
        self.http: aiohttp.ClientSession | None = None
        self.epochs: dict[int, int] = {}
        self.versions: dict[int, int] = {}

    @property
    def url(self) -> str:
        assert self.info is not None
        return self.info.url

    async def start(self) -> ControllerInfo:
        self.server = ControllerServer(self.settings, store=self.store, timing=self.timing, clock=self.clock)
        self.info = await self.server.start()
        self.client = ControllerClient(self.info.url, token=self.info.admin_token, timeout_s=5.0)
        self.http = aiohttp.ClientSession()
        return self.info

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self.http is not None:
            await self.http.close()
        if self.server is not None:
            await self.server.stop()
        self.server = self.client = self.http = None

    # -- raw HTTP --------------------------------------------------------------

    async def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                      params: dict[str, str] | None = None, token: str | None = "admin") -> tuple[int, Any]:
        """A raw call; `token` "admin" (default) sends the admin's, None sends none, anything else as given."""
        assert self.http is not None and self.info is not None
        token = self.info.admin_token if token == "admin" else token
        headers = {"Authorization": f"Bearer {token}"} if token else None
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())  # stdlib: big ints too
        payload_in = io.BytesIO(data) if data is not None and len(data) > 1 << 20 else data  # aiohttp: big bodies as files
        async with self.http.request(method, self.url + path, data=payload_in, params=params,
                                     headers=headers) as response:
            payload = await response.read()
            assert response.content_type == "application/json", (response.status, payload[:200])
            return response.status, orjson.loads(payload)

    # -- brokers ---------------------------------------------------------------

    async def register(self, broker_id: int, *, incarnation: str | None = None, rack: str | None = None) -> RegisterReply:
        assert self.client is not None
        reply = await self.client.register_broker(
            broker_id=broker_id, incarnation_id=incarnation or f"inc-{broker_id}", host="127.0.0.1",
            port=9000 + broker_id, rack=rack,
        )
        self.epochs[broker_id] = reply.broker_epoch
        return reply

    async def catch_up(self, broker_id: int) -> bool:
        """Pull the image and heartbeat with its version, like a broker would; returns `fenced`."""
        assert self.client is not None
        meta = await self.client.metadata()
        self.versions[broker_id] = meta.version
        reply = await self.client.heartbeat(
            broker_id, broker_epoch=self.epochs[broker_id], metadata_version=meta.version
        )
        return reply.fenced

    async def start_broker(self, broker_id: int, *, rack: str | None = None) -> None:
        await self.register(broker_id, rack=rack)
        assert await self.catch_up(broker_id) is False

    def token(self, principal: str) -> str:
        """A bearer token the controller accepts for `principal` (a broker's, the dashboard's, ...)."""
        assert self.info is not None
        return token_for(read_secret(self.info.secret_file), principal)

    async def image(self) -> dict[str, Any]:
        assert self.client is not None
        meta = await self.client.metadata()
        assert meta.image is not None
        return meta.image

    async def broker_record(self, broker_id: int) -> dict[str, Any]:
        image = await self.image()
        return next(b for b in image["brokers"] if b["broker_id"] == broker_id)

