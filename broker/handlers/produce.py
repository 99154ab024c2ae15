"""Produce (key 0): v3-11 served; v0-2 advertised for librdkafka and refused per partition.

Flow: what the request allows (once), the gates per partition
(`produce_gates`: transactional id, ACL, version, acks, topic, one batch),
the value schema, KIP-890 verification, one append of every batch, the wait
for acks=all, the response.

Per partition, before the log sees the bytes (Kafka's ProduceRequest.validateRecords):
exactly one RecordBatch v2 (INVALID_RECORD for none, several, or another
magic; CORRUPT_MESSAGE for a cut batch), zstd only from v7
(UNSUPPORTED_COMPRESSION_TYPE), no writes to internal topics
(INVALID_TOPIC_EXCEPTION). The log then checks size, CRC and counts. Records
are not decoded: the header tuple is all the broker reads -- unless the topic
has a `tinystream.value.schema` and this broker leads the partition; then each
value is checked (`value_schema`) and a bad one rejects the batch with
INVALID_RECORD, naming the record in `record_errors` (v8+, KIP-467) and the
record and rule in `error_message`. Likewise with `confluent.value.schema.validation`
(`confluent.key.schema.validation`): each value (key) must carry a schema id
registered under the topic's subject (`registry_validation`, `_registry_check`).

Transactional batches that would open their producer's transaction in a
partition are verified with the transactional id's coordinator first
(KIP-890 part 1): at once when it runs here, else by AddPartitionsToTxn
verify_only to its broker. A partition that is not part of the Ongoing
transaction is refused with INVALID_TXN_STATE, a stale epoch with
INVALID_PRODUCER_EPOCH, an unreachable coordinator with NOT_ENOUGH_REPLICAS
(retriable). Only requests with such batches await before appending; the
verification answers of one connection come back in order, so pipelined
requests still append in order.

acks: 0 gets no response at all (and the connection is closed if something
failed, Kafka's only way to tell such a client); 1 answers after the local
append; -1 waits for the high watermark (`ReplicaManager.wait_replicated`).
Anything else is INVALID_REQUIRED_ACKS.

Ordering: every append of the request happens before the first await, so
requests pipelined on one connection reach the log in the order sent.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers import produce_gates
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import CLOSE_CONNECTION, BrokerContext, Call
from tinystream.broker.protocol.codec import encode_with, millis, to_millis
from tinystream.broker.replication.partition import AppendOutcome
from tinystream.broker.storage.base import CorruptRecordError
from tinystream.broker.storage.batch import (
    CODEC_MASK,
    TRANSACTIONAL_BIT,
    BatchHeader,
    first_is_transactional,
)
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.topics import registry_validation, value_schema
from tinystream.broker.topics.schema_ids import RegistryUnavailable

_RECORD_ERRORS_MIN_VERSION = 8  # KIP-467

#: (partition, the batch's bytes, its header): what the log appends.
Batch = tuple[TopicPartition, memoryview, BatchHeader]


async def handle_produce(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    acks = body.acks
    writer = _writer(ctx, call)
    txn_id: str | None = getattr(body, "transactional_id", None)
    order: list[TopicPartition] = []
    rejected: dict[TopicPartition, AppendOutcome] = {}
    batches: list[Batch] = []
    unverified: list[Batch] = []
    for topic in body.topic_data:
        name = topic.name
        spec = ctx.topics.get(name)
        for pdata in topic.partition_data:
            tp = TopicPartition(name, pdata.index)
            order.append(tp)
            refused = produce_gates.refusal(writer, tp, spec)
            if refused is not None:
                rejected[tp] = refused
                continue
            error, message, header = produce_gates.check_records(pdata.records, writer.version)
            if header is None:
                rejected[tp] = AppendOutcome(error, message=message)
            elif (schema := spec.configs.get(value_schema.SCHEMA_CONFIG)) and (
                refused := await _schema_check(ctx, tp, pdata.records, header, schema)
            ):
                rejected[tp] = refused
            elif (rule := registry_validation.policy(name, spec.configs)) and (
                refused := await _registry_check(ctx, tp, pdata.records, header, rule)
            ):
                rejected[tp] = refused
            elif header.attributes & TRANSACTIONAL_BIT and txn_id and _needs_verification(ctx, txn_id, tp, header):
                unverified.append((tp, memoryview(pdata.records), header))
            else:
                batches.append((tp, memoryview(pdata.records), header))
    if unverified:  # KIP-890: only these wait (for their coordinator) before the request's appends
        batches += await _verify(ctx, txn_id, unverified, rejected)
    outcomes = _append(ctx, batches, rejected, acks)
    throttle_ms = _throttle(ctx, call)
    if acks == 0:
        return CLOSE_CONNECTION if rejected or any(o.error != ErrorCode.none for o in outcomes.values()) else None
    if acks == -1 and batches:
        outcomes = await ctx.replicas.wait_replicated(outcomes, to_millis(body.timeout))
    if writer.version < produce_gates.FIRST_SERVED_VERSION:
        return _legacy_response(call, order, outcomes, throttle_ms)
    return _response(call, order, outcomes, throttle_ms)


def _throttle(ctx: BrokerContext, call: Call) -> int:
    """The producer_byte_rate gate (Kafka's QuotaManagers.produce): the request's bytes count against the
    client's quota; over it, the answer says how long and the connection reads nothing for that long."""
    size = sum(len(p.records or b"") for t in call.body.topic_data for p in t.partition_data)
    throttle_ms = ctx.quotas.record_produce(call.client.auth.principal, call.header.client_id, size)
    if throttle_ms:
        call.client.throttle.throttle(throttle_ms)
        ctx.metrics.observe_throttle("produce", throttle_ms)
    return throttle_ms


def _writer(ctx: BrokerContext, call: Call) -> produce_gates.Writer:
    """What the request allows (authz.RULES), as Kafka's: transactional batches need a transactional id the
    caller may WRITE (else the whole request is refused), then WRITE on each topic."""
    body = call.body
    txn_id: str | None = getattr(body, "transactional_id", None)
    transactional = any(first_is_transactional(p.records) for t in body.topic_data for p in t.partition_data)
    refused = transactional and (txn_id is None or not authz.allowed(ctx, call, AclOperation.WRITE, authz.TXN, txn_id))
    return produce_gates.Writer.of(version=call.version, acks=body.acks, transactional_id_refused=refused,
                                   may_write=authz.topic_filter(ctx, call, AclOperation.WRITE))


def _append(
    ctx: BrokerContext, batches: list[Batch], rejected: dict[TopicPartition, AppendOutcome], acks: int
) -> dict[TopicPartition, AppendOutcome]:
    """Append every batch before the first await (pipelined requests reach the log in order), count what
    went in and what failed; returns every partition's outcome, the refused ones included."""
    outcomes = ctx.replicas.append(batches, required_acks=acks) if batches else {}
    metrics = ctx.metrics
    for tp, _batch, header in batches:
        outcome = outcomes[tp]
        if outcome.appended_bytes:
            metrics.record_in(tp.topic, outcome.appended_bytes, header.record_count)
    outcomes.update(rejected)
    for outcome in outcomes.values():
        if outcome.error != ErrorCode.none:
            metrics.produce_errors.labels(outcome.error.name).inc()
    return outcomes


def _needs_verification(ctx: BrokerContext, transactional_id: str, tp: TopicPartition, header: BatchHeader) -> bool:
    """A transactional batch that would open its producer's transaction in this partition (KIP-890 part 1).

    Later batches of an open transaction, at its epoch, are not asked about again (Kafka's
    verification guard is also kept per producer until its first append); another epoch is.
    """
    if ctx.transactions is None:
        return False
    partition = ctx.replicas.get(tp)
    if partition is None or not partition.is_leader:
        return False  # the append answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION
    if header.producer_id not in partition.producers.ongoing:
        return True
    entry = partition.producers.get(header.producer_id)
    return entry is None or entry.epoch != header.producer_epoch


async def _verify(
    ctx: BrokerContext,
    transactional_id: str | None,
    unverified: list[Batch],
    rejected: dict[TopicPartition, AppendOutcome],
) -> list[Batch]:
    """Ask the transactional id's coordinator (here, or another broker) about each partition; returns
    the batches to append, and puts the refused ones into `rejected`.

    Not in the transaction: INVALID_TXN_STATE. A stale epoch (PRODUCER_FENCED at the coordinator):
    INVALID_PRODUCER_EPOCH, the partition-level form. A coordinator that cannot answer:
    NOT_ENOUGH_REPLICAS, retriable for every client version, as Kafka maps it.
    """
    assert ctx.transactions is not None and transactional_id
    by_producer: dict[tuple[int, int], list[Batch]] = {}
    for item in unverified:
        by_producer.setdefault((item[2].producer_id, item[2].producer_epoch), []).append(item)
    accepted = []
    for (producer_id, epoch), items in by_producer.items():
        errors = await ctx.transactions.verify(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
            partitions=[(tp.topic, tp.partition) for tp, _, _ in items],
        )
        for tp, records, header in items:
            error = errors[(tp.topic, tp.partition)]
            if error == ErrorCode.none:
                accepted.append((tp, records, header))
            elif error == ErrorCode.invalid_txn_state:
                rejected[tp] = AppendOutcome(
                    error, message=f"{tp.topic}-{tp.partition} is not part of transaction {transactional_id!r}"
                )
            elif error in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch):
                rejected[tp] = AppendOutcome(ErrorCode.invalid_producer_epoch, message="fenced by a newer epoch")
            else:
                rejected[tp] = AppendOutcome(ErrorCode.not_enough_replicas,
                                             message=f"the transaction coordinator could not verify: {error.name}")
    return accepted


