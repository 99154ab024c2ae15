"""The group coordinator's `OffsetsTopic`, over this broker's __consumer_offsets logs.

`append` writes one uncompressed RecordBatch v2 (built with
`storage.batch.build_batch`, keys and values as the coordinator encoded them)
through the same leader path client produces take, with acks=all, and returns
once the high watermark passes it (offsets.commit.timeout.ms); any failure
becomes `OffsetsTopicError(code)` with the partition-level code.

`read` walks a partition from its log start to its log end, batch by batch,
decoding records (decompression bounded by storage.compression).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.errors import OffsetsTopicError
from tinystream.broker.metadata.topics import OFFSETS_TOPIC
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.storage.base import LogError
from tinystream.broker.storage.batch import Record, build_batch, decode_records, read_header
from tinystream.broker.storage.log_scan import scan_batches
from tinystream.broker.storage.topic_partition import TopicPartition

KeyValue = tuple[bytes, bytes | None]

#: Kafka's offsets.commit.timeout.ms.
COMMIT_TIMEOUT_MS = 5000


class LogOffsetsTopic:
    def __init__(self, replicas: ReplicaManager, clock: Callable[[], int]) -> None:
        self._replicas = replicas
        self._clock = clock

    async def append(self, partition: int, records: list[KeyValue]) -> None:
        if not records:
            return
        now = self._clock()
        batch = build_batch(
            [Record(key=k, value=v) for k, v in records], base_timestamp=now, max_timestamp=now
        )
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        outcomes = self._replicas.append([(tp, memoryview(batch), read_header(batch))], required_acks=-1)
        outcome = outcomes[tp]
        if outcome.error != ErrorCode.none:
            raise OffsetsTopicError(outcome.error, outcome.message or "")
        outcomes = await self._replicas.wait_replicated(outcomes, COMMIT_TIMEOUT_MS)
        if outcomes[tp].error != ErrorCode.none:
            raise OffsetsTopicError(outcomes[tp].error, outcomes[tp].message or "")

    def read(self, partition: int) -> Iterator[KeyValue]:
        p = self._replicas.get(TopicPartition(OFFSETS_TOPIC, partition))
        if p is None:
            raise OffsetsTopicError(ErrorCode.not_leader_or_follower, f"__consumer_offsets-{partition} is not here")
        for _, batch in scan_batches(p.log, p.log_start_offset):
            try:
                records = decode_records(batch)
            except LogError as exc:
                raise OffsetsTopicError(ErrorCode.corrupt_message, str(exc)) from exc
            for record in records:
                if record.key is not None:
                    yield record.key, record.value
