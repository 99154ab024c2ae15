"""`tinystream bench compare --peer kafka`: the produce / consume matrix, ours against a peer, in pairs.

    tinystream bench compare --peer kafka                       # Kafka's own perf tools, 3 rounds
    tinystream bench compare --peer kafka --rounds 5 --out bench-out --cells produce --cells consume-lz4

Both brokers are started once and stay up; each round runs every cell on both, back to back, the order
alternating from cell to cell and round to round (ours first, then the peer first), so that a slow
minute on a shared machine falls on both sides. The idle broker of a pair only waits (measured over 20 s:
an idle TinyStream used 0.1% of a core, an idle Kafka 4.3.1 in KRaft combined mode 4.5%, so if anything
the peer's idle cost slows ours a little). The load generator is Kafka's own
ProducerPerformance / ConsumerPerformance by default (`--client java`, a client nobody here wrote);
`--client raw` is our pipelined protocol client and `--client confluent` librdkafka. Each cell prints
the median records/s ratio and broker CPU per GB ratio with their ranges; `--out DIR` also writes
compare.json, compare.md (the table) and two pictures (throughput.png, cpu.png; needs the [bench]
extra's matplotlib).

Replicated (RF 3), end-to-end latency and TLS cells are separate benchmarks today (`bench replicated`,
`bench produce --security`), not yet in this matrix.
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from pathlib import Path

import click

from tinystream.bench import consume_workloads, produce_workloads
from tinystream.bench.compare_report import Pair, summarize, table, write_pictures
from tinystream.bench.stats import RunResult
from tinystream.bench.targets import Target, describe_spec, open_target

CELLS = ("produce", "produce-lz4", "produce-zstd", "consume", "consume-lz4", "consume-zstd")


def pair_order(cell_index: int, round_index: int) -> tuple[str, str]:
    """Ours first on even (cell + round), the peer first otherwise."""
    return ("ours", "peer") if (cell_index + round_index) % 2 == 0 else ("peer", "ours")


def run_cell(cell: str, target: Target, *, client: str, records: int, partitions: int, run_id: str) -> RunResult:
    """One run of one cell on one broker. A cell's topic is the same on every round (a consume topic is
    filled on its first round only)."""
    operation, _, codec = cell.partition("-")
    compression = codec or "none"
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
               partitions: int, say=print) -> list[Pair]:  # type: ignore[no-untyped-def]
    run_id = uuid.uuid4().hex[:8]
    pairs = []
    total = rounds * len(cells)
    for round_index in range(rounds):
        for cell_index, cell in enumerate(cells):
            results = {}
            for side in pair_order(cell_index, round_index):
                results[side] = run_cell(cell, targets[side], client=client, records=records, partitions=partitions,
                                         run_id=run_id)
            pair = Pair(cell, round_index, results["ours"], results["peer"])
            pairs.append(pair)
            done = round_index * len(cells) + cell_index + 1
            say(f"[{done}/{total}] round {round_index + 1} {cell:<13} ours {pair.ours.records_per_s:>12,.0f} "
                f"records/s, {targets['peer'].name} {pair.peer.records_per_s:>12,.0f}: "
                f"{pair.ours.records_per_s / max(pair.peer.records_per_s, 1e-9):.2f}x")
    return pairs


@click.command("compare")
@click.option("--peer", default="kafka", show_default=True, metavar="NAME|CMD",
              help="`kafka`, `tansu`, or a shell command that prints bootstrap=HOST:PORT.")
@click.option("--cells", multiple=True, type=click.Choice(CELLS), help="Cells to run (default: all).")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1))
@click.option("--records", default=2_000_000, show_default=True, type=click.IntRange(1), help="Records per run.")
@click.option("--partitions", default=6, show_default=True, type=click.IntRange(1))
@click.option("--client", type=click.Choice(["java", "raw", "confluent"]), default="java", show_default=True,
              help="java: Kafka's ProducerPerformance / ConsumerPerformance; raw: ours; confluent: librdkafka.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write compare.json, compare.md and the pictures here.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
def compare_bench_command(peer, cells, rounds, records, partitions, client, out, as_json) -> None:
    """Produce and consume (none, lz4, zstd) against a peer, alternating pairs; medians, spreads, pictures."""
    chosen = list(cells) or list(CELLS)
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if as_json else click.echo
    say(f"compare: peer={peer}, client={client}, records={records}, partitions={partitions}, rounds={rounds}, "
        f"cells={','.join(chosen)}")
    with contextlib.ExitStack() as stack:
        targets = {"ours": stack.enter_context(open_target("tinystream")),
                   "peer": stack.enter_context(open_target(peer))}
        pairs = run_matrix(targets, chosen, rounds=rounds, client=client, records=records, partitions=partitions,
                           say=say)
    peer_name = describe_spec(peer)
    summaries = summarize(chosen, pairs)
    text = table(summaries, peer_name)
    say(text)
    report = {"peer": peer_name, "client": client, "records": records, "partitions": partitions, "rounds": rounds,
              "summaries": [s.as_dict() for s in summaries],
              "pairs": [{"cell": p.cell, "round": p.round_index, "ours": p.ours.as_dict(), "peer": p.peer.as_dict()}
                        for p in pairs]}
    if out is not None:
        _write(out, report, text, summaries, pairs, peer_name, say)
    if as_json:
        click.echo(json.dumps(report, indent=2))


def _write(out: Path, report: dict, text: str, summaries, pairs, peer_name: str, say) -> None:  # type: ignore[no-untyped-def]
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(report, indent=2))
    (out / "compare.md").write_text(text + "\n")
    try:
        pictures = write_pictures(summaries, pairs, peer_name, out)
    except ModuleNotFoundError as exc:
        say(f"no pictures: {exc.name} is not installed (pip install 'tinystream[bench]')")
        pictures = []
    say("wrote " + ", ".join(str(p) for p in [out / "compare.json", out / "compare.md", *pictures]))
