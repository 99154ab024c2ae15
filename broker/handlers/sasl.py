"""SaslHandshake (17, v1) and SaslAuthenticate (36, v0-2): a SASL listener's login (KIP-43, KIP-152).

The exchange itself is `security.sasl.SaslSession`, one per connection
(`call.client.auth.sasl`). A refused login answers SASL_AUTHENTICATION_FAILED
with the reason, and the connection closes after that answer; a request out
of order answers ILLEGAL_SASL_STATE. No re-authentication (KIP-368):
session_lifetime_ms is 0.
"""

from __future__ import annotations

from typing import Any

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.security.sasl import AuthenticationFailed, IllegalSaslState


async def handle_sasl_handshake(ctx: BrokerContext, call: Call) -> Any:
    session = call.client.auth.sasl
    offered = tuple(session.enabled) if session is not None else ()
    if session is None:
        return call.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=offered)
    try:
        refused = session.handshake(call.body.mechanism)
    except IllegalSaslState:
        call.client.auth.close_after_reply = True
        return call.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=offered)
    error = ErrorCode.unsupported_sasl_mechanism if refused else ErrorCode.none
    return call.respond(error_code=error, mechanisms=offered)


async def handle_sasl_authenticate(ctx: BrokerContext, call: Call) -> Any:
    auth = call.client.auth
    fields: dict[str, Any] = {"session_lifetime": millis(0)} if call.version >= 1 else {}
    if auth.sasl is None:
        return call.respond(error_code=ErrorCode.illegal_sasl_state, error_message="this listener has no SASL",
                            auth_bytes=b"", **fields)
    try:
        reply = auth.sasl.step(bytes(call.body.auth_bytes))
    except (AuthenticationFailed, IllegalSaslState) as exc:
        auth.close_after_reply = True
        error = ErrorCode.sasl_authentication_failed if isinstance(exc, AuthenticationFailed) \
            else ErrorCode.illegal_sasl_state
        return call.respond(error_code=error, error_message=str(exc), auth_bytes=b"", **fields)
    if auth.sasl.authenticated and auth.sasl.principal:
        auth.principal = auth.sasl.principal
    return call.respond(error_code=ErrorCode.none, error_message=None, auth_bytes=reply, **fields)
