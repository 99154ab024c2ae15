"""Who is on the other end of a connection: its login (SASL, KIP-368 expiry) and the client it is.

The server makes one per connection and every request handler reads it (the
principal for ACLs, the host for groups' client_host), so it lives below both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tinystream.broker.security.sasl import SaslSession


@dataclass(slots=True)
class ConnectionAuth:
    """Who is on a connection: its SASL exchange (on a SASL listener) and the principal it proved."""

    sasl: SaslSession | None = None  # None: the listener asks for no SASL
    principal: str = "User:ANONYMOUS"  # or User:<sasl user>, or User:CN=<client certificate>
    # A failed authentication: that request's answer (this correlation id) is written, then the connection closes,
    # as Kafka does; answers of requests sent before it (in flight during a re-login) go out first.
    close_after: int | None = None
    # KIP-368: connections.max.reauth.ms of the listener (0: a login lasts as long as the connection), and
    # when (time.monotonic()) this connection's SASL session ends unless the client logs in again.
    max_reauth_ms: int = 0
    session_expires_at: float | None = None

    @property
    def authenticated(self) -> bool:
        return self.sasl is None or self.sasl.authenticated

    def session_started(self, now: float) -> int:
        """A login (or re-login) succeeded at `now`: its session lifetime in ms (0: no expiry)."""
        if self.max_reauth_ms <= 0:
            return 0
        self.session_expires_at = now + self.max_reauth_ms / 1000
        return self.max_reauth_ms

    def session_expired(self, now: float) -> bool:
        return self.session_expires_at is not None and now >= self.session_expires_at


@dataclass(slots=True)
class ChannelThrottle:
    """A quota's throttle, handed from a handler to its connection: mute reading this long once answered.

    Kafka mutes the channel for the throttle time after sending a throttled response (KIP-219); the
    handler says how long (`throttle`), the connection takes it when it writes the answer (`take`)."""

    pending_ms: int = 0

    def throttle(self, ms: int) -> None:
        self.pending_ms = max(self.pending_ms, ms)

    def take(self) -> int:
        ms, self.pending_ms = self.pending_ms, 0
        return ms


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Who sent a request (for groups' client_host, for logs, and for what it may do)."""

    connection_id: int
    host: str
    port: int
    auth: ConnectionAuth = field(default_factory=ConnectionAuth)
    listener: str | None = None  # the listener it came in on (None: a test's context, no listener)
    throttle: ChannelThrottle = field(default_factory=ChannelThrottle)  # quota throttles, for the connection
    # A Fetch may leave its record sets in the segment files: the connection's writer sends them (sendfile on
    # plaintext, read a piece at a time on TLS). False: a context with no such writer (a test's).
    file_ranges: bool = False
