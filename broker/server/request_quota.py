"""The request_percentage gate (KIP-124) around a handler: measure it, throttle it, say so in the answer.

For a request that a request_percentage quota covers (control/quotas.py
resolves it; nothing is measured otherwise), `measure` starts a LoopTime with
the request's decode time; the dispatcher runs the handler `timed`
(loop_time.py); `answer` records that time and, over the quota, hands the
throttle to the connection, which mutes the channel once the answer is
written, as for the byte rates (security/peer.py's ChannelThrottle), and puts
it in the answer's throttle_time_ms unless the handler's own is longer (Kafka's
KafkaApis answers the larger of the bandwidth and request throttles). The
answer's encoding is recorded after, with no throttle (Kafka's network-thread
time, recordNoThrottle).

Exempt, as in Kafka: the SASL exchange (Kafka's authenticator serves it, not
KafkaApis) and brokers' own requests (Kafka exempts ClusterAction callers).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.codec import millis, to_millis
from tinystream.broker.server.loop_time import LoopTime

QUOTA = "request"  # the metrics' quota label


def measure(ctx: BrokerContext, call: Call, decode_s: float) -> LoopTime | None:
    """A meter for this request, or None when no request_percentage covers it (or it is exempt)."""
    if not ctx.quotas.request_time_applies(call.client.auth.principal, call.header.client_id):
        return None
    if call.header.api_key in api_versions.SASL_APIS or ctx.from_broker(call.client):
        return None
    return LoopTime(decode_s)


def answer(ctx: BrokerContext, call: Call, meter: LoopTime, result: Any) -> Any:
    """Record the handler's time; over the quota, throttle the channel and say so in `result`."""
    throttle_ms = ctx.quotas.record_request_time(call.client.auth.principal, call.header.client_id, meter.seconds)
    if throttle_ms <= 0:
        return result
    call.client.throttle.throttle(throttle_ms)
    ctx.metrics.observe_throttle(QUOTA, throttle_ms)
    return with_throttle(result, throttle_ms)


def encoded(ctx: BrokerContext, call: Call, seconds: float) -> None:
    """The answer's encoding: counted against the next requests, throttling none now."""
    ctx.quotas.record_request_time_only(call.client.auth.principal, call.header.client_id, seconds)


def with_throttle(result: Any, throttle_ms: int) -> Any:
    """`result` saying throttle_time_ms = throttle_ms, unless it says more or has no such field (already
    encoded bytes, a version without it, no answer): the channel is muted all the same."""
    current = getattr(result, "throttle_time", None)
    if current is None or not dataclasses.is_dataclass(result) or to_millis(current) >= throttle_ms:
        return result
    return dataclasses.replace(result, throttle_time=millis(throttle_ms))
