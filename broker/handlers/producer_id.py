"""InitProducerId (key 22, v0-4): producer ids for idempotent producers.

Without a transactional id Kafka hands out a fresh producer id at epoch 0 on
every call, whatever id and epoch the request carries (TransactionCoordinator:
"if the transactional id is null, then always blindly accept the request and
return a new producerId"); ids come from `ProducerIdManager`, never reused.
When no block of ids can be had (the controller is unreachable) the answer
is COORDINATOR_LOAD_IN_PROGRESS, retriable, as Kafka's RPCProducerIdManager
answers while its next block is pending (KAFKA-14694).

Transactions are not implemented: a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the fatal error clients report
clearly, instead of a retriable one that would make them spin.
"""

from __future__ import annotations

from typing import Any

from tinystream.broker.coordinators.producer_ids import ProducerIdsUnavailable
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis


async def handle_init_producer_id(ctx: BrokerContext, call: Call) -> Any:
    if call.body.transactional_id is not None:
        return call.respond(
            throttle_time=millis(0),
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
        )
    try:
        producer_id = await ctx.producer_ids.next_id()
    except ProducerIdsUnavailable:
        return call.respond(
            throttle_time=millis(0),
            error_code=ErrorCode.coordinator_load_in_progress,
            producer_id=-1,
            producer_epoch=-1,
        )
    return call.respond(throttle_time=millis(0), error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=0)
