"""The asyncio TCP server: a thin loop around `framing` and a request dispatcher.

One `KafkaConnection` (an asyncio.Protocol) per client socket:

- bytes go into a `FrameDecoder`; each whole frame is decoded (`codec`) and
  handed to the dispatcher as its own task, so a long-polling Fetch or a parked
  JoinGroup does not stop the next request from being read and started;
- responses are written strictly in request order (Kafka's rule): a finished
  task waits until every earlier one on the connection has been written;
- a request that wants no answer (Produce acks=0) yields None and is skipped;
- one Fetch at a time per connection (its answer written before the next starts),
  and none while the server's answers waiting for their clients to read them
  (transport buffers, every connection) reach queued.max.request.bytes: a
  Fetch answer is the large one, and clients that never read must not add
  up to an outage (the other requests go on);
- backpressure: reading and starting requests pause while `max_in_flight`
  requests are pending, while the transport's write buffer is full (the client
  is not reading: finished answers wait, unwritten, and count as pending), or
  while the whole server holds `queued_max_request_bytes` of requests not yet
  answered (Kafka's queued.max.request.bytes), so a slow or hostile peer costs
  bounded memory; frames already received wait in the decoder. A frame still
  arriving counts too: its declared size is reserved from the budget once its
  prefix is in (Kafka's MemoryPool, non-strict: a reservation may overshoot),
  and a connection that cannot reserve stops being read; one that holds a
  reservation goes on reading until its frame is whole, so the budget is never
  spent by frames that cannot finish;
- before login (a SASL listener) a frame may be at most
  sasl.server.max.receive.size (Kafka's 512 KiB), so unauthenticated peers
  hold little; a connection is idle from its last whole frame or written
  answer, so a byte now and then does not keep a half-sent frame open;
- bad input (oversized or malformed frame, unknown API or version) is logged
  once and closes only that connection; an ApiVersions request at a version we
  do not know gets the v0-layout UNSUPPORTED_VERSION answer (KIP-511 rule) and
  the connection stays open.

Log lines about a request (bad input, a failed handler) carry `client_id`,
`correlation_id`, `api` and `peer` as record extras, so a JSON log
(`--log-format json`) can be searched by them.

`KafkaServer` is one listener (broker/security/listener_config.py): it owns the
listening socket, its connections' limits (admission.py: the listener's
max.connections, max.connections.per.ip, and the broker-wide max.connections
that spares the inter-broker listener, KIP-402; extra connections are closed
at once), the queued-request budgets (budget.py) and the idle sweep
(connections.max.idle.ms). The listener's limits count its own connections
only, so clients parked on the client listener cannot lock followers out of
the replication listener.

On a TLS listener the connection is admitted against those limits first and
then shakes hands (within TLS_HANDSHAKE_TIMEOUT_S), so sockets that never
finish a handshake count like any other; a client certificate names the
client (mTLS): its subject DN, through ssl.principal.mapping.rules
(security/principal.py), becomes the connection's principal; a certificate no
rule maps is refused.

On a SASL listener with connections.max.reauth.ms (KIP-368) a login lasts
that long: the client logs in again on the connection before it ends, and a
connection whose session has ended is closed, unanswered, at its next request
other than SaslHandshake / SaslAuthenticate (as Kafka's SocketServer does).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tinystream.broker.handlers.context import CLOSE_CONNECTION
from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.codec import Request, decode_request, peek
from tinystream.broker.protocol.errors import MalformedRequest, ProtocolError, UnsupportedRequest
from tinystream.broker.protocol.framing import FrameDecoder
from tinystream.broker.security.peer import ClientInfo, ConnectionAuth
from tinystream.broker.security.principal import NoMatchingRule, PrincipalMapper, certificate_principal
from tinystream.broker.server.admission import BrokerConnections, ConnectionQuotas
from tinystream.broker.server.budget import ByteBudget

log = logging.getLogger(__name__)

#: Requests this large are decoded on a worker thread (a 100 MiB frame of tiny
#: array items takes seconds to decode; the event loop must keep serving).
OFF_LOOP_DECODE_BYTES = 1 << 20


class SessionExpired(Exception):
    """A request on a connection whose SASL session ended without a re-authentication (KIP-368)."""


def _api_key(frame: memoryview) -> int:
    return int.from_bytes(frame[:2], "big", signed=True)


def _named(frame: memoryview | bytes, exc: MalformedRequest) -> MalformedRequest:
    """The same error, prefixed with the API, version and correlation id the frame declares."""
    api_key, version, correlation_id = peek(frame)
    return MalformedRequest(f"{api_versions.api_name(api_key)} v{version} correlation_id={correlation_id}: {exc}")


def _extras(request: Request) -> dict[str, object]:
    header = request.header
    return {"api": api_versions.api_name(header.api_key), "api_version": header.api_version,
            "correlation_id": header.correlation_id, "client_id": header.client_id}


class Dispatcher(Protocol):
    def dispatch(self, request: Request, client: ClientInfo) -> Awaitable[bytes | None | object]:
        """The framed response bytes, None for no response, or CLOSE_CONNECTION."""

    def unsupported_api_versions(self, correlation_id: int) -> bytes:
        """ApiVersions at a version we do not know: v0 layout, UNSUPPORTED_VERSION, full list."""

    def cancel_on_disconnect(self, api_key: int) -> bool:
        """Whether a pending request of this API may be cancelled when its client goes away."""

    def serves(self, api_key: int) -> bool:
        """Whether this API is advertised (others close the connection like unknown ones)."""


class BadInputLog:
    """Logs bad input at WARNING, at most `burst` lines per `period` seconds.

    A flood of garbage (a fuzzer, a port scanner) must not flood the log; what
    was held back is counted in the next line that gets through.
    """

    def __init__(self, burst: int = 20, period: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._burst = burst
        self._period = period
        self._clock = clock
        self._window_start = clock()
        self._count = 0
        self._suppressed = 0

    def warning(self, message: str, *args: Any, extra: dict[str, object] | None = None) -> None:
        now = self._clock()
        if now - self._window_start >= self._period:
            self._window_start = now
            self._count = 0
        if self._count >= self._burst:
            self._suppressed += 1
            return
        self._count += 1
        if self._suppressed:
            message += " (%d similar messages suppressed)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        log.warning(message, *args, extra=extra)


def request_extras(frame: memoryview | bytes) -> dict[str, object]:
    """Log extras naming a request from its raw frame; best effort, as the frame may be malformed.

    Request header v1+ (every API we serve but ControlledShutdown v0):
    api_key int16, api_version int16, correlation_id int32, client_id nullable string.
    """
    if len(frame) < _PEEK.size:
        return {}
    api_key, version, correlation_id = _PEEK.unpack_from(frame, 0)
    extras: dict[str, object] = {
        "api": api_versions.api_name(api_key), "api_version": version, "correlation_id": correlation_id,
    }
    if len(frame) >= _PEEK.size + 2:
        (length,) = _I16.unpack_from(frame, _PEEK.size)
        start = _PEEK.size + 2
        if 0 <= length <= len(frame) - start:
            extras["client_id"] = bytes(frame[start:start + length]).decode("utf-8", "replace")
    return extras


class InFlight:
    """A request started on a connection: its answer (a future), log extras naming it, and the bytes it
    holds against the server's budget until answered."""

    __slots__ = ("api_key", "answer", "extras", "size")

    def __init__(self, api_key: int, answer: asyncio.Future, extras: dict[str, object], size: int) -> None:
        self.api_key = api_key
        self.answer = answer
        self.extras = extras
        self.size = size

    def hold(self, size: int, server: KafkaServer) -> None:
        """Count `size` from now on (less once decoded: bytes after the body were let go)."""
        if size < self.size:
            server.return_bytes(self.size - size)
            self.size = size