#: Batches this large, and every compressed one (a small batch may hold 64 MiB
#: of values), are validated on a worker thread, so validation cannot stall the
#: event loop (heartbeats, other clients).
OFF_LOOP_VALIDATION_BYTES = 256 * 1024


async def _schema_check(
    ctx: BrokerContext, tp: TopicPartition, records: bytes, header: BatchHeader, schema: str
) -> AppendOutcome | None:
    """INVALID_RECORD naming the first record that breaks the topic's schema; None if all pass.

    Only the leader validates: elsewhere the append answers NOT_LEADER_OR_FOLLOWER
    without anything being decoded.
    """
    partition = ctx.replicas.get(tp)
    if partition is None or not partition.is_leader:
        return None
    try:
        if len(records) >= OFF_LOOP_VALIDATION_BYTES or header.attributes & CODEC_MASK:
            found = await asyncio.to_thread(value_schema.violation, records, schema)
        else:
            found = value_schema.violation(records, schema)
    except value_schema.InvalidSchema as exc:  # stored before validation existed, or altered behind our back
        return AppendOutcome(ErrorCode.invalid_record, message=f"the topic's value schema is unusable: {exc}")
    if found is None:
        return None
    if isinstance(found, value_schema.CorruptBatch):
        return AppendOutcome(ErrorCode.corrupt_message, message=found.message)
    detail = found.describe()
    return AppendOutcome(
        ErrorCode.invalid_record,
        message=f"value does not match the topic's schema: {detail}",
        record_errors=((found.index, detail),),
    )


