"""`tinystream transactions list | describe | hanging`: the cluster's transactions, as kafka-transactions.sh shows them.

kafka-python (the CLI's usual client) has no transaction admin APIs, so this
command speaks them itself over the broker's small protocol client:

- list: ListTransactions to every broker (each answers for the transaction
  coordinators it runs), optionally filtered by state;
- describe: FindCoordinator (key type 1), then DescribeTransactions there;
- hanging: DescribeProducers on every partition's leader; an open
  transaction in a partition is hanging when no coordinator has its
  producer id in an Ongoing/Prepare* transaction, or when it has been open
  longer than --max-transaction-timeout (Kafka's find-hanging rule).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click
import orjson

from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.protocol.codec import build, schemas

T = TypeVar("T")

_METADATA, _FIND_COORDINATOR, _DESCRIBE_PRODUCERS, _DESCRIBE_TXNS, _LIST_TXNS = 3, 10, 61, 65, 66
_LIVE_STATES = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}

bootstrap_option = click.option(
    "--bootstrap", "-b", envvar="TINYSTREAM_BOOTSTRAP", default="127.0.0.1:9092", show_default=True,
    help="Broker address(es), comma-separated (env TINYSTREAM_BOOTSTRAP).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="JSON on stdout instead of a table.")


def _request(api_key: int, version: int, /, **fields: Any) -> Any:
    return build(schemas(api_key, version).request_type, fields)


def _entity(api_key: int, version: int, entity: str, /, **fields: Any) -> Any:
    return build(schemas(api_key, version).request_class(entity), fields)


class _Cluster:
    """One connection per broker, opened on first use."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = [b.strip() for b in bootstrap.split(",") if b.strip()]
        self._clients: dict[int, KafkaClient] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}

    async def open(self) -> None:
        last: Exception | None = None
        for address in self._bootstrap:
            host, _, port = address.rpartition(":")
            try:
                client = await KafkaClient.connect(host, int(port), client_id="tinystream-cli")
            except OSError as exc:
                last = exc
                continue
            try:
                metadata = await client.request(_request(_METADATA, 9, topics=None, allow_auto_topic_creation=False,
                                                         include_cluster_authorized_operations=False,
                                                         include_topic_authorized_operations=False))
            finally:
                await client.close()
            self.brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
            self.leaders = {(t.name, p.partition_index): p.leader_id for t in metadata.topics for p in t.partitions
                            if p.leader_id >= 0}
            return
        raise click.ClickException(f"no broker reachable at {','.join(self._bootstrap)}: {last}")

    async def call(self, broker_id: int, body: Any) -> Any:
        client = self._clients.get(broker_id)
        if client is None:
            host, port = self.brokers[broker_id]
            client = self._clients[broker_id] = await KafkaClient.connect(host, port, client_id="tinystream-cli")
        return await client.request(body, timeout=15)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()


def _run(bootstrap: str, work: Callable[[_Cluster], Awaitable[T]]) -> T:
    async def main() -> T:
        cluster = _Cluster(bootstrap)
        await cluster.open()
        try:
            return await work(cluster)
        finally:
            await cluster.close()

    try:
        return asyncio.run(main())
    except (OSError, TimeoutError) as exc:
        raise click.ClickException(f"talking to {bootstrap} failed: {exc}") from None


