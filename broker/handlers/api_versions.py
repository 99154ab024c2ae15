"""ApiVersions (key 18): the advertised table, and the answer to versions we do not know.

KIP-511: a client may open with an ApiVersions version newer than the broker's;
the broker answers in the v0 layout with UNSUPPORTED_VERSION and its full
table, and the client retries at the highest version both know.
"""

from __future__ import annotations

from typing import Any

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol import api_versions as keys
from tinystream.broker.protocol.api_versions import ApiRange
from tinystream.broker.protocol.codec import RequestHeader, encode_response, millis, schemas


def _body(api: Any, advertised: tuple[ApiRange, ...], error: ErrorCode) -> Any:
    rows = tuple(
        api.response("ApiVersion", api_key=a.key, min_version=a.min_version, max_version=a.max_version)
        for a in advertised
    )
    return api.response("ApiVersionsResponse", error_code=error, api_keys=rows, throttle_time=millis(0))


async def handle_api_versions(ctx: BrokerContext, call: Call) -> Any:
    return _body(call.api, ctx.advertised, ErrorCode.none)


def unsupported_version_response(advertised: tuple[ApiRange, ...], correlation_id: int) -> bytes:
    """The framed v0 answer with UNSUPPORTED_VERSION and the full table."""
    api = schemas(keys.API_VERSIONS, 0)
    header = RequestHeader(keys.API_VERSIONS, 0, correlation_id, None)
    return bytes(encode_response(header, _body(api, advertised, ErrorCode.unsupported_version)))  # no records
