"""Client commands: topics, produce, consume, groups. Thin over tinystream.cli.kafka_client."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

import click
import orjson
from kafka import TopicPartition
from kafka.admin import NewPartitions, NewTopic

from tinystream.cli.consumer_group_describe import DescribedConsumerGroup, describe_consumer_group
from tinystream.cli.kafka_client import (
    ClientError,
    admin,
    consumer,
    group_lag,
    producer,
    translated,
)
from tinystream.cli.start_position import BadPosition, StartPosition, parse_offset, parse_time

VALUE_SCHEMA_CONFIG = "tinystream.value.schema"

bootstrap_option = click.option(
    "--bootstrap", "-b", envvar="TINYSTREAM_BOOTSTRAP", default="127.0.0.1:9092", show_default=True,
    help="Broker address(es), comma-separated (env TINYSTREAM_BOOTSTRAP).",
)


def reports_client_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ClientError as exc:
            raise click.ClickException(str(exc)) from None

    return wrapper


@click.group()
def topics() -> None:
    """Create, list, describe and delete topics."""


@topics.command("create")
@bootstrap_option
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(1, 100_000), default=1, show_default=True)
@click.option("--replication-factor", "-r", type=click.IntRange(1, 32), default=1, show_default=True)
@click.option("--config", "-c", "configs", multiple=True, metavar="KEY=VALUE", help="Topic config (Kafka names).")
@click.option("--schema", "schema_file", type=click.File("r"), default=None, metavar="FILE.json",
              help="JSON Schema every record value must match (sets tinystream.value.schema).")
@reports_client_errors
def topics_create(bootstrap: str, name: str, partitions: int, replication_factor: int, configs: tuple[str, ...],
                  schema_file: Any) -> None:
    """Create topic NAME."""
    topic_configs = dict(_pair(item, "--config") for item in configs)
    if schema_file is not None:
        text = schema_file.read()
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise click.BadParameter(f"{schema_file.name} is not JSON: {exc}", param_hint="--schema") from None
        topic_configs[VALUE_SCHEMA_CONFIG] = text
    with admin(bootstrap) as client, translated(bootstrap):
        client.create_topics([NewTopic(name, partitions, replication_factor, topic_configs=topic_configs)])
    click.echo(f"created topic {name} ({partitions} partitions, replication factor {replication_factor})")


@topics.command("list")
@bootstrap_option
@reports_client_errors
def topics_list(bootstrap: str) -> None:
    """List topics (internal ones too)."""
    with admin(bootstrap) as client, translated(bootstrap):
        for name in sorted(client.list_topics()):
            click.echo(name)


@topics.command("describe")
@bootstrap_option
@click.argument("names", nargs=-1)
@reports_client_errors
def topics_describe(bootstrap: str, names: tuple[str, ...]) -> None:
    """Partitions, leaders, replicas and ISR of topics (all when none named)."""
    with admin(bootstrap) as client, translated(bootstrap):
        described = client.describe_topics(list(names) or None)
    for topic in sorted(described, key=lambda t: t["name"]):
        if topic.get("error_code"):
            click.echo(f"topic {topic['name']}  error={topic['error_code']}")
            continue
        click.echo(f"topic {topic['name']}  partitions={len(topic['partitions'])}"
                   + ("  internal" if topic.get("is_internal") else ""))
        for part in sorted(topic["partitions"], key=lambda p: p["partition_index"]):
            click.echo(f"  partition {part['partition_index']}  leader={part['leader_id']}  "
                       f"epoch={part['leader_epoch']}  replicas={part['replica_nodes']}  isr={part['isr_nodes']}")


@topics.command("delete")
@bootstrap_option
@click.argument("names", nargs=-1, required=True)
@reports_client_errors
def topics_delete(bootstrap: str, names: tuple[str, ...]) -> None:
    """Delete topics and their data."""
    with admin(bootstrap) as client, translated(bootstrap):
        client.delete_topics(list(names))
    click.echo("deleted " + ", ".join(names))


@topics.command("grow")
@bootstrap_option
@click.argument("name")
@click.option("--partitions", "-p", type=click.IntRange(1, 100_000), required=True, help="New total count.")
@reports_client_errors
def topics_grow(bootstrap: str, name: str, partitions: int) -> None:
    """Grow topic NAME to a total of --partitions."""
    with admin(bootstrap) as client, translated(bootstrap):
        client.create_partitions({name: NewPartitions(total_count=partitions)})
    click.echo(f"topic {name} now has {partitions} partitions")


@click.command()
@bootstrap_option
@click.argument("topic")
@click.option("--key-separator", "-K", default=None, help="Split each line into KEY<sep>VALUE.")
@click.option("--header", "-H", "headers", multiple=True, metavar="KEY=VALUE", help="Header on every record.")
@click.option("--partition", type=int, default=None, help="Send every record to this partition.")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]), default="none")
@reports_client_errors
def produce(bootstrap: str, topic: str, key_separator: str | None, headers: tuple[str, ...],
            partition: int | None, acks: str, compression: str) -> None:
    """Produce lines from stdin to TOPIC, one record per line."""
    record_headers = [(k, v.encode()) for k, v in (_pair(h, "--header") for h in headers)]
    client = producer(bootstrap, acks=acks if acks == "all" else int(acks),
                      compression_type=None if compression == "none" else compression)
    count = 0
    try:
        with translated(bootstrap):
            for line in sys.stdin:
                line = line.rstrip("\n")
                key: bytes | None = None
                if key_separator is not None and key_separator in line:
                    raw_key, line = line.split(key_separator, 1)
                    key = raw_key.encode()
                client.send(topic, value=line.encode(), key=key, headers=record_headers, partition=partition)
                count += 1
            client.flush()
    finally:
        client.close()
    click.echo(f"produced {count} records to {topic}", err=True)


@click.command()
@bootstrap_option
@click.argument("topic", required=False)
@click.option("--pattern", default=None, metavar="REGEX",
              help="Subscribe to every topic whose name matches (topics created later are picked up).")
@click.option("--partition", "-p", type=click.IntRange(0), default=None, help="Read only this partition of TOPIC.")
@click.option("--offset", "start_offset", default=None, metavar="N|earliest|latest",
              help="Start here (with --partition: that partition; else every partition of TOPIC).")
@click.option("--from-time", default=None, metavar="TIME",
              help="Start at the first record at or after TIME: ISO-8601, or relative like -15m (ListOffsets by time).")
@click.option("--group", "-g", default=None, help="Consume as a member of this group (commits offsets).")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset when nothing is committed.")
@click.option("--max-records", "-n", type=click.IntRange(1), default=None, help="Stop after this many records.")
@click.option("--timeout-ms", type=click.IntRange(0), default=10_000, show_default=True,
              help="Stop when no record arrives for this long.")
@click.option("--format", "output_format", type=click.Choice(["value", "kv", "json"]), default="value",
              show_default=True)
@reports_client_errors
def consume(bootstrap: str, topic: str | None, pattern: str | None, partition: int | None, start_offset: str | None,
            from_time: str | None, group: str | None, from_beginning: bool, max_records: int | None,
            timeout_ms: int, output_format: str) -> None:
    """Print records of TOPIC (or of every topic matching --pattern) to stdout."""
    if (topic is None) == (pattern is None):
        raise click.UsageError("name one TOPIC, or --pattern REGEX")
    if pattern is not None:
        if partition is not None or start_offset is not None or from_time is not None:
            raise click.UsageError("--pattern follows topics as they come: --partition, --offset and --from-time need a TOPIC")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise click.UsageError(f"--pattern {pattern!r} is not a regular expression: {exc}") from None
    if start_offset is not None and from_time is not None:
        raise click.UsageError("give --offset or --from-time, not both")
    try:
        position = (parse_offset(start_offset) if start_offset is not None
                    else parse_time(from_time, now_ms=int(time.time() * 1000)) if from_time is not None else None)
    except BadPosition as exc:
        raise click.UsageError(str(exc)) from None
    client = consumer(bootstrap, group_id=group, enable_auto_commit=group is not None,
                      auto_offset_reset="earliest" if from_beginning else "latest",
                      consumer_timeout_ms=timeout_ms, metadata_max_age_ms=2_000 if pattern else 300_000)
    seen = 0
    try:
        with translated(bootstrap):
            if pattern is not None:
                client.subscribe(pattern=pattern)
            elif partition is None and position is None:
                client.subscribe([topic])
            else:
                assert topic is not None
                _assign(client, topic, partition, position)
            for record in client:
                click.echo(_format_record(record, output_format))
                seen += 1
                if max_records is not None and seen >= max_records:
                    break
            if group is not None:
                client.commit()
    finally:
        client.close()
    click.echo(f"consumed {seen} records", err=True)


def _assign(client: Any, topic: str, partition: int | None, position: StartPosition | None) -> None:
    """Assign TOPIC's partitions (or one) and seek each to `position`; clear errors for what does not exist."""
    known = client.partitions_for_topic(topic)
    if not known:
        raise ClientError(f"topic {topic!r} does not exist")
    if partition is not None and partition not in known:
        raise ClientError(f"topic {topic!r} has no partition {partition} (it has {len(known)}: 0..{max(known)})")
    partitions = [TopicPartition(topic, p) for p in sorted(known) if partition is None or p == partition]
    client.assign(partitions)
    if position is None:
        return
    if position.edge == "earliest":
        client.seek_to_beginning(*partitions)
    elif position.edge == "latest":
        client.seek_to_end(*partitions)
    elif position.offset is not None:
        starts, ends = client.beginning_offsets(partitions), client.end_offsets(partitions)
        for tp in partitions:
            if not starts[tp] <= position.offset <= ends[tp]:
                raise ClientError(f"offset {position.offset} is out of range for {tp.topic}-{tp.partition}: "
                                  f"it holds offsets {starts[tp]}..{ends[tp]}")
            client.seek(tp, position.offset)
    else:
        assert position.timestamp_ms is not None
        found = client.offsets_for_times({tp: position.timestamp_ms for tp in partitions})
        ends = client.end_offsets(partitions)
        for tp in partitions:
            at = found.get(tp)
            client.seek(tp, at.offset if at is not None else ends[tp])  # nothing that late: the end


