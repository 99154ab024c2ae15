"""DescribeLogDirs (35, v1-4): each log dir of this broker, the partitions it holds and their
sizes, and its volume's total and usable bytes (KIP-827, v4).

`kafka-log-dirs.sh --describe` and AdminClient.describeLogDirs ask every
broker this. Needs DESCRIBE on the CLUSTER (Kafka's rule), else a top-level
CLUSTER_AUTHORIZATION_FAILED and no results. Topics null means every hosted
partition. This broker keeps no future logs (AlterReplicaLogDirs,
`alter_log_dirs`, moves a log by one copy, not a future log caught up in the
background): is_future_key is always false and offset_lag is Kafka's figure
for a current log, max(high watermark - log end, 0). A dir whose volume cannot be
read answers KAFKA_STORAGE_ERROR and the other dirs still answer. A broker
whose logs live in memory reports them under its first log dir.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis


@dataclass(frozen=True, slots=True)
class HostedLog:
    """One partition's log as DescribeLogDirs reports it."""

    log_dir: Path
    topic: str
    partition: int
    size: int
    offset_lag: int


@dataclass(frozen=True, slots=True)
class DirReport:
    log_dir: Path
    logs: tuple[HostedLog, ...]
    total_bytes: int = -1
    usable_bytes: int = -1
    error: ErrorCode = ErrorCode.none


def group_by_dir(log_dirs: Iterable[Path], logs: Iterable[HostedLog],
                 wanted: set[tuple[str, int]] | None) -> list[tuple[Path, tuple[HostedLog, ...]]]:
    """Every log dir in order, with the logs in it that the request asks for (None: all), sorted."""
    chosen: dict[Path, list[HostedLog]] = {d: [] for d in log_dirs}
    for hosted in logs:
        if wanted is None or (hosted.topic, hosted.partition) in wanted:
            chosen.setdefault(hosted.log_dir, []).append(hosted)
    return [(d, tuple(sorted(found, key=lambda h: (h.topic, h.partition)))) for d, found in chosen.items()]


def _volume(log_dir: Path, logs: tuple[HostedLog, ...]) -> DirReport:
    try:
        usage = shutil.disk_usage(log_dir)
    except OSError:
        return DirReport(log_dir, (), error=ErrorCode.kafka_storage_error)
    return DirReport(log_dir, logs, total_bytes=usage.total, usable_bytes=usage.free)


def _hosted(ctx: BrokerContext) -> list[HostedLog]:
    logs = ctx.replicas.logs
    first = logs.log_dirs[0]
    hosted = []
    for partition in ctx.replicas.partitions():
        directory = logs.partition_dir(partition.tp)
        hosted.append(HostedLog(
            log_dir=first if directory is None else directory.parent, topic=partition.tp.topic,
            partition=partition.tp.partition, size=partition.log.size_bytes(),
            offset_lag=max(partition.high_watermark - partition.log_end_offset, 0)))
    return hosted


def _wanted(topics: Any) -> set[tuple[str, int]] | None:
    if topics is None:
        return None
    return {(t.topic, int(p)) for t in topics for p in t.partitions}


async def handle_describe_log_dirs(ctx: BrokerContext, call: Call) -> Any:
    if not authz.allowed_cluster(ctx, call, AclOperation.DESCRIBE):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.cluster_authorization_failed, results=())
    reports = [_volume(d, logs) for d, logs in group_by_dir(ctx.replicas.logs.log_dirs, _hosted(ctx),
                                                            _wanted(call.body.topics))]
    return call.respond(throttle_time=millis(0), error_code=ErrorCode.none, results=tuple(
        _result(call, report) for report in reports))


def _result(call: Call, report: DirReport) -> Any:
    by_topic: dict[str, list[HostedLog]] = {}
    for hosted in report.logs:
        by_topic.setdefault(hosted.topic, []).append(hosted)
    return call.make(
        "DescribeLogDirsResult", error_code=report.error, log_dir=os.path.abspath(report.log_dir),
        total_bytes=report.total_bytes, usable_bytes=report.usable_bytes, topics=tuple(
            call.make("DescribeLogDirsTopic", name=topic, partitions=tuple(
                call.make("DescribeLogDirsPartition", partition_index=h.partition, partition_size=h.size,
                          offset_lag=h.offset_lag, is_future_key=False) for h in logs))
            for topic, logs in by_topic.items()))
