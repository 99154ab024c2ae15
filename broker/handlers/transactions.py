"""Transactions (KIP-98, KIP-447): AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeProducers (61), DescribeTransactions (65),
ListTransactions (66).

Thin wiring: the decisions live in `tinystream.broker.transactions` (the
coordinator) and, for TxnOffsetCommit, in the group coordinator. Version notes:

- PRODUCER_FENCED (KIP-588) exists from AddPartitionsToTxn v2, AddOffsetsToTxn
  v2, EndTxn v2, TxnOffsetCommit v3 (InitProducerId v4, in producer_id.py);
  older versions get INVALID_PRODUCER_EPOCH, which those clients know.
- AddPartitionsToTxn v4+ batches transactions and may `verify_only`
  (KIP-890's partition-leader check); v0-3 carry one transaction.
- WriteTxnMarkers comes from another broker's transaction coordinator; only
  v1 is advertised (Kafka 4.0 dropped v0). It, and AddPartitionsToTxn's
  v4+ broker form, need an inter-broker principal where connections are
  authenticated (Kafka's ClusterAction): anyone else gets
  CLUSTER_AUTHORIZATION_FAILED.
- AddOffsetsToTxn adds the group's __consumer_offsets partition to the
  transaction, so its marker reaches the group coordinator.

Authorization (authz.RULES): WRITE on the transactional id for the client
APIs (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), plus WRITE on each topic added
(TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED as Kafka) or
READ on the group and topics whose offsets are committed; CLUSTER_ACTION for
the broker-to-broker forms; READ on a topic for DescribeProducers; DESCRIBE
on the id for DescribeTransactions, and ListTransactions lists only those.
"""

from __future__ import annotations

import datetime
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.coordinators.txn_markers import write_local_markers
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz, topic_routing
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.metadata.topics import OFFSETS_TOPIC
from tinystream.broker.protocol.codec import millis
from tinystream.broker.storage.topic_partition import TopicPartition

_PRODUCER_FENCED_FROM = {24: 2, 25: 2, 26: 2, 28: 3, 22: 4}