@click.group()
def groups() -> None:
    """List and describe consumer groups (with lag)."""


@groups.command("list")
@bootstrap_option
@reports_client_errors
def groups_list(bootstrap: str) -> None:
    with admin(bootstrap) as client, translated(bootstrap):
        listed = client.list_groups()
    for group in sorted(listed, key=_group_name):
        click.echo(_group_name(group))


@groups.command("describe")
@bootstrap_option
@click.argument("group_id")
@click.option("--isolation", type=click.Choice(["read_uncommitted", "read_committed"]), default="read_uncommitted",
              show_default=True, help="Lag to the high watermark, or to the last stable offset (transactions).")
@reports_client_errors
def groups_describe(bootstrap: str, group_id: str, isolation: str) -> None:
    """State, members and per-partition lag of GROUP_ID (to the LSO with --isolation read_committed)."""
    with admin(bootstrap) as client, translated(bootstrap):
        described = client.describe_groups([group_id])
    # kafka-python < 2.3 answers a list of GroupInformation tuples, 2.3+ a dict of dicts by group id.
    groups_found = described.values() if isinstance(described, dict) else described
    consumer_group = describe_consumer_group(bootstrap, group_id)  # KIP-848: DescribeGroups shows it Dead
    if consumer_group is not None:
        _echo_consumer_group(consumer_group)
    for group in groups_found if consumer_group is None else ():
        info = group if isinstance(group, dict) else group._asdict()
        members = info.get("members") or []
        state = info.get("state") or info.get("group_state")
        protocol = info.get("protocol") or info.get("protocol_data") or info.get("protocol_type")
        click.echo(f"group {group_id}  state={state}  protocol={protocol}  members={len(members)}")
    click.echo(f"{'TOPIC':<30} {'PARTITION':>9} {'COMMITTED':>12} {'END':>12} {'LAG':>10}")
    for row in group_lag(bootstrap, group_id, isolation=isolation):
        click.echo(f"{row.topic:<30} {row.partition:>9} {row.committed:>12} {row.end_offset:>12} {row.lag:>10}")