#: Uncompressed batches with more records than this have their heads read on a worker thread (~1 us a
#: record on the loop; handing a 2,382-record batch to a thread cost more than reading it, GIL included).
OFF_LOOP_HEADS_RECORDS = 10_000
#: Distinct schema ids one batch may make the broker look up (legitimate batches carry one or two).
MAX_SCHEMA_IDS_PER_BATCH = 16


async def _registry_check(
    ctx: BrokerContext, tp: TopicPartition, records: bytes, header: BatchHeader, rule: registry_validation.Policy
) -> AppendOutcome | None:
    """INVALID_RECORD naming the first record whose key/value schema id is not registered under its subject.

    Errors when the check cannot be made:
    - no `confluent.schema.registry.url` on this broker: POLICY_VIOLATION, not retriable. The records
      may be fine; the topic's policy cannot be enforced here until an operator sets the URL, and a
      retriable error would only make producers spin until their delivery timeout.
    - the registry cannot answer: NOT_ENOUGH_REPLICAS, retriable for every client version (as the
      transaction verification answers an unreachable coordinator). Nothing was appended, so an
      idempotent producer retries the same sequence; a registry restart then costs latency, not data.
      Not REQUEST_TIMED_OUT: librdkafka takes that as "possibly persisted".
    Only the leader checks: elsewhere the append answers NOT_LEADER_OR_FOLLOWER.
    """
    partition = ctx.replicas.get(tp)
    if partition is None or not partition.is_leader:
        return None
    lookup = ctx.schema_ids
    if lookup is None:
        return AppendOutcome(ErrorCode.policy_violation, message=(
            f"topic {tp.topic} validates schema ids, but this broker has no confluent.schema.registry.url"))
    try:
        # On a worker thread: decompression (up to 64 MiB of work), or a batch of many tiny records.
        if header.attributes & CODEC_MASK or header.record_count > OFF_LOOP_HEADS_RECORDS:
            heads = await asyncio.to_thread(registry_validation.batch_heads, records)
        else:
            heads = registry_validation.batch_heads(records)
    except CorruptRecordError as exc:
        return AppendOutcome(ErrorCode.corrupt_message, message=f"cannot decode records for schema validation: {exc}")
    found = registry_validation.scan(heads, rule)
    ids = found.schema_ids()
    if len(ids) > MAX_SCHEMA_IDS_PER_BATCH:
        return AppendOutcome(ErrorCode.invalid_record, message=(
            f"a batch may name at most {MAX_SCHEMA_IDS_PER_BATCH} distinct schema ids, this one names {len(ids)}"))
    known = {i: s for i, wanted in ids.items() if (s := lookup.cached(i, wanted)) is not None}
    missing = [i for i in ids if i not in known]
    if missing:  # only misses await; a warm cache keeps the check on this turn of the loop
        try:
            answers = await asyncio.gather(*(lookup.subjects(i, ids[i]) for i in missing))
        except RegistryUnavailable as exc:
            return AppendOutcome(ErrorCode.not_enough_replicas,
                                 message=f"the schema registry could not be asked, retry: {exc}")
        known.update(zip(missing, answers, strict=True))
    refusal = registry_validation.verdict(found, known.__getitem__)
    if refusal is None:
        return None
    detail = refusal.describe()
    return AppendOutcome(ErrorCode.invalid_record, message=f"schema validation failed: {detail}",
                         record_errors=((refusal.index, detail),))


