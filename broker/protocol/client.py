"""A small asyncio Kafka client connection: send kio requests, await kio responses.

For broker-to-broker calls (a follower fetching from its leader) and for tests
that need to speak the protocol exactly (one version, raw bytes, pipelining).
Requests may be pipelined; responses are matched to requests by correlation
id in order, as Kafka answers them. A request that expects no response
(Produce with acks=0) is sent with `send_only`.

A SASL login whose session has a lifetime (the broker's
connections.max.reauth.ms, KIP-368) is renewed on the same connection by the
first request after 85% of it, as Kafka's clients do; other requests wait
for the re-login.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import scramp

from tinystream.broker.protocol.codec import build, decode_response, encode_request, schemas, to_millis
from tinystream.broker.protocol.framing import FrameDecoder

_SIZE = struct.Struct(">i")
RELOGIN_AT = 0.85  # of the session lifetime


class ConnectionClosed(ConnectionError):
    pass


class SaslRefused(ConnectionError):
    """The broker refused our SASL mechanism or credentials."""


@dataclass(frozen=True, slots=True)
class SaslLogin:
    mechanism: str  # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    username: str
    password: str


class KafkaClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str | None,
                 *, relogin: bool = True) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._ids = itertools.count(1)
        self._waiting: deque[tuple[int, int, int, asyncio.Future[Any]]] = deque()
        self._read_task = asyncio.create_task(self._read_loop())
        self.closed = asyncio.Event()
        self._login_with: SaslLogin | None = None
        self._relogin_enabled = relogin
        self._relogin_at: float | None = None  # time.monotonic() of the next re-login (KIP-368)
        self._relogin_lock = asyncio.Lock()
        self.relogins = 0
        self.session_lifetime_ms = 0  # of the last login (0: no re-login needed)

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str | None = "tinystream-client",
                      ssl_context: ssl.SSLContext | None = None, sasl: SaslLogin | None = None,
                      relogin: bool = True) -> KafkaClient:
        """Connect (over TLS with `ssl_context`), then log in with `sasl` (SaslHandshake v1 + SaslAuthenticate).

        relogin=False never logs in again (a client from before KIP-368: the broker closes it when its
        session ends)."""
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context,
                                                       server_hostname=host if ssl_context else None)
        client = cls(reader, writer, client_id, relogin=relogin)
        if sasl is not None:
            try:
                await client._login(sasl)
            except BaseException:
                await client.close()
                raise
        return client

    async def _login(self, login: SaslLogin) -> None:
        shake = await self._call(build(schemas(17, 1).request_type, {"mechanism": login.mechanism}))
        if shake.error_code != 0:
            raise SaslRefused(f"SaslHandshake {login.mechanism}: error {shake.error_code}; broker offers "
                              f"{list(shake.mechanisms)}")
        if login.mechanism == "PLAIN":
            reply = await self._authenticate(b"\x00" + login.username.encode() + b"\x00" + login.password.encode())
        else:
            scram = scramp.ScramClient([login.mechanism], login.username, login.password)
            server_first = await self._authenticate(scram.get_client_first().encode())
            scram.set_server_first(bytes(server_first.auth_bytes).decode())
            reply = await self._authenticate(scram.get_client_final().encode())
            scram.set_server_final(bytes(reply.auth_bytes).decode())  # checks the server knew our credentials too
        self.session_lifetime_ms = to_millis(reply.session_lifetime)
        self._login_with = login
        due = self._relogin_enabled and self.session_lifetime_ms > 0
        self._relogin_at = time.monotonic() + RELOGIN_AT * self.session_lifetime_ms / 1000 if due else None

    async def reauthenticate(self, login: SaslLogin | None = None) -> None:
        """Log in again on this connection now (KIP-368), as the last login did unless `login` is given."""
        async with self._relogin_lock:
            await self._relogin(login)

    async def _relogin(self, login: SaslLogin | None, timeout: float | None = 30.0) -> None:
        """A re-login that fails or is cancelled closes the connection: the broker closes it after a
        refusal, and a half-done exchange leaves it mid-login (callers reconnect)."""
        chosen = login or self._login_with
        assert chosen is not None, "no login to repeat"
        try:
            await asyncio.wait_for(self._login(chosen), timeout)
        except BaseException:
            await self.close()
            raise
        self.relogins += 1

    async def _authenticate(self, token: bytes) -> Any:
        reply = await self._call(build(schemas(36, 2).request_type, {"auth_bytes": token}))
        if reply.error_code != 0:
            raise SaslRefused(f"SaslAuthenticate: error {reply.error_code}: {reply.error_message}")
        return reply

    def _relogin_due(self) -> bool:
        return self._relogin_at is not None and time.monotonic() >= self._relogin_at

    async def _relogin_if_due(self, timeout: float | None) -> None:
        if self._relogin_due():
            async with self._relogin_lock:
                if self._relogin_due():  # requests that waited for the lock find it done
                    await self._relogin(None, timeout)

    async def request(self, body: Any, *, timeout: float | None = 30.0) -> Any:
        """Send a kio request entity; return the kio response entity."""
        await self._relogin_if_due(timeout)
        return await self._call(body, timeout=timeout)

    async def _call(self, body: Any, *, timeout: float | None = 30.0) -> Any:
        if self.closed.is_set():
            raise ConnectionClosed("the connection is closed")
        correlation_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append((correlation_id, body.__api_key__, body.__version__, fut))
        self._writer.write(encode_request(body, correlation_id=correlation_id, client_id=self._client_id))
        return await asyncio.wait_for(fut, timeout)

    def send_only(self, body: Any) -> None:
        """Send a request that gets no response (Produce acks=0)."""
        self._writer.write(encode_request(body, correlation_id=next(self._ids), client_id=self._client_id))

    async def send_raw(self, data: bytes, *, api_key: int, api_version: int, timeout: float | None = 30.0) -> Any:
        """Send pre-framed bytes whose answer is a response of (api_key, api_version)."""
        fut = asyncio.get_running_loop().create_future()
        (correlation_id,) = struct.unpack_from(">i", data, 8)
        self._waiting.append((correlation_id, api_key, api_version, fut))
        self._writer.write(data)
        return await asyncio.wait_for(fut, timeout)

    def write_raw(self, data: bytes) -> None:
        self._writer.write(data)

    async def _read_loop(self) -> None:
        decoder = FrameDecoder(2**31 - 1)
        try:
            while True:
                chunk = await self._reader.read(1 << 20)
                if not chunk:
                    break
                decoder.receive_data(chunk)
                while (frame := decoder.next_frame()) is not None:
                    (correlation_id,) = _SIZE.unpack_from(frame, 0)
                    if not self._waiting:
                        raise ConnectionClosed(f"unexpected response {correlation_id}")
                    expected, api_key, version, fut = self._waiting.popleft()
                    if expected != correlation_id:
                        raise ConnectionClosed(f"response {correlation_id} out of order, expected {expected}")
                    if not fut.done():
                        try:
                            fut.set_result(decode_response(api_key, version, bytes(frame))[1])
                        except Exception as exc:  # a response we cannot decode fails only its request
                            fut.set_exception(exc)
        except (ConnectionError, OSError) as exc:
            self._fail(exc)
        except Exception as exc:
            self._fail(exc)
        else:
            self._fail(ConnectionClosed("connection closed by the broker"))
        finally:
            self.closed.set()

    def _fail(self, exc: BaseException) -> None:
        while self._waiting:
            *_, fut = self._waiting.popleft()
            if not fut.done():
                fut.set_exception(exc if isinstance(exc, ConnectionError) else ConnectionClosed(str(exc)))

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass
        self._read_task.cancel()
        await asyncio.gather(self._read_task, return_exceptions=True)
        self._fail(ConnectionClosed("the connection was closed"))  # requests still waiting get no answer
