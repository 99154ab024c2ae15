"""One Kafka connection's decisions with no I/O (in the manner of h11); connection.py is its asyncio adapter.

The adapter (`KafkaConnection`) owns the socket, the request tasks and the
order of the answers. It tells this core what happened (bytes received, a
request started or answered, writes paused, the time) and carries out what the
core decides; the core never touches a socket, a task or the clock:

- `receive_data(data)` buffers bytes; `next_action(now)` returns the next
  thing to do: `Start(frame)` (decode and dispatch one whole request, on a
  worker thread when `off_loop`), `Close(...)` (a bad size prefix), or None
  (wait: more bytes are needed, or a limit holds the connection);
- `reading()` says when reading must pause or may resume (`PauseReading`,
  `ResumeReading`): while `max_in_flight` requests are unanswered, while the
  client does not read its answers (`writing_paused`), while a quota throttles
  it (`muted`, Kafka's channel mute after a throttled answer), while a Fetch waits for
  the previous one or for the server's unread answers, or while the server's
  request budget (queued.max.request.bytes) is spent;
- `admit(api_key, api_version, now)` refuses what this broker does not serve,
  anything but the login before authentication, and anything but a re-login
  once the login's session has ended (KIP-368, connections.max.reauth.ms);
- `refuse_login()` and `refused_delay_over()` close a connection whose login
  failed after connection.failed.authentication.delay.ms, its answer written;
- `check_idle(now)` closes a connection idle past connections.max.idle.ms.

States, one table (`TRANSITIONS`); an event a state does not list raises
`IllegalTransition`, naming both:

    NEW ---handshake---> AWAITING_HANDSHAKE ---ready---> AUTHENTICATING <--logged_in / login_lost--> AUTHENTICATED
    NEW ---ready---> AUTHENTICATING         (a listener without SASL: logged in at once)
    AUTHENTICATING | AUTHENTICATED ---login_refused---> REFUSED    (no frame is started any more)
    every state ---close---> CLOSED

AUTHENTICATING and AUTHENTICATED follow the connection's login
(`ConnectionAuth.authenticated`, which the SASL handler changes): a re-login
stays AUTHENTICATED, a failed one drops back.

Invariants:

- Before login a frame may be at most sasl.server.max.receive.size (Kafka's
  512 KiB), after it socket.request.max.bytes; both are checked at the size
  prefix (`FrameDecoder`), so an unauthenticated peer holds little.
- Request budget (Kafka's MemoryPool, non-strict: `ByteBudget`): a frame still
  arriving reserves its declared size once its prefix is in and the budget is
  not spent, and a connection holding a reservation is read until its frame is
  whole; the reservation becomes the started request's `Ticket`, whose bytes go
  back when it is answered (less once decoded: padding after the body is let
  go). A Fetch held back keeps its frame's bytes. `release()` gives back
  everything still held, once.
- A connection is idle from its last started frame or written answer with
  nothing unanswered: a byte now and then does not keep a half-sent frame open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.errors import ProtocolError, UnsupportedRequest
from tinystream.broker.protocol.framing import FrameDecoder
from tinystream.broker.security.peer import ConnectionAuth
from tinystream.broker.server.budget import ByteBudget, Waiter

#: Requests this large are decoded on a worker thread (a 100 MiB frame of tiny
#: array items takes seconds to decode; the event loop must keep serving).
OFF_LOOP_DECODE_BYTES = 1 << 20


class State(Enum):
    NEW = "new"
    AWAITING_HANDSHAKE = "awaiting the TLS handshake"
    AUTHENTICATING = "authenticating"
    AUTHENTICATED = "authenticated"
    REFUSED = "closing after a refused login"
    CLOSED = "closed"


class Event(Enum):
    HANDSHAKE = "handshake"  # a TLS listener: the handshake starts once admitted
    READY = "ready"  # reading may start (no TLS, or the handshake is done)
    LOGGED_IN = "logged_in"
    LOGIN_LOST = "login_lost"  # a re-login failed: the connection is no longer authenticated
    LOGIN_REFUSED = "login_refused"  # the refused login's answer is written
    CLOSE = "close"


TRANSITIONS: dict[State, dict[Event, State]] = {
    State.NEW: {Event.HANDSHAKE: State.AWAITING_HANDSHAKE, Event.READY: State.AUTHENTICATING,
                Event.CLOSE: State.CLOSED},
    State.AWAITING_HANDSHAKE: {Event.READY: State.AUTHENTICATING, Event.CLOSE: State.CLOSED},
    State.AUTHENTICATING: {Event.LOGGED_IN: State.AUTHENTICATED, Event.LOGIN_REFUSED: State.REFUSED,
                           Event.CLOSE: State.CLOSED},
    State.AUTHENTICATED: {Event.LOGIN_LOST: State.AUTHENTICATING, Event.LOGIN_REFUSED: State.REFUSED,
                          Event.CLOSE: State.CLOSED},
    State.REFUSED: {Event.CLOSE: State.CLOSED},
    State.CLOSED: {Event.CLOSE: State.CLOSED},
}
_BEFORE_READY = (State.NEW, State.AWAITING_HANDSHAKE)  # no frame starts: no writer yet, no certificate principal


class IllegalTransition(Exception):
    def __init__(self, state: State, event: Event) -> None:
        super().__init__(f"connection: event {event.value!r} in state {state.name}")
        self.state = state
        self.event = event


class CloseCause(Enum):
    BAD_INPUT = "bad input"  # logged (rate-limited) and counted as a protocol error; the socket is aborted
    SESSION_EXPIRED = "session expired"  # KIP-368: a request after the session ended without a re-login
    IDLE = "idle"  # connections.max.idle.ms
    LOGIN_REFUSED = "login refused"  # connection.failed.authentication.delay.ms after the refusal's answer


@dataclass(frozen=True, slots=True)
class Start:
    """Decode and dispatch one whole request (without its size prefix)."""

    frame: memoryview
    off_loop: bool  # from OFF_LOOP_DECODE_BYTES: decode on a worker thread


@dataclass(frozen=True, slots=True)
class Close:
    cause: CloseCause
    reason: str
    abort: bool  # reset the socket instead of a graceful close


@dataclass(frozen=True, slots=True)
class PauseReading:
    pass


@dataclass(frozen=True, slots=True)
class ResumeReading:
    pass


@dataclass(frozen=True, slots=True)
class CloseLater:
    """Close after `delay_s` (a refused login: `refused_delay_over()` then says how)."""

    delay_s: float


Action = Start | Close | PauseReading | ResumeReading | CloseLater
PAUSE_READING = PauseReading()
RESUME_READING = ResumeReading()


@dataclass(frozen=True, slots=True)
class Limits:
    """A listener's settings for each of its connections."""

    max_request_bytes: int  # socket.request.max.bytes
    max_receive_before_login: int = 524_288  # sasl.server.max.receive.size (Kafka's default, 512 KiB)
    max_in_flight: int = 100  # unanswered requests before reading pauses
    idle_timeout_s: float = 600.0  # connections.max.idle.ms (Kafka's default, 10 minutes)
    failed_authentication_delay_s: float = 0.1  # connection.failed.authentication.delay.ms (Kafka's, 100 ms)


