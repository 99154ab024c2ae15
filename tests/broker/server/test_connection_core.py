"""The connection core without a socket: bytes and a clock in, decisions out (broker/server/connection_core.py)."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from tinystream.broker.protocol import api_versions
from tinystream.broker.security.peer import ConnectionAuth
from tinystream.broker.server.budget import ByteBudget
from tinystream.broker.server.connection_core import (
    OFF_LOOP_DECODE_BYTES,
    Close,
    CloseCause,
    CloseLater,
    ConnectionCore,
    IllegalTransition,
    Limits,
    PauseReading,
    ResumeReading,
    Start,
    State,
)

METADATA = 3


class Waiter:
    def __init__(self) -> None:
        self.told = 0

    def budget_freed(self) -> None:
        self.told += 1


def request(api_key: int = METADATA, correlation_id: int = 1, padding: int = 0) -> bytes:
    """A framed request: size prefix, header v1 (no client id), `padding` bytes of body."""
    body = struct.pack(">hhih", api_key, 1, correlation_id, -1) + bytes(padding)
    return struct.pack(">i", len(body)) + body


def logged_out() -> ConnectionAuth:
    """A SASL listener's connection before its login (the SASL exchange stands in)."""
    return ConnectionAuth(sasl=SimpleNamespace(authenticated=False))  # type: ignore[arg-type]


def core(*, auth: ConnectionAuth | None = None, budget: ByteBudget | None = None, waiter: Waiter | None = None,
         answers_over: bool = False, now: float = 0.0, **limits: float) -> ConnectionCore:
    c = ConnectionCore(auth=auth or ConnectionAuth(), limits=Limits(**{"max_request_bytes": 100 << 20, **limits}),
                       requests=budget if budget is not None else ByteBudget(None), waiter=waiter or Waiter(),
                       answers_over_budget=lambda: answers_over, serves=lambda key: key != 999, now=now)
    c.ready(now)
    return c


def starts(c: ConnectionCore, now: float = 0.0) -> list[bytes]:
    """Every frame the core starts now (none of them counted as a request in flight)."""
    frames = []
    while (action := c.next_action(now)) is not None:
        assert isinstance(action, Start), action
        frames.append(bytes(action.frame))
    return frames


def test_a_frame_split_at_every_byte_starts_once_whole():
    c = core()
    data = request(correlation_id=7, padding=5)
    for i in range(len(data) - 1):
        assert c.receive_data(data[i:i + 1]) is None
        assert c.next_action(0.0) is None
    c.receive_data(data[-1:])
    assert starts(c) == [data[4:]]


def test_two_frames_in_one_read_start_in_order():
    c = core()
    c.receive_data(request(correlation_id=1) + request(correlation_id=2))
    assert [struct.unpack_from(">i", f, 4)[0] for f in starts(c)] == [1, 2]


def test_a_large_frame_is_decoded_off_the_loop():
    c = core()
    c.receive_data(request(padding=OFF_LOOP_DECODE_BYTES) + request())
    first, second = c.next_action(0.0), c.next_action(0.0)
    assert isinstance(first, Start) and first.off_loop
    assert isinstance(second, Start) and not second.off_loop


def test_an_oversized_frame_before_login_is_refused_at_its_size_prefix():
    c = core(auth=logged_out())
    assert c.state is State.AUTHENTICATING
    c.receive_data(struct.pack(">i", 600 * 1024) + b"\0\x03")  # the prefix and two bytes of the body
    refused = c.next_action(0.0)
    assert isinstance(refused, Close) and refused.cause is CloseCause.BAD_INPUT and refused.abort
    assert "sasl.server.max.receive.size=524288" in refused.reason


def test_the_same_frame_after_login_is_read():
    auth = logged_out()
    c = core(auth=auth)
    auth.sasl.authenticated = True  # the SASL handler's doing
    c.receive_data(request(padding=600 * 1024))
    assert len(starts(c)) == 1
    assert c.state is State.AUTHENTICATED


def test_admission_before_login_and_of_apis_not_served():
    c = core(auth=logged_out())
    assert c.admit(api_versions.API_VERSIONS, 3, 0.0) is None
    assert c.admit(api_versions.SASL_HANDSHAKE, 1, 0.0) is None
    refused = c.admit(METADATA, 12, 0.0)
    assert refused == Close(CloseCause.BAD_INPUT, "api_key=3 api_version=12: sent before SASL authentication", True)
    assert c.refuse_before_login(METADATA, 12) == refused
    assert core().admit(999, 0, 0.0) == Close(CloseCause.BAD_INPUT, "api_key=999 api_version=0: not served by this "
                                                                   "broker", True)


def test_a_session_expires_after_its_lifetime_but_a_relogin_is_admitted():
    auth = ConnectionAuth(max_reauth_ms=1000, principal="User:alice")
    c = core(auth=auth)
    assert auth.session_started(10.0) == 1000
    assert c.admit(METADATA, 12, 10.999) is None
    expired = c.admit(METADATA, 12, 11.0)
    assert isinstance(expired, Close) and expired.cause is CloseCause.SESSION_EXPIRED
    assert "User:alice" in expired.reason and "connections.max.reauth.ms=1000" in expired.reason
    assert c.admit(api_versions.SASL_HANDSHAKE, 1, 11.0) is None
    assert c.admit(api_versions.SASL_AUTHENTICATE, 2, 11.0) is None


def test_idle_from_the_last_started_frame_not_from_stray_bytes():
    c = core(idle_timeout_s=10.0, now=0.0)
    c.receive_data(request())
    [frame] = starts(c, now=5.0)
    ticket = c.request_started(METADATA, len(frame))
    assert c.check_idle(100.0) is None  # a request unanswered: not idle
    c.request_done(ticket)
    c.answer_written(6.0)
    c.receive_data(request()[:3])  # a byte now and then does not count
    assert c.check_idle(16.0) is None
    assert c.check_idle(16.5) == Close(CloseCause.IDLE, "idle", False)


