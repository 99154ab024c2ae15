"""One connection's SASL exchange (KIP-152): SaslHandshake picks a mechanism, SaslAuthenticate steps it.

    session = SaslSession(users, enabled=("SCRAM-SHA-512", "PLAIN"))
    session.handshake("SCRAM-SHA-512")          -> None, or why it is refused
    reply = session.step(client_first)          -> server-first
    reply = session.step(client_final)          -> server-final; session.principal == "User:alice"

A failed step raises AuthenticationFailed; the connection answers
SASL_AUTHENTICATION_FAILED and closes. Until `authenticated`, the connection
serves only ApiVersions, SaslHandshake and SaslAuthenticate.

Re-authentication (KIP-368, `reauthentication=True`: the listener's logins
expire): once authenticated, a new SaslHandshake starts the exchange again on
the same connection, which stays authenticated meanwhile. It must use the same
mechanism and prove the same principal; anything else fails the session (and
closes the connection), as Kafka's SaslServerAuthenticator does. Without
expiry a second handshake is out of order, as in Kafka.
"""

from __future__ import annotations

from enum import Enum

import scramp

from tinystream.scram_users import SCRAM_MECHANISMS, UserStore

PLAIN = "PLAIN"
SUPPORTED = (*SCRAM_MECHANISMS, PLAIN)


class AuthenticationFailed(Exception):
    """The client's credentials were refused (SASL_AUTHENTICATION_FAILED)."""


class IllegalSaslState(Exception):
    """A request out of order (ILLEGAL_SASL_STATE): SaslAuthenticate before a handshake, a handshake
    mid-exchange, or after the login when logins do not expire."""


class Stage(Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "authenticating"
    DONE = "authenticated"
    FAILED = "failed"


class SaslSession:
    def __init__(self, users: UserStore, *, enabled: tuple[str, ...], reauthentication: bool = False) -> None:
        self.users = users
        self.enabled = enabled
        self.reauthentication = reauthentication
        self.stage = Stage.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: scramp.core.ScramServer | None = None
        self._user: str | None = None
        self.reauthentications = 0  # completed re-authentications (KIP-368)

    @property
    def authenticated(self) -> bool:
        """A principal was proven and nothing has failed since (true while a re-authentication runs)."""
        return self.principal is not None and self.stage is not Stage.FAILED

    @property
    def reauthenticating(self) -> bool:
        return self.principal is not None and self.stage is Stage.AUTHENTICATE

    def handshake(self, mechanism: str) -> str | None:
        """None when `mechanism` is enabled (the exchange may start), else why not.

        After a login this starts a re-authentication, with the mechanism used the first time."""
        if self.stage is Stage.DONE and self.reauthentication:  # KIP-368: log in again on this connection
            if mechanism != self.mechanism:
                self.stage = Stage.FAILED
                raise IllegalSaslState(f"re-authentication must use {self.mechanism}, the mechanism of the login")
            self._scram, self._user = None, None
            self.stage = Stage.AUTHENTICATE
            return None
        if self.stage is not Stage.HANDSHAKE:
            raise IllegalSaslState(f"SaslHandshake while {self.stage.value}")
        if mechanism not in self.enabled:
            return f"mechanism {mechanism!r} is not enabled; enabled: {', '.join(self.enabled)}"
        self.mechanism = mechanism
        self.stage = Stage.AUTHENTICATE
        return None

    def step(self, token: bytes) -> bytes:
        """Feed the client's next token; the server's answer (empty for PLAIN)."""
        if self.stage is not Stage.AUTHENTICATE:
            raise IllegalSaslState(f"SaslAuthenticate while {self.stage.value}")
        try:
            return self._plain(token) if self.mechanism == PLAIN else self._scram_step(token)
        except AuthenticationFailed:
            self.stage = Stage.FAILED
            raise

    def _plain(self, token: bytes) -> bytes:
        # RFC 4616: [authzid] NUL authcid NUL passwd
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("a PLAIN token is authzid NUL user NUL password")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise AuthenticationFailed("PLAIN: authorizing as another user is not allowed")
        if not self.users.check_plain(user, password):
            raise AuthenticationFailed(f"Authentication failed: Invalid username or password for {user!r}")
        self._done(user)
        return b""

    def _scram_step(self, token: bytes) -> bytes:
        assert self.mechanism is not None
        text = token.decode("utf-8", "replace")
        try:
            if self._scram is None:
                mechanism = scramp.ScramMechanism(self.mechanism)
                self._scram = mechanism.make_server(self._auth_info)
                self._scram.set_client_first(text)
                return self._scram.get_server_first().encode()
            self._scram.set_client_final(text)
            final = self._scram.get_server_final().encode()
        except (scramp.ScramException, KeyError, ValueError) as exc:
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism} ({exc})") from None
        assert self._user is not None  # set when scramp asked for the user's credentials
        self._done(self._user)
        return final

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        assert self.mechanism is not None
        self._user = user
        cred = self.users.credential(user, self.mechanism)
        if cred is None:
            raise KeyError(f"no {self.mechanism} credentials for {user!r}")
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def _done(self, user: str) -> None:
        principal = f"User:{user}"
        if self.principal is not None:
            if principal != self.principal:
                raise AuthenticationFailed(f"cannot change principals during re-authentication from "
                                           f"{self.principal}: {principal}")
            self.reauthentications += 1
        self.principal = principal
        self.stage = Stage.DONE
