"""Routes each decoded request to its handler, encodes the answer, counts it.

The server's `Dispatcher` protocol: `dispatch` gives framed bytes, None (no
response) or CLOSE_CONNECTION. An API the table knows but this broker does not
advertise (the group APIs when no coordinator is wired) is not `serves`d: the
server closes the connection, as for an unknown API. A request that a
request_percentage quota covers goes through that gate (request_quota.py): its
handler's steps on the loop are timed, as Kafka times a handler thread.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from tinystream.broker.handlers import HANDLERS, Handler
from tinystream.broker.handlers.api_versions import unsupported_version_response
from tinystream.broker.handlers.shared.context import CLOSE_CONNECTION, BrokerContext, Call
from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.codec import Request, encode_response, schemas
from tinystream.broker.protocol.response_parts import ResponseParts
from tinystream.broker.security.peer import ClientInfo
from tinystream.broker.server import request_quota
from tinystream.broker.server.loop_time import timed

_CANCEL_ON_DISCONNECT = frozenset({api_versions.FETCH})

log = logging.getLogger(__name__)


class RequestDispatcher:
    def __init__(self, ctx: BrokerContext, handlers: dict[int, Handler] | None = None) -> None:
        self.ctx = ctx
        table = HANDLERS if handlers is None else handlers
        advertised = {a.key: a for a in ctx.advertised}
        self._handlers = {key: (h, advertised[key]) for key, h in table.items() if key in advertised}
        self._names = {a.key: a.name for a in ctx.advertised}

    async def dispatch(self, request: Request, client: ClientInfo, decode_s: float = 0.0) -> bytes | None | object:
        """`decode_s`: the time the request took to decode (counted against request_percentage)."""
        header = request.header
        entry = self._handlers.get(header.api_key)
        if entry is None:  # the server checks `serves` first; this is a second line
            return CLOSE_CONNECTION
        handler, api = entry
        started = time.perf_counter()
        version = header.api_version if api.serves(header.api_version) else api.first_served
        call = Call(header, request.body, schemas(header.api_key, version), client)
        meter = request_quota.measure(self.ctx, call, decode_s)
        if meter is None:
            result: Any = await handler(self.ctx, call)
        else:
            result = request_quota.answer(self.ctx, call, meter, await timed(handler(self.ctx, call), meter))
        encoding = time.perf_counter()
        if result is not None and result is not CLOSE_CONNECTION and not isinstance(result, bytes):
            result = encode_response(header, result)
        elapsed = time.perf_counter() - started
        if meter is not None:
            request_quota.encoded(self.ctx, call, started + elapsed - encoding)
        self.ctx.metrics.observe_request(self._names[header.api_key], elapsed, request.size + 4,  # + size prefix
                                         len(result) if isinstance(result, bytes | bytearray | ResponseParts) else 0)
        if log.isEnabledFor(logging.DEBUG):  # off the hot path unless asked for
            log.debug("%s v%d from %s answered in %.2f ms", self._names[header.api_key], header.api_version,
                      header.client_id, elapsed * 1000, extra={
                          "api": self._names[header.api_key], "api_version": header.api_version,
                          "client_id": header.client_id, "correlation_id": header.correlation_id,
                          "peer": f"{client.host}:{client.port}", "elapsed_ms": round(elapsed * 1000, 3)})
        return result

    def unsupported_api_versions(self, correlation_id: int) -> bytes:
        return unsupported_version_response(self.ctx.advertised, correlation_id)

    def cancel_on_disconnect(self, api_key: int) -> bool:
        return api_key in _CANCEL_ON_DISCONNECT

    def serves(self, api_key: int) -> bool:
        return api_key in self._handlers