def _append_time(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _response(call: Call, order: list[TopicPartition], outcomes: dict[TopicPartition, AppendOutcome],
              throttle_ms: int) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for tp in order:
        o = outcomes[tp]
        by_topic.setdefault(tp.topic, []).append(
            call.make(
                "PartitionProduceResponse",
                index=tp.partition,
                error_code=o.error,
                base_offset=o.base_offset,
                log_append_time=_append_time(o.log_append_time),
                log_start_offset=o.log_start_offset,
                record_errors=_record_errors(call, o),
                error_message=o.message,
            )
        )
    responses = tuple(
        call.make("TopicProduceResponse", name=name, partition_responses=tuple(parts)) for name, parts in by_topic.items()
    )
    return call.respond(responses=responses, throttle_time=millis(throttle_ms))


def _record_errors(call: Call, outcome: AppendOutcome) -> tuple:
    if not outcome.record_errors or call.version < _RECORD_ERRORS_MIN_VERSION:
        return ()
    return tuple(
        call.make("BatchIndexAndErrorMessage", batch_index=index, batch_index_error_message=message)
        for index, message in outcome.record_errors
    )


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_V0 = struct.Struct(">ihq")
_PARTITION_V2 = struct.Struct(">ihqq")


def _legacy_response(call: Call, order: list[TopicPartition], outcomes: dict[TopicPartition, AppendOutcome],
                     throttle_ms: int) -> bytes:
    """Produce v0-2 responses: kio has no schema for them, and the layout is three fields.

    v0: [topic string, [partition int32, error int16, base_offset int64]]
    v1: + throttle_time int32 at the end; v2: + log_append_time int64 per partition.
    """
    version = call.version
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in order:
        by_topic.setdefault(tp.topic, []).append(tp)

    def write(buffer: Any, _: Any) -> None:
        buffer.write(_I32.pack(len(by_topic)))
        for name, tps in by_topic.items():
            raw = name.encode()
            buffer.write(_I16.pack(len(raw)) + raw + _I32.pack(len(tps)))
            for tp in tps:
                o = outcomes[tp]
                if version >= 2:
                    buffer.write(_PARTITION_V2.pack(tp.partition, o.error.value, o.base_offset, o.log_append_time))
                else:
                    buffer.write(_PARTITION_V0.pack(tp.partition, o.error.value, o.base_offset))
        if version >= 1:
            buffer.write(_I32.pack(throttle_ms))

    return encode_with(write, call.header.correlation_id, None)