async def _list(cluster: _Cluster, states: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    out = []
    for broker_id in sorted(cluster.brokers):
        response = await cluster.call(broker_id, _request(_LIST_TXNS, 0, state_filters=states, producer_id_filters=()))
        for t in response.transaction_states:
            out.append({"transactional_id": t.transactional_id, "coordinator": broker_id,
                        "producer_id": t.producer_id, "state": t.transaction_state})
    return sorted(out, key=lambda t: t["transactional_id"])


def _print(rows: list[dict[str, Any]], columns: list[str], as_json: bool) -> None:
    if as_json:
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    widths = {c: max([len(c), *(len(str(r[c])) for r in rows)]) for c in columns}
    click.echo("  ".join(c.upper().ljust(widths[c]) for c in columns))
    for r in rows:
        click.echo("  ".join(str(r[c]).ljust(widths[c]) for c in columns))


@click.group()
def transactions() -> None:
    """List and describe transactions; find hanging ones."""


@transactions.command("list")
@bootstrap_option
@click.option("--state", "states", multiple=True, help="Only these states (Ongoing, PrepareCommit, ...).")
@json_option
def transactions_list(bootstrap: str, states: tuple[str, ...], as_json: bool) -> None:
    """Every transactional id the coordinators know, with its state."""
    rows = _run(bootstrap, lambda c: _list(c, states))
    _print(rows, ["transactional_id", "coordinator", "producer_id", "state"], as_json)


@transactions.command("describe")
@bootstrap_option
@click.argument("transactional_id")
@json_option
def transactions_describe(bootstrap: str, transactional_id: str, as_json: bool) -> None:
    """One transactional id: state, producer id and epoch, timeout, partitions."""

    async def work(cluster: _Cluster) -> dict[str, Any]:
        any_broker = min(cluster.brokers)
        found = await cluster.call(any_broker, _request(_FIND_COORDINATOR, 3, key=transactional_id, key_type=1))
        if found.error_code.value != 0:
            raise click.ClickException(f"no coordinator for {transactional_id!r}: {found.error_code.name}")
        response = await cluster.call(found.node_id, _request(_DESCRIBE_TXNS, 0, transactional_ids=(transactional_id,)))
        t = response.transaction_states[0]
        if t.error_code.value != 0:
            raise click.ClickException(f"{transactional_id!r}: {t.error_code.name}")
        start = t.transaction_start_time.timestamp() * 1000 if t.transaction_state == "Ongoing" else -1
        return {
            "transactional_id": t.transactional_id, "coordinator": found.node_id, "state": t.transaction_state,
            "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
            "timeout_ms": int(t.transaction_timeout.total_seconds() * 1000),
            "open_for_ms": int(time.time() * 1000 - start) if start > 0 else None,
            "partitions": [f"{d.topic}-{p}" for d in t.topics for p in d.partitions],
        }

    row = _run(bootstrap, work)
    if as_json:
        click.echo(orjson.dumps(row, option=orjson.OPT_INDENT_2).decode())
    else:
        for key, value in row.items():
            click.echo(f"{key:18} {', '.join(value) if isinstance(value, list) else value}")


@transactions.command("hanging")
@bootstrap_option
@click.option("--max-transaction-timeout", "max_timeout_ms", type=click.IntRange(0), default=900_000,
              show_default=True, help="ms (transaction.max.timeout.ms): open longer than this is hanging.")
@json_option
def transactions_hanging(bootstrap: str, max_timeout_ms: int, as_json: bool) -> None:
    """Open transactions in partitions that no coordinator is finishing (they hold back read_committed)."""

    async def work(cluster: _Cluster) -> list[dict[str, Any]]:
        live = {t["producer_id"] for t in await _list(cluster) if t["state"] in _LIVE_STATES}
        by_leader: dict[int, dict[str, list[int]]] = {}
        for (topic, index), leader in cluster.leaders.items():
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(index)
        now = int(time.time() * 1000)
        rows = []
        for leader, topics in sorted(by_leader.items()):
            body = _request(_DESCRIBE_PRODUCERS, 0, topics=tuple(
                _entity(_DESCRIBE_PRODUCERS, 0, "TopicRequest", name=t, partition_indexes=tuple(sorted(ps)))
                for t, ps in sorted(topics.items())))
            response = await cluster.call(leader, body)
            for topic in response.topics:
                for part in topic.partitions:
                    for p in part.active_producers:
                        if p.current_txn_start_offset < 0:
                            continue
                        age = now - p.last_timestamp if p.last_timestamp >= 0 else 0
                        if p.producer_id in live and age <= max_timeout_ms:
                            continue
                        rows.append({"topic": topic.name, "partition": part.partition_index,
                                     "producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                                     "start_offset": p.current_txn_start_offset, "idle_ms": age})
        return rows

    rows = _run(bootstrap, work)
    if not rows and not as_json:
        click.echo("no hanging transactions")
        return
    _print(rows, ["topic", "partition", "producer_id", "producer_epoch", "start_offset", "idle_ms"], as_json)
