"""A follower's writes go to the leader, with the caller's own credentials; the answer comes back as is.

Runs after authentication and the rules (server.py), so a caller a follower
would refuse (401, 403) is refused there and never reaches the leader; the
leader checks the same credentials again. The request is sent once
(`election.FORWARDED_HEADER` marks it, so the leader never forwards it on).
The leader adds the offset its write reached (`OFFSET_HEADER`); the follower
waits until its own replay of `_schemas` has applied that far before it
answers, so a caller who registers through a follower and then reads from it
finds what it registered. Errors are Confluent's: 50003 when the leader
cannot be reached, 50004 when no leader is known. A caller logged in by its
client certificate (mTLS) has no credential a follower could pass on (the key
stays with the client), so its write is refused with 50003 naming the leader
to send it to, rather than reaching the leader without a login.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import Protocol

import aiohttp
from aiohttp import web

from tinystream.registry.election import FORWARDED_HEADER, Action, write_action
from tinystream.registry.errors import ErrorCode, RegistryError

OFFSET_HEADER = "X-TinyStream-Schemas-Offset"  # on a leader's answer to a write: the offset applied
_PASSED_HEADERS = ("Authorization", "Content-Type", "Accept")
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class Leader(Protocol):
    own_url: str

    async def writer(self, wait_s: float) -> str | None: ...


class Forwarder:
    def __init__(self, leadership: Leader, *, applied: Callable[[], int], wait_applied: Callable[[int], Awaitable[None]],
                 leader_wait_s: float = 10.0, timeout_s: float = 60.0, trust: ssl.SSLContext | None = None) -> None:
        """`trust`: verifies a leader's HTTPS certificate (None: the system's CAs)."""
        self.leadership = leadership
        self._trust = trust
        self._applied = applied
        self._wait_applied = wait_applied
        self.leader_wait_s = leader_wait_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def route(self, request: web.Request, route: str, serve: Callable[[], Awaitable[web.StreamResponse]],
                    *, by_certificate: bool = False) -> web.StreamResponse:
        """Serve here, forward, or refuse with 50004, as `election.write_action` decides."""
        forwarded = FORWARDED_HEADER in request.headers
        leader = await self.leadership.writer(self.leader_wait_s)
        action = write_action(request.method, route, own_url=self.leadership.own_url, leader_url=leader,
                              forwarded=forwarded)
        if action is Action.NO_LEADER:
            why = "no registry instance leads" if leader is None else f"this instance is not the leader ({leader} is)"
            raise RegistryError(ErrorCode.UNKNOWN_LEADER, f"Unknown leader: {why}; retry later")
        if action is Action.SERVE:
            response = await serve()
            if request.method != "GET" and response.status < 300:
                response.headers[OFFSET_HEADER] = str(self._applied())
            return response
        assert leader is not None
        if by_certificate:
            raise RegistryError(ErrorCode.FORWARDING_FAILED,
                                f"Error while forwarding the request to the leader {leader}: a login by client "
                                "certificate cannot be passed on; send writes to the leader")
        return await self._forward(request, leader)

    async def _forward(self, request: web.Request, leader: str) -> web.StreamResponse:
        headers = {name: request.headers[name] for name in _PASSED_HEADERS if name in request.headers}
        headers[FORWARDED_HEADER] = self.leadership.own_url
        body = await request.read()
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._trust) if self._trust is not None else None
            self._session = aiohttp.ClientSession(timeout=self._timeout, connector=connector)
        try:
            async with self._session.request(request.method, leader + request.rel_url.path_qs, data=body,
                                             headers=headers, allow_redirects=False) as answer:
                content = await answer.content.read(MAX_ANSWER_BYTES)
                status, content_type = answer.status, answer.headers.get("Content-Type")
                offset = answer.headers.get(OFFSET_HEADER)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise RegistryError(ErrorCode.FORWARDING_FAILED,
                                f"Error while forwarding the request to the leader {leader}: {exc}") from None
        if offset is not None and offset.lstrip("-").isdigit():
            await self._wait_applied(int(offset))  # read-your-writes on this instance (50002 if it lags too long)
        response = web.Response(body=content, status=status)
        if content_type:
            response.headers["Content-Type"] = content_type
        return response

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
