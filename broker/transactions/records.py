"""__transaction_state records in Kafka's layouts (TransactionLogKey v0, TransactionLogValue v0).

Key (version 0)::

    version int16 | transactionalId string (int16 length + UTF-8)

Value (version 0, not flexible)::

    version int16 | producerId int64 | producerEpoch int16 | transactionTimeoutMs int32
    | transactionStatus int8 | transactionPartitions array (int32 count, -1 = null)
        [topic string | partitionIds array of int32]
    | transactionLastUpdateTimestampMs int64 | transactionStartTimestampMs int64

A null value is a tombstone (the id expired). The layout is Kafka's, so
Kafka's own tools could read our topic; the previous epoch (KIP-360) is not
stored in v0 and starts at -1 after a load, as in Kafka before TV2.
"""

from __future__ import annotations

import struct

from tinystream.broker.transactions.errors import RecordDecodeError
from tinystream.broker.transactions.state import TopicPartitionKey, TxnState, TxnTransit

__all__ = ["decode_key", "decode_value", "encode_key", "encode_value"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TAIL = struct.Struct(">qq")  # last update, start
KEY_VERSION = 0
VALUE_VERSION = 0


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version != KEY_VERSION:
            raise RecordDecodeError(f"unknown __transaction_state key version {version}")
        (length,) = _I16.unpack_from(data, 2)
        if length < 0 or 4 + length > len(data):
            raise RecordDecodeError("transactional id runs past the key")
        return data[4 : 4 + length].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordDecodeError(f"unreadable __transaction_state key: {exc}") from exc


def encode_value(t: TxnTransit) -> bytes:
    out = bytearray(_HEAD.pack(VALUE_VERSION, t.producer_id, t.producer_epoch, t.timeout_ms, int(t.state)))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out += _I32.pack(len(by_topic))
    for topic, ids in by_topic.items():
        out += _string(topic) + _I32.pack(len(ids)) + b"".join(_I32.pack(i) for i in ids)
    out += _TAIL.pack(t.last_update_ms, t.txn_start_ms)
    return bytes(out)


def decode_value(data: bytes) -> TxnTransit:
    try:
        version, pid, epoch, timeout, status = _HEAD.unpack_from(data, 0)
        if version != VALUE_VERSION:
            raise RecordDecodeError(f"unknown __transaction_state value version {version}")
        pos = _HEAD.size
        (topics,) = _I32.unpack_from(data, pos)
        pos += 4
        partitions: set[TopicPartitionKey] = set()
        for _ in range(max(topics, 0)):
            (length,) = _I16.unpack_from(data, pos)
            if length < 0 or pos + 2 + length > len(data):
                raise RecordDecodeError("topic name runs past the value")
            topic = data[pos + 2 : pos + 2 + length].decode()
            pos += 2 + length
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            if count < 0 or pos + 4 * count > len(data):
                raise RecordDecodeError("partition ids run past the value")
            for i in range(count):
                partitions.add((topic, _I32.unpack_from(data, pos + 4 * i)[0]))
            pos += 4 * count
        last_update, start = _TAIL.unpack_from(data, pos)
        state = TxnState(status)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, RecordDecodeError):
            raise
        raise RecordDecodeError(f"unreadable __transaction_state value: {exc}") from exc
    return TxnTransit(
        event="load", producer_id=pid, producer_epoch=epoch, last_producer_epoch=-1, timeout_ms=timeout,
        state=state, partitions=frozenset(partitions), txn_start_ms=start, last_update_ms=last_update,
    )