def _echo_consumer_group(group: DescribedConsumerGroup) -> None:
    """A KIP-848 group: epochs, assignor, and each member's assignment (and target while it differs)."""

    def fmt(assignment: dict[str, list[int]]) -> str:
        return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(assignment.items())) or "-"

    click.echo(f"group {group.group_id}  type=consumer  state={group.state}  epoch={group.group_epoch}  "
               f"assignment-epoch={group.assignment_epoch}  assignor={group.assignor}  members={len(group.members)}")
    for m in group.members:
        target = "" if m.target_assignment == m.assignment else f"  target={fmt(m.target_assignment)}"
        click.echo(f"  member {m.member_id}  client={m.client_id}  host={m.client_host}  epoch={m.member_epoch}  "
                   f"assignment={fmt(m.assignment)}{target}")


def _format_record(record: Any, output_format: str) -> str:
    value = record.value.decode(errors="replace") if record.value is not None else ""
    if output_format == "value":
        return value
    key = record.key.decode(errors="replace") if record.key is not None else ""
    if output_format == "kv":
        return f"{key}\t{value}"
    log_append = record.timestamp_type == 1  # the topic's message.timestamp.type is LogAppendTime
    return orjson.dumps({
        "topic": record.topic, "partition": record.partition, "offset": record.offset,
        "timestamp": record.timestamp, "timestamp_type": "LogAppendTime" if log_append else "CreateTime",
        "create_timestamp": None if log_append else record.timestamp,
        "log_append_timestamp": record.timestamp if log_append else None,
        "key": key or None, "value": value,
        "headers": {k: v.decode(errors="replace") for k, v in (record.headers or [])},
    }).decode()


def _group_name(group: Any) -> str:
    if isinstance(group, dict):
        return group.get("group_id") or group.get("group")
    if isinstance(group, tuple):
        return group[0]
    return str(group)


def _pair(item: str, flag: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise click.UsageError(f"{flag} expects KEY=VALUE, got {item!r}")
    return key.strip(), value
