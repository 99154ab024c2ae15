"""The asyncio TCP server: thin loops around `connection_core` (the decisions) and a request dispatcher.

One `KafkaConnection` (an asyncio.Protocol) per client socket. It does the I/O
and carries out what its `ConnectionCore` decides (framing, the frame limit
before login, budget reservations, back-pressure, session expiry, the failed
login's delay, idle closes: see connection_core.py); its own jobs are:

- the TLS handshake on a TLS listener, once the connection is admitted against
  the limits (so sockets that never finish a handshake count like any other),
  within TLS_HANDSHAKE_TIMEOUT_S; a client certificate names the client
  (mTLS): its subject DN, through ssl.principal.mapping.rules
  (tinystream/tls_principal.py), becomes the connection's principal; a certificate no
  rule maps is refused;
- each request the core starts is decoded (`codec`; on a worker thread when
  large) and handed to the dispatcher as its own task, so a long-polling Fetch
  or a parked JoinGroup does not stop the next request from being read;
- answers are written strictly in request order (Kafka's rule), through its
  `ResponseWriter` (response_writer.py: a Fetch's record sets go from the
  segment files, with sendfile on plaintext, a piece at a time on TLS; the writer's queued bytes count as
  unwritten, and a writer over WRITE_BUFFER_HIGH pauses writing like a full
  transport buffer); a finished
  task waits until every earlier one on the connection has been written; a
  request that wants no answer (Produce acks=0) yields None and is skipped;
  answers buffered for a client that does not read pause writing, and the
  server counts them (`answers`) so that Fetches wait while they reach
  queued.max.request.bytes;
- bad input (oversized or malformed frame, unknown API or version) is logged
  once and closes only that connection; an ApiVersions request at a version we
  do not know gets the v0-layout UNSUPPORTED_VERSION answer (KIP-511 rule) and
  the connection stays open; what is logged about a request is in
  request_logs.py.

`KafkaServer` is one listener (broker/security/listener_config.py): it owns the
listening socket, its connections' limits (admission.py: the listener's
max.connections, max.connections.per.ip, and the broker-wide max.connections
that spares the inter-broker listener, KIP-402; extra connections are closed
at once), the queued-request budgets (budget.py) and the idle sweep
(connections.max.idle.ms). The listener's limits count its own connections
only, so clients parked on the client listener cannot lock followers out of
the replication listener.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from tinystream.broker.handlers.shared.context import CLOSE_CONNECTION
from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.codec import Request, decode_request, peek
from tinystream.broker.protocol.errors import MalformedRequest, ProtocolError, UnsupportedRequest
from tinystream.broker.protocol.response_parts import ResponseParts
from tinystream.broker.security.peer import ClientInfo, ConnectionAuth
from tinystream.broker.server.admission import BrokerConnections, ConnectionQuotas
from tinystream.broker.server.budget import ByteBudget
from tinystream.broker.server.connection_core import (
    Action,
    Close,
    CloseCause,
    CloseLater,
    ConnectionCore,
    Limits,
    PauseReading,
    ResumeReading,
    Start,
    Ticket,
)
from tinystream.broker.server.request_logs import BadInputLog, decoded_extras, request_extras
from tinystream.broker.server.response_writer import Answer, ResponseWriter
from tinystream.tls_principal import NoMatchingRule, PrincipalMapper, certificate_principal

log = logging.getLogger(__name__)


def _named(frame: memoryview | bytes, exc: MalformedRequest) -> MalformedRequest:
    """The same error, prefixed with the API, version and correlation id the frame declares."""
    api_key, version, correlation_id = peek(frame)
    return MalformedRequest(f"{api_versions.api_name(api_key)} v{version} correlation_id={correlation_id}: {exc}")


class Dispatcher(Protocol):
    def dispatch(self, request: Request, client: ClientInfo, decode_s: float = 0.0) -> Awaitable[bytes | None | object]:
        """The framed response bytes, None for no response, or CLOSE_CONNECTION (`decode_s`: the time the
        request took to decode, which a request_percentage quota counts)."""

    def unsupported_api_versions(self, correlation_id: int) -> bytes:
        """ApiVersions at a version we do not know: v0 layout, UNSUPPORTED_VERSION, full list."""

    def cancel_on_disconnect(self, api_key: int) -> bool:
        """Whether a pending request of this API may be cancelled when its client goes away."""

    def serves(self, api_key: int) -> bool:
        """Whether this API is advertised (others close the connection like unknown ones)."""


class InFlight:
    """A request started on a connection: its answer (a future), log extras naming it, and its ticket (the
    budget bytes it holds until answered)."""

    __slots__ = ("answer", "extras", "ticket")

    def __init__(self, ticket: Ticket, answer: asyncio.Future, extras: dict[str, object]) -> None:
        self.ticket = ticket
        self.answer = answer
        self.extras = extras


WRITE_BUFFER_HIGH = 4 * 1024 * 1024  # buffered answer bytes before writing (and then reading) pauses
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # a TLS client that has not finished its handshake by then is dropped


class KafkaConnection(asyncio.Protocol):
    """One client connection: the I/O around its `ConnectionCore`; see the module docstring."""

    def __init__(self, server: KafkaServer, connection_id: int) -> None:
        self._server = server
        self._id = connection_id
        auth = server.new_auth()  # each connection's login (a SaslSession on a SASL listener)
        self._client = ClientInfo(connection_id, "", 0, auth, server.listener_name)
        self._core = ConnectionCore(auth=auth, limits=server.limits, requests=server.requests, waiter=self,
                                    answers_over_budget=self._answers_over_budget,
                                    serves=server.dispatcher.serves, now=time.monotonic())
        self._unwritten = 0  # this connection's answer bytes in its transport's buffer, as the server counts them
        self._pending: collections.deque[InFlight] = collections.deque()  # in request order
        self._transport: asyncio.Transport | None = None
        self._writer: ResponseWriter | None = None  # once ready (after a TLS handshake)
        self._transport_full = False  # the transport asked to pause writing
        self._writer_full = False  # the writer's queue is over WRITE_BUFFER_HIGH
        self._draining = False
        self._handshake: asyncio.Future[None] | None = None  # a TLS listener's handshake, once admitted
        self._muted_until = 0.0  # time.monotonic() a quota throttle ends (0: not muted)
        self._unmute_timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A TCP connection: admitted against the limits first, then (on a TLS listener) its handshake.

        Counting before the handshake means a client that opens sockets and never finishes a TLS
        handshake is held to max.connections.per.ip like any other (asyncio's own server-side TLS
        calls connection_made only after the handshake: such sockets were not counted at all)."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername") or ("", 0)
        self._client = ClientInfo(self._id, str(peer[0]), int(peer[1]) if len(peer) > 1 else 0, self._core.auth,
                                  self._server.listener_name, file_ranges=True)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self._server.admit(self):
            self._server.bad_input.warning(
                "refusing connection from %s:%s on listener %s: max.connections=%d or max.connections.per.ip=%d "
                "reached", self._client.host, self._client.port, self._server.listener_name,
                self._server.quotas.max_connections, self._server.quotas.max_connections_per_ip,
            )
            self._core.close()
            transport.abort()
            return
        if self._server.ssl_context is None:
            self._ready(transport)
            if not transport.is_reading():
                asyncio.get_running_loop().call_soon(self._hold_pause)
            return
        self._core.handshake()
        transport.pause_reading()  # start_tls takes the socket over; nothing is read before it does
        self._handshake = asyncio.ensure_future(self._start_tls(transport, self._server.ssl_context))

    def _hold_pause(self) -> None:
        """Pause again a connection paused in connection_made (the request budget was spent). Python before
        3.11.4 registers a new transport's reader after connection_made returns, whatever pause_reading
        said (CPython gh-103607): such a connection was read anyway, and six hostile peers held 118 MiB
        against a 1 MiB budget (test_attacks). is_reading() still says False there, so toggle."""
        transport = self._transport
        if transport is not None and not transport.is_closing() and self._core.reading_paused:
            transport.resume_reading()
            transport.pause_reading()

    async def _start_tls(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(transport, self, context, server_side=True,
                                       ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            log.debug("TLS handshake with %s:%s failed: %s", self._client.host, self._client.port, exc)
            self._core.close()
            transport.abort()
            self._server.release(self)
            return
        except asyncio.CancelledError:  # the server stops
            transport.abort()
            self._server.release(self)
            raise
        if self._core.closed or tls is None:  # aborted while shaking hands (the server stopped, an idle sweep)
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
        self._writer = ResponseWriter(transport, on_drained=self._writer_drained, on_failed=self._writer_failed,
                                      after_sendfile=self._after_sendfile)
        self._core.ready(time.monotonic())
        # A TLS 1.3 client may send its first request in the same flight as its Finished (franz-go does):
        # asyncio hands those bytes to data_received before start_tls returns; they start now.
        self._drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self._core.close()
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        if self._writer is not None:
            self._writer.close()  # a sendfile under way stops; every file slice queued is closed
        self._server.release(self)
        self.recount_unwritten()
        self._core.release()  # every budget byte it held, once (a decode still running hands back none)
        for entry in self._pending:
            if not entry.answer.done() and self._server.dispatcher.cancel_on_disconnect(entry.ticket.api_key):
                entry.answer.cancel()
        self._pending.clear()

    def data_received(self, data: bytes) -> None:
        if self._core.closed:
            return
        refused = self._core.receive_data(data)
        if refused is not None:
            self._carry_out(refused)
            return
        self._drain()

    def _drain(self) -> None:
        """Start the received requests, as long as the core allows (the rest wait in its decoder)."""
        if self._draining:
            return
        self._draining = True
        try:
            while (action := self._core.next_action(time.monotonic())) is not None:
                if isinstance(action, Close):
                    self._carry_out(action)
                    break
                self._on_frame(action)
        finally:
            self._draining = False
        self._update_reading()

    def eof_received(self) -> bool | None:
        # Kafka closes the channel when a read hits end of stream; so do we (a
        # client that stopped sending cannot be told apart from one that left,
        # and a long poll must not outlive its client).
        return None

    def pause_writing(self) -> None:
        self._transport_full = True
        if self._writer is not None:
            self._writer.transport_paused()
        self._pause_writing()

    def resume_writing(self) -> None:
        self._transport_full = False
        if self._writer is not None:
            self._writer.transport_resumed()
        self._resume_writing()

    def _pause_writing(self) -> None:
        self._core.writing_paused = True
        self.recount_unwritten()
        self._update_reading()

    def _resume_writing(self) -> None:
        if self._transport_full or self._writer_full:
            return
        self._core.writing_paused = False
        self.recount_unwritten()
        self._on_done(None)  # answers that finished while the client was not reading

    def _writer_drained(self) -> None:
        self.recount_unwritten()
        if self._writer_full:
            self._writer_full = False
            self._resume_writing()
        elif self._pending and self._pending[0].answer.done():
            self._on_done(None)

    def _writer_failed(self, exc: BaseException) -> None:
        log.debug("writing to connection %s failed: %s", self._describe(), exc)
        self._close(abort=True)

    def _after_sendfile(self, sent: int) -> None:
        """asyncio's sendfile pauses reading and resumes it after: the core's pause (back-pressure) wins."""
        self._server.sendfile_slices += 1
        self._server.sendfile_bytes += sent
        if self._core.reading_paused and self._transport is not None and not self._core.closed:
            self._transport.pause_reading()

    def recount_unwritten(self) -> None:
        """Tell the server how many answer bytes wait in this transport's buffer (0 once closed).

        Sampled at each write, pause, resume and close; asyncio does not say when a buffer below the
        high-water mark has drained, so the server samples every connection again before it makes a Fetch
        wait, and at each idle sweep (a count is never left high on a quiet connection)."""
        transport = self._transport
        size = 0 if self._core.closed or transport is None else transport.get_write_buffer_size()
        if self._writer is not None and not self._core.closed:
            size += self._writer.queued
        if size != self._unwritten:
            self._server.count_unwritten(size - self._unwritten)
            self._unwritten = size

    def _answers_over_budget(self) -> bool:
        return self._server.answers_over_budget(self)

    # -- requests ---------------------------------------------------------------

    def _on_frame(self, start: Start) -> None:
        frame = start.frame
        try:
            if start.off_loop:
                self._start_large_request(frame)
            else:
                self._start_request(frame)
        except ProtocolError as exc:
            self._fail(str(exc), extra=request_extras(frame))

    def _start_request(self, frame: memoryview) -> None:
        decoding = time.perf_counter()
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
        header = request.header
        refused = self._core.admit(header.api_key, header.api_version, time.monotonic())
        if refused is not None:
            self._carry_out(refused, extra=request_extras(frame))
            return
        task = asyncio.ensure_future(self._server.dispatcher.dispatch(request, self._client,
                                                                      time.perf_counter() - decoding))
        self._queue(task, header.api_key, request.held, decoded_extras(request))

    def _start_large_request(self, frame: memoryview) -> None:
        """Decode a large request on a worker thread, so heartbeats and other connections keep moving.

        Its place in the response order is taken now; a malformed or refused
        request closes the connection when its turn comes, as on the fast path.
        """
        api_key, version, correlation_id = peek(frame)
        arrived = time.monotonic()  # a SASL session is judged at arrival, not after the decode
        refused = self._core.refuse_before_login(api_key, version)  # before the worker spends seconds on it
        if refused is not None:
            self._carry_out(refused, extra=request_extras(frame))
            return

        async def decode_then_dispatch() -> bytes | None | object:
            decoding = time.perf_counter()
            try:
                request = await asyncio.to_thread(decode_request, frame)
            except MalformedRequest as exc:
                self._fail(str(_named(frame, exc)), extra=request_extras(frame))
                return CLOSE_CONNECTION
            except ProtocolError as exc:
                self._fail(str(exc), extra=request_extras(frame))
                return CLOSE_CONNECTION
            self._core.hold(entry.ticket, request.held)  # padding after the body no longer counts
            refused = self._core.admit(request.header.api_key, request.header.api_version, arrived)
            if refused is not None:
                self._carry_out(refused, extra=request_extras(frame))
                return CLOSE_CONNECTION
            return await self._server.dispatcher.dispatch(request, self._client, time.perf_counter() - decoding)

        entry = self._queue(asyncio.ensure_future(decode_then_dispatch()), api_key, len(frame), {
            "api": api_versions.api_name(api_key), "api_version": version, "correlation_id": correlation_id,
        })

    def _queue(self, task: asyncio.Future, api_key: int, size: int, extras: dict[str, object]) -> InFlight:
        entry = InFlight(self._core.request_started(api_key, size), task, extras)
        self._pending.append(entry)
        task.add_done_callback(self._on_done)
        self._update_reading()
        return entry

    def _enqueue_result(self, api_key: int, result: bytes | None) -> None:
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        fut.set_result(result)
        self._pending.append(InFlight(self._core.request_started(api_key, 0), fut, {}))
        self._on_done(fut)

    # -- answers, in request order -------------------------------------------------

    def _on_done(self, _: asyncio.Future | None) -> None:
        """Write every finished response at the head of the queue, in request order.

        Not while the client is not reading (writes paused): the answers stay
        queued, so reading stays paused too, until resume_writing.
        """
        core = self._core
        if core.login_refused:
            return
        transport = self._transport
        ready: list[Answer] = []
        room = WRITE_BUFFER_HIGH - (transport.get_write_buffer_size() if transport is not None else 0)
        if self._writer is not None:
            room -= self._writer.queued
        while self._pending and self._pending[0].answer.done() and (
                core.closed or (not core.writing_paused and (room > 0 or not ready))):
            entry = self._pending.popleft()
            fut, extras = entry.answer, entry.extras
            core.request_done(entry.ticket)
            if fut.cancelled():
                continue
            exc = fut.exception()  # retrieved even when the answer can no longer be sent
            if core.closed or transport is None:
                if exc is None and type(fut.result()) is ResponseParts:
                    fut.result().close()  # its file slices, now
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
            if core.refuses_login(extras.get("correlation_id")):  # its answer, then nothing more
                self._flush(ready)
                self._perform(core.refuse_login())
                return
        self._flush(ready)
        core.answer_written(time.monotonic())
        if (throttle_ms := self._client.throttle.take()) > 0 and not core.closed:
            self._mute(throttle_ms / 1000)
        if self._pending and self._pending[0].answer.done() and not core.writing_paused and not core.closed:
            asyncio.get_running_loop().call_soon(self._on_done, None)  # the rest, once this write left
        self._update_reading()

    def _flush(self, ready: list[Answer]) -> None:
        """Hand the writer the finished answers (one syscall for several pipelined byte answers)."""
        if not ready or self._writer is None:
            return
        self._writer.write(ready)
        self.recount_unwritten()
        if self._writer.queued > WRITE_BUFFER_HIGH and not self._writer_full:
            self._writer_full = True
            self._pause_writing()

    def _update_reading(self) -> None:
        if self._transport is None:
            return
        change = self._core.reading()
        if change is not None:
            self._perform([change])
            if isinstance(change, ResumeReading):
                self._drain()  # frames received before the pause

    def _mute(self, delay_s: float) -> None:
        """A quota throttled this client: read nothing more from it for `delay_s` (Kafka mutes the channel)."""
        until = time.monotonic() + delay_s
        if self._muted_until >= until:
            return
        self._muted_until = until
        self._core.muted = True
        if self._unmute_timer is not None:
            self._unmute_timer.cancel()
        self._unmute_timer = asyncio.get_running_loop().call_later(delay_s, self._unmute)

    def _unmute(self) -> None:
        self._unmute_timer = None
        self._muted_until = 0.0
        self._core.muted = False
        if not self._core.closed:
            self._update_reading()
            self._drain()

    # -- carrying out the core's decisions ---------------------------------------------

    def _perform(self, actions: list[Action]) -> None:
        for action in actions:
            match action:
                case PauseReading():
                    if self._transport is not None:
                        self._transport.pause_reading()
                case ResumeReading():
                    if self._transport is not None:
                        self._transport.resume_reading()
                case CloseLater(delay_s=delay):
                    asyncio.get_running_loop().call_later(delay, self._close_refused)
                case Close():
                    self._carry_out(action)

    def _close_refused(self) -> None:
        self._perform(self._core.refused_delay_over())

    def _carry_out(self, close: Close, *, extra: dict[str, object] | None = None) -> None:
        match close.cause:
            case CloseCause.BAD_INPUT:
                self._fail(close.reason, extra=extra)
            case CloseCause.SESSION_EXPIRED:
                self._expire(close.reason)
            case CloseCause.IDLE:
                log.info("closing idle connection %s", self._describe())
                self._close(abort=close.abort)
            case CloseCause.LOGIN_REFUSED:
                self._close(abort=close.abort)

    # -- closing ----------------------------------------------------------------

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

    def _expire(self, reason: str) -> None:
        """Close a connection whose SASL session ended: not bad input, the client did not log in again."""
        log.info("closing connection %s: %s", self._describe(), reason)
        if self._server.on_session_expired is not None:
            self._server.on_session_expired()
        self._close(abort=True)

    def _close(self, *, abort: bool = False) -> None:
        if self._core.closed:
            return
        self._core.close()
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                self._transport.close()

    @property
    def peer_host(self) -> str:
        return self._client.host

    @property
    def buffered(self) -> int:
        """Bytes received and not yet started as requests."""
        return self._core.buffered

    def budget_freed(self) -> None:
        self._update_reading()
        if not self._core.reading_paused:
            self._drain()

    def close_if_idle(self, now: float) -> None:
        """connections.max.idle.ms: the idle sweep's check."""
        idle = self._core.check_idle(now)
        if idle is not None:
            self._carry_out(idle)

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
        self.limits = Limits(max_request_bytes=max_request_bytes, max_receive_before_login=max_receive_before_login,
                             max_in_flight=max_in_flight, idle_timeout_s=idle_timeout_ms / 1000.0,
                             failed_authentication_delay_s=failed_authentication_delay_ms / 1000)
        self.ssl_context = ssl_context  # TLS on the listener (SSL, SASL_SSL)
        self.new_auth = new_auth  # each connection's auth state (a SaslSession on a SASL listener)
        self.listener_name = listener_name
        self.principal_mapper = principal_mapper or PrincipalMapper.parse("DEFAULT")
        self.quotas = ConnectionQuotas(max_connections, max_connections_per_ip=max_connections_per_ip,
                                       broker_connections=broker_connections, protected=protected)
        self.queued_max_request_bytes = queued_max_request_bytes  # None: no server-wide budget
        # Request bytes started (or reserved while arriving) and not yet answered, every connection.
        self.requests: ByteBudget[KafkaConnection] = ByteBudget(queued_max_request_bytes)
        # Answer bytes in transport buffers, every connection (clients not reading); Fetches wait on it.
        self.answers: ByteBudget[KafkaConnection] = ByteBudget(queued_max_request_bytes)
        self.bad_input = BadInputLog(log)
        self._idle_timeout = self.limits.idle_timeout_s
        self._connections: set[KafkaConnection] = set()
        self._ids = itertools.count(1)
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.Task | None = None
        self._on_connections_changed = on_connections_changed
        self.on_protocol_error: Callable[[], None] | None = None
        self.sendfile_slices = 0  # record sets written from segment files with sendfile (response_writer.py)
        self.sendfile_bytes = 0
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

    # -- the queued-request budget (queued.max.request.bytes): each connection's core takes and gives back ---

    @property
    def queued_bytes(self) -> int:
        return self.requests.used

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
                conn.close_if_idle(now)