def client_error(call: Call, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED for clients that know it, INVALID_PRODUCER_EPOCH for older ones (KIP-588)."""
    if error == ErrorCode.producer_fenced and call.version < _PRODUCER_FENCED_FROM.get(call.header.api_key, 0):
        return ErrorCode.invalid_producer_epoch
    return error


def _from_broker(ctx: BrokerContext, call: Call) -> bool:
    """Sent by another broker (see BrokerContext.from_broker), allowed CLUSTER_ACTION."""
    return ctx.from_broker(call.client) and authz.allowed_cluster(ctx, call, AclOperation.CLUSTER_ACTION)


def _may_write_txn(ctx: BrokerContext, call: Call, txn_id: str) -> bool:
    return authz.allowed(ctx, call, AclOperation.WRITE, authz.TXN, txn_id)


def _coordinator(ctx: BrokerContext) -> Any:
    return ctx.transactions.coordinator if ctx.transactions is not None else None


# -- AddPartitionsToTxn ---------------------------------------------------------------------


async def handle_add_partitions_to_txn(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if call.version >= 4 and not _from_broker(ctx, call):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.cluster_authorization_failed,
                            results_by_transaction=())
    if call.version >= 4:
        results = []
        for txn in body.transactions:
            topics = await _add_partitions(ctx, call, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                           txn.topics, verify_only=txn.verify_only)
            results.append(call.make("AddPartitionsToTxnResult", transactional_id=txn.transactional_id,
                                     topic_results=topics))
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.none, results_by_transaction=tuple(results))
    topics = await _add_partitions(ctx, call, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                   body.v3_and_below_producer_epoch, body.v3_and_below_topics, verify_only=False)
    return call.respond(throttle_time=millis(0), results_by_topic_v3_and_below=topics)


async def _add_partitions(
    ctx: BrokerContext, call: Call, txn_id: str, producer_id: int, epoch: int, topics: Any, *, verify_only: bool
) -> tuple[Any, ...]:
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    unknown = {tp for tp in wanted if not _exists(ctx, tp)}
    coordinator = _coordinator(ctx)
    errors: dict[tuple[str, int], ErrorCode]
    may_write = authz.topic_filter(ctx, call, AclOperation.WRITE)
    refused = {tp for tp in wanted if not may_write(tp[0])}
    if not verify_only and not _may_write_txn(ctx, call, txn_id):
        errors = dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    elif not verify_only and refused:
        errors = {tp: ErrorCode.topic_authorization_failed if tp in refused else ErrorCode.operation_not_attempted
                  for tp in wanted}
    elif coordinator is None:
        errors = {tp: ErrorCode.coordinator_not_available for tp in wanted}
    elif verify_only:
        errors = coordinator.verify_partitions(transactional_id=txn_id, producer_id=producer_id,
                                               producer_epoch=epoch, partitions=wanted)
    elif unknown:
        # Kafka: the whole request fails; the known partitions get OPERATION_NOT_ATTEMPTED.
        errors = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                  for tp in wanted}
    else:
        error = await coordinator.add_partitions(transactional_id=txn_id, producer_id=producer_id,
                                                 producer_epoch=epoch, partitions=wanted)
        errors = {tp: error for tp in wanted}
    by_topic: dict[str, list[Any]] = {}
    for topic, index in wanted:
        by_topic.setdefault(topic, []).append(call.make(
            "AddPartitionsToTxnPartitionResult", partition_index=index,
            partition_error_code=client_error(call, errors[(topic, index)]),
        ))
    return tuple(call.make("AddPartitionsToTxnTopicResult", name=t, results_by_partition=tuple(ps))
                 for t, ps in by_topic.items())


def _exists(ctx: BrokerContext, tp: tuple[str, int]) -> bool:
    spec = ctx.topics.get(tp[0])
    return spec is not None and 0 <= tp[1] < spec.partitions


# -- AddOffsetsToTxn, TxnOffsetCommit --------------------------------------------------------


async def handle_add_offsets_to_txn(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    coordinator = _coordinator(ctx)
    if not _may_write_txn(ctx, call, body.transactional_id):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.transactional_id_authorization_failed)
    if not authz.allowed(ctx, call, AclOperation.READ, authz.GROUP, body.group_id):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.group_authorization_failed)
    if coordinator is None or ctx.groups is None:
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.coordinator_not_available)
    ensured = await topic_routing.ensure_offsets_topic(ctx)
    if ensured.error != ErrorCode.none:
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.coordinator_not_available)
    partition = (OFFSETS_TOPIC, ctx.groups.partition_for(body.group_id))
    error = await coordinator.add_partitions(transactional_id=body.transactional_id, producer_id=body.producer_id,
                                             producer_epoch=body.producer_epoch, partitions=[partition])
    return call.respond(throttle_time=millis(0), error_code=client_error(call, error))


async def handle_txn_offset_commit(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    offsets = {
        (t.name, p.partition_index): (p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
        for t in body.topics for p in t.partitions
    }
    may_read = authz.topic_filter(ctx, call, AclOperation.READ)
    refused: dict[tuple[str, int], ErrorCode] = {}
    if not _may_write_txn(ctx, call, body.transactional_id):
        refused = dict.fromkeys(offsets, ErrorCode.transactional_id_authorization_failed)
    elif not authz.allowed(ctx, call, AclOperation.READ, authz.GROUP, body.group_id):
        refused = dict.fromkeys(offsets, ErrorCode.group_authorization_failed)
    else:
        refused = {tp: ErrorCode.topic_authorization_failed for tp in offsets if not may_read(tp[0])}
    offsets = {tp: v for tp, v in offsets.items() if tp not in refused}
    if not offsets:
        results: dict[tuple[str, int], ErrorCode] = {}
    elif ctx.groups is None:
        results = {tp: ErrorCode.coordinator_not_available for tp in offsets}
    else:
        results = await ctx.groups.coordinator.txn_offset_commit(
            group_id=body.group_id,
            producer_id=body.producer_id,
            producer_epoch=body.producer_epoch,
            generation_id=getattr(body, "generation_id", -1),
            member_id=getattr(body, "member_id", ""),
            group_instance_id=getattr(body, "group_instance_id", None),
            offsets=offsets,
        )
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), error in {**refused, **results}.items():
        by_topic.setdefault(topic, []).append(
            call.make("TxnOffsetCommitResponsePartition", partition_index=index, error_code=client_error(call, error))
        )
    topics = tuple(call.make("TxnOffsetCommitResponseTopic", name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return call.respond(throttle_time=millis(0), topics=topics)


# -- EndTxn ------------------------------------------------------------------------------------


async def handle_end_txn(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    coordinator = _coordinator(ctx)
    if not _may_write_txn(ctx, call, body.transactional_id):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.transactional_id_authorization_failed)
    if coordinator is None:
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.coordinator_not_available)
    error = await coordinator.end_txn(transactional_id=body.transactional_id, producer_id=body.producer_id,
                                      producer_epoch=body.producer_epoch, commit=body.committed)
    return call.respond(throttle_time=millis(0), error_code=client_error(call, error))


# -- WriteTxnMarkers (broker to broker) ---------------------------------------------------------


async def handle_write_txn_markers(ctx: BrokerContext, call: Call) -> Any:
    results = []
    allowed = _from_broker(ctx, call)
    for marker in call.body.markers:
        tps = [TopicPartition(t.name, int(i)) for t in marker.topics for i in t.partition_indexes]
        if not allowed:
            errors = {tp: ErrorCode.cluster_authorization_failed for tp in tps}
        else:
            errors = await write_local_markers(ctx.replicas, ctx.groups, [
                (tp, marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch)
                for tp in tps
            ])
        by_topic: dict[str, list[Any]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                call.make("WritableTxnMarkerPartitionResult", partition_index=tp.partition, error_code=errors[tp])
            )
        results.append(call.make(
            "WritableTxnMarkerResult", producer_id=marker.producer_id,
            topics=tuple(call.make("WritableTxnMarkerTopicResult", name=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
        ))
    return call.respond(markers=tuple(results))


# -- DescribeTransactions, ListTransactions (kafka-transactions.sh) ---------------------------


async def handle_describe_producers(ctx: BrokerContext, call: Call) -> Any:
    """KIP-664: the producers a partition leader holds state for, with their open transaction's first offset."""
    topics = []
    may_read = authz.topic_filter(ctx, call, AclOperation.READ)
    for topic in call.body.topics:
        parts = []
        for index in topic.partition_indexes:
            partition = ctx.replicas.get(TopicPartition(topic.name, int(index)))
            error = ErrorCode.none
            if not may_read(topic.name):
                error, partition = ErrorCode.topic_authorization_failed, None
            elif partition is None:
                error = ErrorCode.unknown_topic_or_partition
            elif not partition.is_leader:
                error = ErrorCode.not_leader_or_follower
            producers: list[Any] = []
            if partition is not None and error == ErrorCode.none:
                ongoing = partition.producers.ongoing
                for entry in partition.producers.entries():
                    last = entry.batches[-1] if entry.batches else None
                    producers.append(call.make(
                        "ProducerState", producer_id=entry.producer_id, producer_epoch=entry.epoch,
                        last_sequence=last.last_seq if last else -1, last_timestamp=last.timestamp if last else -1,
                        coordinator_epoch=partition.coordinator_epoch(entry.producer_id),
                        current_txn_start_offset=ongoing.get(entry.producer_id, -1),
                    ))
            parts.append(call.make("PartitionResponse", partition_index=index, error_code=error, error_message=None,
                                   active_producers=tuple(producers)))
        topics.append(call.make("TopicResponse", name=topic.name, partitions=tuple(parts)))
    return call.respond(throttle_time=millis(0), topics=tuple(topics))


def _start_time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(max(ms, 0) / 1000, tz=datetime.UTC) if ms >= 0 else \
        datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


async def handle_describe_transactions(ctx: BrokerContext, call: Call) -> Any:
    coordinator = _coordinator(ctx)
    states = []
    may_describe = authz.topic_filter(ctx, call, AclOperation.DESCRIBE)
    for txn_id in call.body.transactional_ids:
        if not authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.TXN, txn_id):
            error, d = ErrorCode.transactional_id_authorization_failed, None
        elif coordinator is None:
            error, d = ErrorCode.coordinator_not_available, None
        else:
            error, d = coordinator.describe(txn_id)
        by_topic: dict[str, list[int]] = {}
        for topic, index in d.partitions if d is not None else ():
            if not may_describe(topic):  # Kafka leaves out the topics the caller may not describe
                continue
            by_topic.setdefault(topic, []).append(index)
        states.append(call.make(
            "TransactionState",
            error_code=error,
            transactional_id=txn_id,
            transaction_state=d.state.kafka_name if d is not None else "",
            transaction_timeout=millis(d.timeout_ms if d is not None else 0),
            transaction_start_time=_start_time(d.txn_start_ms if d is not None else -1),
            producer_id=d.producer_id if d is not None else -1,
            producer_epoch=d.producer_epoch if d is not None else -1,
            topics=tuple(call.make("TopicData", topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        ))
    return call.respond(throttle_time=millis(0), transaction_states=tuple(states))


async def handle_list_transactions(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    coordinator = _coordinator(ctx)
    listed = coordinator.list_transactions() if coordinator is not None else []
    state_filters = set(body.state_filters)
    pid_filters = set(body.producer_id_filters)
    duration = getattr(body, "duration_filter", -1)
    now = ctx.replicas.clock()
    known = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
             "PrepareEpochFence"}
    out = []
    for d in listed:
        if state_filters and d.state.kafka_name not in state_filters:
            continue
        if pid_filters and d.producer_id not in pid_filters:
            continue
        if duration >= 0 and (d.txn_start_ms < 0 or now - d.txn_start_ms < duration):
            continue
        if not authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.TXN, d.transactional_id):
            continue
        out.append(call.make("TransactionState", transactional_id=d.transactional_id, producer_id=d.producer_id,
                             transaction_state=d.state.kafka_name))
    return call.respond(throttle_time=millis(0), error_code=ErrorCode.none,
                        unknown_state_filters=tuple(sorted(state_filters - known)), transaction_states=tuple(out))
