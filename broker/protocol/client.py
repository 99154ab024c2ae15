"""A small asyncio Kafka client connection: send kio requests, await kio responses.

For broker-to-broker calls (a follower fetching from its leader) and for tests
that need to speak the protocol exactly (one version, raw bytes, pipelining).
Requests may be pipelined; responses are matched to requests by correlation
id in order, as Kafka answers them. A request that expects no response
(Produce with acks=0) is sent with `send_only`.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

import scramp

from tinystream.broker.protocol.codec import build, decode_response, encode_request, schemas
from tinystream.broker.protocol.framing import FrameDecoder

_SIZE = struct.Struct(">i")


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
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str | None) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._ids = itertools.count(1)
        self._waiting: deque[tuple[int, int, int, asyncio.Future[Any]]] = deque()
        self._read_task = asyncio.create_task(self._read_loop())
        self.closed = asyncio.Event()

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str | None = "tinystream-client",
                      ssl_context: ssl.SSLContext | None = None, sasl: SaslLogin | None = None) -> KafkaClient:
        """Connect (over TLS with `ssl_context`), then log in with `sasl` (SaslHandshake v1 + SaslAuthenticate)."""
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context,
                                                       server_hostname=host if ssl_context else None)
        client = cls(reader, writer, client_id)
        if sasl is not None:
            try:
                await client._login(sasl)
            except BaseException:
                await client.close()
                raise
        return client

    async def _login(self, login: SaslLogin) -> None:
        shake = await self.request(build(schemas(17, 1).request_type, {"mechanism": login.mechanism}))
        if shake.error_code != 0:
            raise SaslRefused(f"SaslHandshake {login.mechanism}: error {shake.error_code}; broker offers "
                              f"{list(shake.mechanisms)}")
        if login.mechanism == "PLAIN":
            await self._authenticate(b"\x00" + login.username.encode() + b"\x00" + login.password.encode())
            return
        scram = scramp.ScramClient([login.mechanism], login.username, login.password)
        server_first = await self._authenticate(scram.get_client_first().encode())
        scram.set_server_first(server_first.decode())
        server_final = await self._authenticate(scram.get_client_final().encode())
        scram.set_server_final(server_final.decode())  # checks the server knew our credentials too

    async def _authenticate(self, token: bytes) -> bytes:
        reply = await self.request(build(schemas(36, 2).request_type, {"auth_bytes": token}))
        if reply.error_code != 0:
            raise SaslRefused(f"SaslAuthenticate: error {reply.error_code}: {reply.error_message}")
        return bytes(reply.auth_bytes)

    async def request(self, body: Any, *, timeout: float | None = 30.0) -> Any:
        """Send a kio request entity; return the kio response entity."""
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
