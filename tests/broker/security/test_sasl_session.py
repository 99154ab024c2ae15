"""The SASL state machine without a socket: SCRAM and PLAIN, refusals, order."""

from __future__ import annotations

import pytest
import scramp

from tinystream.broker.security.sasl import AuthenticationFailed, IllegalSaslState, SaslSession
from tinystream.scram_users import UserStore

USERS = UserStore()
USERS.set_password("alice", "pw")


def scram_login(session: SaslSession, mechanism: str, user: str, password: str) -> None:
    client = scramp.ScramClient([mechanism], user, password)
    client.set_server_first(session.step(client.get_client_first().encode()).decode())
    client.set_server_final(session.step(client.get_client_final().encode()).decode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_logs_in_with_the_right_password_only(mechanism):
    good = SaslSession(USERS, enabled=(mechanism,))
    assert good.handshake(mechanism) is None
    scram_login(good, mechanism, "alice", "pw")
    assert good.authenticated and good.principal == "User:alice"
    bad = SaslSession(USERS, enabled=(mechanism,))
    bad.handshake(mechanism)
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        scram_login(bad, mechanism, "alice", "nope")
    assert not bad.authenticated
    with pytest.raises(IllegalSaslState):
        bad.step(b"again")  # a failed session takes nothing more


def test_plain_checks_the_salted_credentials_and_refuses_another_authzid():
    session = SaslSession(USERS, enabled=("PLAIN",))
    session.handshake("PLAIN")
    assert session.step(b"\x00alice\x00pw") == b"" and session.principal == "User:alice"
    for token in (b"\x00alice\x00bad", b"bob\x00alice\x00pw", b"alice-pw"):
        other = SaslSession(USERS, enabled=("PLAIN",))
        other.handshake("PLAIN")
        with pytest.raises(AuthenticationFailed):
            other.step(token)


def test_handshake_refuses_a_disabled_mechanism_and_order_is_enforced():
    session = SaslSession(USERS, enabled=("SCRAM-SHA-512",))
    with pytest.raises(IllegalSaslState):
        session.step(b"n,,n=alice,r=x")  # before a handshake
    assert "not enabled" in session.handshake("PLAIN")
    assert session.handshake("SCRAM-SHA-512") is None
    with pytest.raises(IllegalSaslState):
        session.handshake("SCRAM-SHA-512")  # only one handshake


def test_reauthentication_keeps_the_session_and_must_prove_the_same_principal():
    """KIP-368: a handshake after the login starts it again; the connection stays authenticated meanwhile."""
    USERS.set_password("bob", "pw2")
    session = SaslSession(USERS, enabled=("SCRAM-SHA-512", "PLAIN"), reauthentication=True)
    session.handshake("SCRAM-SHA-512")
    scram_login(session, "SCRAM-SHA-512", "alice", "pw")
    assert session.authenticated and not session.reauthenticating
    assert session.handshake("SCRAM-SHA-512") is None
    assert session.authenticated and session.reauthenticating  # other requests keep being served
    scram_login(session, "SCRAM-SHA-512", "alice", "pw")
    assert session.reauthentications == 1 and session.principal == "User:alice" and not session.reauthenticating

    session.handshake("SCRAM-SHA-512")
    with pytest.raises(AuthenticationFailed, match="cannot change principals"):
        scram_login(session, "SCRAM-SHA-512", "bob", "pw2")
    assert not session.authenticated and session.principal == "User:alice"
    with pytest.raises(IllegalSaslState):
        session.handshake("SCRAM-SHA-512")  # a failed session is over


def test_reauthentication_with_another_mechanism_fails_the_session():
    session = SaslSession(USERS, enabled=("SCRAM-SHA-512", "PLAIN"), reauthentication=True)
    session.handshake("PLAIN")
    session.step(b"\x00alice\x00pw")
    with pytest.raises(IllegalSaslState, match="must use PLAIN"):
        session.handshake("SCRAM-SHA-512")
    assert not session.authenticated


def test_without_expiring_logins_a_second_handshake_is_out_of_order():
    """connections.max.reauth.ms=0 (the default): as in Kafka, nothing to re-authenticate."""
    session = SaslSession(USERS, enabled=("PLAIN",))
    session.handshake("PLAIN")
    session.step(b"\x00alice\x00pw")
    with pytest.raises(IllegalSaslState):
        session.handshake("PLAIN")


def test_a_wrong_password_at_reauthentication_fails_the_session():
    session = SaslSession(USERS, enabled=("PLAIN",), reauthentication=True)
    session.handshake("PLAIN")
    session.step(b"\x00alice\x00pw")
    session.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed):
        session.step(b"\x00alice\x00stolen-session-but-not-the-password")
    assert not session.authenticated and session.reauthentications == 0
