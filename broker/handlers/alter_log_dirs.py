"""AlterReplicaLogDirs (34, v1-2): move a partition's log to another of this broker's log dirs.

`kafka-reassign-partitions.sh` with "log_dirs" in its JSON and
AdminClient.alterReplicaLogDirs send it. Needs ALTER on the CLUSTER (Kafka's
rule), else CLUSTER_AUTHORIZATION_FAILED for every partition. Per partition,
as Kafka's ReplicaManager.alterReplicaLogDirs: a path that is not one of
`log.dirs` (exact absolute path) -> LOG_DIR_NOT_FOUND; a partition this broker
does not host -> NOT_LEADER_OR_FOLLOWER, or UNKNOWN_TOPIC_OR_PARTITION when
no such partition exists; already in that dir -> NONE, nothing done.

The move is simpler than Kafka's (a "future" log filled by a fetcher and
swapped in once caught up): the log is closed, its directory copied on a
worker thread (`log_manager.copy_partition`: crash-safe, see there), reopened
in the new dir, and the old directory deleted; the answer comes when the move
is done; moves on one broker run one at a time. While the copy runs, appends and reads of that partition answer
KAFKA_STORAGE_ERROR (retriable: clients retry), unlike Kafka's online move.
A failed copy reopens the log where it was and answers KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.replication.partition import Partition
from tinystream.broker.storage.log_manager import LogManager, copy_partition
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.storage.txn_index import FILE_NAME as TXN_INDEX_FILE
from tinystream.broker.storage.txn_index import TxnIndex

log = logging.getLogger(__name__)
# One move at a time per broker: two requests for one partition must not copy into the same
# `.move-tmp` at once, and the second then sees where the first put it.
_MOVES: WeakKeyDictionary[LogManager, asyncio.Lock] = WeakKeyDictionary()


def target_dir(path: str, log_dirs: Sequence[Path]) -> Path | None:
    """The configured log dir the request names (Kafka compares absolute paths), or None."""
    for d in log_dirs:
        if os.path.abspath(d) == path:
            return d
    return None


def check(path: str, log_dirs: Sequence[Path], hosted_in: Path | None, exists: bool) -> ErrorCode | None:
    """A partition's answer known without moving anything, in Kafka's order; None: move it.

    `hosted_in` is the log dir holding this broker's replica (None: not hosted here); `exists`
    says whether the cluster has such a partition at all."""
    target = target_dir(path, log_dirs)
    if target is None:
        return ErrorCode.log_dir_not_found
    if hosted_in is None:
        return ErrorCode.not_leader_or_follower if exists else ErrorCode.unknown_topic_or_partition
    if os.path.abspath(hosted_in) == os.path.abspath(target):
        return ErrorCode.none
    return None


async def handle_alter_replica_log_dirs(ctx: BrokerContext, call: Call) -> Any:
    wanted = [(d.path, TopicPartition(t.name, int(p))) for d in call.body.dirs for t in d.topics for p in t.partitions]
    answers: dict[TopicPartition, ErrorCode] = {}
    if not authz.allowed_cluster(ctx, call, AclOperation.ALTER):
        answers = {tp: ErrorCode.cluster_authorization_failed for _, tp in wanted}
    else:
        lock = _MOVES.setdefault(ctx.replicas.logs, asyncio.Lock())
        for path, tp in wanted:
            async with lock:
                answers[tp] = await _alter(ctx, path, tp)
    by_topic: dict[str, list[Any]] = {}
    for tp, code in answers.items():
        by_topic.setdefault(tp.topic, []).append(
            call.make("AlterReplicaLogDirPartitionResult", partition_index=tp.partition, error_code=code))
    return call.respond(throttle_time=millis(0), results=tuple(
        call.make("AlterReplicaLogDirTopicResult", topic_name=topic, partitions=tuple(parts))
        for topic, parts in by_topic.items()))


async def _alter(ctx: BrokerContext, path: str, tp: TopicPartition) -> ErrorCode:
    logs = ctx.replicas.logs
    partition = ctx.replicas.get(tp)
    spec = ctx.topics.get(tp.topic)
    exists = spec is not None and 0 <= tp.partition < spec.partitions
    hosted_in = None
    if partition is not None:
        directory = logs.partition_dir(tp)
        hosted_in = logs.log_dirs[0] if directory is None else directory.parent
    known = check(path, logs.log_dirs, hosted_in, exists)
    if known is not None:
        return known
    target = target_dir(path, logs.log_dirs)
    source = logs.partition_dir(tp)
    if partition is None or target is None or source is None:  # an in-memory log has no directory to move
        return ErrorCode.kafka_storage_error
    return await _move(ctx, logs, partition, source, target)


async def _move(ctx: BrokerContext, logs: LogManager, partition: Partition, source: Path, target: Path) -> ErrorCode:
    old_log, config = partition.log, partition.log.config
    await asyncio.to_thread(old_log.close)  # appends from here on fail (retriable) until the new log is in
    try:
        moved = await asyncio.to_thread(copy_partition, source, target)
    except Exception:
        # Before the source was renamed away it is whole and reopens; after, the copy was complete.
        moved = source if source.is_dir() else target / source.name
        log.exception("moving %s to %s failed; it is in %s", partition.tp, target, moved.parent)
    partition.log = await asyncio.to_thread(logs.open_in, moved, config, ctx.replicas.clock())
    if moved == source:
        return ErrorCode.kafka_storage_error
    logs.relocated(partition.tp, moved)
    partition.txn_index = TxnIndex(moved / TXN_INDEX_FILE)
    return ErrorCode.none