class Ticket:
    """A started request: its API and the request-budget bytes it holds until answered."""

    __slots__ = ("api_key", "size")

    def __init__(self, api_key: int, size: int) -> None:
        self.api_key = api_key
        self.size = size


def api_key_of(frame: memoryview | bytes) -> int:
    return int.from_bytes(frame[:2], "big", signed=True)


class ConnectionCore:
    """One connection's framing, limits, budget bytes, login and idle decisions; see the module docstring.

    `requests` is the server's request budget, shared by its connections; `waiter` is told
    (`budget_freed`) when a spent budget drops below its bound. `answers_over_budget()` says whether a
    Fetch must wait for the server's unread answers; `serves(api_key)` whether the broker serves an API.
    """

    def __init__(self, *, auth: ConnectionAuth, limits: Limits, requests: ByteBudget[Any], waiter: Waiter,
                 answers_over_budget: Callable[[], bool], serves: Callable[[int], bool], now: float) -> None:
        self.auth = auth
        self.limits = limits
        self._requests = requests
        self._waiter = waiter
        self._answers_over_budget = answers_over_budget
        self._serves = serves
        self._decoder = FrameDecoder(limits.max_request_bytes)
        self._state = State.NEW
        self.login_refused = False  # stays true once closed: nothing more is started or written
        self._reserved = 0  # budget bytes reserved for the frame being received (its declared size)
        self._held: memoryview | None = None  # a received Fetch waiting for the previous one to be written
        self._held_size = 0  # budget bytes of the held Fetch frame
        self._tickets: set[Ticket] = set()  # started, not yet answered
        self._fetches = 0  # of which Fetches
        self.reading_paused = False
        self.writing_paused = False  # the client is not reading its answers (the transport's buffer is full)
        self.muted = False  # a client quota throttles it: nothing is read until the adapter unmutes (KIP-219)
        self.last_active = now

    # -- state --------------------------------------------------------------------------

    @property
    def state(self) -> State:
        self._follow_login()
        return self._state

    @property
    def closed(self) -> bool:
        return self._state is State.CLOSED

    def _apply(self, event: Event) -> None:
        target = TRANSITIONS[self._state].get(event)
        if target is None:
            raise IllegalTransition(self._state, event)
        self._state = target

    def _logged_in(self) -> bool:
        """Whether the connection is logged in now (the SASL handler changes it); the state follows."""
        self._follow_login()
        return self.auth.authenticated

    def _follow_login(self) -> None:
        if self._state is State.AUTHENTICATING and self.auth.authenticated:
            self._apply(Event.LOGGED_IN)
        elif self._state is State.AUTHENTICATED and not self.auth.authenticated:
            self._apply(Event.LOGIN_LOST)

    def handshake(self) -> None:
        """Admitted on a TLS listener: nothing is read until the handshake is done."""
        self._apply(Event.HANDSHAKE)

    def ready(self, now: float) -> None:
        """Reading starts (no TLS, or the handshake is done)."""
        self._apply(Event.READY)
        self._follow_login()
        self.last_active = now

    def close(self) -> None:
        """The adapter closes (or aborts) the socket; idempotent."""
        self._apply(Event.CLOSE)

    # -- bytes in, frames out -------------------------------------------------------------

    @property
    def buffered(self) -> int:
        """Bytes received and not yet started as requests."""
        return self._decoder.buffered

    def receive_data(self, data: bytes) -> Close | None:
        try:
            self._decoder.receive_data(data)
        except ProtocolError as exc:
            return Close(CloseCause.BAD_INPUT, str(exc), abort=True)
        return None

    def next_action(self, now: float) -> Start | Close | None:
        """The next request to start, a bad size prefix, or None: wait (more bytes, a limit, or the TLS
        handshake: bytes that came in its last flight wait in the decoder until `ready`)."""
        try:
            if self._state not in _BEFORE_READY and not self.closed and not self.must_wait():
                frame = self._held if self._held is not None else self._next_frame()
                if frame is not None:
                    self._held = None
                    self._give_back(self._held_size)
                    self._held_size = 0
                    if api_key_of(frame) != api_versions.FETCH or not self._fetch_must_wait():
                        self.last_active = now
                        return Start(frame, off_loop=len(frame) >= OFF_LOOP_DECODE_BYTES)
                    # One Fetch at a time per connection, as Kafka serves them, and none while the
                    # server's unread answers are over budget.
                    self._held = frame
                    self._held_size = len(frame)
                    self._requests.take(self._held_size)
            if not self.closed:
                self._reserve_arriving()
        except ProtocolError as exc:
            return Close(CloseCause.BAD_INPUT, str(exc), abort=True)
        return None

    def _next_frame(self) -> memoryview | None:
        """The next whole frame (its reservation handed back: the request now counts its own bytes)."""
        self._apply_frame_limit()
        frame = self._decoder.next_frame()
        if frame is not None and self._reserved:
            reserved, self._reserved = self._reserved, 0
            self._give_back(reserved)
        return frame

    def _apply_frame_limit(self) -> None:
        """socket.request.max.bytes once logged in; sasl.server.max.receive.size before (Kafka's rule)."""
        if self._logged_in():
            self._decoder.limit = self.limits.max_request_bytes
            self._decoder.limit_name = "socket.request.max.bytes"
        else:
            self._decoder.limit = min(self.limits.max_request_bytes, self.limits.max_receive_before_login)
            self._decoder.limit_name = "sasl.server.max.receive.size"

    def _reserve_arriving(self) -> None:
        """Reserve the declared size of a frame still arriving, when the budget allows (else reading waits)."""
        if self._reserved or not self._decoder.in_frame:
            return
        self._apply_frame_limit()
        size = self._decoder.frame_size()
        if size > 0 and not self._requests.must_wait(self._waiter):
            self._reserved = size
            self._requests.take(size)

    # -- back-pressure ---------------------------------------------------------------------

    def must_wait(self) -> bool:
        """Whether reading and starting requests pause (registers with the budget to be told when not)."""
        if (self.login_refused or self.writing_paused or self.muted or len(self._tickets) >= self.limits.max_in_flight
                or (self._held is not None and self._fetch_must_wait())):
            return True
        # A reserved frame is already counted: it may finish arriving and start, whatever the budget.
        return not self._reserved and self._requests.must_wait(self._waiter)

    def _fetch_must_wait(self) -> bool:
        """A Fetch on this connection is unanswered or its answer unwritten, or the server's unread answers
        are over budget. Fetch answers are the large ones (up to fetch.max.bytes each): a client that
        pipelines many and never reads would otherwise make the broker hold all of them in memory."""
        return self._fetches > 0 or self._answers_over_budget()

    def reading(self) -> PauseReading | ResumeReading | None:
        """Pause or resume reading, when that changes."""
        if self.closed:
            return None
        should_pause = self.must_wait()
        if should_pause and not self.reading_paused:
            self.reading_paused = True
            return PAUSE_READING
        if not should_pause and self.reading_paused:
            self.reading_paused = False
            return RESUME_READING
        return None

    # -- requests ----------------------------------------------------------------------------

    def refuse_before_login(self, api_key: int, api_version: int) -> Close | None:
        """Anything but the login before authentication is refused (a large frame: before it is decoded)."""
        if not self._logged_in() and api_key not in api_versions.BEFORE_AUTHENTICATION:
            return Close(CloseCause.BAD_INPUT,
                         str(UnsupportedRequest(api_key, api_version, "sent before SASL authentication")), abort=True)
        return None

    def admit(self, api_key: int, api_version: int, now: float) -> Close | None:
        """Refuse what this broker does not serve, anything but the login before authentication, and
        anything but a re-login once the login's session has ended at `now` (KIP-368)."""
        auth = self.auth
        if api_key not in api_versions.SASL_APIS and auth.session_expired(now):
            return Close(CloseCause.SESSION_EXPIRED,
                         f"{api_versions.api_name(api_key)} after the SASL session of {auth.principal} ended "
                         f"(connections.max.reauth.ms={auth.max_reauth_ms}) without a re-authentication", abort=True)
        if not self._serves(api_key):
            return Close(CloseCause.BAD_INPUT,
                         str(UnsupportedRequest(api_key, api_version, "not served by this broker")), abort=True)
        return self.refuse_before_login(api_key, api_version)

    def request_started(self, api_key: int, size: int) -> Ticket:
        """A request takes its place in the answer order, holding `size` budget bytes until answered."""
        self._requests.take(size)
        ticket = Ticket(api_key, size)
        self._tickets.add(ticket)
        if api_key == api_versions.FETCH:
            self._fetches += 1
        return ticket

    def hold(self, ticket: Ticket, size: int) -> None:
        """The request holds `size` bytes from now on (less once decoded: bytes after the body were let go)."""
        if size < ticket.size:
            self._give_back(ticket.size - size)
            ticket.size = size

    def request_done(self, ticket: Ticket) -> None:
        """Answered, failed or cancelled: its bytes go back."""
        self._give_back(ticket.size)
        ticket.size = 0
        if ticket in self._tickets:
            self._tickets.remove(ticket)
            if ticket.api_key == api_versions.FETCH:
                self._fetches -= 1

    def answer_written(self, now: float) -> None:
        self.last_active = now

    def release(self) -> None:
        """The socket is gone: every byte still held goes back to the budget."""
        self._give_back(self._reserved + self._held_size)
        self._reserved = self._held_size = 0
        for ticket in self._tickets:
            self._give_back(ticket.size)
            ticket.size = 0  # a decode still running must not hand them back twice (hold)
        self._tickets.clear()
        self._fetches = 0

    def _give_back(self, size: int) -> None:
        if size:
            self._requests.give_back(size)

    # -- a refused login (connection.failed.authentication.delay.ms) ------------------------

    def refuses_login(self, correlation_id: object) -> bool:
        """Whether the answer to `correlation_id` refused the login: nothing more after it."""
        refused = self.auth.close_after
        return refused is not None and correlation_id == refused

    def refuse_login(self) -> list[Action]:
        """Read nothing more, close a little later. Closing at once races the client: a socket closed with
        the client's next bytes unread is reset, and a client can lose the refusal before reading it."""
        if self.closed:  # closed meanwhile (a bad frame read while the refusal was being written): nothing to do
            return []
        self._follow_login()
        self._apply(Event.LOGIN_REFUSED)
        self.login_refused = True
        actions: list[Action] = []
        if not self.reading_paused:
            self.reading_paused = True
            actions.append(PAUSE_READING)
        actions.append(CloseLater(self.limits.failed_authentication_delay_s))
        return actions

    def refused_delay_over(self) -> list[Action]:
        """Reading resumes for the close: a TLS close waits for the peer's close_notify (what arrives is
        dropped: nothing is started), and a paused transport would hold the connection open."""
        actions: list[Action] = []
        if self.reading_paused and not self.closed:
            self.reading_paused = False
            actions.append(RESUME_READING)
        actions.append(Close(CloseCause.LOGIN_REFUSED, "login refused", abort=False))
        return actions

    # -- idle (connections.max.idle.ms) ----------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing unanswered. (A half-sent frame does not count: a peer that stops mid-frame is as idle
        as one that sends nothing, and is closed the same way.)"""
        return not self._tickets

    def check_idle(self, now: float) -> Close | None:
        if self.idle and now - self.last_active > self.limits.idle_timeout_s:
            return Close(CloseCause.IDLE, "idle", abort=False)
        return None
