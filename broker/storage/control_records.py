"""Transaction markers: the control batches that end a transaction in a partition (KIP-98).

A marker is a RecordBatch v2 with the transactional and control attribute
bits set, the producer id and epoch of the transaction, no sequence, and one
record whose key and value are Kafka's ControlRecordType and EndTxnMarker::

    key   = version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)
    value = version int16 (0) | coordinatorEpoch int32

Clients skip control batches by the attribute bit (they never reach the
application); read_committed consumers use COMMIT/ABORT together with the
Fetch response's aborted-transactions list.
"""

from __future__ import annotations

import enum
import struct

from tinystream.broker.storage.base import CorruptRecordError
from tinystream.broker.storage.batch import NO_SEQUENCE, Record, build_batch, decode_records, parse_header

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def build_marker(
    *, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp: int
) -> bytes:
    """One control batch ending `producer_id`'s transaction (offset 0; the log assigns the real one)."""
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    record = Record(key=_KEY.pack(CONTROL_VERSION, kind), value=_VALUE.pack(CONTROL_VERSION, coordinator_epoch))
    return build_batch(
        [record],
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        transactional=True,
        control=True,
    )


def control_type(batch: bytes | memoryview) -> ControlType:
    """COMMIT or ABORT of a control batch; CorruptRecordError if it holds no readable control record."""
    header = parse_header(batch)
    if not header.is_control:
        raise CorruptRecordError("not a control batch")
    records = decode_records(batch)
    if not records or records[0].key is None or len(records[0].key) < _KEY.size:
        raise CorruptRecordError("a control batch without a control record key")
    _, kind = _KEY.unpack_from(records[0].key, 0)
    try:
        return ControlType(kind)
    except ValueError as exc:
        raise CorruptRecordError(f"unknown control record type {kind}") from exc
