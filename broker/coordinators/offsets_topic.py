"""Coordinators' internal topics over this broker's logs: __consumer_offsets and __transaction_state.

`append` writes one uncompressed RecordBatch v2 (built with
`storage.batch.build_batch`, keys and values as the coordinator encoded them)
through the same leader path client produces take, with acks=all, and returns
once the high watermark passes it (offsets.commit.timeout.ms); any failure
becomes the coordinator's own error type carrying the partition-level code
(`OffsetsTopicError` for groups, `TxnLogError` for transactions). With a
producer id the batch is transactional (TxnOffsetCommit, KIP-98).

`read` walks a partition from its log start to its log end, batch by batch,
decoding records (decompression bounded by storage.compression). For
__consumer_offsets, records of a transaction come back as `TxnRecord` and
its markers as `TxnMarker`, so the group coordinator applies only committed
transactional offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.errors import OffsetsTopicError
from tinystream.broker.groups.persistence import LogEntry, TxnMarker, TxnRecord
from tinystream.broker.metadata.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.storage.base import LogError
from tinystream.broker.storage.batch import NO_SEQUENCE, Record, build_batch, decode_records, read_header
from tinystream.broker.storage.control_records import ControlType, control_type
from tinystream.broker.storage.log_scan import scan_batches
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.transactions.errors import TxnLogError

KeyValue = tuple[bytes, bytes | None]

#: Kafka's offsets.commit.timeout.ms (and transaction state appends, which Kafka bounds by the request timeout).
COMMIT_TIMEOUT_MS = 5000


class _InternalTopic:
    """Append and read one internal topic's partitions; errors become `self._error(code, message)`."""

    topic: str

    def __init__(self, replicas: ReplicaManager, clock: Callable[[], int]) -> None:
        self._replicas = replicas
        self._clock = clock

    def _error(self, code: ErrorCode, message: str) -> Exception:
        raise NotImplementedError

    async def append(
        self, partition: int, records: list[KeyValue], *, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        if not records:
            return
        now = self._clock()
        batch = build_batch(
            [Record(key=k, value=v) for k, v in records], base_timestamp=now, max_timestamp=now,
            producer_id=producer_id, producer_epoch=producer_epoch if producer_id >= 0 else -1,
            base_sequence=NO_SEQUENCE, transactional=producer_id >= 0,
        )
        tp = TopicPartition(self.topic, partition)
        outcomes = self._replicas.append([(tp, memoryview(batch), read_header(batch))], required_acks=-1)
        outcome = outcomes[tp]
        if outcome.error != ErrorCode.none:
            raise self._error(outcome.error, outcome.message or "")
        outcomes = await self._replicas.wait_replicated(outcomes, COMMIT_TIMEOUT_MS)
        if outcomes[tp].error != ErrorCode.none:
            raise self._error(outcomes[tp].error, outcomes[tp].message or "")

    def _entries(self, partition: int) -> Iterator[LogEntry]:
        p = self._replicas.get(TopicPartition(self.topic, partition))
        if p is None:
            raise self._error(ErrorCode.not_leader_or_follower, f"{self.topic}-{partition} is not here")
        for header, batch in scan_batches(p.log, p.log_start_offset):
            try:
                if header.is_control:
                    if header.producer_id >= 0:
                        yield TxnMarker(header.producer_id, control_type(batch) is ControlType.COMMIT)
                    continue
                records = decode_records(batch)
            except LogError as exc:
                raise self._error(ErrorCode.corrupt_message, str(exc)) from exc
            for record in records:
                if record.key is None:
                    continue
                if header.is_transactional:
                    yield TxnRecord(record.key, record.value, header.producer_id)
                else:
                    yield record.key, record.value


class LogOffsetsTopic(_InternalTopic):
    """The group coordinator's `OffsetsTopic` over __consumer_offsets."""

    topic = OFFSETS_TOPIC

    def _error(self, code: ErrorCode, message: str) -> Exception:
        return OffsetsTopicError(code, message)

    def read(self, partition: int) -> Iterator[LogEntry]:
        return self._entries(partition)


class LogTxnStateTopic(_InternalTopic):
    """The transaction coordinator's `TxnStateLog` over __transaction_state (never transactional itself)."""

    topic = TRANSACTION_STATE_TOPIC

    def _error(self, code: ErrorCode, message: str) -> Exception:
        return TxnLogError(code, message)

    def read(self, partition: int) -> Iterator[KeyValue]:
        for entry in self._entries(partition):
            if not isinstance(entry, TxnMarker | TxnRecord):
                yield entry