def test_a_frame_arriving_reserves_its_size_and_the_reservation_is_released():
    budget, waiter = ByteBudget(100), Waiter()
    c = core(budget=budget, waiter=waiter)
    data = request(padding=1000)
    c.receive_data(data[:50])
    assert c.next_action(0.0) is None
    assert budget.used == len(data) - 4  # the declared size, reserved (non-strict: over the bound)
    c.receive_data(data[50:])
    [frame] = starts(c)
    assert budget.used == 0  # handed back: the request counts its own bytes
    ticket = c.request_started(METADATA, len(frame))
    c.hold(ticket, 20)  # decoded: the padding no longer counts
    assert budget.used == 20
    c.request_done(ticket)
    assert budget.used == 0


def test_a_connection_that_cannot_reserve_stops_reading_until_told():
    budget = ByteBudget(100)
    first, second_waiter = core(budget=budget), Waiter()
    second = core(budget=budget, waiter=second_waiter)
    first.receive_data(request(padding=1000)[:50])
    assert first.next_action(0.0) is None and budget.used > 100
    second.receive_data(request(padding=1000)[:50])
    assert second.next_action(0.0) is None
    assert second.reading() == PauseReading()
    first.release()  # the first connection went away mid-frame
    assert budget.used == 0 and second_waiter.told == 1
    assert second.reading() == ResumeReading()
    assert second.next_action(0.0) is None and budget.used == len(request(padding=1000)) - 4


def test_one_fetch_at_a_time_the_next_held_with_its_bytes():
    budget = ByteBudget(None)
    c = core(budget=budget)
    fetch = request(api_key=api_versions.FETCH, correlation_id=1), request(api_key=api_versions.FETCH, correlation_id=2)
    c.receive_data(fetch[0] + fetch[1])
    first = c.next_action(0.0)
    assert isinstance(first, Start)
    ticket = c.request_started(api_versions.FETCH, len(first.frame))
    assert starts(c) == [] and budget.used == 2 * len(first.frame)  # the second one held
    assert c.reading() == PauseReading()
    c.request_done(ticket)
    assert c.reading() == ResumeReading()
    assert starts(c) == [fetch[1][4:]] and budget.used == 0


def test_fetches_wait_while_the_servers_unread_answers_are_over_budget():
    c = core(answers_over=True)
    c.receive_data(request(api_key=api_versions.FETCH) + request())
    assert starts(c) == [] and c.must_wait()


def test_reading_pauses_at_max_in_flight():
    c = core(max_in_flight=2)
    tickets = [c.request_started(METADATA, 10), c.request_started(METADATA, 10)]
    assert c.reading() == PauseReading()
    assert c.reading() is None  # said once
    c.request_done(tickets[0])
    assert c.reading() == ResumeReading()


def test_writes_paused_pause_reading():
    c = core()
    c.writing_paused = True
    c.receive_data(request())
    assert starts(c) == [] and c.reading() == PauseReading()


def test_a_refused_login_starts_nothing_more_and_closes_after_the_delay():
    auth = logged_out()
    auth.close_after = 5
    c = core(auth=auth, failed_authentication_delay_s=0.25)
    assert not c.refuses_login(4) and c.refuses_login(5)
    assert c.refuse_login() == [PauseReading(), CloseLater(0.25)]
    assert c.state is State.REFUSED
    c.receive_data(request())
    assert starts(c) == []
    assert c.refused_delay_over() == [ResumeReading(), Close(CloseCause.LOGIN_REFUSED, "login refused", False)]
    c.close()
    assert c.state is State.CLOSED and c.login_refused


def test_the_state_table_refuses_events_out_of_order():
    c = ConnectionCore(auth=ConnectionAuth(), limits=Limits(max_request_bytes=1 << 20), requests=ByteBudget(None),
                       waiter=Waiter(), answers_over_budget=lambda: False, serves=lambda key: True, now=0.0)
    assert c.state is State.NEW
    c.handshake()
    assert c.state is State.AWAITING_HANDSHAKE
    with pytest.raises(IllegalTransition, match="event 'handshake' in state AWAITING_HANDSHAKE"):
        c.handshake()
    c.ready(1.0)
    assert c.state is State.AUTHENTICATED  # a listener without SASL
    c.close()
    c.close()  # idempotent
    assert c.closed and c.reading() is None and c.next_action(2.0) is None
    with pytest.raises(IllegalTransition):
        c.ready(2.0)


def test_a_muted_connection_starts_nothing_and_pauses_reading_until_unmuted():
    c = core()
    c.muted = True  # a client quota throttled it (Kafka mutes the channel for the throttle time)
    c.receive_data(request(correlation_id=1))
    assert c.next_action(0.0) is None
    assert c.reading() == PauseReading()
    c.muted = False
    assert c.reading() == ResumeReading()
    assert len(starts(c)) == 1


def test_no_frame_starts_before_the_tls_handshake_is_done():
    """Bytes that came with the handshake's last flight wait in the decoder: no writer, no principal yet."""
    c = ConnectionCore(auth=ConnectionAuth(), limits=Limits(max_request_bytes=1 << 20), requests=ByteBudget(None),
                       waiter=Waiter(), answers_over_budget=lambda: False, serves=lambda key: True, now=0.0)
    c.handshake()
    assert c.receive_data(request(correlation_id=5)) is None
    assert c.next_action(0.5) is None
    c.ready(1.0)
    action = c.next_action(1.0)
    assert isinstance(action, Start) and struct.unpack_from(">i", action.frame, 4)[0] == 5
