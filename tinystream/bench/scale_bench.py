"""`tinystream bench scale --peer kafka`: what size costs a broker, ours against Kafka, cell by cell.

    partitions   --partitions partitions (default 10,000) in topics of --per-topic (500), one small
                 batch in each; then the broker is stopped cleanly and started again, then killed
                 (SIGKILL) and started again. Figures: create time, memory (RSS of the broker's
                 process group) per partition, and each start-up until Metadata shows a leader for every
                 partition.
    connections  --connections client connections (default 1,000), each sending ApiVersions and then
                 Metadata, all open at once. Figures: time until every one is answered, memory per
                 open connection, connections refused.
    log          one partition filled to --log-mb MB (default 2,048; the issue's 20 GB is --log-mb 20480)
                 of 1 KB records, then the same clean and unclean restarts, each until ListOffsets gives
                 the filled end offset again.

Each cell starts each broker fresh in its own folder, one broker at a time, so the two never share the
machine; rounds alternate which goes first. Both brokers get the same max.connections settings (ours
defaults to 1,000 / 250 per address, Kafka's to unlimited). Memory is what the kernel says the process
group holds (VmRSS): for Kafka that includes a JVM heap that grows in steps, so its per-partition figure
is coarse. Start-up times include the interpreter's or the JVM's own start.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.metadata.v1.request import MetadataRequest
from kio.schema.metadata.v1.response import MetadataResponse

from tinystream.bench import produce_workloads
from tinystream.bench.control import end_offsets, ensure_topic, partition_count
from tinystream.bench.memory import group_rss_bytes
from tinystream.bench.stats import Spread
from tinystream.bench.targets import Target
from tinystream.bench.wire_client import WireConnection
from tinystream.testing.peers import PeerUnavailable, RunningBroker
from tinystream.testing.peers.apache_kafka import start_apache_kafka
from tinystream.testing.peers.tinystream_broker import start_tinystream

CELLS = ("partitions", "connections", "log")
PEERS = ("tinystream", "kafka")
START_TIMEOUT = 900.0  # a big log or 10k partitions: start-up is what is measured, give it room
MB = 1 << 20

Figures = dict[str, float]


@dataclass(frozen=True)
class ScaleSizes:
    partitions: int
    per_topic: int
    connections: int
    log_mb: int


class Broker:
    """One broker kind in one folder, started, stopped and started again on the same data."""

    def __init__(self, spec: str, folder: Path, *, connections: int) -> None:
        if spec not in PEERS:
            raise PeerUnavailable(f"bench scale starts {' or '.join(PEERS)} itself, not {spec!r}")
        self.spec, self.folder = spec, folder
        limit = connections + 100
        self.overrides = {"max.connections": limit, "max.connections.per.ip": limit}
        self.running: RunningBroker | None = None

    def start(self) -> Target:
        start = start_tinystream if self.spec == "tinystream" else start_apache_kafka
        self.running = start(workdir=self.folder, overrides=self.overrides, timeout=START_TIMEOUT)
        return Target(name=self.spec, bootstrap=self.running.bootstrap, version=self.running.version,
                      process=self.running)

    def rss_mb(self) -> float:
        assert self.running is not None
        return (group_rss_bytes(self.running.process.pid) or 0) / MB

    def stop(self, *, clean: bool) -> None:
        if self.running is None:
            return
        if clean:
            self.running.stop(timeout=300)
        else:
            self.running.kill()
        self.running = None


@contextlib.contextmanager
def fresh_broker(spec: str, *, connections: int) -> Iterator[Broker]:
    with tempfile.TemporaryDirectory(prefix=f"tinystream-bench-scale-{spec}-") as folder:
        broker = Broker(spec, Path(folder), connections=connections)
        try:
            yield broker
        finally:
            broker.stop(clean=False)


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


# --------------------------------------------------------------------------- partitions


def topic_sizes(partitions: int, per_topic: int) -> list[int]:
    """Topics of `per_topic` partitions, the last one holding the rest."""
    full, rest = divmod(partitions, per_topic)
    return [per_topic] * full + ([rest] if rest else [])


async def _create_and_fill(target: Target, topics: dict[str, int]) -> None:
    conn = await WireConnection.open(*target.host_port)
    try:
        for topic, count in topics.items():
            await ensure_topic(conn, topic, count, timeout=300)
    finally:
        await conn.close()
    for topic, count in topics.items():  # one batch of 5 records per partition
        spec = produce_workloads.ProduceSpec(topic=topic, partitions=count, records=count * 5, record_size=100,
                                             batch_bytes=500, acks="1", compression="none", progress=False)
        await produce_workloads._raw_produce(target, spec, count * 5, label="filling")


async def _wait_for_leaders(target: Target, topics: dict[str, int], timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    conn = await WireConnection.open(*target.host_port)
    try:
        for topic, count in topics.items():
            while await partition_count(conn, topic) < count:
                if time.monotonic() > deadline:
                    raise click.ClickException(f"{target.name}: {topic} has no leader everywhere after {timeout}s")
                await asyncio.sleep(0.05)
    finally:
        await conn.close()


def run_partitions(spec: str, sizes: ScaleSizes) -> Figures:
    topics = {f"scale-{i}": n for i, n in enumerate(topic_sizes(sizes.partitions, sizes.per_topic))}
    with fresh_broker(spec, connections=sizes.connections) as broker:
        target = broker.start()
        idle = broker.rss_mb()
        create = timed(lambda: asyncio.run(_create_and_fill(target, topics)))
        loaded = broker.rss_mb()
        figures = {"create_s": create, "rss_idle_mb": idle, "rss_mb": loaded,
                   "kb_per_partition": (loaded - idle) * 1024 / sizes.partitions}
        for clean, name in ((True, "clean_restart_s"), (False, "unclean_restart_s")):
            broker.stop(clean=clean)
            figures[name] = timed(lambda: asyncio.run(_wait_for_leaders(broker.start(), topics)))
        return figures


# --------------------------------------------------------------------------- connections


async def _open_and_ask(target: Target, count: int) -> tuple[list[WireConnection], int]:
    """`count` connections, each answered ApiVersions then Metadata; (open ones, refused)."""
    async def one() -> WireConnection | None:
        try:
            conn = await WireConnection.open(*target.host_port, buffer_bytes=64 << 10)
            await conn.request(ApiVersionsRequest(), ApiVersionsResponse)
            await conn.request(MetadataRequest(topics=()), MetadataResponse)
            return conn
        except (OSError, asyncio.IncompleteReadError, ConnectionError):
            return None

    results = await asyncio.gather(*(one() for _ in range(count)))
    opened = [c for c in results if c is not None]
    return opened, count - len(opened)


def run_connections(spec: str, sizes: ScaleSizes) -> Figures:
    with fresh_broker(spec, connections=sizes.connections) as broker:
        target = broker.start()
        idle = broker.rss_mb()

        async def measure() -> Figures:
            start = time.perf_counter()
            opened, refused = await _open_and_ask(target, sizes.connections)
            seconds = time.perf_counter() - start
            held = broker.rss_mb()
            for conn in opened:
                await conn.close()
            return {"connect_s": seconds, "refused": float(refused), "rss_idle_mb": idle, "rss_mb": held,
                    "kb_per_connection": (held - idle) * 1024 / max(1, len(opened))}

        return asyncio.run(measure())


# --------------------------------------------------------------------------- log


async def _wait_for_end(target: Target, topic: str, end: int, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ConnectionError):
            conn = await WireConnection.open(*target.host_port)
            try:
                if (await end_offsets(conn, topic, 1, timeout=timeout)).get(0) == end:
                    return
            finally:
                await conn.close()
        if time.monotonic() > deadline:
            raise click.ClickException(f"{target.name}: {topic} did not come back to offset {end} in {timeout}s")
        await asyncio.sleep(0.05)


def run_log(spec: str, sizes: ScaleSizes) -> Figures:
    records = sizes.log_mb * MB // 1024
    with fresh_broker(spec, connections=sizes.connections) as broker:
        target = broker.start()
        produce = produce_workloads.ProduceSpec(topic="scale-log", partitions=1, records=records, record_size=1024,
                                                batch_bytes=1 << 20, acks="1", compression="none", progress=False)
        fill = produce_workloads.RUNNERS["raw"](target, produce)
        figures = {"fill_mb_per_s": sizes.log_mb / fill.seconds if fill.seconds else 0.0,
                   "log_mb": float(sizes.log_mb)}
        for clean, name in ((True, "clean_restart_s"), (False, "unclean_restart_s")):
            broker.stop(clean=clean)
            figures[name] = timed(lambda: asyncio.run(_wait_for_end(broker.start(), "scale-log", fill.records)))
        return figures


RUNNERS: dict[str, Callable[[str, ScaleSizes], Figures]] = {
    "partitions": run_partitions, "connections": run_connections, "log": run_log}


# --------------------------------------------------------------------------- report


def summary_rows(cell: str, runs: list[tuple[Figures, Figures]], peer: str) -> list[str]:
    """Markdown rows: each figure's median (range) on both sides and the median per-round ratio."""
    rows = []
    for key in runs[0][0]:
        ours = Spread.of([o[key] for o, _ in runs])
        theirs = Spread.of([p[key] for _, p in runs])
        ratios = [o[key] / p[key] for o, p in runs if p[key]]
        ratio = f"{Spread.of(ratios).median:.2f}x" if ratios else "n/a"
        rows.append(f"| {cell} | {key} | {ours.median:,.2f} [{ours.low:,.2f}..{ours.high:,.2f}] | "
                    f"{theirs.median:,.2f} [{theirs.low:,.2f}..{theirs.high:,.2f}] | {ratio} |")
    return rows


