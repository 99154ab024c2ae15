"""Driver-side glue shared by the batch and stream readers: metadata -> offsets.

Holds the lazily created OffsetsClient and drops it when pickled: PySpark
pickles the reader into every task's read function, and a reader must be
cheap to build because PySpark builds several (one per planner process).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinystream.spark.kafka_client import OffsetsClient
from tinystream.spark.offsets import TopicPartition
from tinystream.spark.options import Assign, OffsetSpec, ReadOptions, Subscribe
from tinystream.spark.planning import Role, resolve_offsets, select_partitions, timestamps_to_look_up


class OffsetPlanner:
    def __init__(self, opts: ReadOptions):
        self.opts = opts
        self._client: OffsetsClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        return state

    @property
    def client(self) -> OffsetsClient:
        if self._client is None:
            self._client = OffsetsClient(
                self.opts.bootstrap_servers, self.opts.client_conf,
                retries=self.opts.fetch_retries, retry_interval_ms=self.opts.fetch_retry_interval_ms,
            )
        return self._client

    def current_partitions(self) -> tuple[TopicPartition, ...]:
        sub = self.opts.subscription
        if isinstance(sub, Assign):
            return sub.partitions
        topics = sub.topics if isinstance(sub, Subscribe) else None
        return select_partitions(sub, self.client.partitions_by_topic(topics))

    def resolve(self, spec: OffsetSpec, tps: Sequence[TopicPartition], role: Role) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        wanted = timestamps_to_look_up(spec, tps)
        by_timestamp = self.client.for_timestamps(wanted) if wanted else None
        return resolve_offsets(
            spec, tps,
            earliest=self.client.earliest(tps), latest=self.client.latest(tps),
            by_timestamp=by_timestamp, strategy=self.opts.timestamp_strategy, role=role,
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
