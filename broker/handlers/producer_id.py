"""InitProducerId (key 22, v0-4): producer ids for idempotent and transactional producers.

Without a transactional id Kafka hands out a fresh producer id at epoch 0 on
every call, whatever id and epoch the request carries (TransactionCoordinator:
"if the transactional id is null, then always blindly accept the request and
return a new producerId"); ids come from `ProducerIdManager`, never reused.
When no block of ids can be had (the controller is unreachable) the answer
is COORDINATOR_LOAD_IN_PROGRESS, retriable, as Kafka's RPCProducerIdManager
answers while its next block is pending (KAFKA-14694).

With a transactional id the transaction coordinator answers (it must be the
id's coordinator: NOT_COORDINATOR otherwise): the id keeps its producer id
and gets the next epoch, fencing any older producer with the same id
(PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH before, KIP-588); an
Ongoing transaction is aborted first (CONCURRENT_TRANSACTIONS meanwhile).
v3+ may name the caller's own producer id and epoch (KIP-360) to bump it.

Authorization (authz.RULES): WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one, IDEMPOTENT_WRITE on the
cluster or WRITE on any topic (KIP-679; CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.coordinators.producer_ids import ProducerIdsUnavailable
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.handlers.transactions import client_error
from tinystream.broker.protocol.codec import millis, to_millis


async def handle_init_producer_id(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if body.transactional_id is not None:
        if not authz.allowed(ctx, call, AclOperation.WRITE, authz.TXN, body.transactional_id):
            return call.respond(throttle_time=millis(0), error_code=ErrorCode.transactional_id_authorization_failed,
                                producer_id=-1, producer_epoch=-1)
        if ctx.transactions is None:
            error, producer_id, epoch = ErrorCode.coordinator_not_available, -1, -1
        else:
            error, producer_id, epoch = await ctx.transactions.coordinator.init_producer_id(
                transactional_id=body.transactional_id,
                timeout_ms=to_millis(body.transaction_timeout),
                producer_id=getattr(body, "producer_id", -1),
                producer_epoch=getattr(body, "producer_epoch", -1),
            )
        return call.respond(throttle_time=millis(0), error_code=client_error(call, error), producer_id=producer_id,
                            producer_epoch=epoch)
    if not (authz.allowed_cluster(ctx, call, AclOperation.IDEMPOTENT_WRITE)
            or authz.allowed_any(ctx, call, AclOperation.WRITE, authz.TOPIC)):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.cluster_authorization_failed,
                            producer_id=-1, producer_epoch=-1)
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