WRITE_BUFFER_HIGH = 4 * 1024 * 1024  # buffered answer bytes before writing (and then reading) pauses
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # a TLS client that has not finished its handshake by then is dropped
_PEEK = struct.Struct(">hhi")
_I16 = struct.Struct(">h")


class KafkaConnection(asyncio.Protocol):
    """One client connection; see the module docstring."""

    def __init__(self, server: KafkaServer, connection_id: int) -> None:
        self._server = server
        self._id = connection_id
        self._decoder = FrameDecoder(server.max_request_bytes)
        self._reserved = 0  # budget bytes reserved for the frame being received (its declared size)
        self._held_size = 0  # budget bytes of the held Fetch frame
        self._unwritten = 0  # this connection's answer bytes in its transport's buffer, as the server counts them
        self._pending: collections.deque[InFlight] = collections.deque()  # in request order
        self._transport: asyncio.Transport | None = None
        self._client = ClientInfo(connection_id, "", 0)
        self._reading_paused = False
        self._writing_paused = False
        self._draining = False
        self._held: memoryview | None = None  # a received Fetch waiting for the previous one to be written
        self._closed = False
        self._refused = False  # a failed login: closing after connection.failed.authentication.delay.ms
        self._handshake: asyncio.Future[None] | None = None  # a TLS listener's handshake, once admitted
        self.last_active = time.monotonic()

    # -- asyncio.Protocol -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A TCP connection: admitted against the limits first, then (on a TLS listener) its handshake.

        Counting before the handshake means a client that opens sockets and never finishes a TLS
        handshake is held to max.connections.per.ip like any other (asyncio's own server-side TLS
        calls connection_made only after the handshake: such sockets were not counted at all)."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername") or ("", 0)
        auth = self._server.new_auth()
        self._client = ClientInfo(self._id, str(peer[0]), int(peer[1]) if len(peer) > 1 else 0, auth,
                                  self._server.listener_name)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self._server.admit(self):
            self._server.bad_input.warning(
                "refusing connection from %s:%s on listener %s: max.connections=%d or max.connections.per.ip=%d "
                "reached", self._client.host, self._client.port, self._server.listener_name,
                self._server.quotas.max_connections, self._server.quotas.max_connections_per_ip,
            )
            self._closed = True
            transport.abort()
            return
        if self._server.ssl_context is None:
            self._ready(transport)
            return
        transport.pause_reading()  # start_tls takes the socket over; nothing is read before it does
        self._handshake = asyncio.ensure_future(self._start_tls(transport, self._server.ssl_context))

    async def _start_tls(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(transport, self, context, server_side=True,
                                       ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            log.debug("TLS handshake with %s:%s failed: %s", self._client.host, self._client.port, exc)
            self._closed = True
            transport.abort()
            self._server.release(self)
            return
        except asyncio.CancelledError:  # the server stops
            transport.abort()
            self._server.release(self)
            raise
        if self._closed or tls is None:  # aborted while shaking hands (the server stopped, an idle sweep)
            if tls is not None:
                tls.abort()
            self._server.release(self)
            return
        assert isinstance(tls, asyncio.Transport)
        self._transport = tls
        ssl_object = tls.get_extra_info("ssl_object")
        try:
            cert_principal = certificate_principal(ssl_object.getpeercert(binary_form=True),
                                                   self._server.principal_mapper)
        except (NoMatchingRule, ValueError) as exc:
            self._server.bad_input.warning("refusing connection from %s:%s: %s", self._client.host,
                                           self._client.port, exc)
            self._close(abort=True)
            self._server.release(self)
            return
        if cert_principal is not None:  # mTLS: the certificate names the client
            self._client.auth.principal = cert_principal
        self._ready(tls)

    def _ready(self, transport: asyncio.Transport) -> None:
        # Responses are written as whole frames; a large buffer before pausing keeps
        # big Fetch responses from pausing the reader after every write.
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self.last_active = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._server.release(self)
        self.recount_unwritten()
        self._server.return_bytes(self._reserved + self._held_size)
        self._reserved = self._held_size = 0
        for entry in self._pending:
            self._server.return_bytes(entry.size)
            entry.size = 0  # a decode still running must not hand them back twice (InFlight.hold)
            if not entry.answer.done() and self._server.dispatcher.cancel_on_disconnect(entry.api_key):
                entry.answer.cancel()
        self._pending.clear()

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        try:
            self._decoder.receive_data(data)
        except ProtocolError as exc:
            self._fail(str(exc))
            return
        self._drain()

    def _drain(self) -> None:
        """Start the received requests, as long as the limits allow (the rest wait in the decoder)."""
        if self._draining:
            return
        self._draining = True
        try:
            while not self._closed and not self._must_wait():
                frame = self._held if self._held is not None else self._next_frame()
                if frame is None:
                    break
                self._held = None
                self._server.return_bytes(self._held_size)
                self._held_size = 0
                if _api_key(frame) == api_versions.FETCH and self._fetch_must_wait():
                    # One Fetch at a time per connection, as Kafka serves them, and none while the
                    # server's unread answers are over budget.
                    self._held = frame
                    self._held_size = len(frame)
                    self._server.take_bytes(self._held_size)
                    break
                self.last_active = time.monotonic()
                self._on_frame(frame)
            if not self._closed:
                self._reserve_arriving()
        except ProtocolError as exc:
            self._fail(str(exc))
        finally:
            self._draining = False
        self._update_reading()

    def _next_frame(self) -> memoryview | None:
        """The next whole frame (its reservation handed back: the request now counts its own bytes)."""
        self._apply_frame_limit()
        frame = self._decoder.next_frame()
        if frame is not None and self._reserved:
            reserved, self._reserved = self._reserved, 0
            self._server.return_bytes(reserved)
        return frame

    def _apply_frame_limit(self) -> None:
        """socket.request.max.bytes once logged in; sasl.server.max.receive.size before (Kafka's rule)."""
        if self._client.auth.authenticated:
            self._decoder.limit = self._server.max_request_bytes
            self._decoder.limit_name = "socket.request.max.bytes"
        else:
            self._decoder.limit = min(self._server.max_request_bytes, self._server.max_receive_before_login)
            self._decoder.limit_name = "sasl.server.max.receive.size"

    def _reserve_arriving(self) -> None:
        """Reserve the declared size of a frame still arriving, when the budget allows (else reading waits)."""
        if self._reserved or not self._decoder.in_frame:
            return
        self._apply_frame_limit()
        size = self._decoder.frame_size()
        if size > 0 and not self._server.over_budget(self):
            self._reserved = size
            self._server.take_bytes(size)

    def eof_received(self) -> bool | None:
        # Kafka closes the channel when a read hits end of stream; so do we (a
        # client that stopped sending cannot be told apart from one that left,
        # and a long poll must not outlive its client).
        return None

    def pause_writing(self) -> None:
        self._writing_paused = True
        self.recount_unwritten()
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.recount_unwritten()
        self._on_done(None)  # answers that finished while the client was not reading

    def recount_unwritten(self) -> None:
        """Tell the server how many answer bytes wait in this transport's buffer (0 once closed).

        Sampled at each write, pause, resume and close; asyncio does not say when a buffer below the
        high-water mark has drained, so the server samples every connection again before it makes a Fetch
        wait, and at each idle sweep (a count is never left high on a quiet connection)."""
        transport = self._transport
        size = 0 if self._closed or transport is None else transport.get_write_buffer_size()
        if size != self._unwritten:
            self._server.count_unwritten(size - self._unwritten)
            self._unwritten = size

    # -- requests ---------------------------------------------------------------

    def _on_frame(self, frame: memoryview) -> None:
        try:
            self._start_request(frame)
        except ProtocolError as exc:
            self._fail(str(exc), extra=request_extras(frame))
        except SessionExpired as exc:
            self._expire(str(exc))

    def _start_request(self, frame: memoryview) -> None:
        if len(frame) >= OFF_LOOP_DECODE_BYTES:
            self._start_large_request(frame)
            return
        try:
            request = decode_request(frame)
        except UnsupportedRequest as exc:
            if exc.api_key == api_versions.API_VERSIONS:
                _, _, correlation_id = peek(frame)
                self._enqueue_result(exc.api_key, self._server.dispatcher.unsupported_api_versions(correlation_id))
                return
            raise
        except MalformedRequest as exc:
            raise _named(frame, exc) from exc
        self._admit(request)
        task = asyncio.ensure_future(self._server.dispatcher.dispatch(request, self._client))
        self._queue(task, request.header.api_key, request.held, _extras(request))

    def _start_large_request(self, frame: memoryview) -> None:
        """Decode a large request on a worker thread, so heartbeats and other connections keep moving.

        Its place in the response order is taken now; a malformed or refused
        request closes the connection when its turn comes, as on the fast path.
        """
        api_key, version, correlation_id = peek(frame)
        arrived = time.monotonic()  # a SASL session is judged at arrival, not after the decode
        if not self._client.auth.authenticated and api_key not in api_versions.BEFORE_AUTHENTICATION:
            # Refused before the worker thread spends seconds decoding it.
            raise UnsupportedRequest(api_key, version, "sent before SASL authentication")

        async def decode_then_dispatch() -> bytes | None | object:
            try:
                request = await asyncio.to_thread(decode_request, frame)
                entry.hold(request.held, self._server)  # padding after the body no longer counts
                self._admit(request, arrived)
            except SessionExpired as exc:
                self._expire(str(exc))
                return CLOSE_CONNECTION
            except MalformedRequest as exc:
                self._fail(str(_named(frame, exc)), extra=request_extras(frame))
                return CLOSE_CONNECTION
            except ProtocolError as exc:
                self._fail(str(exc), extra=request_extras(frame))
                return CLOSE_CONNECTION
            return await self._server.dispatcher.dispatch(request, self._client)

        entry = self._queue(asyncio.ensure_future(decode_then_dispatch()), api_key, len(frame), {
            "api": api_versions.api_name(api_key), "api_version": version, "correlation_id": correlation_id,
        })

    def _admit(self, request: Request, arrived: float | None = None) -> None:
        """Refuse what this broker does not serve, anything but the login before authentication, and
        anything but a re-login once the login's session has ended (at `arrived`, default now)."""
        header = request.header
        now = time.monotonic() if arrived is None else arrived
        if header.api_key not in api_versions.SASL_APIS and self._client.auth.session_expired(now):
            raise SessionExpired(f"{api_versions.api_name(header.api_key)} after the SASL session of "
                                 f"{self._client.auth.principal} ended (connections.max.reauth.ms="
                                 f"{self._client.auth.max_reauth_ms}) without a re-authentication")
        if not self._server.dispatcher.serves(header.api_key):
            raise UnsupportedRequest(header.api_key, header.api_version, "not served by this broker")
        if not self._client.auth.authenticated and header.api_key not in api_versions.BEFORE_AUTHENTICATION:
            raise UnsupportedRequest(header.api_key, header.api_version, "sent before SASL authentication")

    def _queue(self, task: asyncio.Future, api_key: int, size: int, extras: dict[str, object]) -> InFlight:
        self._server.take_bytes(size)
        entry = InFlight(api_key, task, extras, size)
        self._pending.append(entry)
        task.add_done_callback(self._on_done)
        self._update_reading()
        return entry

    def _enqueue_result(self, api_key: int, result: bytes | None) -> None:
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        fut.set_result(result)
        self._pending.append(InFlight(api_key, fut, {}, 0))
        self._on_done(fut)

    def _on_done(self, _: asyncio.Future | None) -> None:
        """Write every finished response at the head of the queue, in request order.

        Not while the client is not reading (writes paused): the answers stay
        queued, so reading stays paused too, until resume_writing.
        """
        if self._refused:
            return
        transport = self._transport
        ready: list[bytes | bytearray] = []
        room = WRITE_BUFFER_HIGH - (transport.get_write_buffer_size() if transport is not None else 0)
        while self._pending and self._pending[0].answer.done() and (
                self._closed or (not self._writing_paused and (room > 0 or not ready))):
            entry = self._pending.popleft()
            fut, extras = entry.answer, entry.extras
            self._server.return_bytes(entry.size)
            if fut.cancelled():
                continue
            exc = fut.exception()  # retrieved even when the answer can no longer be sent
            if self._closed or transport is None:
                continue
            if exc is not None:
                log.error("%s (correlation_id=%s) failed on connection %s; closing it", extras.get("api"),
                          extras.get("correlation_id"), self._describe(), exc_info=exc,
                          extra={**extras, "peer": self._peer()})
                self._flush(ready)
                self._close()
                return
            result = fut.result()
            if result is CLOSE_CONNECTION:
                self._flush(ready)
                self._close()
                return
            if result is not None:
                ready.append(result)
                room -= len(result)
            refused = self._client.auth.close_after  # a refused login: its answer, then nothing more
            if refused is not None and extras.get("correlation_id") == refused:
                self._flush(ready)
                self._close_after_failed_login()
                return
        self._flush(ready)
        self.last_active = time.monotonic()
        if self._pending and self._pending[0].answer.done() and not self._writing_paused and not self._closed:
            asyncio.get_running_loop().call_soon(self._on_done, None)  # the rest, once this write left
        self._update_reading()

    def _flush(self, ready: list[bytes | bytearray]) -> None:
        """One write for several pipelined responses (one syscall instead of many)."""
        if not ready or self._transport is None:
            return
        if len(ready) == 1:
            # A memoryview: on a partial send asyncio (3.11) slices `data[n:]`
            # before buffering it, a full copy of a bytearray (~45 MiB for a
            # Java consumer's fetch) and a zero-copy view of a memoryview.
            self._transport.write(memoryview(ready[0]))
        else:
            self._transport.writelines(ready)
        self.recount_unwritten()

    def _must_wait(self) -> bool:
        if (self._refused or self._writing_paused or len(self._pending) >= self._server.max_in_flight
                or (self._held is not None and self._fetch_must_wait())):
            return True
        # A reserved frame is already counted: it may finish arriving and start, whatever the budget.
        return not self._reserved and self._server.over_budget(self)

    def _fetch_must_wait(self) -> bool:
        return self._fetch_in_flight() or self._server.answers_over_budget(self)

    def _fetch_in_flight(self) -> bool:
        """A Fetch on this connection is unanswered or its answer is not yet written.

        Fetch answers are the large ones (up to fetch.max.bytes each): a client
        that pipelines many and never reads would otherwise make the broker
        hold all of them, finished and unwritten, in memory.
        """
        return any(entry.api_key == api_versions.FETCH for entry in self._pending)

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        should_pause = self._must_wait()
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
            self._drain()  # frames received before the pause

    # -- closing ----------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing in flight. (A half-sent frame does not count: a peer that stops
        mid-frame is as idle as one that sends nothing, and is closed the same way.)"""
        return not self._pending

    def _describe(self) -> str:
        return f"#{self._id} {self._client.host}:{self._client.port}"

    def _peer(self) -> str:
        return f"{self._client.host}:{self._client.port}"

    def _fail(self, reason: str, *, extra: dict[str, object] | None = None) -> None:
        self._server.bad_input.warning("closing connection %s: %s", self._describe(), reason,
                                       extra={**(extra or {}), "peer": self._peer()})
        if self._server.on_protocol_error is not None:
            self._server.on_protocol_error()
        self._close(abort=True)

    def _close_after_failed_login(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms: read nothing more, close a little later.

        Closing at once races the client: a socket closed with the client's next bytes unread is reset,
        and a client can lose the SASL_AUTHENTICATION_FAILED answer before reading it.
        """
        self._refused = True  # no further frame is started, no further answer written
        if self._transport is not None and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        asyncio.get_running_loop().call_later(self._server.failed_authentication_delay_s, self._close_refused)

    def _close_refused(self) -> None:
        # Reading resumes for the close: a TLS close waits for the peer's close_notify (what arrives is
        # dropped: `_refused` starts no frame), and a paused transport would hold the connection open.
        if self._transport is not None and self._reading_paused and not self._closed:
            self._reading_paused = False
            self._transport.resume_reading()
        self._close()

    def _expire(self, reason: str) -> None:
        """Close a connection whose SASL session ended: not bad input, the client did not log in again."""
        log.info("closing connection %s: %s", self._describe(), reason)
        if self._server.on_session_expired is not None:
            self._server.on_session_expired()
        self._close(abort=True)

    def _close(self, *, abort: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                self._transport.close()

    @property
    def peer_host(self) -> str:
        return self._client.host

    def budget_freed(self) -> None:
        self._update_reading()
        if not self._reading_paused:
            self._drain()

    def close_idle(self) -> None:
        log.info("closing idle connection %s", self._describe())
        self._close()

    def abort(self) -> None:
        self._close(abort=True)


class KafkaServer:
    """One listener: its socket, its connections and their limits (see the module docstring)."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        max_request_bytes: int,
        max_connections: int,
        idle_timeout_ms: int,
        max_connections_per_ip: int | None = None,
        queued_max_request_bytes: int | None = None,
        max_in_flight: int = 100,
        on_connections_changed: Callable[[int], None] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        new_auth: Callable[[], ConnectionAuth] = ConnectionAuth,
        listener_name: str | None = None,
        principal_mapper: PrincipalMapper | None = None,
        broker_connections: BrokerConnections | None = None,
        protected: bool = False,
        failed_authentication_delay_ms: int = 100,
        max_receive_before_login: int = 524_288,
    ) -> None:
        self.dispatcher = dispatcher
        self.ssl_context = ssl_context  # TLS on the listener (SSL, SASL_SSL)
        self.new_auth = new_auth  # each connection's auth state (a SaslSession on a SASL listener)
        self.listener_name = listener_name
        self.failed_authentication_delay_s = failed_authentication_delay_ms / 1000
        self.principal_mapper = principal_mapper or PrincipalMapper.parse("DEFAULT")
        self.max_request_bytes = max_request_bytes
        self.max_receive_before_login = max_receive_before_login  # sasl.server.max.receive.size
        self.quotas = ConnectionQuotas(max_connections, max_connections_per_ip=max_connections_per_ip,
                                       broker_connections=broker_connections, protected=protected)
        self.queued_max_request_bytes = queued_max_request_bytes  # None: no server-wide budget
        # Request bytes started (or reserved while arriving) and not yet answered, every connection.
        self.requests: ByteBudget[KafkaConnection] = ByteBudget(queued_max_request_bytes)
        # Answer bytes in transport buffers, every connection (clients not reading); Fetches wait on it.
        self.answers: ByteBudget[KafkaConnection] = ByteBudget(queued_max_request_bytes)
        self.max_in_flight = max_in_flight
        self.bad_input = BadInputLog()
        self._idle_timeout = idle_timeout_ms / 1000.0
        self._connections: set[KafkaConnection] = set()
        self._ids = itertools.count(1)
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.Task | None = None
        self._on_connections_changed = on_connections_changed
        self.on_protocol_error: Callable[[], None] | None = None
        self.on_session_expired: Callable[[], None] | None = None

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; returns the bound (host, port) (port 0 picks a free one)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self, next(self._ids)), host=host, port=port, reuse_address=True, backlog=1024,
        )  # TLS (ssl_context) starts in each connection once it is admitted: KafkaConnection._start_tls
        self._sweeper = asyncio.create_task(self._sweep_idle(), name="kafka-idle-sweep")
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.abort()
        if self._server is not None:
            await self._server.wait_closed()

    def admit(self, conn: KafkaConnection) -> bool:
        if not self.quotas.admit(conn.peer_host):
            return False
        self._connections.add(conn)
        if self._on_connections_changed:
            self._on_connections_changed(len(self._connections))
        return True

    def release(self, conn: KafkaConnection) -> None:
        self.requests.forget(conn)
        self.answers.forget(conn)
        if conn in self._connections:
            self._connections.discard(conn)
            self.quotas.release(conn.peer_host)
            if self._on_connections_changed:
                self._on_connections_changed(len(self._connections))

    # -- the queued-request budget (queued.max.request.bytes) ----------------------------

    @property
    def queued_bytes(self) -> int:
        return self.requests.used

    def take_bytes(self, size: int) -> None:
        self.requests.take(size)

    def return_bytes(self, size: int) -> None:
        if size:
            self.requests.give_back(size)

    def over_budget(self, conn: KafkaConnection) -> bool:
        """Whether `conn` must wait to start requests; it is told (budget_freed) when it may go on."""
        return self.requests.must_wait(conn)

    # -- answers waiting for their clients (same bound, counted apart: only Fetches wait on it) ------

    @property
    def unwritten_bytes(self) -> int:
        return self.answers.used

    def count_unwritten(self, delta: int) -> None:
        if delta < 0:
            self.answers.give_back(-delta)
        else:
            self.answers.take(delta)

    def answers_over_budget(self, conn: KafkaConnection) -> bool:
        """Whether `conn`'s next Fetch must wait for unread answers to drain; it is told when it may go on."""
        if self.answers.spent():
            self.recount_unwritten()  # the counts may be stale: buffers drain without a word
        return self.answers.must_wait(conn)

    def recount_unwritten(self) -> None:
        for conn in list(self._connections):
            conn.recount_unwritten()

    async def _sweep_idle(self) -> None:
        interval = min(max(self._idle_timeout / 4, 0.05), 10.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            self.recount_unwritten()  # wakes Fetches held on answers that have drained meanwhile
            for conn in list(self._connections):
                if conn.idle and now - conn.last_active > self._idle_timeout:
                    conn.close_idle()
