"""`tinystream bench compare --peer kafka`: the produce / consume matrix, ours against a peer, in pairs.

    tinystream bench compare --peer kafka                       # Kafka's own perf tools, 3 rounds
    tinystream bench compare --peer kafka --rounds 5 --out bench-out --cells produce --cells consume-lz4

Both brokers are started once and stay up; each round runs every cell on both, back to back, the order
alternating from cell to cell and round to round (ours first, then the peer first), so that a slow
minute on a shared machine falls on both sides. The idle broker of a pair only waits (measured over 20 s:
an idle TinyStream used 0.1% of a core, an idle Kafka 4.3.1 in KRaft combined mode 4.5%, so if anything
the peer's idle cost slows ours a little). The load generator is Kafka's own
ProducerPerformance / ConsumerPerformance by default (`--client java`, a client nobody here wrote);
`--client raw` is our pipelined protocol client, `--client confluent` librdkafka and `--client franz`
franz-go's kgo (franzbench, franz_client.py: a Go client, not bound by one thread). Each cell prints
the median records/s ratio and broker CPU per GB ratio with their ranges; `--out DIR` also writes
compare.json, compare.md (the table) and two pictures (throughput.png, cpu.png; needs the [bench]
extra's matplotlib).

Two cells run on 3-broker clusters instead (cluster_cells.py), and only when asked for with `--cells`
(the clusters start only then): `replicated` (RF 3, acks=all, a producer and a consumer at the same time)
and `latency` (end to end at `--latency-rate` records/s for `--latency-seconds`); `--out` adds latency.png.
The TLS cells (produce-tls, consume-tls; tls_cells.py) start both brokers with an SSL listener beside
PLAINTEXT (one throwaway certificate for both) and run the uncompressed workload through it. What TLS
and SASL cost against our own PLAINTEXT is `bench produce|consume --security`.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import click

from tinystream.bench import cluster_cells, consume_workloads, franz_client, produce_workloads, tls_cells
from tinystream.bench.compare_report import (
    LatencyPair,
    Pair,
    latency_table,
    summarize,
    table,
    write_latency_picture,
    write_pictures,
)
from tinystream.bench.stats import RunResult
from tinystream.bench.targets import Target, describe_spec, open_target
from tinystream.testing.peers import PeerUnavailable

CELLS = ("produce", "produce-lz4", "produce-zstd", "consume", "consume-lz4", "consume-zstd", *tls_cells.TLS_CELLS)
CLUSTER_CELLS = ("replicated", "latency")  # 3-broker clusters; run only when named with --cells
REPLICATED_ROWS = ("replicated-produce", "replicated-consume")  # the replicated cell's two table rows


def pair_order(cell_index: int, round_index: int) -> tuple[str, str]:
    """Ours first on even (cell + round), the peer first otherwise."""
    return ("ours", "peer") if (cell_index + round_index) % 2 == 0 else ("peer", "ours")


def run_cell(cell: str, target: Target, *, client: str, records: int, partitions: int, run_id: str) -> RunResult:
    """One run of one cell on one broker. A cell's topic is the same on every round (a consume topic is
    filled on its first round only)."""
    operation, _, variant = cell.partition("-")
    compression = "none" if variant in ("", "tls") else variant
    topic = f"compare-{cell}-{run_id}"
    if operation == "produce":
        spec = produce_workloads.ProduceSpec(
            topic=topic, partitions=partitions, records=records, record_size=100, batch_bytes=262_144, acks="1",
            compression=compression, warmup_records=min(records // 10, 200_000), progress=False)
        return produce_workloads.RUNNERS[client](target, spec)
    consume = consume_workloads.ConsumeSpec(topic=topic, partitions=partitions, records=records, record_size=100,
                                            batch_bytes=262_144, compression=compression, progress=False)
    return consume_workloads.RUNNERS[client](target, consume)


def run_matrix(targets: dict[str, Target], cells: list[str], *, rounds: int, client: str, records: int,
               partitions: int, say=print, ssl_targets: dict[str, Target] | None = None) -> list[Pair]:  # type: ignore[no-untyped-def]
    """Every cell on both sides, `rounds` times; a TLS cell runs on `ssl_targets` (the same brokers' SSL
    listeners)."""
    run_id = uuid.uuid4().hex[:8]
    pairs = []
    total = rounds * len(cells)
    for round_index in range(rounds):
        for cell_index, cell in enumerate(cells):
            results = {}
            chosen = ssl_targets if cell in tls_cells.TLS_CELLS else targets
            if chosen is None:
                raise ValueError(f"{cell} needs the brokers' SSL listeners (ssl_targets)")
            for side in pair_order(cell_index, round_index):
                results[side] = run_cell(cell, chosen[side], client=client, records=records, partitions=partitions,
                                         run_id=run_id)
            pair = Pair(cell, round_index, results["ours"], results["peer"])
            pairs.append(pair)
            done = round_index * len(cells) + cell_index + 1
            say(f"[{done}/{total}] round {round_index + 1} {cell:<13} ours {pair.ours.records_per_s:>12,.0f} "
                f"records/s, {targets['peer'].name} {pair.peer.records_per_s:>12,.0f}: "
                f"{pair.ours.records_per_s / max(pair.peer.records_per_s, 1e-9):.2f}x")
    return pairs


@dataclass(frozen=True)
class ClusterSizes:
    records: int  # replicated: records per run
    partitions: int
    latency_rate: int  # latency: records/s
    latency_seconds: int


def run_cluster_matrix(targets: dict[str, cluster_cells.ClusterTarget], cells: list[str], *, rounds: int,
                       sizes: ClusterSizes, say=print) -> tuple[list[Pair], list[LatencyPair]]:  # type: ignore[no-untyped-def]
    """The 3-broker cells, each round back to back on both clusters, the side that goes first alternating."""
    run_id = uuid.uuid4().hex[:8]
    pairs: list[Pair] = []
    latency: list[LatencyPair] = []
    total = rounds * len(cells)
    for round_index in range(rounds):
        for cell_index, cell in enumerate(cells):
            order = pair_order(cell_index, round_index)
            done = f"[{round_index * len(cells) + cell_index + 1}/{total}] round {round_index + 1} {cell:<13}"
            peer = targets["peer"].name
            if cell == "replicated":
                got = {side: cluster_cells.run_replicated(
                    targets[side], records=sizes.records, partitions=sizes.partitions,
                    topic=f"compare-replicated-{run_id}-{round_index}-{side}") for side in order}
                for index, row in enumerate(REPLICATED_ROWS):
                    pairs.append(Pair(row, round_index, got["ours"][index], got["peer"][index]))
                produce, consume = pairs[-2], pairs[-1]
                say(f"{done} produce ours {produce.ours.records_per_s:>10,.0f} records/s, {peer} "
                    f"{produce.peer.records_per_s:>10,.0f}; consume at the same time ours "
                    f"{consume.ours.records_per_s:>10,.0f}, {peer} {consume.peer.records_per_s:>10,.0f}")
                continue
            runs = {side: cluster_cells.run_latency(
                targets[side], rate=sizes.latency_rate, seconds=sizes.latency_seconds, partitions=sizes.partitions,
                topic=f"compare-latency-{run_id}-{round_index}-{side}") for side in order}
            latency.append(LatencyPair(round_index, runs["ours"], runs["peer"]))
            say(f"{done} end-to-end p50 / p99 / p99.9 ms: ours " + _percentiles(runs["ours"].latency_ms)
                + f", {peer} " + _percentiles(runs["peer"].latency_ms))
    return pairs, latency


def _percentiles(latency_ms: dict[str, float]) -> str:
    return " / ".join(f"{latency_ms.get(k, float('nan')):.0f}" for k in ("p50", "p99", "p99.9"))


@click.command("compare")
@click.option("--peer", default="kafka", show_default=True, metavar="NAME|CMD",
              help="`kafka`, `tansu`, or a shell command that prints bootstrap=HOST:PORT.")
@click.option("--cells", multiple=True, type=click.Choice(CELLS + CLUSTER_CELLS),
              help="Cells to run (default: the eight single-broker cells, the TLS ones not with --client raw; "
                   "replicated and latency only when named).")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1))
@click.option("--records", default=2_000_000, show_default=True, type=click.IntRange(1), help="Records per run.")
@click.option("--partitions", default=6, show_default=True, type=click.IntRange(1))
@click.option("--client", type=click.Choice(["java", "raw", "confluent", "franz"]), default="java", show_default=True,
              help="java: Kafka's ProducerPerformance / ConsumerPerformance; raw: ours; confluent: librdkafka; "
                   "franz: franz-go (tools/install-go-programs.sh).")
@click.option("--replicated-records", default=1_000_000, show_default=True, type=click.IntRange(1),
              help="replicated cell: records per run (produced and consumed at the same time).")
@click.option("--latency-rate", default=20_000, show_default=True, type=click.IntRange(1),
              help="latency cell: records/s, fixed (ProducerPerformance --throughput).")
@click.option("--latency-seconds", default=60, show_default=True, type=click.IntRange(1),
              help="latency cell: seconds per run.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write compare.json, compare.md and the pictures here.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
def compare_bench_command(peer, cells, rounds, records, partitions, client, replicated_records, latency_rate,
                          latency_seconds, out, as_json) -> None:
    """Produce and consume (none, lz4, zstd) against a peer, alternating pairs; medians, spreads, pictures.
    With --cells replicated / latency: 3-broker clusters, ProducerPerformance and ConsumerPerformance."""
    chosen = list(cells) or [c for c in CELLS if client != "raw" or c not in tls_cells.TLS_CELLS]
    single = [c for c in chosen if c in CELLS]
    secured = [c for c in single if c in tls_cells.TLS_CELLS]
    if secured and client == "raw":
        raise click.UsageError(f"--cells {' '.join(secured)}: the raw client speaks PLAINTEXT only; "
                               "use --client java or confluent")
    if secured and peer not in tls_cells.TLS_PEERS:
        raise click.UsageError(f"--cells {' '.join(secured)} needs --peer kafka (started here with an SSL "
                               f"listener), not {peer!r}")
    clustered = [c for c in CLUSTER_CELLS if c in chosen]
    if client == "franz" and single:
        try:
            franz_client.franz_binary()
        except PeerUnavailable as exc:
            raise click.UsageError(f"--client franz: {exc}") from exc
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if as_json else click.echo
    say(f"compare: peer={peer}, client={client}, records={records}, partitions={partitions}, rounds={rounds}, "
        f"cells={','.join(chosen)}")
    pairs: list[Pair] = []
    latency: list[LatencyPair] = []
    if single:
        with contextlib.ExitStack() as stack:
            ssl_targets = None
            if secured:
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tinystream-compare-tls-")))
                files = tls_cells.make_tls_files(folder)
                sides = {"ours": stack.enter_context(tls_cells.open_with_ssl("tinystream", files)),
                         "peer": stack.enter_context(tls_cells.open_with_ssl(peer, files))}
                targets = {side: plain for side, (plain, _) in sides.items()}
                ssl_targets = {side: ssl for side, (_, ssl) in sides.items()}
            else:
                targets = {"ours": stack.enter_context(open_target("tinystream")),
                           "peer": stack.enter_context(open_target(peer))}
            pairs += run_matrix(targets, single, rounds=rounds, client=client, records=records, partitions=partitions,
                                say=say, ssl_targets=ssl_targets)
    if clustered:
        if peer not in cluster_cells.CLUSTER_PEERS:
            raise click.UsageError(f"--cells {' '.join(clustered)} needs --peer kafka (a 3-node peer), not {peer!r}")
        say(f"3-broker cells: replicated-records={replicated_records}, latency-rate={latency_rate}/s, "
            f"latency-seconds={latency_seconds}")
        sizes = ClusterSizes(replicated_records, partitions, latency_rate, latency_seconds)
        with contextlib.ExitStack() as stack:
            cluster_targets = {"ours": stack.enter_context(cluster_cells.open_cluster("tinystream")),
                               "peer": stack.enter_context(cluster_cells.open_cluster(peer))}
            more, latency = run_cluster_matrix(cluster_targets, clustered, rounds=rounds, sizes=sizes, say=say)
        pairs += more
    peer_name = describe_spec(peer)
    rows = single + (list(REPLICATED_ROWS) if "replicated" in clustered else [])
    summaries = summarize(rows, pairs)
    text = "\n\n".join(part for part in (table(summaries, peer_name) if summaries else "",
                                          latency_table(latency, peer_name)) if part)
    say(text)
    report = {"peer": peer_name, "client": client, "records": records, "partitions": partitions, "rounds": rounds,
              "replicated_records": replicated_records, "latency_rate": latency_rate,
              "latency_seconds": latency_seconds,
              "summaries": [s.as_dict() for s in summaries],
              "pairs": [{"cell": p.cell, "round": p.round_index, "ours": p.ours.as_dict(), "peer": p.peer.as_dict()}
                        for p in pairs],
              "latency": [{"round": p.round_index, "ours": p.ours.as_dict(), "peer": p.peer.as_dict()}
                          for p in latency]}
    if out is not None:
        _write(out, report, text, summaries, pairs, latency, peer_name, say)
    if as_json:
        click.echo(json.dumps(report, indent=2))


def _write(out: Path, report: dict, text: str, summaries, pairs, latency, peer_name: str, say) -> None:  # type: ignore[no-untyped-def]
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(report, indent=2))
    (out / "compare.md").write_text(text + "\n")
    try:
        pictures = write_pictures(summaries, pairs, peer_name, out) if summaries else []
        if latency:
            pictures.append(write_latency_picture(latency, peer_name, out))
    except ModuleNotFoundError as exc:
        say(f"no pictures: {exc.name} is not installed (pip install 'tinystream[bench]')")
        pictures = []
    say("wrote " + ", ".join(str(p) for p in [out / "compare.json", out / "compare.md", *pictures]))