@click.command("scale")
@click.option("--peer", default="kafka", show_default=True, type=click.Choice(["kafka", "tinystream"]))
@click.option("--cells", multiple=True, type=click.Choice(CELLS), help="Cells to run (default: all three).")
@click.option("--rounds", default=1, show_default=True, type=click.IntRange(1))
@click.option("--partitions", default=10_000, show_default=True, type=click.IntRange(1))
@click.option("--per-topic", default=500, show_default=True, type=click.IntRange(1), help="Partitions per topic.")
@click.option("--connections", default=1_000, show_default=True, type=click.IntRange(1))
@click.option("--log-mb", default=2_048, show_default=True, type=click.IntRange(1),
              help="log cell: MB in the one partition (20 GB: 20480).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON on stdout.")
def scale_bench_command(peer, cells, rounds, partitions, per_topic, connections, log_mb, as_json) -> None:
    """Many partitions, many connections, a big log: start-up, recovery and memory, ours against a peer."""
    sizes = ScaleSizes(partitions, per_topic, connections, log_mb)
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if as_json else click.echo
    chosen = list(cells) or list(CELLS)
    say(f"scale: peer={peer}, cells={','.join(chosen)}, rounds={rounds}, partitions={partitions}, "
        f"connections={connections}, log-mb={log_mb}")
    results: dict[str, list[tuple[Figures, Figures]]] = {cell: [] for cell in chosen}
    for round_index in range(rounds):
        for cell_index, cell in enumerate(chosen):
            order = ("tinystream", peer) if (round_index + cell_index) % 2 == 0 else (peer, "tinystream")
            got = {}
            for index, side in enumerate(order):
                got[index] = RUNNERS[cell](side, sizes)
                say(f"round {round_index + 1} {cell:<12} {side:<10} "
                    + ", ".join(f"{k}={v:,.2f}" for k, v in got[index].items()))
            ours, theirs = (got[0], got[1]) if order[0] == "tinystream" else (got[1], got[0])
            results[cell].append((ours, theirs))
    header = f"| cell | figure | ours | {peer} | ours / {peer} |\n|---|---|---|---|---|"
    say("\n".join([header, *(row for cell in chosen for row in summary_rows(cell, results[cell], peer))]))
    if as_json:
        click.echo(json.dumps({"peer": peer, "sizes": sizes.__dict__, "rounds": [
            {"cell": cell, "ours": o, "peer": p} for cell in chosen for o, p in results[cell]]}, indent=2))
