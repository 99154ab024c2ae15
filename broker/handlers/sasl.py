"""SaslHandshake (17, v1) and SaslAuthenticate (36, v0-2): a SASL listener's login (KIP-43, KIP-152).

The exchange itself is `security.sasl.SaslSession`, one per connection
(`call.client.auth.sasl`). A refused login answers SASL_AUTHENTICATION_FAILED
with the reason, and the connection closes after that answer; a request out
of order answers ILLEGAL_SASL_STATE.

Re-authentication (KIP-368): with the listener's connections.max.reauth.ms
set, a login answers session_lifetime_ms; the client logs in again on the same
connection before it ends (a SaslHandshake after the login starts it), and
the connection closes on its next other request once it has (connection.py).
"""

from __future__ import annotations

import time
from typing import Any

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.security.sasl import AuthenticationFailed, IllegalSaslState, Stage


async def handle_sasl_handshake(ctx: BrokerContext, call: Call) -> Any:
    session = call.client.auth.sasl
    offered = tuple(session.enabled) if session is not None else ()
    if session is None:
        return call.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=offered)
    relogin = session.authenticated
    try:
        refused = session.handshake(call.body.mechanism)
    except IllegalSaslState:
        if relogin:
            ctx.metrics.sasl_reauthentications.labels(result="failed").inc()
        call.client.auth.close_after = call.header.correlation_id
        return call.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=offered)
    error = ErrorCode.unsupported_sasl_mechanism if refused else ErrorCode.none
    return call.respond(error_code=error, mechanisms=offered)


async def handle_sasl_authenticate(ctx: BrokerContext, call: Call) -> Any:
    auth = call.client.auth
    lifetime = {"session_lifetime": millis(0)} if call.version >= 1 else {}
    if auth.sasl is None:
        return call.respond(error_code=ErrorCode.illegal_sasl_state, error_message="this listener has no SASL",
                            auth_bytes=b"", **lifetime)
    relogin = auth.sasl.reauthenticating
    try:
        reply = auth.sasl.step(bytes(call.body.auth_bytes))
    except (AuthenticationFailed, IllegalSaslState) as exc:
        auth.close_after = call.header.correlation_id
        error = ErrorCode.sasl_authentication_failed if isinstance(exc, AuthenticationFailed) \
            else ErrorCode.illegal_sasl_state
        if relogin:
            ctx.metrics.sasl_reauthentications.labels(result="failed").inc()
        return call.respond(error_code=error, error_message=str(exc), auth_bytes=b"", **lifetime)
    if auth.sasl.stage is Stage.DONE:  # the last step of a login or a re-login
        auth.principal = auth.sasl.principal or auth.principal
        ms = auth.session_started(time.monotonic())
        lifetime = {"session_lifetime": millis(ms)} if call.version >= 1 else {}
        if relogin:
            ctx.metrics.sasl_reauthentications.labels(result="succeeded").inc()
    return call.respond(error_code=ErrorCode.none, error_message=None, auth_bytes=reply, **lifetime)
